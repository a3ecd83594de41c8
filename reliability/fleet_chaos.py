"""The fleet scenario: many topics landed by several ``parka ingest`` daemons of a topic pattern
each (a lane per topic in each daemon, ``consumer/_fleet.py``), while producers feed every topic:

1. the daemons start and every topic's table appears;
2. daemons are SIGKILLed at moments the seed picks, each replaced by a new one;
3. topics are created while they run: the daemons pick them up at their next listing;
4. one topic's table is made unwritable (``chattr +i`` on its folder: no new file, even for root)
   until every other topic committed :data:`COMMITS_WHILE_BLOCKED` times; its lanes fail and start
   again, and no other topic may go longer than :data:`STALL_BOUND_S` between two commits;
5. the producers stop, every table catches up, and SIGTERM stops every daemon (exit 0).

At the end each table must hold every acknowledged record of its topic once, and no orphan file.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .feed import Feeder, IdSource, Ledger, create_topic, end_problems
from .procs import FAST_GROUP, Proc, Timeout, state_of, stop_all, wait_for
from .report import STOP_BOUND_S
from .tables import DeltaTarget, tally

__all__ = ["STALL_BOUND_S", "run_fleet_chaos"]

log = logging.getLogger("reliability")

LATENCY_S = 1.0
STALL_BOUND_S = LATENCY_S + 10.0
"""Between two commits of a topic whose table is writable, while another topic's is not: its
``--allowed-latency`` plus a margin for a loaded 2-core machine running every daemon, producer and
broker (a producer's next segment comes within a second)."""
PARTITIONS = 2
COMMITS_WHILE_BLOCKED = 5
"""How long a table stays unwritable: until every other topic committed this many times."""


class Commits(threading.Thread):
    """When each table's version moved, read from its log folder every quarter second."""

    def __init__(self, lake: Path) -> None:
        super().__init__(name="fleet-commits", daemon=True)
        self.lake = lake
        self.moved: dict[str, list[float]] = {}
        self._versions: dict[str, int] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.25):  # a sampling period, not a synchronisation
            for log_dir in self.lake.glob("*/_delta_log"):
                topic = log_dir.parent.name
                version = sum(1 for p in log_dir.glob("*.json"))
                if version != self._versions.get(topic):
                    self._versions[topic] = version
                    self.moved.setdefault(topic, []).append(time.monotonic())

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)

    def each_moved_since(self, start: float) -> bool:
        """Whether every table seen so far committed after ``start``."""
        return all(self.since(topic, start) for topic in list(self.moved))

    def since(self, topic: str, start: float) -> list[float]:
        return [t for t in self.moved.get(topic, []) if t > start]

    def longest_gap(self, topic: str, start: float, end: float) -> float:
        """The longest time in [start, end] without a commit of ``topic``."""
        marks = [start, *(t for t in self.moved.get(topic, []) if start < t < end), end]
        return max(b - a for a, b in itertools.pairwise(marks))


def _chattr(path: Path, flag: str) -> str | None:
    """``chattr flag path``: None, or why it failed."""
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def run_fleet_chaos(
    bootstrap: str,
    run_id: str,
    out: Path,
    ids: IdSource,
    seed: int,
    *,
    topics: int,
    late: int,
    daemons: int,
    kills: int,
) -> dict[str, Any]:
    rng = random.Random(f"{seed}-fleet")
    prefix = f"reliability-fleet-{run_id}"
    lake = out / "lake"
    lake.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "parka.cli", "ingest", "--topics-regex", f"{re.escape(prefix)}-.*"]
    command += [f"{lake}/{{topic}}", "-k", bootstrap, *FAST_GROUP, "--allowed-latency", str(LATENCY_S)]
    command += ["--topics-refresh-interval", "2"]
    faults: Counter[str] = Counter()
    problems: list[str] = []
    ledgers: dict[str, Ledger] = {}
    feeders: dict[str, Feeder] = {}
    procs: list[Proc] = []
    live: list[Proc] = []
    commits = Commits(lake)
    started = time.monotonic()

    def add_topics(names: list[str]) -> None:
        for name in names:
            create_topic(bootstrap, name, PARTITIONS)
            ledgers[name] = Ledger()
            feeder = Feeder(
                bootstrap, name, PARTITIONS, ledgers[name], ids, random.Random(f"{seed}-{name}"),
                interval_s=1.0, records=(10, 40),
            )  # fmt: skip
            feeders[name] = feeder
            feeder.start()

    def start() -> None:
        proc = Proc.start(f"d{len(procs) + 1}", command, out / f"d{len(procs) + 1}.log", role="daemon")
        procs.append(proc)
        live.append(proc)

    def tables_exist(names: list[str]) -> bool:
        return all(DeltaTarget(lake / n).exists() for n in names)

    blocked = f"{prefix}-00"
    block_window: tuple[float, float] | None = None
    stop_seconds: list[float] = []
    try:
        add_topics([f"{prefix}-{i:02d}" for i in range(topics)])
        commits.start()
        for _ in range(daemons):
            start()
        wait_for(lambda: tables_exist(list(feeders)), "every topic's table", 180)
        for k in range(kills):
            wait_for(functools.partial(commits.each_moved_since, time.monotonic()), "every table to move", 120)
            victim = rng.choice(live)
            victim.kill_group()
            try:
                victim.wait_exit(60)
            except Timeout:  # the run goes on, its verdict a FAIL with what the process was doing
                problems.append(f"{victim.name} not out 60 s after SIGKILL: {state_of(victim.pid)}")
            live.remove(victim)
            faults["SIGKILL of a daemon"] += 1
            start()
            if k == kills // 2:
                new = [f"{prefix}-late{i}" for i in range(late)]
                add_topics(new)
                wait_for(functools.partial(tables_exist, new), "the topics created later to land", 120)
                faults["topic created while the daemons run"] += len(new)
        # a table unwritable for a while: the other topics go on
        why = _chattr(lake / blocked, "+i")
        if why is not None:
            problems.append(f"cannot make {blocked}'s table unwritable: chattr +i: {why}")
        else:
            began = time.monotonic()
            others = [t for t in feeders if t != blocked]
            try:
                failed = lambda: any(p.has(f"topic {blocked}: the lane stopped") for p in live)  # noqa: E731
                wait_for(failed, f"a lane of {blocked} to fail on its unwritable table", 120)
                faults["a table unwritable for a while"] += 1
                # unwritable until every other topic committed COMMITS_WHILE_BLOCKED times since
                moved = lambda: all(len(commits.since(t, began)) >= COMMITS_WHILE_BLOCKED for t in others)  # noqa: E731
                wait_for(moved, "the other topics to commit while one table is unwritable", 180)
            finally:
                _chattr(lake / blocked, "-i")
            block_window = (began, time.monotonic())
        for feeder in feeders.values():
            feeder.finish()
        for name, ledger in ledgers.items():
            target = DeltaTarget(lake / name)
            caught_up = lambda t=target, want=ledger.acknowledged: set(t.ids()) >= want  # noqa: E731
            try:
                wait_for(caught_up, f"{name}'s table to hold every acknowledged record", 300)
            except Timeout as exc:
                problems.append(str(exc))
        for proc in list(live):
            sent = time.monotonic()
            proc.signal(signal.SIGTERM)
            code = proc.wait_exit(STOP_BOUND_S + 30)
            stop_seconds.append(time.monotonic() - sent)
            faults["SIGTERM (leave)"] += 1
            if code != 0:
                problems.append(f"{proc.name} exited {code} on SIGTERM: {proc.tail(800)}")
    finally:
        commits.stop()
        for feeder in feeders.values():
            if feeder.is_alive():
                feeder.finish(60)
        stop_all(procs)
    gaps: dict[str, float] = {}
    if block_window is not None:
        gaps = {t: round(commits.longest_gap(t, *block_window), 1) for t in feeders if t != blocked}
        stalled = {t: g for t, g in gaps.items() if g > STALL_BOUND_S}
        if stalled:
            problems.append(
                f"topics without a commit for more than {STALL_BOUND_S:.0f} s while {blocked}'s table was "
                f"unwritable: {stalled}"
            )
    per_topic = {}
    totals: Counter[str] = Counter()
    orphans: list[str] = []
    for name, ledger in ledgers.items():
        target = DeltaTarget(lake / name)
        t = tally(target.ids(), ledger.acknowledged)
        per_topic[name] = t.as_dict()
        for key in ("records_produced", "records_in_table", "lost", "duplicated", "unexpected"):
            totals[key] += per_topic[name][key]
        orphans += [f"{name}/{f}" for f in target.orphans()]
    if any(s > STOP_BOUND_S for s in stop_seconds):
        problems.append(f"a daemon took more than {STOP_BOUND_S:.0f} s to stop: {sorted(stop_seconds)}")
    unacknowledged = Ledger(failures=[f"{t}: {f}" for t, ledger in ledgers.items() for f in ledger.failures])
    problems = end_problems(problems, unacknowledged, orphans, unexpected_ids=totals["unexpected"])
    return {
        "topics": len(ledgers),
        "daemons": daemons,
        "wall_s": round(time.monotonic() - started, 1),
        "faults": dict(faults),
        **dict(totals),
        "orphans": len(orphans),
        "longest_commit_gap_s_while_blocked": gaps,
        "stall_bound_s": STALL_BOUND_S,
        "stop_seconds": sorted(round(s, 1) for s in stop_seconds),
        "per_topic": per_topic,
        "problems": problems,
    }
