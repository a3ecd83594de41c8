"""A pytest plugin that measures each test's CPU: the worker process's own, its live
descendants' (a Spark session's JVM, a daemon under test) and what the children it reaped used,
read from ``/proc`` at the test's start and end (Linux). Processes that leave the worker's tree
(servers started with ``nohup ... &`` by a script that exits) are not counted. Not loaded by
``make test``; to find where the suite's CPU goes::

    PYTHONPATH=scripts PARKA_TEST_CPU_DIR=out/cpu .venv/bin/pytest -q -n 3 -p pytest_cpu
    .venv/bin/python scripts/pytest_cpu.py out/cpu      # totals per folder, the top tests

Each worker writes ``<pid>.tsv`` (CPU-s, wall-s, start as epoch seconds, node id) into ``$PARKA_TEST_CPU_DIR``.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
_rows: list[tuple[str, float, float, float]] = []


def _tree_cpu(root: int) -> float:
    """CPU-seconds of ``root`` and its live descendants, with the children each reaped."""
    stats: dict[int, tuple[int, int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the command's ')': state, ppid, ... utime, stime, cutime, cstime (fields 14-17 of stat)
        stats[int(d.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, (ppid, _) in stats.items():
        children[ppid].append(pid)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += stats.get(pid, (0, 0))[1]
        stack.extend(children.get(pid, ()))
    return total / _TICK


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu, wall, start = _tree_cpu(os.getpid()), time.monotonic(), time.time()
    yield
    _rows.append((item.nodeid, _tree_cpu(os.getpid()) - cpu, time.monotonic() - wall, start))


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("PARKA_TEST_CPU_DIR")
    if out and _rows:
        Path(out).mkdir(parents=True, exist_ok=True)
        lines = (f"{cpu:.1f}\t{wall:.1f}\t{start:.1f}\t{nodeid}\n" for nodeid, cpu, wall, start in _rows)
        (Path(out) / f"{os.getpid()}.tsv").write_text("".join(lines))


def report(folder: Path, top: int = 15) -> str:
    """CPU-s and wall-s per test folder (integration files one by one), then the top tests."""
    rows: list[tuple[float, float, str]] = []
    for f in folder.glob("*.tsv"):
        for line in f.read_text().splitlines():
            cpu, wall, _start, nodeid = line.split("\t", 3)
            rows.append((float(cpu), float(wall), nodeid))
    groups: dict[str, list[Any]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for cpu, wall, nodeid in rows:
        parts = nodeid.split("::")[0].split("/")
        group = "/".join(parts[:3]) if parts[1] == "integration" else "tests/unit"
        groups[group][0] += cpu
        groups[group][1] += wall
        groups[group][2] += 1
    out = [f"{len(rows)} tests, {sum(r[0] for r in rows):.0f} CPU-s, {sum(r[1] for r in rows):.0f} wall-s"]
    out.append("  CPU-s  wall-s tests  folder or file")
    for group, (cpu, wall, n) in sorted(groups.items(), key=lambda g: -g[1][0]):
        out.append(f"{cpu:7.0f} {wall:7.0f} {n:5d}  {group}")
    out.append("  CPU-s  wall-s  test")
    out += [f"{cpu:7.1f} {wall:7.1f}  {nodeid}" for cpu, wall, nodeid in sorted(rows, reverse=True)[:top]]
    return "\n".join(out)


if __name__ == "__main__":
    print(report(Path(sys.argv[1])))
