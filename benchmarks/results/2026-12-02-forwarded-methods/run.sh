#!/usr/bin/env bash
# OLD and NEW: two clones of parka, each with its virtualenv made (make setup); the broker at
# BOOTSTRAP. N rounds, each runs benchmarks.profile_path in OLD then in NEW, into OUT/<old|new>-<round>.
# Usage: run.sh OLD NEW BOOTSTRAP N OUT
set -euo pipefail
old=$1 new=$2 bootstrap=$3 rounds=$4 out=$5
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for arm in old new; do
    repo=${!arm}
    (cd "$repo" && .venv/bin/python -m benchmarks.profile_path --bootstrap "$bootstrap" --rows 100000 \
      --out "$out/$arm-$round" >"$out/$arm-$round.log" 2>&1)
  done
done
