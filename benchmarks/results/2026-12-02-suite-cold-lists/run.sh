#!/usr/bin/env bash
# .ci/run on a cold machine at one commit, with the CPU of every process on the machine counted:
#   run.sh REPO COMMIT OUT
# A fresh clone, an empty HOME (no uv, pip, npm, Maven or parka cache) and an empty Ivy home (the
# real one kept aside meanwhile: benchmarks/empty_ivy.sh), then `.ci/run` under /usr/bin/time
# and scripts/cpu_by_process.py, with PARKA_TEST_TIMELINE. OUT gets: out (the run's output), time
# (wall s), cpu.json, timeline.jsonl.
set -euo pipefail
REPO=$(realpath "$1") COMMIT=$2 OUT=$(realpath -m "$3")
# shellcheck source=benchmarks/empty_ivy.sh
source "$(dirname "$0")/../../empty_ivy.sh"
mkdir -p "$OUT"
work=$(mktemp -d)
ivy_aside "$work"
mkdir -p "$work/run/home"
git clone -q "$REPO" "$work/run/repo"
git -C "$work/run/repo" checkout -q "$COMMIT"
cd "$work/run/repo"
HOME="$work/run/home" PARKA_TEST_TIMELINE="$OUT/timeline.jsonl" /usr/bin/time -o "$OUT/time" -f "%e" \
  python3 "$REPO/scripts/cpu_by_process.py" --out "$OUT/cpu.json" -- .ci/run >"$OUT/out" 2>&1 || true
scripts/kafka-local.sh down >/dev/null 2>&1 || true
cd /
rm -rf "$work/run" /tmp/pytest-of-"$(id -un)"
