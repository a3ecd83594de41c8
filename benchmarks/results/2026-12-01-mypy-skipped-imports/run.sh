#!/usr/bin/env bash
# run.sh CLONE_A CLONE_B ROUNDS: scripts/typecheck.sh with an empty cache in each clone (its
# virtualenv made), arms alternated; prints each run's user + system CPU-seconds (GNU time).
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
for ((i = 1; i <= rounds; i++)); do
  for arm in "$a" "$b"; do
    rm -rf "$arm/.mypy_cache"
    t=$( { /usr/bin/time -f "%U %S %e" "$arm/scripts/typecheck.sh" .venv/bin/mypy >/dev/null; } 2>&1 | tail -1)
    read -r user sys wall <<<"$t"
    echo "round $i $(basename "$arm") cpu=$(echo "$user + $sys" | bc) wall=$wall"
  done
done
