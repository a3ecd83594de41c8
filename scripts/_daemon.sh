# shellcheck shell=bash
# Sourced by the scripts that run a local server for the tests, CI and the demo (kafka-local.sh,
# s3proxy.sh, azurite.sh, schema-registry.sh, iceberg-rest.sh): the one implementation of a
# server's pid file, its start-up wait and its stop. The sourcing script defines log() and is_up()
# (does the server answer?) and sets PIDFILE, LOG and PORT.

# shellcheck source=scripts/_maven.sh
source "$(dirname "${BASH_SOURCE[0]}")/_maven.sh"

# fetch_once DONE FUNCTION: run FUNCTION, which downloads or builds the server into HOME_DIR and
# makes the file DONE last, unless DONE exists. Two fetches at once on a fresh machine (make test's
# fetch in the background and a test's `up`, or the plain and the secured broker) take turns on a
# lock in HOME_DIR: one fetches, the other waits and then finds DONE. A subshell holds the lock, so
# no server started afterwards inherits it; FUNCTION's exit status is fetch_once's.
fetch_once() {
  local done=$1 fn=$2
  [[ -e "$done" ]] && return 0
  mkdir -p "$HOME_DIR"
  if command -v flock >/dev/null; then
    ( flock 9; [[ -e "$done" ]] || "$fn" ) 9>"$HOME_DIR/.fetch.lock"
  else
    "$fn"
  fi
}

# start_ticks PID: when PID started, in clock ticks since boot (/proc/PID/stat's 22nd field), a
# count the corrections of the wall clock do not move; empty without /proc.
start_ticks() {
  if [[ -r "/proc/$1/stat" ]]; then sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}' || true; fi
}

# write_pid PID: the pid file of the server just started: its pid and its start (start_ticks).
write_pid() { echo "$1 $(start_ticks "$1")" > "$PIDFILE"; }

# The pid of the server this script started, when it is alive (exit 1 otherwise). A pid file
# left by a server that was killed can name a process started since with the same pid: the file
# holds the server's start (write_pid), and a process that started at another tick is not ours.
# A file of the pid alone (written by an older script) is checked by its time instead: a process
# that started after the file was written is not ours. That check compares the wall clock with the
# time since boot, which a paused machine's clock correction moves apart (a minute on this
# project's machines: every server of a test run seemed not the script's, was left running and
# held its port against the next run).
running_pid() {
  [[ -f "$PIDFILE" ]] || return 1
  local pid started
  read -r pid started < "$PIDFILE" || [[ -n "$pid" ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -n "$started" ]]; then
    local now; now=$(start_ticks "$pid")
    [[ -z "$now" || "$now" == "$started" ]] || return 1
  elif [[ -r "/proc/$pid/stat" && -r /proc/stat ]]; then
    local ticks btime
    ticks=$(start_ticks "$pid")
    btime=$(awk '/^btime/ {print $2}' /proc/stat)
    (( btime + ticks / $(getconf CLK_TCK) <= $(stat -c %Y "$PIDFILE") + 1 )) || return 1
  fi
  echo "$pid"
}

# wait_until_up WHAT TIMEOUT_S WHERE: returns once is_up answers; exits 5, with the log's tail,
# when the server exits first or TIMEOUT_S pass.
wait_until_up() {
  local what=$1 deadline=$((SECONDS + $2)) where=$3
  while ! is_up; do
    if ! running_pid >/dev/null; then log "$what exited during start-up; last log lines:"; tail -30 "$LOG" >&2; exit 5; fi
    if (( SECONDS > deadline )); then log "$what did not answer on $where in time; see $LOG"; exit 5; fi
    sleep 0.3
  done
}

# stop_server WHAT: SIGTERM, then SIGKILL after 30 s; the pid file goes either way.
stop_server() {
  local what=$1 pid
  if pid=$(running_pid); then
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    log "$what stopped (pid $pid)"
  else
    log "no $what started by this script is running on port $PORT"
  fi
  rm -f "$PIDFILE"
}

# need_java WHAT: exit 3, saying what to install, unless a Java 17+ runtime is on PATH.
need_java() {
  command -v java >/dev/null || { log "java not found: install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)"; exit 3; }
  local major
  major=$(java -version 2>&1 | sed -nE 's/.*version "([0-9]+).*/\1/p' | head -1)
  if [[ -z "$major" || "$major" -lt 17 ]]; then log "$1 needs Java 17+, found: $(java -version 2>&1 | head -1)"; exit 3; fi
}
