#!/usr/bin/env bash
# .ci/run on a cold machine, at two commits in turn:
#   run.sh REPO OUT COMMIT...
# For each COMMIT: a fresh clone, an empty HOME (no uv, pip, npm, Maven or parka cache) and an
# empty Ivy home (the real one kept aside meanwhile: benchmarks/empty_ivy.sh), then `.ci/run`
# under /usr/bin/time with PARKA_TEST_TIMELINE. OUT gets per run: the output, the timeline and a
# line of runs.tsv: commit, wall seconds of .ci/run, pytest's own seconds from its summary, its
# summary.
set -euo pipefail
REPO=$(realpath "$1") OUT=$(realpath -m "$2")
shift 2
# shellcheck source=benchmarks/empty_ivy.sh
source "$(dirname "$0")/../../empty_ivy.sh"
mkdir -p "$OUT"
work=$(mktemp -d)
ivy_aside "$work"
[[ -f "$OUT/runs.tsv" ]] || printf 'commit\twall_s\tpytest_s\tsummary\n' >"$OUT/runs.tsv"
n=$(($(wc -l <"$OUT/runs.tsv")))
for commit in "$@"; do
  rm -rf "$IVY" "$work/run"
  mkdir -p "$work/run/home"
  git clone -q "$REPO" "$work/run/repo"
  git -C "$work/run/repo" checkout -q "$commit"
  name="$n-$commit"
  (cd "$work/run/repo" && HOME="$work/run/home" PARKA_TEST_TIMELINE="$OUT/$name.timeline.jsonl" \
    /usr/bin/time -o "$work/time" -f "%e" .ci/run >"$OUT/$name.out" 2>&1) || true
  summary=$(grep -E '^[0-9]+ (passed|failed)' "$OUT/$name.out" | tail -1)
  pytest_s=$(sed -nE 's/.* in ([0-9.]+)s.*/\1/p' <<<"$summary")
  # (time's last line: a failed command's file starts with "Command exited with non-zero status N")
  printf '%s\t%s\t%s\t%s\n' "$commit" "$(tail -1 "$work/time")" "$pytest_s" "$summary" >>"$OUT/runs.tsv"
  (cd "$work/run/repo" && scripts/kafka-local.sh down >/dev/null 2>&1 || true)
  rm -rf "$work/run" /tmp/pytest-of-"$(id -un)"
  n=$((n + 1))
done
column -t -s $'\t' "$OUT/runs.tsv"
