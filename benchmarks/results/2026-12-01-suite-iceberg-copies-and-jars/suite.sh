#!/bin/bash
# suite.sh LABEL: `make test` in the current folder (a clone with `make setup` done), with the
# tests' timeline (PARKA_TEST_TIMELINE) and /proc/stat's cpu line before and after, into OUT
# (default /tmp/suite-runs); the remembered Spark jars are removed first, as on a fresh machine.
L=$1; OUT=${OUT:-/tmp/suite-runs}; mkdir -p "$OUT"
rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/parka/spark-jars"
head -1 /proc/stat > "$OUT/stat-$L.before"; start=$(date +%s.%N)
env -u PYTHONDONTWRITEBYTECODE PARKA_TEST_TIMELINE="$OUT/tl-$L.jsonl" make test > "$OUT/test-$L.log" 2>&1
rc=$?; end=$(date +%s.%N); head -1 /proc/stat > "$OUT/stat-$L.after"
python3 - "$OUT" "$L" "$rc" "$(echo "$end - $start" | bc)" <<'PY'
import re, sys
out, label, rc, wall = sys.argv[1:]
b = open(f"{out}/stat-{label}.before").read().split()[1:]
a = open(f"{out}/stat-{label}.after").read().split()[1:]
d = [int(x) - int(y) for x, y in zip(a, b)]
summary = re.findall(r"\d+ (?:passed|failed).*? in [0-9.]+s", open(f"{out}/test-{label}.log").read())
print(f"{label} rc {rc} make test {float(wall):.1f} s busy {(sum(d) - d[3] - d[4]) / 100:.0f} idle {(d[3] + d[4]) / 100:.0f} | {summary[-1] if summary else ''}")
PY
