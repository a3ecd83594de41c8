"""CPU-seconds of a process's threads over a window, summed by thread name (digits as ``#``),
read from ``/proc/<pid>/task/*/stat`` at its start and end (Linux). How the fleet daemon's threads
were sampled: started 20 s after each daemon of ``benchmarks.fleet_load`` started,

    python3 threads.py "$(pgrep -f 'ingest --topics-regex' | head -1)" 30
"""

from __future__ import annotations

import collections
import os
import re
import sys
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def snapshot(pid: str) -> dict[str, tuple[str, float]]:
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[task.name] = (stat[stat.index("(") + 1 : stat.rindex(")")], (int(fields[11]) + int(fields[12])) / TICK)
    return out


def main(pid: str, seconds: float) -> None:
    before = snapshot(pid)
    time.sleep(seconds)
    after = snapshot(pid)
    cpu: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    for tid, (name, used) in after.items():
        kind = re.sub(r"\d+", "#", name)
        cpu[kind] += used - before.get(tid, (name, 0.0))[1]
        threads[kind] += 1
    print(f"total {sum(cpu.values()):.1f} CPU-s in {seconds:g} s")
    for kind, used in cpu.most_common(15):
        print(f"{used:7.2f} {threads[kind]:4} {kind}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
