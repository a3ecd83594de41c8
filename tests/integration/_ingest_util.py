"""Helpers for the ingestion tests: produce known data, run `parka ingest`, inspect tables."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from deltalake import DeltaTable
from parka.lake import FileName, default_app_id, logged_files, read_file, table_identity
from parka.lake import row_groups as row_group_bytes
from parka.producer import ParquetProducer

from reliability import forkserver, procs
from reliability.procs import FAST_GROUP

EVENTS = pa.schema(
    [
        ("id", pa.int64(), False),
        ("device", pa.string(), False),
        ("day", pa.string(), False),
        ("value", pa.float64()),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
)


def events(start: int, n: int, days: int = 3) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "device": [f"d{i % 7}" for i in ids],
            "day": [f"2024-01-0{1 + (i // 50) % days}" for i in ids],
            "value": [None if i % 11 == 0 else i * 0.5 for i in ids],
            "at": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us", tz="UTC")),
        },
        schema=EVENTS,
    )


EVENTS_AVRO = {  # EVENTS as an Avro schema: JSON and Avro records of the same rows
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "device", "type": "string"},
        {"name": "day", "type": "string"},
        {"name": "value", "type": ["null", "double"]},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    ],
}


def json_value(row: dict[str, Any]) -> bytes:
    return json.dumps({**row, "at": row["at"].isoformat()}).encode()


def produce_json(bootstrap: str, topic: str, start: int, n: int, *, partition: int | None = None) -> None:
    """Records ``start`` to ``start + n - 1`` of :func:`events` as JSON values, keyed by device,
    each with a header."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    where = {} if partition is None else {"partition": partition}
    for row in events(start, n).to_pylist():
        producer.produce(topic, value=json_value(row), key=row["device"], headers=[("source", b"json")], **where)
    assert producer.flush(30) == 0


def debezium_envelope(op: str, row: dict[str, Any] | None, lsn: int) -> dict[str, Any]:
    """A Debezium change event's envelope as its PostgreSQL connector writes one (``op``: ``r``,
    ``c``, ``u`` or ``d``; ``row`` is ``after``, or ``before`` for a delete), ordered by ``lsn``."""
    return {
        "before": row if op == "d" else None,
        "after": None if op == "d" else row,
        "source": {"connector": "postgresql", "db": "shop", "lsn": lsn},
        "op": op,
        "ts_ms": 1_700_000_000_000 + lsn,
    }


def create_topic(admin: AdminClient, name: str, partitions: int = 1, **config: str) -> str:
    """Create topic ``name`` and return it once the metadata shows every partition with a
    leader (on a loaded machine that takes up to 60 s)."""
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config)], operation_timeout=30)
    futures[name].result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        ready = md is not None and md.error is None and len(md.partitions) == partitions
        if ready and all(p.leader >= 0 for p in md.partitions.values()):
            return name
        time.sleep(0.1)  # between metadata reads
    raise RuntimeError(f"topic {name} not ready")


def produce_events(
    bootstrap: str, topic: str, start: int, n: int, *, batch: int = 100, extra: dict[str, Any] | None = None
) -> int:
    """Produce ids [start, start+n) as segments of ``batch`` records; returns segments sent."""
    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
        "columnar.batch.records": batch,
        **(extra or {}),
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, EVENTS)
        producer.produce_batch(topic, events(start, n), key_column="device")
        assert producer.flush(30) == 0
        return producer.stats()["segments"]


def run_ingest(
    topic: str,
    table: Path | str,
    bootstrap: str,
    *extra: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, str(table), "-k", bootstrap, "-q", *FAST_GROUP, *extra]
    proc = forkserver.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"parka ingest exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc


def start_ingest(
    topic: str, table: Path | str, bootstrap: str, *extra: str, log: Path, env: dict[str, str] | None = None
) -> forkserver.Process:
    # the tests wait on progress: lines (lag), so one a second rather than a daemon's one a minute
    cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, str(table), "-k", bootstrap, *FAST_GROUP]
    cmd += ["--progress-interval", "1", *extra]
    with open(log, "ab") as handle:  # the child keeps its own descriptor
        return forkserver.popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})


def app_id_of(topic: str, table: Path | str, catalog: str | None = None) -> str:
    """The app id (and consumer group) ingestion of ``topic`` into ``table`` gets by default."""
    return default_app_id(topic, table_identity(str(table), catalog))


def last_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    return result


def table_ids(path: Path | str, storage_options: dict[str, str] | None = None) -> list[int]:
    table = DeltaTable(str(path), storage_options=storage_options)
    ids: list[int] = table.to_pyarrow_table(columns=["id"])["id"].to_pylist()
    return ids


def wait_for_rows(path: Path, n: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    count = -1
    while time.monotonic() < deadline:
        # The log folder appears before the first commit file is renamed into place (delta-spark
        # creates it early), so wait for a committed version, not for the folder.
        if any((path / "_delta_log").glob("[0-9]*.json")):
            count = len(table_ids(path))
            if count >= n:
                return count
        time.sleep(0.5)
    return count


def data_files_on_disk(path: Path) -> set[str]:
    """Every file under the table but its log and checkpoints (``_*`` folders): data files, and
    the temporary files a write killed half way leaves (``.<name>.<id>.tmp``)."""
    return {
        str(p.relative_to(path))
        for p in path.rglob("*")
        if p.is_file() and not any(part.startswith("_") for part in p.relative_to(path).parts[:-1])
    }


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Return once ``condition()`` holds; fail naming ``what`` after ``timeout_s``
    (:func:`reliability.procs.wait_for`: its pauses grow with a costly condition's reads)."""
    procs.wait_for(condition, what, timeout_s)


def log_has(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text(errors="replace")


def referenced_files(path: Path | str, storage_options: dict[str, str] | None = None) -> set[str]:
    from urllib.parse import unquote

    actions = DeltaTable(str(path), storage_options=storage_options).get_add_actions(flatten=True)
    return {unquote(p) for p in pa.table(actions)["path"].to_pylist()}


def assert_no_orphans(path: Path) -> None:
    """No orphan in the table at ``path``: every data file on disk is one the table references,
    or one its log still names (the inputs a background compaction removed stay for readers of
    older versions until VACUUM)."""
    unreferenced = data_files_on_disk(path) - referenced_files(path)
    orphans = unreferenced - logged_files(str(path))
    assert not orphans, f"{len(orphans)} file(s) no log entry names: {sorted(orphans)[:5]}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def message_values(bootstrap: str, topic: str, expected: int, timeout_s: float = 30) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"peek-{time.time_ns()}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < expected and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            out.append(msg)
    consumer.close()
    return out


def assert_segments_stored_byte_for_byte(
    bootstrap: str,
    topic: str,
    segments: int,
    table: Path | str,
    storage_options: dict[str, str] | None = None,
    files: set[str] | None = None,
) -> None:
    """Every segment of ``topic`` is in ``table`` (a folder or an object store URI) once, its row
    groups byte for byte: per Kafka partition, the row groups of the table's files (by first
    offset, as their names say) are the row groups of the partition's segments, in offset order.
    ``files``: the table's data files relative to ``table`` (default: a Delta table's)."""
    expected: dict[int, list[bytes]] = {}
    for m in sorted(message_values(bootstrap, topic, segments), key=lambda m: (m.partition(), m.offset())):
        expected.setdefault(m.partition(), []).extend(row_group_bytes(m.value()))
    by_partition: dict[int, list[tuple[int, str]]] = {}
    for path in referenced_files(table, storage_options) if files is None else files:
        name = FileName.parse(path)
        assert name is not None and name.topic == topic, path
        by_partition.setdefault(name.partition, []).append((name.offset, path))
    stored = {
        p: [g for _, path in sorted(fs) for g in row_group_bytes(read_file(str(table), path, storage_options))]
        for p, fs in by_partition.items()
    }
    assert stored == expected


ID_SCHEMA = pa.schema([("id", pa.int64(), False)])


def produce_ids(bootstrap: str, topic: str, n: int, per_segment: int) -> None:
    """Records ``{"id": i}`` (schema ``ID_SCHEMA``) into partition 0, in segments of ``per_segment``,
    cut by count alone (a loaded machine must not cut one early at a linger)."""
    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.batch.records": per_segment,
        "linger.ms": 60_000,
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, ID_SCHEMA)
        for i in range(n):
            producer.produce(topic, value={"id": i}, partition=0)
        assert producer.flush(30) == 0


def race_two_workers(
    topic: str, table: Path, bootstrap: str, flags: Sequence[str], logs: Sequence[Path], produce: Callable[[], int]
) -> None:
    """Two ``parka ingest`` daemons with ``flags`` (one app id), each in a consumer group of its
    own so both own every partition (of two) and race on the same offsets: both wait at the same
    offsets before ``produce`` writes (it returns the rows the table must reach), then both stop
    on SIGTERM and must exit 0. Only the ``txn`` check stands between them and duplicates; the
    caller checks the table. Their logs must show that they raced."""
    racers = [start_ingest(topic, table, bootstrap, *flags, "-g", f"g{i}-{topic}", log=logs[i]) for i in range(2)]
    try:
        for log in logs:
            wait_for(lambda log=log: log_has(log, "partition 1 assigned"), f"{log.name} to be assigned")
        rows = produce()
        assert wait_for_rows(table, rows, timeout_s=120) >= rows
        for proc in racers:
            proc.send_signal(signal.SIGTERM)
        for proc, log in zip(racers, logs, strict=True):
            assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        for proc in racers:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
    texts = "".join(log.read_text() for log in logs)
    raced = ("commit conflict", "the table already had", "the table already holds it")
    assert any(sign in texts for sign in raced)  # they really raced
