#!/bin/bash
# usage: brk.sh LABEL OPTS
cd /work/main
export PARKA_KAFKA_PORT=19400 PARKA_KAFKA_FRESH=1 PARKA_KAFKA_JVM_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC $2"
scripts/kafka-local.sh up >/dev/null 2>&1
pid=$(pgrep -f "kafka.Kafka.*19400" | head -1)
[ -z "$pid" ] && pid=$(pgrep -f "data-19400" | head -1)
t=$(awk '{print $14+$15}' /proc/$pid/stat)
echo "$1 broker up: $t ticks"
scripts/kafka-local.sh down >/dev/null 2>&1
