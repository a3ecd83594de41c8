"""Where a test run's workers spend their time, from ``PARKA_TEST_TIMELINE=FILE make test``
(``tests/conftest.py`` writes a line per test, ``tests/integration/_servers.py`` one per server
start): per worker, its busy time, the time its tests' setups took (waits for a server or the
Spark session included) and its idle time; when each server was up; the Spark session's span.

``python scripts/test_timeline.py FILE``
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> int:
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    tests = [x for x in lines if "test" in x]
    servers = [x for x in lines if "server" in x]
    t0 = min(x.get("start", x.get("launched", 1e20)) for x in lines)
    end = max(x["end"] for x in tests)
    print(f"{len(tests)} tests, {end - t0:.0f} s from the first event to the last test's end")
    by_worker: dict[str, list[dict[str, float]]] = defaultdict(list)
    for x in tests:
        by_worker[x["worker"]].append(x)
    print("worker  first   last   busy  setups  idle  tests  spark-session tests (span)")
    for worker, xs in sorted(by_worker.items()):
        xs.sort(key=lambda x: x["start"])
        busy = sum(x["end"] - x["start"] for x in xs)
        setup = sum(x.get("setup", 0.0) for x in xs)
        spark = [x for x in xs if x["test"].startswith("tests/integration/spark/")]
        span = f"{len(spark)} ({spark[0]['start'] - t0:.0f}-{spark[-1]['end'] - t0:.0f} s)" if spark else "0"
        first, last = xs[0]["start"] - t0, xs[-1]["end"] - t0
        idle = last - first - busy
        print(f"{worker:6} {first:6.0f} {last:6.0f} {busy:6.0f} {setup:7.0f} {idle:5.0f} {len(xs):6}  {span}")
    print("server              launched  ready  (s after the first event; first waiter)")
    seen: dict[str, dict[str, float]] = {}
    for x in sorted(servers, key=lambda x: x.get("launched", x.get("asked", 0))):
        s = seen.setdefault(x["server"], {})
        for key in ("launched", "ready", "asked"):
            if key in x and key not in s:
                s[key] = x[key] - t0
    nan = float("nan")
    for name, s in seen.items():
        print(f"{name:18} {s.get('launched', nan):9.0f} {s.get('ready', nan):6.0f}  {s.get('asked', nan):6.0f}")
    waits = sorted(tests, key=lambda x: -x.get("setup", 0.0))[:10]
    print("longest setups:")
    for x in waits:
        print(f"  {x.get('setup', 0):6.1f} s at {x['start'] - t0:5.0f} s  {x['worker']}  {x['test'][:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
