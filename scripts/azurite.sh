#!/usr/bin/env bash
# Start, stop or inspect Azurite, Azure's official storage emulator (npm package `azurite`), blob
# service only, on loopback, with its data in a folder.
#
#   scripts/azurite.sh up       # idempotent: npm install once, start, create the container
#   scripts/azurite.sh fetch    # npm install only (make test: beside the set-up)
#   scripts/azurite.sh down     # stop the emulator started here
#   scripts/azurite.sh status   # exit 0 when it answers on its port
#   scripts/azurite.sh env      # the storage options for parka / delta-rs, one key=value a line
#
# The account is the emulator's well-known devstoreaccount1 (its key is public, in Azure's docs).
# Environment: PARKA_AZURITE_VERSION (default below), PARKA_AZURITE_HOME (package, data, log;
# default ~/.cache/parka/azurite), PARKA_AZURITE_PORT (default 19181),
# PARKA_AZURITE_CONTAINER (created by `up`; default `lake`).
set -euo pipefail

VERSION="${PARKA_AZURITE_VERSION:-3.37.0}"
HOME_DIR="${PARKA_AZURITE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/parka/azurite}"
PORT="${PARKA_AZURITE_PORT:-19181}"
CONTAINER="${PARKA_AZURITE_CONTAINER:-lake}"
ACCOUNT=devstoreaccount1
ACCOUNT_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
PKG="$HOME_DIR/$VERSION"
BIN="$PKG/node_modules/.bin/azurite-blob"
DATA="$HOME_DIR/data-$PORT"
PIDFILE="$HOME_DIR/azurite-$PORT.pid"
LOG="$HOME_DIR/azurite-$PORT.log"

log() { echo "azurite: $*" >&2; }
# shellcheck source=scripts/_daemon.sh
source "$(dirname "${BASH_SOURCE[0]}")/_daemon.sh"

install() {
  [[ -f "$PKG/.complete" ]] && return 0
  command -v npm >/dev/null || { log "npm not found: install Node.js 20+ and npm (apt-get install nodejs npm)"; exit 3; }
  fetch_once "$PKG/.complete" npm_install
}

# Azurite's telemetry client, applicationinsights, brings OpenTelemetry's SDK and exporters: 234
# MB of its 360 MB, of which the emulator, started with --disableTelemetry, only requires the
# module. An npm override puts an empty module of that name in its place: a first fetch took
# 18.8-19.3 CPU-s instead of 31.2-49.6, and 127 MB on disk instead of 361
# (benchmarks/results/2026-12-01-azurite-without-telemetry/).
npm_install() {
  mkdir -p "$PKG/applicationinsights-stub"
  log "installing azurite@$VERSION from npm into $PKG"
  echo '{"name": "applicationinsights", "version": "0.0.0", "main": "index.js"}' >"$PKG/applicationinsights-stub/package.json"
  echo '// parka: Azurite runs with --disableTelemetry and only requires this module' >"$PKG/applicationinsights-stub/index.js"
  echo 'module.exports = {};' >>"$PKG/applicationinsights-stub/index.js"
  cat >"$PKG/package.json" <<JSON
{"private": true, "dependencies": {"azurite": "$VERSION"},
 "overrides": {"applicationinsights": "file:./applicationinsights-stub"}}
JSON
  (cd "$PKG" && npm install --silent --no-audit --no-fund --prefix "$PKG" >&2)
  [[ -x "$BIN" ]] || { log "npm finished but $BIN is missing"; exit 3; }
  touch "$PKG/.complete"
}

is_up() { curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/$ACCOUNT?comp=list" 2>/dev/null; }

wait_ready() {
  wait_until_up azurite "${PARKA_AZURITE_START_TIMEOUT_S:-60}" "port $PORT"
}

# Create Container with a Shared Key signature (neither delta-rs nor object_store creates one).
# 201: created, 409: there already.
create_container() {
  local date version=2021-08-06 hexkey sts sig code
  date=$(LC_ALL=C TZ=GMT date '+%a, %d %b %Y %H:%M:%S GMT')
  hexkey=$(printf '%s' "$ACCOUNT_KEY" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  sts="PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:$date\nx-ms-version:$version\n/$ACCOUNT/$ACCOUNT/$CONTAINER\nrestype:container"
  sig=$(printf "$sts" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | base64 -w0)
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "http://127.0.0.1:$PORT/$ACCOUNT/$CONTAINER?restype=container" \
    -H "x-ms-date: $date" -H "x-ms-version: $version" -H "Content-Length: 0" -H "Authorization: SharedKey $ACCOUNT:$sig")
  case "$code" in
    201|409) log "ready at http://127.0.0.1:$PORT/$ACCOUNT (container $CONTAINER)" ;;
    *) log "creating container $CONTAINER answered HTTP $code; see $LOG"; exit 5 ;;
  esac
}

up() {
  command -v openssl >/dev/null || { log "openssl not found (apt-get install openssl): it signs the container creation"; exit 3; }
  if pid=$(running_pid); then log "already running (pid $pid) on 127.0.0.1:$PORT"; wait_ready; create_container; return 0; fi
  if is_up; then log "port $PORT is already in use by another process; set PARKA_AZURITE_PORT"; exit 4; fi
  install
  mkdir -p "$DATA"
  log "starting azurite $VERSION (blob) on 127.0.0.1:$PORT, data in $DATA (log: $LOG)"
  nohup "$BIN" --blobHost 127.0.0.1 --blobPort "$PORT" --location "$DATA" --disableTelemetry --silent \
    --skipApiVersionCheck >>"$LOG" 2>&1 &
  write_pid $!
  wait_ready
  create_container
}

down() { stop_server azurite; }

storage_env() {
  cat <<ENV
azure_storage_account_name=$ACCOUNT
azure_storage_account_key=$ACCOUNT_KEY
azure_storage_endpoint=http://127.0.0.1:$PORT/$ACCOUNT
azure_allow_http=true
ENV
}

case "${1:-}" in
  up) up ;;
  fetch) install ;;
  down) down ;;
  status) if is_up; then log "up on 127.0.0.1:$PORT"; else log "down"; exit 1; fi ;;
  env) storage_env ;;
  data-dir) echo "$DATA" ;;
  reset) down; rm -rf "$DATA"; log "data removed: $DATA" ;;
  *) echo "usage: $0 up|down|fetch|status|env|data-dir|reset" >&2; exit 2 ;;
esac
