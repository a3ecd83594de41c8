"""``parka ingest --cdc debezium``: Debezium change events, produced as segments by ParquetProducer,
land as the latest row per key. Envelopes are unwrapped to their rows (``after``, ``before`` for a
delete) with ``__op`` and the sequence column; the flattened shape (``__deleted``) lands as it is.
A delete event deletes its key and its tombstone finds nothing more; an event whose sequence is
below the live row's changes nothing; events that name no row go to the dead-letter table as
they came. The table, read by delta-rs' query engine, equals a model that takes the events one by
one."""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder
from parka.producer import ParquetProducer

from reliability.upsert_chaos import cdc_apply

from ._ingest_util import debezium_envelope, last_json, run_ingest

pytestmark = pytest.mark.integration

ROW = pa.struct([("id", pa.int64(), False), ("name", pa.string()), ("qty", pa.int64())])
SOURCE = pa.struct([("connector", pa.string(), False), ("db", pa.string(), False), ("lsn", pa.int64())])
ENVELOPE = pa.schema(
    [
        ("before", ROW),
        ("after", ROW),
        ("source", SOURCE, False),
        ("op", pa.string(), False),
        ("ts_ms", pa.int64(), False),
    ]
)

Event = tuple[str, int, int, "dict[str, Any] | None"]  # op, id, lsn, row (None: a tombstone when op is "")


def produce_envelopes(bootstrap: str, topic: str, events: list[Event], *, batch: int = 6) -> None:
    """Envelopes keyed by id, in order; op ``""``: a tombstone of the id."""
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": batch}
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, ENVELOPE)
        for op, key, lsn, row in events:
            if not op:
                producer.produce(topic, None, key=str(key))
                continue
            envelope = debezium_envelope(op, row, lsn)
            producer.produce(topic, envelope, key=str(key))
        assert producer.flush(30) == 0


def apply(model: dict[int, tuple[int, Any]], events: list[Event]) -> None:
    """The events one by one (:func:`reliability.upsert_chaos.cdc_apply`)."""
    for op, key, lsn, row in events:
        cdc_apply(model, op, key, lsn, row)


def table_rows(table: Path) -> dict[int, dict[str, Any]]:
    reader = QueryBuilder().register("t", DeltaTable(str(table))).execute("select * from t")
    rows = pa.table(reader.read_all()).to_pylist()
    assert len({r["id"] for r in rows}) == len(rows), "a key holds more than one row"
    return {r["id"]: r for r in rows}


def test_debezium_envelopes_land_as_the_latest_row_per_key(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    rng = random.Random(7)
    model: dict[int, tuple[int, dict[str, Any]]] = {}
    lsn = 100

    def row(key: int) -> dict[str, Any]:
        return {"id": key, "name": f"item-{key}-{rng.randrange(1000)}", "qty": rng.randrange(50)}

    # the snapshot, then inserts, updates and deletes
    first: list[Event] = [("r", k, lsn, row(k)) for k in range(40)]
    for _ in range(150):
        lsn += 1
        key = rng.randrange(60)
        if key in model or any(e[1] == key for e in first):
            if rng.random() < 0.15:  # a delete, with its tombstone or without (tombstones.on.delete=false)
                first += [("d", key, lsn, row(key)), *([("", key, lsn, None)] if rng.random() < 0.5 else [])]
                continue
            first.append(("u", key, lsn, row(key)))
        else:
            first.append(("c", key, lsn, row(key)))
    # a later run: a replay of old events (lower lsn: they change nothing), a stale delete, a
    # key deleted and created again, and a tombstone of a key never seen
    second: list[Event] = [("u", 3, 50, row(3)), ("d", 5, 60, row(5))]
    second += [("d", 7, lsn + 1, row(7)), ("", 7, lsn + 1, None), ("c", 7, lsn + 2, row(7)), ("", 999, lsn + 3, None)]
    second += [("u", k, lsn + 10 + k, row(k)) for k in range(10, 20)]
    flags = ("--cdc", "debezium", "--cdc-fields", "source.db,ts_ms", "--end-at-latest")
    for events in (first, second):
        produce_envelopes(bootstrap, topic, events)
        apply(model, events)
        run_ingest(topic, table, bootstrap, *flags)
        rows = table_rows(table)
        assert {k: {c: r[c] for c in ("id", "name", "qty")} for k, r in rows.items()} == {
            k: v for k, (_, v) in model.items()
        }
        assert {k: r["__source_lsn"] for k, r in rows.items()} == {k: s for k, (s, _) in model.items()}
    assert {r["__op"] for r in rows.values()} <= {"r", "c", "u"}
    assert {r["__source_db"] for r in rows.values()} == {"shop"}
    names = DeltaTable(str(table)).schema().to_arrow().names
    assert names[:7] == ["id", "name", "qty", "__op", "__source_db", "__ts_ms", "__source_lsn"], names
    assert "before" not in names and "after" not in names


def test_a_truncate_goes_to_the_dead_letter_table_as_it_came(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    produce_envelopes(bootstrap, topic, [("c", 1, 1, {"id": 1, "name": "a", "qty": 1})])
    produce_envelopes(bootstrap, topic, [("t", 0, 2, None)])
    produce_envelopes(bootstrap, topic, [("u", 1, 3, {"id": 1, "name": "b", "qty": 2})])
    proc = run_ingest(topic, table, bootstrap, "--cdc", "debezium", "--end-at-latest", "--dlq-table", str(dlq))
    assert last_json(proc)["dead_letters"] == 1
    assert {k: r["name"] for k, r in table_rows(table).items()} == {1: "b"}
    dead = pa.table(QueryBuilder().register("d", DeltaTable(str(dlq))).execute("select * from d").read_all())
    [letter] = dead.to_pylist()
    assert "op 't' (a truncate names no key" in letter["error"], letter["error"]
    assert pq.read_table(io.BytesIO(letter["value"])).column("op").to_pylist() == ["t"]  # the envelope as produced


def test_flattened_events_keyed_by_columns_land_and_their_tombstones_are_passed(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``ExtractNewRecordState`` with deletes rewritten: ``__deleted`` marks a delete, which lands
    and is deleted in the same commit; ``--key-columns id``, so the tombstones that follow
    deletes cannot name a row, and the run moves past them."""
    schema = pa.schema(
        [("id", pa.int64(), False), ("name", pa.string()), ("__deleted", pa.string()), ("__source_lsn", pa.int64())]
    )
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 5}
    model: dict[int, str] = {}
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, schema)
        for lsn in range(120):
            key = lsn % 23
            deleted = lsn % 7 == 3
            value = {"id": key, "name": f"v{lsn}", "__deleted": "true" if deleted else "false", "__source_lsn": lsn}
            producer.produce(topic, value, key=f"k{key}")
            if deleted:
                producer.produce(topic, None, key=f"k{key}")
                model.pop(key, None)
            else:
                model[key] = f"v{lsn}"
        assert producer.flush(30) == 0
    flags = ("--cdc", "debezium", "--key-columns", "id", "--end-at-latest")
    proc = run_ingest(topic, table, bootstrap, *flags)
    assert last_json(proc)["dead_letters"] == 0
    rows = table_rows(table)
    assert {k: r["name"] for k, r in rows.items()} == model
    assert {r["__deleted"] for r in rows.values()} == {"false"}
