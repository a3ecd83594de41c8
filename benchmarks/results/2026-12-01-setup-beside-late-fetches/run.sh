#!/usr/bin/env bash
# make test's foreground set-up (`make -j2 setup fetch-early`) on a cold machine, with the late
# servers' fetches (the schema registry's build, Azurite's install) started beside it at the
# first second, niced, as make test starts them ("beside"), and without them ("alone"):
#   run.sh REPO ROUNDS OUT
# Each run: a fresh clone of REPO's HEAD and an empty HOME (no uv, pip, npm, Maven or parka
# cache); after the timed set-up the script waits for the background fetches to end before the
# next run. OUT gets runs.tsv: round, arm, the set-up's wall seconds, its user + system CPU-s.
set -euo pipefail
REPO=$(realpath "$1") ROUNDS=$2 OUT=$(realpath -m "$3")
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'round\tarm\tsetup_wall_s\tsetup_cpu_s\n' >"$OUT/runs.tsv"
for round in $(seq 1 "$ROUNDS"); do
  for arm in beside alone; do
    rm -rf "$work/run"
    mkdir -p "$work/run/home"
    git clone -q "$REPO" "$work/run/repo"
    cd "$work/run/repo"
    export HOME="$work/run/home"
    pids=()
    if [[ $arm == beside ]]; then
      for s in schema-registry azurite; do
        nice -n 10 scripts/$s.sh fetch >"$OUT/$round-$arm-$s.log" 2>&1 &
        pids+=($!)
      done
    fi
    /usr/bin/time -o "$work/time" -f "%e %U %S" env -u PYTHONDONTWRITEBYTECODE \
      make --no-print-directory -j2 setup fetch-early >"$OUT/$round-$arm.log" 2>&1
    for p in "${pids[@]}"; do wait "$p"; done
    read -r wall user sys <"$work/time"
    printf '%s\t%s\t%s\t%.2f\n' "$round" "$arm" "$wall" "$(echo "$user + $sys" | bc)" >>"$OUT/runs.tsv"
    cd /
  done
done
column -t "$OUT/runs.tsv"
