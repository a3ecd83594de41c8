#!/bin/bash
# A/B of the fleet arm alone, 60 s, alternating variants; args: ROUNDS then "label|ARGS" pairs
cd "$(dirname "$0")/../../../.."
rounds=$1; shift
for r in $(seq 1 $rounds); do
  for v in "$@"; do
    label=${v%%|*}; args=${v#*|}
    out=${OUT:?set OUT to a folder}/$label-$r; rm -rf $out
    env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m benchmarks.fleet_load --bootstrap 127.0.0.1:19300 \
      --kafka-data-dir "$(PARKA_KAFKA_PORT=19300 scripts/kafka-local.sh data-dir)" --out $out --duration 60 --arms fleet $args > $out.log 2>&1
    echo "$label $r rc=$? $(grep '^| fleet' $out/report.md)"
  done
done
