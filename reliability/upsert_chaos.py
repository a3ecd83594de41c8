"""``parka ingest --upsert`` workers killed around their upsert commits, joining and leaving,
while a producer keeps producing keyed updates and tombstones; or, with ``cdc``,
``parka ingest --cdc debezium`` workers while it produces Debezium change events.

One topic (4 partitions) gets events on :data:`KEYS` keys from an idempotent
:class:`~parka.producer.ParquetProducer` (``columnar.tombstone.order=key``): a new version of a
random key, or (one in ten) its tombstone. The producer remembers each key's latest event in
produce order, which is each partition's offset order (idempotence, one producer): the model of
the table. Workers of one consumer group upsert it into one Delta table with background
compaction at its most eager (two small files are enough), so compactions move rows under the
key index between the kills. The plan, ``rounds`` times: for each crash point of :data:`POINTS`
a worker joins armed with ``PARKA_TEST_CRASH_AT`` and SIGKILLs itself there (for ``on-revoke``
a second worker joins to revoke its partitions), then a worker is SIGKILLed once it logged a
compaction. Last, a worker joins and leaves by SIGTERM. At
the end the producer stops, one ``parka ingest --upsert --end-at-latest`` pass runs, and the
table, read with delta-rs' query engine (deletion vectors applied), must be the model: no key
lost (missing, or at an older version), none resurrected (present though deleted), none twice,
and no file under the table that no version names.

With ``table_format`` ``iceberg`` the table is an Iceberg table (the embedded catalog), its
superseded rows deleted by position-delete files, read back by pyiceberg's scan.

With ``cdc`` the events are Debezium envelopes (:data:`ENVELOPE`), ordered by ``source.lsn``: a
new version is a ``c`` or ``u`` event at the next lsn, a delete a ``d`` event followed, one time
in two, by its tombstone, and one event in twenty replays a live key's older state (an update
or a delete at an lsn below the key's), which must change nothing. The model takes the events
one by one by the same rules (:func:`cdc_apply`).
"""

from __future__ import annotations

import functools
import logging
import random
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import tables
from .feed import create_topic, producer_conf
from .procs import Proc, Timeout, ingest_command, stop_all, wait_for

__all__ = ["POINTS", "run_upsert_chaos"]

log = logging.getLogger("reliability")

KEYS = 400
POINTS = ("mid-write", "after-write", "after-delta-commit", "on-revoke")
SCHEMA = pa.schema([("id", pa.int64(), False), ("version", pa.int64(), False), ("note", pa.string())])
ROW = pa.struct(list(SCHEMA))
ENVELOPE = pa.schema(
    [
        ("before", ROW),
        ("after", ROW),
        ("source", pa.struct([("lsn", pa.int64(), False)]), False),
        ("op", pa.string(), False),
        ("ts_ms", pa.int64(), False),
    ]
)


def cdc_apply(model: dict[int, tuple[int, Any]], op: str, key: int, lsn: int, row: Any) -> None:
    """One change event into ``model`` (key -> (lsn, row) of its live row): an event whose lsn
    is below the live row's changes nothing; ``""`` is a tombstone, which deletes whatever is
    live; ``d`` deletes; ``c``/``u``/``r`` make ``row`` the key's row (``parka ingest --cdc
    debezium``'s rules, which its tests hold the table to)."""
    live = model.get(key)
    if not op:
        model.pop(key, None)
    elif live is not None and lsn < live[0]:
        return
    elif op == "d":
        model.pop(key, None)
    else:
        model[key] = (lsn, row)


class KeyedFeeder(threading.Thread):
    """Produces events until stopped; ``model`` is each key's latest version (deleted keys out)."""

    def __init__(self, bootstrap: str, topic: str, rng: random.Random, *, cdc: bool = False) -> None:
        super().__init__(name="upsert-feeder", daemon=True)
        conf = producer_conf(bootstrap, **{"columnar.tombstone.order": "key", "columnar.batch.records": 50})
        self._conf = conf
        self.topic = topic
        self.rng = rng
        self.cdc = cdc
        self._latest: dict[int, int] = {}  # key -> version (plain upserts)
        self._changes: dict[int, tuple[int, int]] = {}  # cdc: key -> (lsn, version) of its live row
        self.stale = 0
        self.events = 0
        self.tombstones = 0
        self.errors: list[str] = []
        self._halt = threading.Event()

    def _report(self, err: Any, msg: Any, *rest: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def run(self) -> None:
        from parka.producer import ParquetProducer

        producer = ParquetProducer(self._conf)
        producer.set_schema(self.topic, ENVELOPE if self.cdc else SCHEMA)
        try:
            while not self._halt.is_set():
                for _ in range(40):
                    if self.cdc:
                        self._change(producer)
                        continue
                    key = self.rng.randrange(KEYS)
                    self.events += 1
                    if self.rng.random() < 0.1:
                        producer.produce(self.topic, None, key=str(key), on_delivery=self._report)
                        self._latest.pop(key, None)
                        self.tombstones += 1
                    else:
                        value = {"id": key, "version": self.events, "note": f"v{self.events}"}
                        producer.produce(self.topic, value, key=str(key), on_delivery=self._report)
                        self._latest[key] = self.events
                producer.poll(0)
                self._halt.wait(0.02)
        finally:
            left = producer.flush(300)
            if left:
                self.errors.append(f"{left} message(s) not delivered at the end")

    @property
    def model(self) -> dict[int, int]:
        """Each key's latest version, deleted keys out."""
        return {k: v for k, (_, v) in self._changes.items()} if self.cdc else self._latest

    def _change(self, producer: Any) -> None:
        """One Debezium event (or a delete and its tombstone) of a random key."""
        key = self.rng.randrange(KEYS)
        self.events += 1
        live = self._changes.get(key)
        lsn, op = self.events, "u" if live is not None else "c"
        if live is not None and self.rng.random() < 0.05:  # a replay of an older state: changes nothing
            lsn, op = self.rng.randrange(live[0]), self.rng.choice("ud")
            self.stale += 1
        elif self.rng.random() < 0.1:
            op = "d"
        row = {"id": key, "version": self.events, "note": f"v{self.events}"}
        value: dict[str, Any] = {"before": row if op == "d" else None, "after": None if op == "d" else row}
        value.update(op=op, source={"lsn": lsn}, ts_ms=lsn)
        producer.produce(self.topic, value, key=str(key), on_delivery=self._report)
        cdc_apply(self._changes, op, key, lsn, self.events)
        if op == "d" and lsn == self.events and self.rng.random() < 0.5:
            producer.produce(self.topic, None, key=str(key), on_delivery=self._report)
            cdc_apply(self._changes, "", key, lsn, self.events)
            self.tombstones += 1

    def finish(self) -> None:
        self._halt.set()
        self.join(timeout=330)


def run_upsert_chaos(
    bootstrap: str, run_id: str, out: Path, seed: int, *, rounds: int, cdc: bool = False, table_format: str = "delta"
) -> dict[str, Any]:
    """The scenario, into a Delta table or (``table_format`` ``iceberg``) an Iceberg table of the
    embedded catalog, whose superseded rows go by position-delete files; returns its result for
    the summary (lost, duplicated, faults, problems)."""
    kind = ("upsert-cdc" if cdc else "upsert") + ("" if table_format == "delta" else f"-{table_format}")
    rng = random.Random(f"{seed}-{kind}")
    topic = f"reliability-{kind}-{run_id}"
    create_topic(bootstrap, topic, 4)
    target = tables.target(table_format, out, "table")
    group = f"reliability-{kind}-{run_id}"
    mode = ("--cdc", "debezium") if cdc else ("--upsert",)
    flags = (*mode, "-g", group, "--allowed-latency", "0.5", "--compact-min-files", "2", *target.flags)
    command = ingest_command(topic, target.name, bootstrap, *flags)
    faults: Counter[str] = Counter()
    problems: list[str] = []
    procs: list[Proc] = []
    feeder = KeyedFeeder(bootstrap, topic, rng, cdc=cdc)
    feeder.start()
    n = 0

    def start(crash_at: str | None = None, after: int = 1) -> Proc:
        nonlocal n
        n += 1
        proc = Proc.start(f"w{n}", command, out / f"w{n}.log", crash_at=crash_at, crash_after=after)
        procs.append(proc)
        return proc

    points = POINTS if table_format == "delta" else (*POINTS, "after-deletes")  # Iceberg's delete files written
    try:
        for _ in range(rounds):
            for point in points:
                victim = start(point, 1 if point == "on-revoke" else rng.randint(1, 3))  # one revoke each
                if point == "on-revoke":
                    wait_for(functools.partial(victim.has, "assigned"), f"{victim.name} to hold partitions", 120)
                    start()  # joins: the group rebalances, the victim's partitions are revoked
                victim.wait_exit(180)
                if victim.crashed_at_its_point():
                    faults[f"crash point {point}"] += 1
                else:
                    problems.append(
                        f"{victim.name} armed at {point} exited {victim.popen.returncode}: {victim.tail(800)}"
                    )
                for other in [p for p in procs if p.alive()]:
                    other.signal(signal.SIGTERM)
                    code = other.wait_exit(60)
                    if code != 0:
                        problems.append(f"{other.name} exited {code} on SIGTERM: {other.tail(800)}")
                    faults["SIGTERM (leave)"] += 1
            # a worker killed once its compaction moved rows under its key index
            compactor = start()
            wait_for(functools.partial(compactor.has, "compacted"), f"{compactor.name} to compact", 180)
            compactor.kill_group()
            compactor.wait_exit(60)
            faults["SIGKILL after a compaction"] += 1
        leaver = start()
        wait_for(lambda: leaver.has("committed") or leaver.count("progress") > 2, f"{leaver.name} to work", 120)
        leaver.signal(signal.SIGTERM)
        if leaver.wait_exit(60) != 0:
            problems.append(f"{leaver.name} exited {leaver.popen.returncode} on SIGTERM: {leaver.tail(800)}")
        faults["SIGTERM (leave)"] += 1
    except Timeout as exc:
        problems.append(str(exc))
    finally:
        feeder.finish()
        stop_all(procs)
    final = Proc.start("final", [*command, "--end-at-latest"], out / "final.log")
    procs.append(final)
    # the backlog the kills left: into Iceberg the final pass landed about 1,000 records/s of
    # these small segments (a delete file per data file a commit touches, a footer read per new
    # file), 320,000 records in 300 s in the full mode at fa729f4, short of its end
    if final.wait_exit(300 if table_format == "delta" else 900) != 0:
        problems.append(f"the final pass exited {final.popen.returncode}: {final.tail(2000)}")
    problems += [f"the producer: {e}" for e in feeder.errors]
    return {**verdict(target, feeder, faults, problems), "crash_points": list(points)}


def verdict(target: tables.Target, feeder: KeyedFeeder, faults: Counter[str], problems: list[str]) -> dict[str, Any]:
    """The table against the producer's model, read with deletes applied (delta-rs' query engine,
    pyiceberg's scan)."""
    rows: list[dict[str, Any]] = []
    if target.exists() and target.catalog_name is not None:
        rows = target.read(["id", "version"]).to_pylist()
    elif target.exists():
        from deltalake import DeltaTable, QueryBuilder

        reader = QueryBuilder().register("t", DeltaTable(str(target.name))).execute("select id, version from t")
        rows = pa.table(reader.read_all()).to_pylist()
    got = Counter(r["id"] for r in rows)
    duplicated = sum(c - 1 for c in got.values() if c > 1)
    latest = {r["id"]: r["version"] for r in rows}
    model = feeder.model
    lost = [k for k, v in model.items() if latest.get(k) != v]
    resurrected = [k for k in latest if k not in model]
    orphans = target.orphans()
    if lost:
        problems.append(f"{len(lost)} key(s) missing or at an older version, e.g. {sorted(lost)[:5]}")
    if resurrected:
        problems.append(f"{len(resurrected)} deleted key(s) in the table, e.g. {sorted(resurrected)[:5]}")
    if duplicated:
        problems.append(f"{duplicated} extra row(s) of keys already in the table")
    if orphans:
        problems.append(f"{len(orphans)} file(s) no version names, e.g. {orphans[:3]}")
    return {
        "records_produced": feeder.events,
        "tombstones": feeder.tombstones,
        "stale_events": feeder.stale,
        "keys_in_model": len(model),
        "records_in_table": len(rows),
        "lost": len(lost),
        "duplicated": duplicated,
        "unexpected": len(resurrected),
        "orphans": len(orphans),
        "compacted_files": target.compacted_files(),
        "faults": dict(faults),
        "crash_points": list(POINTS),
        "problems": problems,
    }
