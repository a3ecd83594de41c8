"""Spark raw mode (``parka spark-ingest``, delta-spark commits) killed at its commit points.

A topic of 2 partitions; before each run the suite produces another chunk of good segments
and one bad message per partition (:data:`~.catalogue.RAW_INPUTS`, in turn). Each run is
``parka spark-ingest --end-at-latest --max-offsets-per-trigger 4 --dlq-table ...`` in a process
group of its own, armed with one of the driver's crash points (``PARKA_TEST_CRASH_AT``:
``batch-before-write``, ``batch-after-write``, ``after-dead-letters``, ``after-delta-commit``;
``PARKA_TEST_CRASH_AFTER`` drawn by the seed), or killed from outside: SIGKILL to the whole
process group (driver, JVM, Python workers) right after a commit. Each is followed by the
next run, which must replay or skip what the killed one left. A last run without faults must
exit 0, with ``parka ingest`` (same app id: another writer) racing it on the same table. Then
every acknowledged id is in the table once, every bad message once in the dead-letter table,
and no data file is unreferenced.
"""

from __future__ import annotations

import logging
import random
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from parka.producer import ParquetProducer

from . import tables
from .bad_inputs import judge_dead_letters
from .catalogue import EVENTS, RAW_INPUTS, events
from .feed import IdSource, Ledger, create_topic, end_problems, producer_conf, raw_producer_conf
from .procs import CRASH_LINE, Proc, ingest_command, spark_ingest_command, stop_all, wait_for

__all__ = ["SPARK_POINTS", "SparkPlan", "run_spark_chaos"]

log = logging.getLogger("reliability")

SPARK_POINTS = ("batch-before-write", "batch-after-write", "after-dead-letters", "after-delta-commit")
PARTITIONS = 2
RUN_TIMEOUT_S = 420


@dataclass(frozen=True)
class SparkPlan:
    """``crashes`` runs killed at a crash point (cycling through :data:`SPARK_POINTS` in a seeded
    order), ``group_kills`` runs whose process group the suite kills after a commit; with
    ``racer``, ``parka ingest`` races the last run on the same table."""

    crashes: int
    group_kills: int
    racer: bool = True


@dataclass
class SparkChaos:
    bootstrap: str
    run_id: str
    out: Path
    seed: int
    plan: SparkPlan
    faults: Counter[str] = field(default_factory=Counter)
    events: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    everyone: list[Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.topic = f"rel-spark-{self.run_id}"
        self.table = self.out / "table"
        self.dlq = self.out / "dlq"
        self.rng = random.Random(f"{self.seed}-spark")
        self.runs = 0
        self.bad_sent = 0

    def produce_chunk(self, ledger: Ledger, ids: IdSource, segments: int, *, bad: bool = True) -> None:
        """``segments`` good segments on random partitions, then one bad message per partition."""
        with ParquetProducer(producer_conf(self.bootstrap, **{"columnar.batch.records": 100})) as producer:
            producer.set_schema(self.topic, EVENTS)
            for _ in range(segments):
                chunk = ids.take(self.rng.randint(20, 100))
                partition = self.rng.randrange(PARTITIONS)
                producer.produce_batch(
                    self.topic, events(chunk), partition=partition, on_delivery=ledger.segment_report(chunk)
                )
            if producer.flush(120):
                raise RuntimeError(f"segments to {self.topic} without a delivery report")
        if not bad:
            return
        raw = Producer(raw_producer_conf(self.bootstrap))
        for partition in range(PARTITIONS):
            kind = RAW_INPUTS[self.bad_sent % len(RAW_INPUTS)]
            assert kind.build is not None
            value, headers = kind.build(self.rng, self.bad_sent)
            self.bad_sent += 1
            raw.produce(
                self.topic, value=value, headers=headers, partition=partition, on_delivery=ledger.bad_report(kind.kind)
            )
        if raw.flush(120):
            raise RuntimeError(f"bad messages to {self.topic} without a delivery report")

    def start(self, *, crash_at: str | None = None, after: int = 1) -> Proc:
        self.runs += 1
        name = f"spark{self.runs:02d}" + (f"-{crash_at}" if crash_at else "")
        flags = ("--end-at-latest", "--max-offsets-per-trigger", "4", "--dlq-table", str(self.dlq))
        command = spark_ingest_command(self.topic, self.table, self.bootstrap, *flags)
        proc = Proc.start(name, command, self.out / "logs" / f"{name}.log", crash_at=crash_at, crash_after=after)
        self.everyone.append(proc)
        return proc

    def crash_run(self, point: str, after: int) -> None:
        run = self.start(crash_at=point, after=after)
        self.events.append(f"{run.name}: crash at {point} (after {after})")
        code = run.wait_exit(RUN_TIMEOUT_S)
        run.wait_group_gone(60)
        if run.crashed_at_its_point():
            self.faults[f"crash point {point}"] += 1
            self.events.append(f"{run.name}: {CRASH_LINE.format(point=point)}")
        elif code == 0:
            self.events.append(f"{run.name}: finished before reaching {point} (no crash)")
            self.faults[f"crash point {point} not reached"] += 1
        else:
            self.problems.append(f"{run.name} exited {code}: {run.tail(2000)}")

    def group_kill_run(self) -> None:
        """A run killed from outside, SIGKILL to its whole process group, right after its k-th
        commit (k drawn by the seed)."""
        run = self.start()
        commits = self.rng.randint(1, 2)
        self.events.append(f"{run.name}: SIGKILL of its process group after commit {commits}")
        wait_for(lambda: run.count("committed ") >= commits or not run.alive(), f"{run.name}'s commits", RUN_TIMEOUT_S)
        if run.alive():
            run.kill_group()
            self.faults["SIGKILL of the process group after a commit"] += 1
        else:
            self.faults["SIGKILL of the process group not done (the run finished first)"] += 1
        code = run.wait_exit(60)
        run.wait_group_gone(60)
        if code not in (-signal.SIGKILL, 0):
            self.problems.append(f"{run.name} exited {code}: {run.tail(2000)}")

    def final_run(self) -> Proc:
        """The last run, without faults; with ``racer``, ``parka ingest`` (same app id) joins it
        on the same table once Spark has committed. Both must exit 0."""
        run = self.start()
        other = None
        if self.plan.racer:
            wait_for(lambda: run.has("committed ") or not run.alive(), f"{run.name}'s first commit", RUN_TIMEOUT_S)
            command = ingest_command(self.topic, self.table, self.bootstrap, "--end-at-latest")
            command += ["--max-segments-per-commit", "2", "--dlq-table", str(self.dlq)]
            other = Proc.start("racer-parka-ingest", command, self.out / "logs" / "racer-parka-ingest.log")
            self.everyone.append(other)
            self.events.append(f"{run.name}: parka ingest (same app id) races it on the same table")
        code = run.wait_exit(RUN_TIMEOUT_S)
        run.wait_group_gone(60)
        if code != 0:
            self.problems.append(f"the last spark-ingest run exited {code}: {run.tail(2000)}")
        if other is not None:
            other_code = other.wait_exit(300)
            self.events.append(f"the racing parka ingest exited {other_code}")
            if other_code != 0:
                self.problems.append(f"the racing parka ingest exited {other_code}: {other.tail(2000)}")
        return run

    def run(self, ids: IdSource) -> dict[str, Any]:
        started = time.monotonic()
        create_topic(self.bootstrap, self.topic, PARTITIONS)
        ledger = Ledger()
        points = [SPARK_POINTS[i % len(SPARK_POINTS)] for i in range(self.plan.crashes)]
        self.rng.shuffle(points)
        steps: list[tuple[str, str | None]] = [("crash", p) for p in points]
        steps += [("group-kill", None)] * self.plan.group_kills
        self.rng.shuffle(steps)
        final: Proc | None = None
        try:
            # the table exists before any bad message (a new table takes the first segment's schema)
            self.produce_chunk(ledger, ids, 6, bad=False)
            created = subprocess.run(
                ingest_command(self.topic, self.table, self.bootstrap, "--end-at-latest", "-q"),
                capture_output=True,
                text=True,
                timeout=300,
            )
            if created.returncode != 0:
                raise RuntimeError(f"parka ingest could not create the table: {created.stderr[-2000:]}")
            for i, (action, point) in enumerate(steps):
                self.produce_chunk(ledger, ids, self.rng.randint(12, 20))
                log.info("spark step %d/%d: %s", i + 1, len(steps), point or action)
                if action == "crash":
                    assert point is not None
                    after = 1 if point == "after-dead-letters" else self.rng.randint(1, 3)
                    self.crash_run(point, after)
                else:
                    self.group_kill_run()
            # a longer backlog for the last run, which the racer shares
            self.produce_chunk(ledger, ids, 30)
            final = self.final_run()
        finally:
            stop_all(self.everyone)
        return self.verdict(ledger, final, time.monotonic() - started)

    def verdict(self, ledger: Ledger, final: Proc | None, wall_s: float) -> dict[str, Any]:
        table = tables.DeltaTarget(self.table)
        tally = tables.tally(table.ids(), ledger.acknowledged, ledger.failed)
        judged = judge_dead_letters(ledger.bad, tables.DeltaTarget(self.dlq).dead_letters(), self.topic)
        orphans = table.orphans()
        unexpected = judged["unexpected"]
        problems = end_problems(
            self.problems, ledger, orphans, unexpected_dead_letters=unexpected, unexpected_ids=tally.unexpected
        )
        last = [ln for ln in (final.text() if final else "").splitlines() if ln.startswith('{"status"')]
        return {
            "topic": self.topic,
            "table": str(self.table),
            "wall_s": round(wall_s, 1),
            "faults": dict(self.faults),
            "planned_kills": self.plan.crashes + self.plan.group_kills,
            **tally.as_dict(),
            "segments_acknowledged": ledger.segments,
            "bad_messages_sent": len(ledger.bad),
            "bad_input_kinds": {k: v.as_dict() for k, v in judged["kinds"].items()},
            "orphans": len(orphans),
            "final_run": last[-1] if last else None,
            "runs": self.runs,
            "problems": problems,
            "events": self.events,
        }


def run_spark_chaos(
    bootstrap: str, run_id: str, out: Path, ids: IdSource, seed: int, plan: SparkPlan
) -> dict[str, Any]:
    return SparkChaos(bootstrap, run_id, out, seed, plan).run(ids)
