#!/bin/bash
# usage: drvrun.sh LABEL EXTRA_JVM_OPTS
cd /work/main
J="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djdk.lang.Process.launchMechanism=VFORK $2"
rm -rf /tmp/drvt-$1
python3 scripts/cpu_by_process.py --out /tmp/drv-$1.json -- /usr/bin/time -f "%e s wall" .venv/bin/python -m parka.cli spark-ingest drvtopic1 /tmp/drvt-$1 -k 127.0.0.1:19300 --master 'local[2]' -c spark.ui.enabled=false -c spark.sql.shuffle.partitions=2 -c "spark.driver.extraJavaOptions=$J" --end-at-latest > /tmp/drv-$1.log 2>&1
echo "$1: $(tail -1 /tmp/drv-$1.log) $(python3 scripts/cpu_by_process.py --report /tmp/drv-$1.json | grep -E 'in all|Spark drivers' | tr '\n' ' ')"
