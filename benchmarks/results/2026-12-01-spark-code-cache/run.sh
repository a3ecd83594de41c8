#!/bin/bash
# run.sh LABEL XJVM
cd /tmp/sw
export XJVM="$2"
( while sleep 2; do pid=$(pgrep -f "parka-tests" | head -1); [ -n "$pid" ] && { jcmd $pid Compiler.codecache > /tmp/jx/cc-$1.tmp 2>/dev/null && mv /tmp/jx/cc-$1.tmp /tmp/jx/cc-$1.txt; awk '{print ($14+$15)/100}' /proc/$pid/stat > /tmp/jx/jvmcpu-$1.tmp 2>/dev/null && mv /tmp/jx/jvmcpu-$1.tmp /tmp/jx/jvmcpu-$1.txt; }; done ) &
w=$!
/usr/bin/time -f "%e wall %U user %S sys" -o /tmp/jx/time-$1.txt env -u PYTHONDONTWRITEBYTECODE .venv/bin/pytest -q -n 0 -p no:cacheprovider tests/integration/spark/test_spark_raw.py tests/integration/spark/test_spark_delta_commit.py tests/integration/spark/test_spark_stats.py tests/integration/spark/test_spark_interop.py tests/integration/spark/test_spark_upsert.py > /tmp/jx/out-$1.txt 2>&1
kill $w
grep -E "passed|failed" /tmp/jx/out-$1.txt | tail -1; echo "$1 $(cat /tmp/jx/time-$1.txt) jvm $(cat /tmp/jx/jvmcpu-$1.txt)"
