#!/usr/bin/env bash
# Start, stop or inspect a Spark standalone cluster on loopback: one master and two workers, run
# by the installed pyspark's own sbin/spark-daemon.sh (the pip package ships that script, not
# start-master.sh/start-worker.sh, which only wrap it) with Java 17. No download, no Docker.
#
#   scripts/spark-standalone.sh up       # idempotent: starts what is not running, waits for the workers
#   scripts/spark-standalone.sh down     # stop the daemons started here
#   scripts/spark-standalone.sh status   # exit 0 when the master answers with every worker alive
#   scripts/spark-standalone.sh url      # the master URL: spark://127.0.0.1:<port>
#
# Environment: PARKA_SPARK_MASTER_PORT (default 17077; the master's web UI is port+1, worker i
# uses port+2i and port+2i+1), PARKA_SPARK_WORKERS (2), PARKA_SPARK_WORKER_CORES (1),
# PARKA_SPARK_WORKER_MEMORY (1g), PARKA_SPARK_CLUSTER_HOME (logs, pids, work dirs; default
# ~/.cache/parka/spark-standalone-<port>), PARKA_PYTHON (the interpreter whose pyspark to use;
# default the repo's .venv/bin/python, else python3).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PORT="${PARKA_SPARK_MASTER_PORT:-17077}"
UI_PORT=$((PORT + 1))
WORKERS="${PARKA_SPARK_WORKERS:-2}"
CORES="${PARKA_SPARK_WORKER_CORES:-1}"
MEMORY="${PARKA_SPARK_WORKER_MEMORY:-1g}"
HOME_DIR="${PARKA_SPARK_CLUSTER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/parka/spark-standalone-$PORT}"
MASTER="spark://127.0.0.1:$PORT"
MASTER_CLASS=org.apache.spark.deploy.master.Master
WORKER_CLASS=org.apache.spark.deploy.worker.Worker

log() { echo "spark-standalone: $*" >&2; }

python_bin() {
  if [[ -n "${PARKA_PYTHON:-}" ]]; then echo "$PARKA_PYTHON"
  elif [[ -x "$REPO/.venv/bin/python" ]]; then echo "$REPO/.venv/bin/python"
  else echo python3; fi
}

spark_home() {
  local home
  home=$("$(python_bin)" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null) || {
    log "pyspark is not installed for $(python_bin): run make setup (or pip install 'parka[spark]')"; exit 3; }
  [[ -x "$home/sbin/spark-daemon.sh" ]] || { log "$home/sbin/spark-daemon.sh missing: this pyspark ships no daemon script"; exit 3; }
  echo "$home"
}

need_java() {
  command -v java >/dev/null || { log "java not found: install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)"; exit 3; }
}

# The environment spark-daemon.sh reads: where pids and logs go, loopback only, small daemons.
daemon_env() {
  export SPARK_HOME
  SPARK_HOME="$(spark_home)"
  export SPARK_PID_DIR="$HOME_DIR/pids" SPARK_LOG_DIR="$HOME_DIR/logs" SPARK_CONF_DIR="$HOME_DIR/conf"
  export SPARK_IDENT_STRING="parka-$PORT" SPARK_LOCAL_IP=127.0.0.1 SPARK_DAEMON_MEMORY="${SPARK_DAEMON_MEMORY:-512m}"
  mkdir -p "$SPARK_PID_DIR" "$SPARK_LOG_DIR" "$SPARK_CONF_DIR" "$HOME_DIR/work"
}

daemon() { "$SPARK_HOME/sbin/spark-daemon.sh" "$@"; }

running() { daemon status "$1" "$2" >/dev/null 2>&1; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

alive_workers() {
  curl -fsS --max-time 5 "http://127.0.0.1:$UI_PORT/json/" 2>/dev/null \
    | sed -nE 's/.*"aliveworkers" *: *([0-9]+).*/\1/p' | head -1
}

wait_ready() {
  local deadline=$((SECONDS + ${PARKA_SPARK_START_TIMEOUT_S:-120})) alive=""
  while :; do
    alive=$(alive_workers || true)
    [[ "${alive:-0}" -ge "$WORKERS" ]] && break
    if ! running "$MASTER_CLASS" 1; then log "the master exited; its log:"; tail -30 "$SPARK_LOG_DIR"/*Master*.out >&2; exit 5; fi
    if (( SECONDS > deadline )); then log "only ${alive:-0} of $WORKERS workers registered in time; logs in $SPARK_LOG_DIR"; exit 5; fi
    sleep 0.5
  done
  log "ready: $MASTER with $alive worker(s) (web UI http://127.0.0.1:$UI_PORT)"
}

up() {
  need_java
  daemon_env
  if running "$MASTER_CLASS" 1; then
    log "master already running on $MASTER"
  else
    if port_open "$PORT"; then log "port $PORT is already in use by another process; set PARKA_SPARK_MASTER_PORT"; exit 4; fi
    log "starting the master on $MASTER (logs: $SPARK_LOG_DIR)"
    daemon start "$MASTER_CLASS" 1 --host 127.0.0.1 --port "$PORT" --webui-port "$UI_PORT" >/dev/null
  fi
  for i in $(seq 1 "$WORKERS"); do
    if running "$WORKER_CLASS" "$i"; then continue; fi
    log "starting worker $i ($CORES core(s), $MEMORY)"
    daemon start "$WORKER_CLASS" "$i" --host 127.0.0.1 --port $((PORT + 2 * i)) --webui-port $((PORT + 2 * i + 1)) \
      --cores "$CORES" --memory "$MEMORY" --work-dir "$HOME_DIR/work/worker-$i" "$MASTER" >/dev/null
  done
  wait_ready
}

down() {
  daemon_env
  local i
  for i in $(seq "$WORKERS" -1 1); do daemon stop "$WORKER_CLASS" "$i" >/dev/null || true; done
  daemon stop "$MASTER_CLASS" 1 >/dev/null || true
  local deadline=$((SECONDS + 60))
  while port_open "$PORT" && (( SECONDS < deadline )); do sleep 0.5; done
  log "stopped (master $MASTER)"
}

status() {
  daemon_env
  local alive
  alive=$(alive_workers || true)
  if running "$MASTER_CLASS" 1 && [[ "${alive:-0}" -ge "$WORKERS" ]]; then
    log "up: $MASTER with $alive worker(s)"
  else
    log "down or incomplete (master running: $(running "$MASTER_CLASS" 1 && echo yes || echo no), alive workers: ${alive:-0})"
    exit 1
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  url) echo "$MASTER" ;;
  *) echo "usage: $0 up|down|status|url" >&2; exit 2 ;;
esac
