"""``parka ingest --upsert --catalog``: a keyed topic lands in an Iceberg table (SQL and REST
catalogs) as the latest row per key, superseded rows deleted by position-delete files that parka
writes. Read by pyiceberg's scan and by DuckDB's iceberg extension (both apply them); kill -9
at each crash point of an upsert commit, then a restart, ends as the model (on the REST catalog
here; the SQL catalog's kills are in tests/integration/spark/test_spark_iceberg.py, where Spark
reads the table too)."""

from __future__ import annotations

import functools
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from parka.lake import optimize_iceberg
from parka.producer import ParquetProducer
from pyiceberg.manifest import DataFileContent, ManifestContent

from .._ingest_util import last_json, start_ingest
from ..test_cdc import Event, produce_envelopes
from ..test_cdc import apply as apply_changes
from ..test_upsert import (
    BY_VERSION,
    ICEBERG_UPSERT_POINTS,
    apply,
    compacting_rounds,
    crash_at_each_point,
    follow_rounds,
    produce,
)
from ._lake import Lake, duckdb_rows, ingest, table_rows

pytestmark = pytest.mark.integration


def delete_files(lake: Lake, identifier: str) -> dict[str, list[str]]:
    """The current snapshot's live position-delete files, by the data file each names."""
    table = lake.catalog().load_table(identifier)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    out: dict[str, list[str]] = {}
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            f = entry.data_file
            assert (manifest.content == ManifestContent.DELETES) == (f.content != DataFileContent.DATA)
            if f.content == DataFileContent.POSITION_DELETES:
                target = f.lower_bounds[2147483546].decode()
                assert f.upper_bounds[2147483546].decode() == target  # file-scoped
                out.setdefault(target, []).append(f.file_path)
    return out


NO_COMPACTION = ("--compact-min-files", "0")  # the deletes as the commits left them (compaction: its own test)


def land(
    lake: Lake, topic: str, bootstrap: str, model: dict[int, int], events: list[tuple[int, int | None]], *extra: str
) -> None:
    produce(bootstrap, topic, events)
    apply(model, events)
    ingest(lake, topic, lake.name("t"), bootstrap, "--upsert", "--end-at-latest", *NO_COMPACTION, *extra)


@pytest.mark.parametrize(
    ("lake", "extra"), [("sql", ()), ("rest", ()), ("sql", BY_VERSION)], indirect=["lake"],
    ids=["sql", "rest", "sql-partitioned"],
)  # fmt: skip
def test_the_table_holds_the_latest_row_per_key_through_updates_tombstones_and_restarts(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake, extra: tuple[str, ...]
) -> None:
    topic = new_topic(partitions=2)
    identifier = lake.name("t")
    model: dict[int, int] = {}
    rounds: list[list[tuple[int, int | None]]] = [
        [(k, 1) for k in range(60)] + [(k, 2) for k in range(0, 60, 3)] + [(k, None) for k in range(50, 60)],
        [(k, 3) for k in range(0, 20)] + [(5, None), (5, 4), (7, None), (1000, None)],
        [(k, None) for k in range(10, 15)],
        [(k, 5) for k in range(0, 60, 2)],  # deletes more rows of files that have a delete file
    ]
    for events in rounds:
        land(lake, topic, bootstrap, model, events, *extra)
        assert table_rows(lake, identifier) == model
        assert duckdb_rows(lake, identifier) == model
        deletes = delete_files(lake, identifier)
        assert all(len(files) == 1 for files in deletes.values()), deletes  # one per data file
    assert deletes  # rows were deleted by position
    assert lake.engine().open(identifier).partition_columns() == list(extra[1:])
    live = {p for files in deletes.values() for p in files}
    on_disk = {f"file://{lake.data_root(identifier)}/{p}" for p in lake.on_disk(identifier)}
    assert live <= on_disk
    # nothing new
    again = ingest(lake, topic, identifier, bootstrap, "--upsert", "--end-at-latest", *NO_COMPACTION, *extra)
    assert last_json(again)["records"] == 0 and table_rows(lake, identifier) == model
    # expiry deletes the delete files (and data files) only expired snapshots named
    handle = lake.engine().open(identifier)
    assert handle is not None
    assert handle.expire_snapshots(time.time() * 1000 + 1000) > 0
    current = lake.files(identifier) | {p.removeprefix(f"file://{lake.data_root(identifier)}/") for p in live}
    assert lake.on_disk(identifier) == current
    assert table_rows(lake, identifier) == model


# the SQL catalog's: tests/integration/spark/test_spark_iceberg.py, where Spark's Iceberg runtime
# reads the table too
@pytest.mark.parametrize("lake", ["rest"], indirect=True)
def test_kill_9_at_each_crash_point_then_restart_holds_the_latest_row_per_key(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    """At each crash point in turn, on one table: updates, tombstones and keys created again
    arrive, and a worker is SIGKILLed at the point (data files written, delete files written
    too, or a commit whose changes the key index never took); the next worker starts from what
    the crashed one left, reading the key index from the table and deleting the crashed
    commit's files, delete files included. After the last, a run to the end: the table is the
    model, with no file on disk that no snapshot names."""
    topic = new_topic(partitions=2)
    identifier = lake.name("t")
    model: dict[int, int] = {}
    land(lake, topic, bootstrap, model, [(k, 1) for k in range(40)])
    flags = ("--upsert", "--end-at-latest", "--max-segments-per-commit", "1", *NO_COMPACTION)

    crash_at_each_point(
        bootstrap,
        topic,
        identifier,
        model,
        ICEBERG_UPSERT_POINTS,
        *lake.flags,
        *flags,
        left=lake.delete_files_left(identifier),
    )
    ingest(lake, topic, identifier, bootstrap, *flags)
    assert table_rows(lake, identifier) == model
    assert duckdb_rows(lake, identifier) == model
    assert lake.on_disk(identifier) <= lake.logged(identifier)  # no orphans


@pytest.mark.parametrize("lake", ["sql"], indirect=True)  # the index's logic: one catalog is enough
def test_key_columns_and_sequence_by_hold_each_keys_highest_sequence(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    """``--key-columns`` and ``--sequence-by`` on Iceberg: an event whose sequence is below the
    live row's changes nothing, across runs."""
    topic = new_topic(partitions=1)
    identifier = lake.name("t")
    schema = pa.schema([("id", pa.int64(), False), ("version", pa.int64(), False)])

    def send(rows: list[tuple[int, int]]) -> None:
        conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 5}
        with ParquetProducer(conf) as producer:
            producer.set_schema(topic, schema)
            for key, version in rows:
                producer.produce(topic, {"id": key, "version": version}, key=str(key).encode())
            assert producer.flush(30) == 0

    flags = ("--upsert", "--key-columns", "id", "--sequence-by", "version", "--end-at-latest")
    send([(k, 10) for k in range(20)])
    ingest(lake, topic, identifier, bootstrap, *flags)
    send([(k, 5) for k in range(10)] + [(k, 20) for k in range(10, 20)])  # older for 0-9, newer for 10-19
    ingest(lake, topic, identifier, bootstrap, *flags)
    assert table_rows(lake, identifier) == {k: 10 if k < 10 else 20 for k in range(20)}


@pytest.mark.parametrize("lake", ["sql"], indirect=True)
def test_two_workers_on_one_iceberg_upsert_table_hold_the_latest_row_per_key(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake, tmp_path: Path
) -> None:
    """Two daemons of one group split the topic's partitions; each one's key index catches up
    with the other's snapshots from what they changed (their data and delete files)."""
    topic = new_topic(partitions=4)
    identifier = lake.name("t")
    model: dict[int, int] = {}
    land(lake, topic, bootstrap, model, [(k, 0) for k in range(80)])
    flags = ("-g", f"grp-{topic}", "--upsert", "--allowed-latency", "1", "--max-segments-per-commit", "2")
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    workers = [start_ingest(topic, identifier, bootstrap, *lake.flags, *flags, log=log) for log in logs]
    try:
        rows = functools.partial(table_rows, lake, identifier)
        follow_rounds(bootstrap, topic, model, rows, seed=7, steps=3, keys=80, n=60, tombstones=0.15)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        codes = [w.wait(timeout=60) for w in workers]
    assert codes == [0, 0], [log.read_text()[-2000:] for log in logs]
    assert table_rows(lake, identifier) == model
    texts = [log.read_text() for log in logs]
    assert all("assigned" in t for t in texts)  # both held partitions
    assert sum(t.count("key index caught up from version") for t in texts) > 0, texts[0][-2000:]
    assert all("could not catch up" not in t for t in texts), texts


@pytest.mark.parametrize("lake", ["sql"], indirect=True)
def test_background_compaction_applies_the_position_deletes(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake, tmp_path: Path
) -> None:
    """With background compaction at its most eager, one daemon lands rounds of random updates
    and tombstones into an Iceberg upsert table: each compaction reads its files with their
    position deletes applied and removes those delete files with them, the key index catches up
    with it, and the table stays the model through every round. ``parka optimize`` then compacts
    what is left the same way. The table is partitioned: an update moves its key's row to
    another partition."""
    topic = new_topic(partitions=2)
    identifier = lake.name("t")
    model: dict[int, int] = {}
    rows = functools.partial(table_rows, lake, identifier)
    compacting_rounds(bootstrap, topic, identifier, model, rows, tmp_path / "log", *lake.flags, *BY_VERSION, steps=5)
    assert table_rows(lake, identifier) == model
    logged = lake.logged(identifier)
    assert any(Path(p).name.startswith("compacted-") for p in logged), logged
    # a compacted file holds live rows only: no delete file of its own inputs came along
    deletes = delete_files(lake, identifier)
    assert all(len(files) == 1 for files in deletes.values()), deletes
    live = lake.files(identifier)
    assert set(deletes) <= {f"file://{lake.data_root(identifier)}/{p}" for p in live}
    result = optimize_iceberg(lake.engine(), identifier)
    assert result.files_added >= 1 or len(live) < 2, result
    assert table_rows(lake, identifier) == model


@pytest.mark.parametrize("lake", ["sql"], indirect=True)  # the committer's path: one catalog is enough
def test_debezium_envelopes_land_in_iceberg_as_the_latest_row_per_key(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    """``--cdc debezium --catalog``: creates, updates, a delete with its tombstone, a replay of an
    older event (it changes nothing) and a key deleted then created again."""
    topic = new_topic(partitions=2)
    identifier = lake.name("t")
    model: dict[int, tuple[int, Any]] = {}
    first: list[Event] = [("c", k, 100 + k, {"id": k, "name": f"n{k}", "qty": k}) for k in range(20)]
    first += [("u", k, 200 + k, {"id": k, "name": f"u{k}", "qty": k + 1}) for k in range(0, 20, 2)]
    first += [("d", 3, 300, {"id": 3, "name": "n3", "qty": 3}), ("", 3, 300, None)]
    second: list[Event] = [("u", 4, 150, {"id": 4, "name": "stale", "qty": 0})]  # older than its update
    second += [("d", 5, 400, {"id": 5, "name": "n5", "qty": 5}), ("c", 5, 401, {"id": 5, "name": "back", "qty": 9})]
    for events in (first, second):
        produce_envelopes(bootstrap, topic, events)
        apply_changes(model, events)
        ingest(lake, topic, identifier, bootstrap, "--cdc", "debezium", "--end-at-latest", *NO_COMPACTION)
        rows = lake.rows(identifier).to_pylist()
        assert len({r["id"] for r in rows}) == len(rows), "a key holds more than one row"
        got = {r["id"]: {c: r[c] for c in ("id", "name", "qty")} for r in rows}
        assert got == {k: v for k, (_, v) in model.items()}
        assert {r["id"]: r["__source_lsn"] for r in rows} == {k: s for k, (s, _) in model.items()}
