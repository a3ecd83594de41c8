#!/usr/bin/env bash
# Cold fetches of the servers' jars with the system's Maven 3.8 (PARKA_MVN) against the scripts'
# Maven 3.9.16 (its breadth-first collector, 16 threads), one after the other, each into an empty
# cache; then uv's install of pyspark with and without pyproject.toml's static metadata for it.
#   benchmarks/results/2026-12-01-maven-parallel-poms/run.sh OUT
# OUT gets runs.tsv: arm, what, wall seconds, user + system CPU-seconds, MB received.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../../.." && pwd)"
OUT=$(realpath -m "${1:?usage: run.sh OUT}")
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rx() { cat /sys/class/net/*/statistics/rx_bytes | paste -sd+ | bc; }
# measure ARM WHAT COMMAND...: one timed run, its line in runs.tsv
measure() {
  local arm=$1 what=$2 before after
  shift 2
  before=$(rx)
  /usr/bin/time -o "$work/time" -f "%e %U %S" "$@" >"$OUT/$arm-$what.log" 2>&1
  after=$(rx)
  read -r wall user sys <"$work/time"
  printf '%s\t%s\t%s\t%.2f\t%d\n' "$arm" "$what" "$wall" "$(echo "$user + $sys" | bc)" $(((after - before) / 1000000)) >>"$OUT/runs.tsv"
}
printf 'arm\twhat\twall_s\tcpu_s\trx_mb\n' >"$OUT/runs.tsv"
# the new Maven's own download, once, outside the runs (as a fresh machine's first fetch does it)
XDG_CACHE_HOME="$work/maven-home" bash -c "source '$REPO/scripts/_maven.sh' && mvn_command"
for what in kafka-local s3proxy iceberg-rest schema-registry; do
  for arm in maven-3.8 maven-3.9-parallel; do
    cache="$work/$arm-$what"
    mkdir -p "$cache/parka"
    if [[ $arm == maven-3.8 ]]; then
      measure "$arm" "$what" env XDG_CACHE_HOME="$cache" PARKA_MVN="$(command -v mvn)" "$REPO/scripts/$what.sh" fetch
    else
      cp -r "$work/maven-home/parka/apache-maven-3.9.16" "$cache/parka/"
      measure "$arm" "$what" env XDG_CACHE_HOME="$cache" "$REPO/scripts/$what.sh" fetch
    fi
    rm -rf "$cache"
  done
done
# uv: pyspark 4.0.0 into a fresh virtualenv, empty cache, from a folder with no pyproject.toml
# (pyspark's metadata read from its sdist) and with one holding only the repo's
# [[tool.uv.dependency-metadata]] table
uv=$REPO/.venv/bin/uv
mkdir -p "$work/with" "$work/without"
python3 - "$REPO/pyproject.toml" "$work/with/pyproject.toml" <<'PY'
import re
import sys

text = open(sys.argv[1]).read()
table = re.search(r"^\[\[tool\.uv\.dependency-metadata\]\]\n.*?^\]\n", text, re.S | re.M)
open(sys.argv[2], "w").write(table.group(0))
PY
for arm in without with; do
  python3 -m venv --without-pip "$work/venv-$arm"
  (cd "$work/$arm" && measure "uv-$arm-static-metadata" pyspark env UV_CACHE_DIR="$work/uv-$arm" \
    "$uv" pip install --quiet -C--build-option=--compression=stored --python "$work/venv-$arm/bin/python" pyspark==4.0.0)
  rm -rf "$work/uv-$arm" "$work/venv-$arm"
done
column -t "$OUT/runs.tsv"
