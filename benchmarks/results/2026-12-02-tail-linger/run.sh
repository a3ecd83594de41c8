#!/usr/bin/env bash
# produce() per dict before and after a kept tail's linger runs from its own rows' staging:
#   run.sh OLD NEW BOOTSTRAP ROUNDS OUT
# OLD and NEW are clones with their virtualenvs (make setup and the bench extra) and this
# record's sibling ../2026-12-02-produce-stages/stages.py; each round runs its producer part on
# both, in alternating order, into OUT/<round>-<old|new>.txt.
set -euo pipefail
OLD=$(realpath "$1") NEW=$(realpath "$2") BOOTSTRAP=$3 ROUNDS=$4 OUT=$(realpath -m "$5")
mkdir -p "$OUT"
stages=benchmarks/results/2026-12-02-produce-stages/stages.py
for round in $(seq 1 "$ROUNDS"); do
  arms=(old new)
  ((round % 2)) || arms=(new old)
  for arm in "${arms[@]}"; do
    repo=$OLD
    [[ $arm == new ]] && repo=$NEW
    (cd "$repo" && env -u PYTHONDONTWRITEBYTECODE .venv/bin/python "$stages" --bootstrap "$BOOTSTRAP" --producer-only) \
      >"$OUT/$round-$arm.txt"
  done
done
