#!/usr/bin/env bash
# make fetch-early (Kafka's, s3proxy's and the Iceberg REST catalog's jars, the three at once) and
# then the KMS jar (scripts/parquet-kms-jar.sh), on a cold machine, two clones side by side, arms
# alternated:
#   run.sh OLD_CLONE NEW_CLONE ROUNDS OUT
# Each run with an empty parka cache (XDG_CACHE_HOME: Maven itself and its repository included).
# NEW_CLONE's virtualenv gives the KMS script its pyspark in both arms. OUT gets runs.tsv: round,
# arm, wall s and user + system CPU-s of each step; and each run's libs listing with SHA-1s.
set -euo pipefail
OLD=$(realpath "$1") NEW=$(realpath "$2") ROUNDS=$3 OUT=$(realpath -m "$4")
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'round\tarm\tearly_wall_s\tearly_cpu_s\tkms_wall_s\tkms_cpu_s\n' >"$OUT/runs.tsv"
cpu() { read -r wall user sys <"$1"; printf '%s\t%.2f' "$wall" "$(echo "$user + $sys" | bc)"; }
for round in $(seq 1 "$ROUNDS"); do
  for arm in old new; do
    [[ $arm == old ]] && repo=$OLD || repo=$NEW
    rm -rf "$work/cache"
    (cd "$repo" && XDG_CACHE_HOME="$work/cache" /usr/bin/time -o "$work/early" -f "%e %U %S" \
      make --no-print-directory fetch-early >"$OUT/$arm-$round.log" 2>&1)
    (cd "$repo" && XDG_CACHE_HOME="$work/cache" /usr/bin/time -o "$work/kms" -f "%e %U %S" \
      scripts/parquet-kms-jar.sh "$NEW/.venv/bin/python" >>"$OUT/$arm-$round.log" 2>&1)
    printf '%s\t%s\t%s\t%s\n' "$round" "$arm" "$(cpu "$work/early")" "$(cpu "$work/kms")" >>"$OUT/runs.tsv"
    (cd "$work/cache/parka" && find kafka-* s3proxy-* iceberg-rest-* parquet-kms -name '*.jar' -type f \
      | sort | xargs sha1sum) >"$OUT/$arm-$round.jars"
  done
done
column -t "$OUT/runs.tsv"
