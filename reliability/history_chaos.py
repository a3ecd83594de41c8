"""A long history in a short run: ``parka ingest`` workers SIGKILLed while VACUUM, checkpoints,
the log cleanup after them and background compaction run all the time on a Delta table whose
retention is seconds.

It is the ingest scenario (:class:`.ingest_chaos.IngestChaos`: a producer that keeps producing,
bad messages, another writer, workers joining and leaving) with every worker on
``--table-retention`` :data:`RETENTION_S` (the table the first one creates gets that deleted-file
and log retention) and ``--vacuum-every 1``, beside its own checkpoints every 2 to 6 commits and
compaction whenever 2 to 6 small files are there; the plan is SIGKILLs at random moments, a worker
killed inside each of :data:`SPANS` (a VACUUM, a checkpoint and the log cleanup after it: the
kill comes from a thread of the worker's own while delta-rs' call runs, ``parka.crash.crash_during``)
and one SIGTERM, each once the table has gained :data:`STEP_VERSIONS` versions since the step
before, so that the run spans many retention windows. Nothing may be lost or duplicated, as there.

And VACUUM may not delete a file that a version inside the retention names: a reader
(:class:`PinnedReader`) reads the table's latest version and its files every second, and until
:data:`RETENTION_S` (less a margin for the clocks) has passed since that read, every one of those
files must still be on disk, and the version must still read (one of them, by time travel, at each
round). Files compaction removed after the read are deleted no sooner than the retention after
their removal, so later than that.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable

from .feed import IdSource
from .ingest_chaos import IngestChaos, IngestPlan, Step, plan
from .procs import wait_for
from .tables import DeltaTarget

__all__ = ["RETENTION_S", "SPANS", "STEP_VERSIONS", "HistoryChaos", "PinnedReader", "run_history_chaos"]

RETENTION_S = 10
SPANS = ("during-vacuum", "during-checkpoint")
STEP_VERSIONS = 40  # versions the table gains between two faults (a few retention windows each)
_MARGIN_S = 2.0  # a file's modification time and this process's clock: the same machine, a margin anyway


@dataclass(frozen=True)
class Pinned:
    """A version as a reader saw it, and when."""

    read_at: float  # time.time()
    version: int
    files: frozenset[str]


class PinnedReader(threading.Thread):
    """Reads ``path``'s latest version every second; checks that the versions read less than the
    retention ago keep their files and still read."""

    def __init__(self, path: Path, rng: random.Random) -> None:
        super().__init__(name="pinned-reader", daemon=True)
        self.path = path
        self.rng = rng
        self.pinned: list[Pinned] = []
        self.problems: list[str] = []
        self.checks = 0
        self.time_travels = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(1.0):  # the reader's pace, not a synchronisation
            try:
                self.round()
            except Exception as exc:  # a read that fails inside the retention is the finding
                self.problems.append(f"the pinned reader failed: {type(exc).__name__}: {str(exc)[:300]}")

    def round(self) -> None:
        if not any((self.path / "_delta_log").glob("[0-9]*.json")):
            return
        table = DeltaTable(str(self.path))
        paths = pa.table(table.get_add_actions(flatten=True))["path"].to_pylist()
        self.pinned.append(Pinned(time.time(), table.version(), frozenset(unquote(p) for p in paths)))
        now = time.time()
        inside = [p for p in self.pinned if now - p.read_at < RETENTION_S - _MARGIN_S]
        self.pinned = inside  # older ones may lose their files now
        for p in inside:
            self.checks += 1
            gone = sorted(f for f in p.files if not (self.path / f).exists())
            if gone:
                self.problems.append(
                    f"version {p.version}, read {now - p.read_at:.1f} s ago (retention {RETENTION_S} s), "
                    f"lost {len(gone)} file(s): {gone[:3]}"
                )
        old = self.rng.choice(inside)
        rows = DeltaTable(str(self.path), version=old.version).get_add_actions(flatten=True)
        if len(pa.table(rows)) != len(old.files):
            self.problems.append(f"version {old.version} read back with another file list by time travel")
        self.time_travels += 1

    def finish(self) -> None:
        self._stop_event.set()
        self.join(60)


class HistoryChaos(IngestChaos):
    """The ingest scenario, each fault once the table has aged by :data:`STEP_VERSIONS` versions."""

    def age(self) -> None:
        assert isinstance(self.table, DeltaTarget)
        table = self.table
        start = table.version()
        wait_for(lambda: table.version() >= start + STEP_VERSIONS, f"{STEP_VERSIONS} more table versions", 300)

    def kill(self, step: Step) -> None:
        self.age()
        super().kill(step)

    def crash(self, step: Step) -> None:
        self.age()
        super().crash(step)

    def leave_step(self, step: Step) -> None:
        self.age()
        super().leave_step(step)


def run_history_chaos(bootstrap: str, run_id: str, out: Path, ids: IdSource, seed: int, kills: int) -> dict[str, Any]:
    """The scenario: ``kills`` SIGKILLs and one SIGTERM, on a Delta table."""
    steps = plan(random.Random(f"{seed}-history-plan"), IngestPlan(1, kills, 1, racer=False, points=SPANS))
    flags = ("--table-retention", str(RETENTION_S), "--vacuum-every", "1")
    chaos = HistoryChaos(bootstrap, run_id, out, seed, steps, None, flags=flags, name="history")
    assert isinstance(chaos.table, DeltaTarget)
    reader = PinnedReader(chaos.table.path, random.Random(f"{seed}-history-reader"))
    reader.start()
    try:
        result = chaos.run(ids)
    finally:
        reader.finish()
    result["problems"] += reader.problems
    vacuums = sum(w.count("VACUUM deleted") for w in chaos.everyone)
    return {
        **result,
        "retention_s": RETENTION_S,
        "planned_kills": kills + len(SPANS),
        "crash_points": list(SPANS),
        "pinned_versions_checked": reader.checks,
        "time_travels": reader.time_travels,
        "vacuums_logged": vacuums,
    }
