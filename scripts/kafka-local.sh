#!/usr/bin/env bash
# Start, stop or inspect a single-node Apache Kafka broker (KRaft) on loopback, built
# from Maven Central artifacts and run with the machine's Java 17. No Docker needed.
#
#   scripts/kafka-local.sh up       # idempotent: fetch jars once, format storage once, start
#   scripts/kafka-local.sh fetch    # fetch the jars only (make test: beside the set-up)
#   scripts/kafka-local.sh jar-list # write scripts/jars/kafka-<version>.txt, the jars' list, by Maven
#   scripts/kafka-local.sh down     # stop the broker started here
#   scripts/kafka-local.sh status   # exit 0 when the broker answers on its port
#   scripts/kafka-local.sh free-port  # the port to start on: PARKA_KAFKA_PORT, or a free one when
#                                     # another process holds it (make demo)
#   scripts/kafka-local.sh kill     # SIGKILL the broker (fault tests); its data stays for the next up
#   scripts/kafka-local.sh client-config  # sasl_ssl: the path of the librdkafka settings file
#
# Environment: PARKA_KAFKA_VERSION (default below), PARKA_KAFKA_HOME (jars, config, data,
# logs; default ~/.cache/parka/kafka-<version>), PARKA_KAFKA_PORT (default 9092; 9094 with
# sasl_ssl), PARKA_KAFKA_HEAP (default 1G), PARKA_KAFKA_JVM_OPTS (the JVM's compiler and collector;
# default -XX:+UseG1GC, Kafka's own), PARKA_KAFKA_FRESH=1 (an `up` that starts the broker removes
# its data first: the tests' session brokers, which would otherwise load every topic of every
# earlier run; 16,000 partition folders made a start take 132 s).
#
# PARKA_KAFKA_SECURITY=sasl_ssl starts a separate broker whose client listener is SASL_SSL
# (SCRAM-SHA-512 and SCRAM-SHA-256), with its own data, config and log under
# <home>/sasl-<port>/. A CA and the broker's certificate (CN localhost, SAN 127.0.0.1) are
# made there once with openssl; the SCRAM user is created when the storage is formatted
# (kafka-storage format --add-scram). The user is PARKA_KAFKA_SASL_USERNAME (default parka),
# the password PARKA_KAFKA_SASL_PASSWORD, else a generated one; both are written, with the CA's
# path, to <home>/sasl-<port>/client.properties (mode 0600, librdkafka keys), never to a log.
# The controller listener (port + 1) stays PLAINTEXT on loopback.
set -euo pipefail

VERSION="${PARKA_KAFKA_VERSION:-4.3.1}"
HOME_DIR="${PARKA_KAFKA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/parka/kafka-$VERSION}"
SECURITY="${PARKA_KAFKA_SECURITY:-plaintext}"
case "$SECURITY" in
  plaintext) PORT="${PARKA_KAFKA_PORT:-9092}" ;;
  sasl_ssl) PORT="${PARKA_KAFKA_PORT:-9094}" ;;
  *) echo "kafka-local: PARKA_KAFKA_SECURITY must be plaintext or sasl_ssl, got '$SECURITY'" >&2; exit 2 ;;
esac
CONTROLLER_PORT="${PARKA_KAFKA_CONTROLLER_PORT:-$((PORT + 1))}"
HEAP="${PARKA_KAFKA_HEAP:-1G}"
JVM_OPTS="${PARKA_KAFKA_JVM_OPTS:--XX:+UseG1GC}"
LIBS="$HOME_DIR/libs"
DATA="$HOME_DIR/data-$PORT"
CONF="$HOME_DIR/server-$PORT.properties"
PIDFILE="$HOME_DIR/broker-$PORT.pid"
LOG="$HOME_DIR/broker-$PORT.log"
L4J="$HOME_DIR/log4j2.properties"
if [[ "$SECURITY" == sasl_ssl ]]; then
  SEC_DIR="$HOME_DIR/sasl-$PORT"
  DATA="$SEC_DIR/data"
  CONF="$SEC_DIR/server.properties"
  PIDFILE="$SEC_DIR/broker.pid"
  LOG="$SEC_DIR/broker.log"
  L4J="$SEC_DIR/log4j2.properties"
  CA="$SEC_DIR/ca.pem"
  CLIENT_CONF="$SEC_DIR/client.properties"
  SASL_USER="${PARKA_KAFKA_SASL_USERNAME:-parka}"
fi

log() { echo "kafka-local: $*" >&2; }
# shellcheck source=scripts/_daemon.sh
source "$(dirname "${BASH_SOURCE[0]}")/_daemon.sh"

# The jars of a version with a list (scripts/jars/kafka-<version>.txt: SHA-1 and path under
# Maven Central, written by `scripts/kafka-local.sh jar-list` through Maven) are fetched with curl
# at once and checked; another version's are resolved by Maven
JAR_LIST="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/jars/kafka-$VERSION.txt"

fetch_jars() {
  [[ -f "$LIBS/.complete" ]] && return 0
  [[ -f "$JAR_LIST" ]] || need_maven "Kafka"
  fetch_once "$LIBS/.complete" resolve_jars
}

resolve_jars() {
  rm -rf "$LIBS" "$LIBS.part"
  if [[ -f "$JAR_LIST" ]]; then
    log "fetching Kafka $VERSION's jars ($(grep -vc '^#' "$JAR_LIST")) from Maven Central"
    fetch_central "$LIBS.part" <"$JAR_LIST" || exit 3
    mv "$LIBS.part" "$LIBS"
  else
    log "resolving org.apache.kafka:kafka_2.13:$VERSION and its runtime dependencies from Maven Central"
    write_pom > "$HOME_DIR/pom.xml"
    (cd "$HOME_DIR" && maven dependency:copy-dependencies -DoutputDirectory="$LIBS" -DincludeScope=runtime)
  fi
  touch "$LIBS/.complete"
}

write_pom() {
  cat <<POM
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
}

# Write JAR_LIST: Maven resolves the jars (in its repository's layout) into a temporary folder,
# and each one's path and SHA-1 are listed
jar_list() {
  need_maven "Kafka"
  local work
  work=$(mktemp -d)
  write_pom > "$work/pom.xml"
  (cd "$work" && maven dependency:copy-dependencies -DoutputDirectory="$work/libs" -DincludeScope=runtime \
    -Dmdep.useRepositoryLayout=true) || { rm -rf "$work"; exit 3; }
  mkdir -p "$(dirname "$JAR_LIST")"
  {
    echo "# Kafka $VERSION's broker classpath from Maven Central (SHA-1, path): scripts/kafka-local.sh jar-list"
    (cd "$work/libs" && find . -name '*.jar' | sort | while read -r jar; do
      echo "$(sha1sum "$jar" | cut -c1-40) ${jar#./}"
    done)
  } > "$JAR_LIST"
  rm -rf "$work"
  log "wrote $JAR_LIST"
}

listener_config() {
  if [[ "$SECURITY" == plaintext ]]; then
    cat <<PROPS
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
PROPS
    return
  fi
  # the broker talks to itself over SASL_SSL too, as its own SCRAM user (created at format)
  local jaas
  jaas="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"parka-broker\" password=\"$(cat "$SEC_DIR/broker.password")\";"
  cat <<PROPS
listeners=SASL_SSL://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=SASL_SSL://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$jaas
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$jaas
ssl.keystore.type=PEM
ssl.keystore.location=$SEC_DIR/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$CA
ssl.client.auth=none
PROPS
}

write_config() {
  mkdir -p "$DATA"
  if [[ "$SECURITY" == sasl_ssl ]]; then touch "$CONF"; chmod 600 "$CONF"; fi  # it holds the broker's password
  { cat <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
PROPS
  listener_config
  cat <<PROPS
log.dirs=$DATA
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
auto.create.topics.enable=true
message.max.bytes=8388608
replica.fetch.max.bytes=8388608
log.retention.hours=24
metadata.max.idle.interval.ms=0
PROPS
  } > "$CONF"
  cat > "$L4J" <<L4J
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

# sasl_ssl: a CA and the broker's key and certificate, made once and kept in $SEC_DIR
make_certs() {
  [[ -f "$SEC_DIR/broker-keystore.pem" && -f "$CA" ]] && return 0
  command -v openssl >/dev/null || { log "openssl not found: install it (apt-get install openssl) to make the broker's certificates"; exit 3; }
  log "making a CA and a broker certificate in $SEC_DIR"
  mkdir -p "$SEC_DIR"
  chmod 700 "$SEC_DIR"
  (
    cd "$SEC_DIR"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=parka local CA" \
      -keyout ca.key -out ca.pem -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" -keyout broker.key -out broker.csr 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' > broker.ext
    openssl x509 -req -sha256 -days 3650 -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
      -extfile broker.ext -out broker.pem 2>/dev/null
    # Kafka's PEM key store: an unencrypted PKCS#8 key, then the chain
    openssl pkcs8 -topk8 -nocrypt -in broker.key -out broker-key.pk8
    cat broker-key.pk8 broker.pem ca.pem > broker-keystore.pem.tmp
    rm -f broker.csr broker-key.pk8
    chmod 644 ca.pem
    mv broker-keystore.pem.tmp broker-keystore.pem
  ) || { log "making the certificates failed"; exit 5; }
}

# sasl_ssl: the client's and the broker's own password, from the environment or generated
# once; written only to files of mode 0600, never printed
make_credentials() {
  local password="${PARKA_KAFKA_SASL_PASSWORD:-}"
  [[ -f "$SEC_DIR/broker.password" ]] || (umask 077; openssl rand -hex 24 > "$SEC_DIR/broker.password")
  if [[ -f "$DATA/meta.properties" && -f "$CLIENT_CONF" ]]; then
    # the SCRAM users were created at format time: the password cannot change under them
    local formatted_user formatted_password
    formatted_user=$(sed -n 's/^sasl.username=//p' "$CLIENT_CONF")
    formatted_password=$(sed -n 's/^sasl.password=//p' "$CLIENT_CONF")
    if [[ -n "$password" && "$password" != "$formatted_password" || "$SASL_USER" != "$formatted_user" ]]; then
      log "the broker in $DATA was formatted with another SASL user or password than PARKA_KAFKA_SASL_USERNAME/PASSWORD give; run '$0 reset' (PARKA_KAFKA_SECURITY=sasl_ssl) to start over"
      exit 4
    fi
    return 0
  fi
  if [[ -f "$DATA/meta.properties" ]]; then
    log "$CLIENT_CONF is gone but the broker in $DATA has its SCRAM user; run '$0 reset' (PARKA_KAFKA_SECURITY=sasl_ssl) to start over"
    exit 4
  fi
  [[ -n "$password" ]] || password=$(openssl rand -hex 24)
  if [[ "$password$SASL_USER" == *[\"\]\[,=]* ]]; then
    log "PARKA_KAFKA_SASL_USERNAME/PASSWORD must not contain \" [ ] , or ="; exit 2
  fi
  (umask 077; cat > "$CLIENT_CONF" <<CLIENT
bootstrap.servers=127.0.0.1:$PORT
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=$SASL_USER
sasl.password=$password
ssl.ca.location=$CA
CLIENT
  )
}

# sasl_ssl: kafka-storage format's --add-scram arguments (the client user and the broker's
# own, both mechanisms), one per line. kafka-storage takes them on its command line only, so the passwords
# are visible to this machine's process list for the seconds the format takes, once.
scram_args() {
  local user password broker
  user=$(sed -n 's/^sasl.username=//p' "$CLIENT_CONF")
  password=$(sed -n 's/^sasl.password=//p' "$CLIENT_CONF")
  broker=$(cat "$SEC_DIR/broker.password")
  for mech in SCRAM-SHA-512 SCRAM-SHA-256; do
    printf '%s\n' --add-scram "$mech=[name=$user,password=$password]" --add-scram "$mech=[name=parka-broker,password=$broker]"
  done
}

is_up() { listening "$PORT"; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The port `make demo` starts its broker on: $PORT when a broker of this script runs there or
# nothing listens on it; else (another Kafka, most often, on 9092) the first port from $PORT + 100
# where a broker of this script runs (an earlier demo's) or, failing that, the first free pair of
# ports (client, controller), said on stderr. (Plaintext brokers: their pid files.)
free_port() {
  if running_pid >/dev/null || ! is_up; then echo "$PORT"; return; fi
  local p
  for ((p = PORT + 100; p < PORT + 300; p += 2)); do
    if PIDFILE="$HOME_DIR/broker-$p.pid" running_pid >/dev/null; then
      log "port $PORT is in use by another process (not a broker this script started): using this script's broker on port $p"
      echo "$p"; return
    fi
  done
  for ((p = PORT + 100; p < PORT + 300; p += 2)); do
    if ! listening "$p" && ! listening "$((p + 1))"; then
      log "port $PORT is in use by another process (not a broker this script started): this broker takes port $p (to use the running Kafka instead, give make demo its address: docs/quickstart.md)"
      echo "$p"; return
    fi
  done
  log "port $PORT and ports $((PORT + 100))-$((PORT + 299)) are in use; set PARKA_KAFKA_PORT"; exit 4
}

# A new cluster id as `kafka-storage random-uuid` makes one (16 random bytes, base64url without
# padding, never starting with "-"), without starting a JVM for it.
cluster_id() {
  local id
  while id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'); [[ "$id" == -* ]]; do :; done
  echo "$id"
}

up() {
  need_java "Kafka $VERSION"
  if pid=$(running_pid); then
    log "broker already running (pid $pid) on 127.0.0.1:$PORT"; wait_ready; return 0
  fi
  if is_up; then log "port $PORT is already in use by another process; set PARKA_KAFKA_PORT"; exit 4; fi
  if [[ "${PARKA_KAFKA_FRESH:-0}" == 1 && -d "$DATA" ]]; then
    log "PARKA_KAFKA_FRESH=1: removing the data of the last broker on this port ($DATA)"
    rm -rf "$DATA"
    if [[ "$SECURITY" == sasl_ssl ]]; then rm -f "$CLIENT_CONF"; fi  # its user goes with the data
  fi
  fetch_jars
  local scram=()
  if [[ "$SECURITY" == sasl_ssl ]]; then
    make_certs
    make_credentials
    [[ -f "$DATA/meta.properties" ]] || mapfile -t scram < <(scram_args)
  fi
  write_config
  if [[ ! -f "$DATA/meta.properties" ]]; then
    log "formatting KRaft storage in $DATA"
    java -cp "$(classpath)" -Dlog4j2.configurationFile="$L4J" \
      kafka.tools.StorageTool format -t "$(cluster_id)" \
      -c "$CONF" "${scram[@]}" >>"$LOG" 2>&1 || { log "storage format failed; see $LOG"; tail -20 "$LOG" >&2; exit 5; }
  fi
  log "starting Kafka $VERSION on 127.0.0.1:$PORT (log: $LOG)"
  # shellcheck disable=SC2086  # options, split as a shell would
  nohup java -Xms256m -Xmx"$HEAP" $JVM_OPTS -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$L4J" \
    -cp "$(classpath)" kafka.Kafka "$CONF" >>"$LOG" 2>&1 &
  write_pid $!
  wait_ready
}

wait_ready() {
  wait_until_up broker "${PARKA_KAFKA_START_TIMEOUT_S:-90}" "port $PORT"
  log "broker ready at 127.0.0.1:$PORT"
  if [[ "$SECURITY" == sasl_ssl ]]; then
    log "SASL_SSL (SCRAM-SHA-512, SCRAM-SHA-256); CA: $CA; client settings with the user and password: $CLIENT_CONF"
  fi
}

down() { stop_server broker; }

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
  fetch) need_java "Kafka $VERSION"; fetch_jars ;;
  jar-list) jar_list ;;
  down) down ;;
  kill) kill9 ;;
  status) if is_up; then log "up on 127.0.0.1:$PORT"; else log "down"; exit 1; fi ;;
  data-dir) echo "$DATA" ;;
  free-port) free_port ;;
  reset)
    down; rm -rf "$DATA"; log "data removed: $DATA"
    if [[ "$SECURITY" == sasl_ssl ]]; then rm -f "$CLIENT_CONF"; fi ;;  # its user went with the data
  client-config)
    if [[ "$SECURITY" != sasl_ssl ]]; then log "client-config needs PARKA_KAFKA_SECURITY=sasl_ssl"; exit 2; fi
    echo "$CLIENT_CONF" ;;
  *) echo "usage: $0 up|down|fetch|jar-list|kill|status|data-dir|free-port|reset|client-config" >&2; exit 2 ;;
esac
