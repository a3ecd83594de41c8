#!/usr/bin/env bash
# The tests' Spark jars fetch (python -m tests.integration.spark._jars: Ivy's resolution of the
# session's packages, the KMS jar by Maven, NioLocalFileSystem compiled) on a cold machine, two
# clones side by side, arms alternated:
#   run.sh OLD_CLONE NEW_CLONE ROUNDS OUT
# Each run starts with an empty parka cache (XDG_CACHE_HOME) and an empty Ivy home (the real one
# kept aside meanwhile: benchmarks/empty_ivy.sh). OUT gets runs.tsv: round, arm, wall s, user +
# system CPU-s.
set -euo pipefail
OLD=$(realpath "$1") NEW=$(realpath "$2") ROUNDS=$3 OUT=$(realpath -m "$4")
# shellcheck source=benchmarks/empty_ivy.sh
source "$(dirname "$0")/../../empty_ivy.sh"
mkdir -p "$OUT"
work=$(mktemp -d)
ivy_aside "$work"
printf 'round\tarm\twall_s\tcpu_s\n' >"$OUT/runs.tsv"
for round in $(seq 1 "$ROUNDS"); do
  for arm in old new; do
    [[ $arm == old ]] && repo=$OLD || repo=$NEW
    rm -rf "$IVY" "$work/cache"
    mkdir -p "$work/cache"
    (cd "$repo" && XDG_CACHE_HOME="$work/cache" /usr/bin/time -o "$work/time" -f "%e %U %S" \
      .venv/bin/python -m tests.integration.spark._jars >"$OUT/$arm-$round.log" 2>&1)
    read -r wall user sys <"$work/time"
    printf '%s\t%s\t%s\t%.2f\n' "$round" "$arm" "$wall" "$(echo "$user + $sys" | bc)" >>"$OUT/runs.tsv"
  done
done
column -t "$OUT/runs.tsv"
