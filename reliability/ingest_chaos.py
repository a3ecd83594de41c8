"""``parka ingest`` workers joining, leaving and killed while a producer keeps producing.

One topic (4 partitions) gets good segments continuously from an idempotent producer, and
every few segments a bad message (:data:`~.catalogue.RAW_INPUTS`, in turn), plus one very large
segment and one of huge strings. One to three workers of one consumer group ingest it into a
table with a dead-letter table. The seeded plan (:func:`plan`) is a list of steps:

* ``crash``: a worker joins with ``PARKA_TEST_CRASH_AT=<point>`` and
  ``PARKA_TEST_CRASH_AFTER=<n>`` and SIGKILLs itself the n-th time it reaches the point; for
  ``on-revoke``, once it owns partitions, another worker joins or leaves to revoke them;
* ``kill``: the suite SIGKILLs a running worker once a condition holds (right after its next
  commit, its next progress line, or its next assignment);
* ``leave``: SIGTERM to a running worker, which must commit what it holds and exit 0.

Between steps the group grows or shrinks to the plan's size (1 to 3 workers). Meanwhile
another writer appends rows of its own to the same table (``write_deltalake``, or pyiceberg's
``append`` for an Iceberg table: a different application), and for part of the run a racer
(same app id, another consumer group) ingests the same partitions. At the end the producer
stops, the workers catch up, get SIGTERM, and one ``parka ingest --end-at-latest`` pass runs;
then every acknowledged id must be in the table once, every bad message once in the
dead-letter table, and no file under the table unreferenced. The tables are Delta or Iceberg
tables (``table_format``: :func:`.tables.target`); the scenario is the same.
"""

from __future__ import annotations

import logging
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import forkserver, tables
from .bad_inputs import judge_data_inputs, judge_dead_letters
from .catalogue import FOREIGN_IDS, events
from .feed import Feeder, IdSource, Ledger, create_topic, end_problems, high_watermarks
from .procs import CRASH_LINE, Proc, Timeout, ingest_command, stop_all, wait_for

__all__ = ["CRASH_POINTS", "IngestPlan", "Step", "plan", "run_ingest_chaos"]

log = logging.getLogger("reliability")

CRASH_POINTS = ("before-write", "mid-write", "after-write", "after-dead-letters", "after-delta-commit", "on-revoke")
# PARKA_TEST_CRASH_AFTER is drawn from these ranges: points reached per segment go further in
_AFTER = {
    "before-write": (1, 8),
    "mid-write": (1, 8),
    "after-write": (1, 8),
    "after-dead-letters": (1, 1),  # reached once per commit with new dead letters
    "after-delta-commit": (1, 3),
    "on-revoke": (1, 1),
    # spans, not points (parka.crash.crash_during): the history scenario's, inside delta-rs' calls
    "during-vacuum": (1, 3),
    "during-checkpoint": (1, 3),
}
KILL_WHEN = ("next-commit", "next-progress", "next-assignment")
PARTITIONS = 4


@dataclass(frozen=True)
class Step:
    """One fault. ``group``: how many workers (the armed one included) the group has for it."""

    action: str  # crash | kill | leave
    group: int
    point: str | None = None
    after: int = 1
    when: str | None = None  # kill: the condition after which the SIGKILL goes out

    def describe(self) -> str:
        if self.action == "crash":
            return f"crash at {self.point} (after {self.after}), group of {self.group}"
        if self.action == "kill":
            return f"SIGKILL at {self.when}, group of {self.group}"
        return f"SIGTERM (leave), group of {self.group}"


@dataclass(frozen=True)
class IngestPlan:
    crashes_per_point: int
    kills: int
    leaves: int
    racer: bool = True
    points: tuple[str, ...] = CRASH_POINTS  # the crash points the plan visits


def plan(rng: random.Random, p: IngestPlan) -> list[Step]:
    """The seeded list of steps: every crash point ``crashes_per_point`` times, ``kills``
    SIGKILLs and ``leaves`` SIGTERMs, shuffled, each with a group size of 1 to 3."""
    steps = []
    for point in p.points:
        for _ in range(p.crashes_per_point):
            # on-revoke needs a second worker to join or leave; crashes want company to rebalance
            low = 2 if point == "on-revoke" else 1
            steps.append(Step("crash", rng.randint(low, 3), point, rng.randint(*_AFTER[point])))
    steps += [Step("kill", rng.randint(1, 3), when=rng.choice(KILL_WHEN)) for _ in range(p.kills)]
    steps += [Step("leave", rng.randint(2, 3)) for _ in range(p.leaves)]
    rng.shuffle(steps)
    return steps


class ForeignWriter(threading.Thread):
    """Another application appending rows of its own to the table (negative ids) until stopped."""

    def __init__(self, table: tables.Target, rng: random.Random) -> None:
        super().__init__(name="foreign-writer", daemon=True)
        self.table = table
        self.rng = rng
        self.appended: set[int] = set()
        self.uncertain: set[int] = set()
        self.errors: list[str] = []
        self.next_id = FOREIGN_IDS
        self._stop_event = threading.Event()

    def run(self) -> None:
        schema = self.table.schema()
        while not self._stop_event.wait(self.rng.uniform(0.5, 2.0)):  # the write rate, not a synchronisation
            n = self.rng.randint(1, 20)
            ids = range(self.next_id, self.next_id + n)
            self.next_id += n
            rows = events(ids)
            rows = pa.table({f.name: rows[f.name] if f.name in rows.column_names else None for f in schema})
            try:
                self.table.append(rows.cast(schema))
            except Exception as exc:  # it may or may not have landed: both are fine, once
                self.uncertain.update(ids)
                self.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            else:
                self.appended.update(ids)

    def finish(self) -> None:
        self._stop_event.set()
        self.join(60)


@dataclass
class IngestChaos:
    bootstrap: str
    run_id: str
    out: Path
    seed: int
    steps: list[Step]
    racer_window: tuple[int, int] | None
    faults: Counter[str] = field(default_factory=Counter)
    events: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    stop_seconds: list[float] = field(default_factory=list)  # each leave's SIGTERM to exit
    workers: list[Proc] = field(default_factory=list)
    everyone: list[Proc] = field(default_factory=list)
    racer: Proc | None = None
    flags: tuple[str, ...] = ()  # for every worker and the final pass
    name: str = "ingest"
    table_format: str = "delta"  # the tables' (tables.FORMATS)

    def __post_init__(self) -> None:
        self.topic = f"rel-{self.name}-{self.run_id}"
        self.table = tables.target(self.table_format, self.out, "table")
        self.dlq = tables.target(self.table_format, self.out, "dlq")
        self.group = f"rel-group-{self.name}-{self.run_id}"
        self.app_id = self.table.app_id(self.topic)
        self.rng = random.Random(f"{self.seed}-ingest-run")
        self.started = 0

    # -- workers ------------------------------------------------------------------------------

    def start(self, *, crash_at: str | None = None, after: int = 1, group: str | None = None) -> Proc:
        self.started += 1
        name = f"w{self.started:02d}" + (f"-{crash_at}" if crash_at else "")
        flags = ["-g", group or self.group, "--dlq-table", self.dlq.name, *self.table.flags, *self.flags]
        flags += ["--allowed-latency", f"{self.rng.uniform(0.3, 2.0):.1f}"]
        flags += ["--max-segments-per-commit", str(self.rng.randint(2, 8))]
        flags += ["--checkpoint-interval", str(self.rng.randint(2, 6))]
        # background compaction is on by default; a low budget makes it run (and race) often
        flags += ["--compact-min-files", str(self.rng.randint(2, 6))]
        command = ingest_command(self.topic, self.table.name, self.bootstrap, *flags)
        proc = Proc.start(name, command, self.out / "logs" / f"{name}.log", crash_at=crash_at, crash_after=after)
        self.everyone.append(proc)
        if group is None:
            self.workers.append(proc)
            self.faults["join (a rebalance)"] += 1
        self.events.append(f"{name} joins" + (f" (crash at {crash_at}, after {after})" if crash_at else ""))
        return proc

    def live(self) -> list[Proc]:
        self.reap()
        return [w for w in self.workers if w.alive()]

    def reap(self) -> None:
        """Workers that exited on their own without being asked to: a failure of parka."""
        for w in list(self.workers):
            code = w.popen.poll()
            if code is None:
                continue
            self.workers.remove(w)
            if w.crashed_at_its_point():
                continue  # accounted for by the step that armed it
            self.problems.append(f"{w.name} exited {code} unasked: {w.tail(1500)}")

    def leave(self, w: Proc) -> None:
        """SIGTERM: the worker commits what it holds and exits 0, its time to exit in the event.
        A stop past ``--stop-timeout`` (30 s) exits 143 with a line naming where its threads were:
        a problem, with that line in it. Still running after 90 s (the bound failed): a SIGABRT
        that writes its threads' stacks to its log, then a SIGKILL, after which the run goes on
        to its verdict."""
        # SIGTERM before the worker has installed its handler would just end the process
        wait_for(lambda: w.has("progress:") or not w.alive(), f"{w.name} to run", 90)
        self.workers.remove(w)
        w.signal(signal.SIGTERM)
        self.faults["SIGTERM (leave)"] += 1
        asked = time.monotonic()
        try:
            code = w.wait_exit(90)
        except Timeout as exc:
            w.abort_with_stacks()  # what it was doing: every thread's stack, in its log
            self.problems.append(f"{exc} after SIGTERM, its threads' stacks at SIGABRT: {w.tail(8000)}")
            w.wait_exit(30)
            self.faults["SIGKILL (still running 90 s after SIGTERM)"] += 1
            self.stop_seconds.append(time.monotonic() - asked)
            self.events.append(f"{w.name} leaves (SIGTERM): still running after 90 s, SIGKILLed")
            return
        took = time.monotonic() - asked
        self.stop_seconds.append(took)
        self.events.append(f"{w.name} leaves (SIGTERM): exit {code} after {took:.1f} s")
        if code != 0:
            self.problems.append(f"{w.name} exited {code} after SIGTERM: {w.tail(1500)}")

    def resize(self, size: int) -> None:
        while len(self.live()) < size:
            self.start()
        while len(self.live()) > size:
            self.leave(self.rng.choice(self.live()))

    # -- steps --------------------------------------------------------------------------------

    def crash(self, step: Step) -> None:
        assert step.point is not None
        self.resize(step.group - 1)
        armed = self.start(crash_at=step.point, after=step.after)
        wait_for(lambda: armed.has("assigned") or not armed.alive(), f"{armed.name} to be assigned", 90)
        if step.point == "on-revoke" and armed.alive():
            others = [w for w in self.live() if w is not armed]
            if len(others) < 2:
                self.start()  # a join revokes everyone's partitions
            else:
                self.leave(self.rng.choice(others))  # so does a leave
        try:
            wait_for(lambda: not armed.alive(), f"{armed.name} to reach {step.point}", 120)
        except Timeout:
            armed.kill_group()
            armed.wait_exit(30)
            self.faults["SIGKILL (crash point not reached)"] += 1
            self.events.append(f"{armed.name} did not reach {step.point} in 120 s: SIGKILL")
        if armed in self.workers:
            self.workers.remove(armed)
        if armed.crashed_at_its_point():
            self.faults[f"crash point {step.point}"] += 1
            self.events.append(f"{armed.name}: {CRASH_LINE.format(point=step.point)}")
        elif armed.popen.returncode != -signal.SIGKILL:
            self.problems.append(f"{armed.name} exited {armed.popen.returncode}: {armed.tail(1500)}")

    def kill(self, step: Step) -> None:
        self.resize(step.group)
        victim = self.rng.choice(self.live())
        mark = {"next-commit": "committed ", "next-progress": "progress:", "next-assignment": "assigned"}[
            step.when or "next-commit"
        ]
        seen = victim.count(mark)
        if step.when == "next-assignment":
            self.start()  # a join: everyone is assigned again
        try:
            wait_for(lambda: victim.count(mark) > seen or not victim.alive(), f"{victim.name}: {step.when}", 90)
        except Timeout:
            self.events.append(f"{victim.name}: no {step.when} in 90 s; killed anyway")
        if victim.alive():
            self.workers.remove(victim)
            victim.kill_group()
            victim.wait_exit(30)
            self.faults[f"SIGKILL at {step.when}"] += 1
            self.events.append(f"{victim.name} SIGKILLed at {step.when}")

    # -- the run ------------------------------------------------------------------------------

    def run(self, ids: IdSource) -> dict[str, Any]:
        started = time.monotonic()
        create_topic(self.bootstrap, self.topic, PARTITIONS)
        ledger = Ledger()
        feeder = Feeder(
            self.bootstrap,
            self.topic,
            PARTITIONS,
            ledger,
            ids,
            random.Random(f"{self.seed}-ingest-feed"),
            bad_every=4,
            data_kinds=["large-segment", "huge-strings"],
            data_after=40,
        )
        foreign = ForeignWriter(self.table, random.Random(f"{self.seed}-foreign"))
        final: subprocess.CompletedProcess[str] | None = None
        try:
            feeder.start()
            self.start()
            wait_for(self.table.exists, "the table to be created", 120)
            self.table.keep_history_short()  # the workers' checkpoints expire it while they crash
            feeder.bad_enabled.set()
            foreign.start()
            for i, step in enumerate(self.steps):
                if self.racer_window and i == self.racer_window[0]:
                    self.racer = self.start(group=f"{self.group}-racer")
                    self.events.append(f"{self.racer.name} is a racer: same app id, group {self.group}-racer")
                if self.racer_window and i == self.racer_window[1] and self.racer is not None:
                    self.racer.signal(signal.SIGTERM)
                    if self.racer.wait_exit(90) != 0:
                        self.problems.append(f"racer exited {self.racer.popen.returncode}: {self.racer.tail()}")
                log.info("ingest step %d/%d: %s", i + 1, len(self.steps), step.describe())
                self.events.append(f"step {i + 1}: {step.describe()}")
                {"crash": self.crash, "kill": self.kill, "leave": self.leave_step}[step.action](step)
            feeder.finish()
            foreign.finish()
            self.resize(max(1, len(self.live())))
            highs = high_watermarks(self.bootstrap, self.topic, PARTITIONS)
            try:
                wait_for(
                    lambda: self.table.caught_up(self.app_id, highs),
                    "the workers to catch up with the topic",
                    300,
                    poll_s=1.0,
                )
            except Timeout as exc:  # too slow is a problem, but the final pass still lands the rest: judge it
                done = self.table.txn_versions(self.app_id, PARTITIONS)
                self.problems.append(f"{exc}: txn versions {done}, high watermarks {highs}")
            for w in self.live():
                self.leave(w)
            final = self.final_pass()
        finally:
            stop_all(self.everyone)
            if feeder.is_alive():
                feeder.finish(60)
            if foreign.is_alive():
                foreign.finish()
        return self.verdict(ledger, foreign, final, time.monotonic() - started)

    def final_pass(self) -> subprocess.CompletedProcess[str]:
        """One ``parka ingest --end-at-latest`` after everything: it must exit 0."""
        flags = ("-g", self.group, "--end-at-latest", "--dlq-table", self.dlq.name, "-q", *self.flags)
        flags += ("--compact-min-files", "2")  # compacts what the workers left, before it stops
        command = ingest_command(self.topic, self.table.name, self.bootstrap, *self.table.flags, *flags)
        final = forkserver.run(command, capture_output=True, text=True, timeout=300)
        if final.returncode != 0:
            self.problems.append(f"the final --end-at-latest pass exited {final.returncode}: {final.stderr[-1500:]}")
        return final

    def leave_step(self, step: Step) -> None:
        self.resize(step.group)
        self.leave(self.rng.choice(self.live()))

    def verdict(
        self, ledger: Ledger, foreign: ForeignWriter, final: subprocess.CompletedProcess[str] | None, wall_s: float
    ) -> dict[str, Any]:
        ids = self.table.ids()
        own = [i for i in ids if i >= 0]
        theirs = [i for i in ids if i < 0]
        tally = tables.tally(own, ledger.acknowledged, ledger.failed)
        foreign_tally = tables.tally(theirs, foreign.appended, foreign.uncertain)
        judged = judge_dead_letters(ledger.bad, self.dlq.dead_letters(), self.topic)
        judged["kinds"].update(judge_data_inputs(ledger, own))
        orphans = self.table.orphans()
        # An append of the other writer that failed may leave its file behind (deltalake and
        # pyiceberg write it before they commit; pyiceberg gives up after 4 conflicts). parka's
        # files are named after the topic: the others are the other writer's, not counted when its
        # failed appends explain them all.
        notes = []
        ours = (f"{self.topic}-p", "compacted-g")  # ingestion's files and background compaction's
        left_by_other = [f for f in orphans if not Path(f).name.lstrip(".").startswith(ours)]
        if left_by_other and len(left_by_other) <= len(foreign.errors):
            orphans = [f for f in orphans if f not in left_by_other]
            notes.append(
                f"{len(left_by_other)} unreferenced file(s) under the table, left by the other writer's "
                f"{len(foreign.errors)} failed append(s), not by parka"
            )
        dlq_orphans = self.dlq.orphans()
        if dlq_orphans:
            # a dead-letter file is written before its commit: an append that loses a race leaves
            # one behind (reported, not counted: no record is affected)
            notes.append(
                f"{len(dlq_orphans)} unreferenced file(s) under the dead-letter table, left by dead-letter "
                "appends that lost a race (the file is written before its commit)"
            )
        problems = end_problems(self.problems, ledger, orphans, unexpected_dead_letters=judged["unexpected"])
        if tally.unexpected or foreign_tally.lost or foreign_tally.duplicated or foreign_tally.unexpected:
            problems.append(f"the other writer's rows: {foreign_tally.as_dict()}; ours unexpected {tally.unexpected}")
        return {
            "topic": self.topic,
            "table": str(self.table),
            "table_format": self.table_format,
            "wall_s": round(wall_s, 1),
            "faults": dict(self.faults),
            **tally.as_dict(),
            "segments_acknowledged": ledger.segments,
            "bad_messages_sent": len(ledger.bad),
            "bad_input_kinds": {k: v.as_dict() for k, v in judged["kinds"].items()},
            "other_writer": {
                "rows_appended": len(foreign.appended),
                "rows_in_table": len(theirs),
                "failed_appends": len(foreign.errors),
                "append_errors": foreign.errors[:5],
                "files_left": len(left_by_other),
            },
            "orphans": len(orphans),
            "compacted_files": self.table.compacted_files(),
            "dead_letter_table_orphans": len(dlq_orphans),
            "notes": notes,
            "final_pass": final.stdout.strip().splitlines()[-1] if final and final.stdout.strip() else None,
            "workers_started": self.started,
            "stop_seconds": sorted(round(t, 1) for t in self.stop_seconds),
            "problems": problems,
            "events": self.events,
        }


def run_ingest_chaos(
    bootstrap: str, run_id: str, out: Path, ids: IdSource, seed: int, p: IngestPlan, *, table_format: str = "delta"
) -> dict[str, Any]:
    """The scenario on tables of ``table_format`` (:data:`.tables.FORMATS`); the seed's plan is the
    same for each format."""
    steps = plan(random.Random(f"{seed}-ingest-plan"), p)
    window = (len(steps) // 3, len(steps) // 3 + max(2, len(steps) // 6)) if p.racer else None
    name = "ingest" if table_format == "delta" else f"ingest-{table_format}"
    result = IngestChaos(bootstrap, run_id, out, seed, steps, window, name=name, table_format=table_format).run(ids)
    planned_kills = len(p.points) * p.crashes_per_point + p.kills
    return {**result, "crash_points": list(p.points), "planned_kills": planned_kills}
