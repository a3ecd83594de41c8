#!/usr/bin/env bash
# The CPU of the test workers' collection on a fresh machine, two ways. REPO: a clone with its
# virtualenv made (make setup). Each round removes every __pycache__ folder of the virtualenv's
# site-packages and of the repo's packages and tests (as on a fresh machine, where uv installs
# without compiling), byte-compiles the repo's folders as make's `compiled` target does first, then either
#   workers:      5 `pytest --collect-only` at once (what `pytest -n 5`'s workers do first), or
#   once-first:   one `pytest --collect-only`, then those 5 at once,
# each timed whole by /usr/bin/time (user + system CPU of the round's process tree), arms alternated.
# Usage: run.sh REPO ROUNDS OUT
set -euo pipefail
repo=$1 rounds=$2 out=$3
export repo
mkdir -p "$out"
unset PYTHONDONTWRITEBYTECODE  # as make does (its Makefile unexports it)
round() {
  set -euo pipefail
  cd "$repo"
  find .venv/lib/python3*/site-packages parka producer consumer lake spark_ext ops reliability tests \
    -name __pycache__ -type d -prune -exec rm -rf {} +
  .venv/bin/python -m compileall -q -j 0 parka producer consumer lake ops spark_ext reliability tests benchmarks demo
  collect() { .venv/bin/pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1; }
  if [[ $1 == once-first ]]; then collect; fi
  for _ in 1 2 3 4 5; do collect & done
  wait
}
export -f round
for i in $(seq 1 "$rounds"); do
  for arm in workers once-first; do
    /usr/bin/time -f "$arm round $i: %U user %S sys %e wall" bash -c "round $arm" 2>>"$out/times.txt"
  done
done
cat "$out/times.txt"
