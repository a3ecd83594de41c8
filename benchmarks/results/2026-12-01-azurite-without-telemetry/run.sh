#!/usr/bin/env bash
# Azurite's first fetch (scripts/azurite.sh fetch: npm install) on a cold machine, two clones side
# by side, arms alternated:
#   run.sh OLD_CLONE NEW_CLONE ROUNDS OUT
# Each run with an empty npm cache and an empty Azurite home. OUT gets runs.tsv: round, arm, wall
# s, user + system CPU-s, MB installed.
set -euo pipefail
OLD=$(realpath "$1") NEW=$(realpath "$2") ROUNDS=$3 OUT=$(realpath -m "$4")
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'round\tarm\twall_s\tcpu_s\tmb\n' >"$OUT/runs.tsv"
for round in $(seq 1 "$ROUNDS"); do
  for arm in old new; do
    [[ $arm == old ]] && repo=$OLD || repo=$NEW
    rm -rf "$work/home" "$work/npm"
    PARKA_AZURITE_HOME="$work/home" npm_config_cache="$work/npm" /usr/bin/time -o "$work/time" -f "%e %U %S" \
      "$repo/scripts/azurite.sh" fetch >"$OUT/$arm-$round.log" 2>&1
    read -r wall user sys <"$work/time"
    printf '%s\t%s\t%s\t%.2f\t%s\n' "$round" "$arm" "$wall" "$(echo "$user + $sys" | bc)" \
      "$(du -sm "$work/home" | cut -f1)" >>"$OUT/runs.tsv"
  done
done
# the new arm's install serves: up (start, create the container), status, down
PARKA_AZURITE_HOME="$work/home" PARKA_AZURITE_PORT=19189 "$NEW/scripts/azurite.sh" up >"$OUT/up.log" 2>&1
PARKA_AZURITE_HOME="$work/home" PARKA_AZURITE_PORT=19189 "$NEW/scripts/azurite.sh" status && echo "status: answers" >>"$OUT/up.log"
PARKA_AZURITE_HOME="$work/home" PARKA_AZURITE_PORT=19189 "$NEW/scripts/azurite.sh" down >>"$OUT/up.log" 2>&1
column -t "$OUT/runs.tsv"
