#!/usr/bin/env bash
# Start, stop or inspect a single-node Apache Kafka broker (KRaft) on loopback, built
# from Maven Central artifacts and run with the machine's Java 17. No Docker needed.
#
#   scripts/kafka-local.sh up       # idempotent: fetch jars once, format storage once, start
#   scripts/kafka-local.sh down     # stop the broker started here
#   scripts/kafka-local.sh status   # exit 0 when the broker answers on its port
#   scripts/kafka-local.sh kill     # SIGKILL the broker (fault tests); its data stays for the next up
#
# Environment: PARKA_KAFKA_VERSION (default below), PARKA_KAFKA_HOME (jars, config, data,
# logs; default ~/.cache/parka/kafka-<version>), PARKA_KAFKA_PORT (default 9092),
# PARKA_KAFKA_HEAP (default 1G).
set -euo pipefail

VERSION="${PARKA_KAFKA_VERSION:-4.3.1}"
HOME_DIR="${PARKA_KAFKA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/parka/kafka-$VERSION}"
PORT="${PARKA_KAFKA_PORT:-9092}"
CONTROLLER_PORT="${PARKA_KAFKA_CONTROLLER_PORT:-$((PORT + 1))}"
HEAP="${PARKA_KAFKA_HEAP:-1G}"
LIBS="$HOME_DIR/libs"
DATA="$HOME_DIR/data-$PORT"
CONF="$HOME_DIR/server-$PORT.properties"
PIDFILE="$HOME_DIR/broker-$PORT.pid"
LOG="$HOME_DIR/broker-$PORT.log"

log() { echo "kafka-local: $*" >&2; }

need_java() {
  command -v java >/dev/null || { log "java not found: install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)"; exit 3; }
  local major
  major=$(java -version 2>&1 | sed -nE 's/.*version "([0-9]+).*/\1/p' | head -1)
  if [[ -z "$major" || "$major" -lt 17 ]]; then log "Kafka $VERSION needs Java 17+, found: $(java -version 2>&1 | head -1)"; exit 3; fi
}

fetch_jars() {
  [[ -f "$LIBS/.complete" ]] && return 0
  command -v mvn >/dev/null || { log "mvn not found: install Maven (apt-get install maven) to resolve Kafka from Maven Central"; exit 3; }
  mkdir -p "$HOME_DIR"
  log "resolving org.apache.kafka:kafka_2.13:$VERSION and its runtime dependencies from Maven Central"
  cat > "$HOME_DIR/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>parka.local</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>2.0.17</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>2.25.4</version></dependency>
  </dependencies>
</project>
POM
  rm -rf "$LIBS"
  (cd "$HOME_DIR" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory="$LIBS" -DincludeScope=runtime)
  touch "$LIBS/.complete"
}

write_config() {
  mkdir -p "$DATA"
  cat > "$CONF" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DATA
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
message.max.bytes=8388608
replica.fetch.max.bytes=8388608
log.retention.hours=24
PROPS
  cat > "$HOME_DIR/log4j2.properties" <<L4J
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = $LOG.log4j
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = WARN
L4J
}

classpath() { echo "$LIBS/*"; }

is_up() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

running_pid() {
  [[ -f "$PIDFILE" ]] || return 1
  local pid; pid=$(cat "$PIDFILE")
  kill -0 "$pid" 2>/dev/null && echo "$pid"
}

up() {
  need_java
  if pid=$(running_pid); then
    log "broker already running (pid $pid) on 127.0.0.1:$PORT"; wait_ready; return 0
  fi
  if is_up; then log "port $PORT is already in use by another process; set PARKA_KAFKA_PORT"; exit 4; fi
  fetch_jars
  write_config
  if [[ ! -f "$DATA/meta.properties" ]]; then
    log "formatting KRaft storage in $DATA"
    java -cp "$(classpath)" -Dlog4j2.configurationFile="$HOME_DIR/log4j2.properties" \
      kafka.tools.StorageTool format -t "$(java -cp "$(classpath)" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)" \
      -c "$CONF" >>"$LOG" 2>&1 || { log "storage format failed; see $LOG"; tail -20 "$LOG" >&2; exit 5; }
  fi
  log "starting Kafka $VERSION on 127.0.0.1:$PORT (log: $LOG)"
  nohup java -Xms256m -Xmx"$HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$HOME_DIR/log4j2.properties" \
    -cp "$(classpath)" kafka.Kafka "$CONF" >>"$LOG" 2>&1 &
  echo $! > "$PIDFILE"
  wait_ready
}

wait_ready() {
  local deadline=$((SECONDS + ${PARKA_KAFKA_START_TIMEOUT_S:-90}))
  while ! is_up; do
    if ! running_pid >/dev/null; then log "broker exited during start-up; last log lines:"; tail -30 "$LOG" >&2; exit 5; fi
    if (( SECONDS > deadline )); then log "broker did not open port $PORT in time; see $LOG"; exit 5; fi
    sleep 0.5
  done
  log "broker ready at 127.0.0.1:$PORT"
}

down() {
  if pid=$(running_pid); then
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    log "broker stopped (pid $pid)"
  else
    log "no broker started by this script is running on port $PORT"
  fi
  rm -f "$PIDFILE"
}

kill9() {
  if pid=$(running_pid); then
    kill -9 "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    log "broker killed (SIGKILL, pid $pid); its data stays"
  else
    log "no broker started by this script is running on port $PORT"
  fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  kill) kill9 ;;
  status) if is_up; then log "up on 127.0.0.1:$PORT"; else log "down"; exit 1; fi ;;
  data-dir) echo "$DATA" ;;
  reset) down; rm -rf "$DATA"; log "data removed: $DATA" ;;
  *) echo "usage: $0 up|down|kill|status|data-dir|reset" >&2; exit 2 ;;
esac
