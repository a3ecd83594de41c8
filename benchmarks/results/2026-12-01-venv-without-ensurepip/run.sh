#!/usr/bin/env bash
# make setup's first two steps, a virtualenv with uv in it, both ways, arms alternated:
#   run.sh ROUNDS OUT
# old: `python3 -m venv V` (ensurepip installs pip and setuptools), then V's pip installs uv;
# new: `python3 -m venv --without-pip V`, then the system's pip installs uv into it
# (`pip --python`). Warm pip cache in both arms (uv's wheel downloaded once before round 1).
# OUT gets runs.tsv: round, arm, wall s, user + system CPU-s.
set -euo pipefail
ROUNDS=$1 OUT=$(realpath -m "$2")
UV=uv==0.13.9
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps -d "$work/dl" "$UV"
printf 'round\tarm\twall_s\tcpu_s\n' >"$OUT/runs.tsv"
for round in $(seq 1 "$ROUNDS"); do
  for arm in old new; do
    rm -rf "$work/v"
    if [[ $arm == old ]]; then
      /usr/bin/time -o "$work/time" -f "%e %U %S" bash -c "python3 -m venv '$work/v' && '$work/v/bin/pip' install --quiet $UV"
    else
      /usr/bin/time -o "$work/time" -f "%e %U %S" bash -c "python3 -m venv --without-pip '$work/v' && python3 -m pip --python '$work/v/bin/python' install --quiet $UV"
    fi
    "$work/v/bin/uv" --version >/dev/null
    read -r wall user sys <"$work/time"
    printf '%s\t%s\t%s\t%.2f\n' "$round" "$arm" "$wall" "$(echo "$user + $sys" | bc)" >>"$OUT/runs.tsv"
  done
done
column -t "$OUT/runs.tsv"
