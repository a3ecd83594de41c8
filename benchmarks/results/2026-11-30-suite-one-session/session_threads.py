"""Each second, the CPU-seconds of every thread of the JVMs whose command line holds "parka-tests"
(the tests' Spark session), summed by thread name (digits as ``#``), written to ``argv[1]``; a
thread's last reading counts. Run beside pytest; stop it (kill) once pytest has ended. Linux.

    python3 session_threads.py OUT.txt &
"""

from __future__ import annotations

import collections
import os
import re
import sys
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def sample(last: dict[tuple[str, str], tuple[str, float]]) -> None:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            tasks = list((proc / "task").iterdir())
        except OSError:
            continue
        if "java" not in cmd or "parka-tests" not in cmd:
            continue
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            last[(proc.name, task.name)] = (name, (int(fields[11]) + int(fields[12])) / TICK)


def main(out: str) -> None:
    last: dict[tuple[str, str], tuple[str, float]] = {}
    while True:
        sample(last)
        by_name: collections.Counter[str] = collections.Counter()
        for name, cpu in last.values():
            by_name[re.sub(r"\d+", "#", name)] += cpu
        Path(out).write_text("".join(f"{cpu:8.1f} {name}\n" for name, cpu in by_name.most_common()))
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1])
