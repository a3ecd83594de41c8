#!/bin/bash
# run.sh LABEL [hadoop]: the Spark session's tests of four files in one pytest process (-n 0),
# with the session JVM's CPU-seconds sampled every 0.5 s from /proc/PID/stat: its own (user,
# system) and its reaped children's (the chmod and readlink processes Hadoop's local file system
# starts). "hadoop" runs them with Hadoop's own local file system (PARKA_TEST_SPARK_LOCAL_FS).
# Run from a clone with `make setup` done; writes jvm-LABEL.txt and out-LABEL.txt here.
set -u
here=$(cd "$(dirname "$0")" && pwd)
label=$1
[ "${2:-}" = hadoop ] && export PARKA_TEST_SPARK_LOCAL_FS=hadoop
(while true; do
   for p in $(pgrep -f "SparkSubmit.*parka-tests"); do
     [ -r /proc/$p/stat ] && echo "$p $(cut -d')' -f2 /proc/$p/stat | awk '{print $12, $13, $14, $15}')"
   done
   sleep 0.5
 done) > "$here/jvm-$label.txt" &
watcher=$!
env -u PYTHONDONTWRITEBYTECODE .venv/bin/pytest -q -n 0 -p no:cacheprovider \
  tests/integration/spark/test_spark_raw.py tests/integration/spark/test_spark_delta_commit.py \
  tests/integration/spark/test_spark_ingest.py tests/integration/spark/test_spark_upsert.py > "$here/out-$label.txt" 2>&1
kill $watcher
read -r pid user system cuser csystem < <(tail -1 "$here/jvm-$label.txt")
printf '%s\t%s\t%.2f\t%.2f\t%.2f\n' "$label" "$(grep -E '^[0-9]+ (passed|failed)' "$here/out-$label.txt" | tail -1)" \
  "$(echo "($user + $system) / 100" | bc -l)" "$(echo "($cuser + $csystem) / 100" | bc -l)" \
  "$(echo "($user + $system + $cuser + $csystem) / 100" | bc -l)" >> "$here/runs.tsv"
