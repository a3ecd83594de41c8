"""Run a module (``python -m benchmarks.named_threads MODULE ARGS...``) with each Python thread's
name given to its OS thread, so that ``/proc/PID/task/*/comm`` tells the threads apart
(:func:`thread_cpu_s`). Linux's ``prctl(PR_SET_NAME)`` keeps the first 15 bytes.

A measuring aid for the benchmarks: parka itself does not name its OS threads (Python before
3.14 does not either), and ``/proc`` shows every Python thread as ``python``.
"""

from __future__ import annotations

import ctypes
import os
import re
import runpy
import sys
import threading
from collections import Counter

__all__ = ["thread_cpu_s"]

_PR_SET_NAME = 15


def _name_os_threads() -> None:
    libc = ctypes.CDLL(None)
    start = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def named(self: threading.Thread) -> None:
        libc.prctl(_PR_SET_NAME, self.name.encode()[:15], 0, 0, 0)
        start(self)

    threading.Thread._bootstrap_inner = named  # type: ignore[attr-defined]


def thread_cpu_s(pid: int) -> Counter[str]:
    """User + system CPU-seconds of process ``pid``'s live threads, summed by name with digits
    and a topic's lane name folded (``parka-write_3`` and ``parka-write_7`` are ``parka-write_#``).
    Threads that ended are not counted: compare two reads by their total with the process's."""
    tick = os.sysconf("SC_CLK_TCK")
    out: Counter[str] = Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        name = "parka-lane" if name.startswith("parka-lane") else re.sub(r"\d+", "#", name)
        out[name] += (int(fields[11]) + int(fields[12])) / tick
    return out


if __name__ == "__main__":
    _name_os_threads()
    module = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
