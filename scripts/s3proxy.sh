#!/usr/bin/env bash
# Start, stop or inspect a local S3-compatible server: s3proxy (Maven Central, org.gaul:s3proxy,
# its jar-with-dependencies) with the filesystem backend, on loopback, run with Java 17+.
# s3proxy 4.x evaluates `If-None-Match: *` while it writes (it publishes by a hard link), so
# delta-rs's conditional-put commits are safe on it, as on AWS S3.
#
#   scripts/s3proxy.sh up       # idempotent: fetch the jar once, start, wait until it answers
#   scripts/s3proxy.sh fetch    # fetch the jar only (make test: beside the set-up)
#   scripts/s3proxy.sh down     # stop the server started here
#   scripts/s3proxy.sh status   # exit 0 when it answers on its port
#   scripts/s3proxy.sh env      # the storage options for parka / delta-rs, one key=value a line
#
# Buckets are folders of the data directory: `up` creates PARKA_S3PROXY_BUCKET (default `lake`).
# Environment: PARKA_S3PROXY_VERSION (default below), PARKA_S3PROXY_HOME (jar, config, data, log;
# default ~/.cache/parka/s3proxy-<version>), PARKA_S3PROXY_PORT (default 19180),
# PARKA_S3PROXY_ACCESS_KEY / PARKA_S3PROXY_SECRET_KEY (defaults: local test credentials).
set -euo pipefail

VERSION="${PARKA_S3PROXY_VERSION:-4.1.0}"
HOME_DIR="${PARKA_S3PROXY_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/parka/s3proxy-$VERSION}"
PORT="${PARKA_S3PROXY_PORT:-19180}"
BUCKET="${PARKA_S3PROXY_BUCKET:-lake}"
ACCESS_KEY="${PARKA_S3PROXY_ACCESS_KEY:-parka-local}"
SECRET_KEY="${PARKA_S3PROXY_SECRET_KEY:-parka-local-secret}"
JAR="$HOME_DIR/s3proxy-$VERSION-jar-with-dependencies.jar"
DATA="$HOME_DIR/data-$PORT"
CONF="$HOME_DIR/s3proxy-$PORT.conf"
PIDFILE="$HOME_DIR/s3proxy-$PORT.pid"
LOG="$HOME_DIR/s3proxy-$PORT.log"

log() { echo "s3proxy: $*" >&2; }
# shellcheck source=scripts/_daemon.sh
source "$(dirname "${BASH_SOURCE[0]}")/_daemon.sh"

# the jar's SHA-1 per version (Central's .sha1 file): fetched with curl and checked; another
# version comes through Maven
declare -A JAR_SHA1=([4.1.0]=0a0b89e982bc1b1b5757d45b61109e05a840dd87)

fetch_jar() {
  [[ -f "$JAR" ]] && return 0
  [[ -n "${JAR_SHA1[$VERSION]:-}" ]] || need_maven "s3proxy"
  fetch_once "$JAR" download_jar
}

# into a temporary folder first: the jar's name appears only once it is whole
download_jar() {
  local coords="org.gaul:s3proxy:$VERSION:jar-with-dependencies"
  log "fetching $coords from Maven Central"
  if [[ -n "${JAR_SHA1[$VERSION]:-}" ]]; then
    echo "${JAR_SHA1[$VERSION]} $(central_path "$coords")" | fetch_central "$HOME_DIR/.part" || exit 3
  else
    maven dependency:copy -Dartifact="org.gaul:s3proxy:$VERSION:jar:jar-with-dependencies" \
      -DoutputDirectory="$HOME_DIR/.part" >&2
  fi
  mv "$HOME_DIR/.part/$(basename "$JAR")" "$JAR" || { log "the jar did not arrive at $JAR"; exit 3; }
  rm -rf "$HOME_DIR/.part"
}

write_config() {
  mkdir -p "$DATA/$BUCKET"
  cat > "$CONF" <<PROPS
s3proxy.endpoint=http://127.0.0.1:$PORT
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$ACCESS_KEY
s3proxy.credential=$SECRET_KEY
jclouds.provider=filesystem-nio2
jclouds.filesystem.basedir=$DATA
PROPS
  chmod 600 "$CONF"
}

# an anonymous request gets 403 from a live s3proxy: any HTTP answer means it is serving
is_up() { curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/" 2>/dev/null; }

wait_ready() {
  wait_until_up s3proxy "${PARKA_S3PROXY_START_TIMEOUT_S:-60}" "port $PORT"
  log "ready at http://127.0.0.1:$PORT (bucket $BUCKET)"
}

up() {
  need_java "s3proxy $VERSION"
  if pid=$(running_pid); then log "already running (pid $pid) on 127.0.0.1:$PORT"; mkdir -p "$DATA/$BUCKET"; wait_ready; return 0; fi
  if is_up; then log "port $PORT is already in use by another process; set PARKA_S3PROXY_PORT"; exit 4; fi
  fetch_jar
  write_config
  log "starting s3proxy $VERSION on 127.0.0.1:$PORT, data in $DATA (log: $LOG)"
  LOG_LEVEL=warn JETTY_LOG_LEVEL=warn nohup java -Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -jar "$JAR" --properties "$CONF" >>"$LOG" 2>&1 &
  write_pid $!
  wait_ready
}

down() { stop_server s3proxy; }

storage_env() {
  cat <<ENV
aws_access_key_id=$ACCESS_KEY
aws_secret_access_key=$SECRET_KEY
aws_endpoint_url=http://127.0.0.1:$PORT
aws_region=us-east-1
aws_allow_http=true
ENV
}

case "${1:-}" in
  up) up ;;
  fetch) fetch_jar ;;
  down) down ;;
  status) if is_up; then log "up on 127.0.0.1:$PORT"; else log "down"; exit 1; fi ;;
  env) storage_env ;;
  data-dir) echo "$DATA" ;;
  reset) down; rm -rf "$DATA"; log "data removed: $DATA" ;;
  *) echo "usage: $0 up|down|fetch|status|env|data-dir|reset" >&2; exit 2 ;;
esac
