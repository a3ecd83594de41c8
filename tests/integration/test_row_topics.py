"""``parka ingest --value-format json``: a topic of JSON records (not segments) lands in bulk, each
run of records one data file, with the records' keys, timestamps and headers as the reserved
columns; bad records are dead letters; a topic that moves from records to segments lands both in
offset order, exactly once, also across a SIGKILL at each step of the protocol. The Avro
(schema registry) form of the same is in ``registry/test_ingest_rows.py``."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import decimal
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable, QueryBuilder
from parka.consumer import AIOParquetConsumer, ParquetConsumer
from parka.lake import FileName

from ._ingest_util import (
    EVENTS_AVRO,
    assert_no_orphans,
    debezium_envelope,
    events,
    json_value,
    last_json,
    produce_events,
    produce_json,
    race_two_workers,
    referenced_files,
    run_ingest,
    table_ids,
)


@pytest.fixture
def schema_file(tmp_path: Path) -> Path:
    path = tmp_path / "event.avsc"
    path.write_text(json.dumps(EVENTS_AVRO))
    return path


def test_json_records_land_with_their_keys_timestamps_and_headers_and_bad_ones_are_dead_letters(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, schema_file: Path
) -> None:
    topic = new_topic()
    produce_json(bootstrap, topic, 0, 40)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b'{"id": "forty", "device": "d1", "day": "x", "at": "2024-01-01T00:00:00Z"}')
    plain.produce(topic, value=b"not json")
    assert plain.flush(30) == 0
    produce_json(bootstrap, topic, 40, 60)
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    flags = ("--end-at-latest", "--value-format", "json", "--value-schema", str(schema_file), "--dlq-table", str(dlq))
    result = last_json(run_ingest(topic, table, bootstrap, *flags))
    assert result["dead_letters"] == 2
    rows = DeltaTable(str(table)).to_pyarrow_table().sort_by("id")
    assert rows["id"].to_pylist() == list(range(100))
    want = events(0, 100)
    for name in want.column_names:
        assert rows[name].to_pylist() == want[name].to_pylist(), name
    assert rows["__parka_key"].to_pylist() == [f"d{i % 7}".encode() for i in range(100)]
    assert rows["__parka_headers"].to_pylist() == [[{"key": "source", "value": b"json"}]] * 100
    assert pa.compute.min(rows["__parka_timestamp"]).as_py() > 1_700_000_000_000  # the Kafka timestamps
    dead = DeltaTable(str(dlq)).to_pyarrow_table().sort_by("offset").to_pylist()
    assert [d["offset"] for d in dead] == [40, 41]
    assert "--value-format json" in dead[0]["error"] and dead[1]["value"] == b"not json"
    # the two runs of good records around the bad ones, stitched: one file, named by its offsets
    names = [FileName.parse(p) for p in referenced_files(table)]
    assert [(n.offset, n.last) for n in names if n is not None] == [(0, 101)]
    assert last_json(run_ingest(topic, table, bootstrap, *flags))["records"] == 0


def test_json_schema_is_inferred_from_the_first_batch_then_the_tables(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        plain.produce(topic, value=json.dumps({"n": i, "name": f"x{i}"}).encode())
    assert plain.flush(30) == 0
    table = tmp_path / "t"
    run_ingest(topic, table, bootstrap, "--end-at-latest", "--value-format", "json")
    plain.produce(topic, value=json.dumps({"n": 5, "name": "x5"}).encode())
    plain.produce(topic, value=json.dumps({"n": 6, "other": 1}).encode())  # not the table's: refused
    assert plain.flush(30) == 0
    proc = run_ingest(topic, table, bootstrap, "--end-at-latest", "--value-format", "json", check=False)
    assert proc.returncode == 1 and f"at {topic}[0]@6" in proc.stderr and "other" in proc.stderr
    got = DeltaTable(str(table)).to_pyarrow_table().sort_by("n")
    assert got.select(["n", "name"]).to_pylist() == [{"n": i, "name": f"x{i}"} for i in range(6)]


def test_a_topic_moving_from_json_records_to_segments_lands_both_in_order_exactly_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, schema_file: Path
) -> None:
    topic = new_topic(partitions=2)
    for p in (0, 1):
        produce_json(bootstrap, topic, p * 10_000, 300, partition=p)
    produce_events(bootstrap, topic, 20_000, 400, batch=50)  # segments, both partitions
    for p in (0, 1):
        produce_json(bootstrap, topic, 30_000 + p * 1000, 200, partition=p)  # a producer not moved yet
    table = tmp_path / "t"
    flags = ("--end-at-latest", "--value-format", "json", "--value-schema", str(schema_file))
    run_ingest(topic, table, bootstrap, *flags, "--max-segments-per-commit", "3")
    want = [*range(300), *range(10_000, 10_300), *range(20_000, 20_400), *range(30_000, 30_200)]
    want += range(31_000, 31_200)
    assert sorted(table_ids(table)) == sorted(want)
    assert_no_orphans(table)


@pytest.mark.parametrize("point", ["after-write"])  # every point: registry/test_ingest_rows.py
def test_kill_9_amid_json_records_then_restart_is_exactly_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, schema_file: Path, point: str
) -> None:
    topic = new_topic(partitions=2)
    produce_json(bootstrap, topic, 0, 600)
    produce_events(bootstrap, topic, 600, 200, batch=50)
    produce_json(bootstrap, topic, 800, 200)
    table = tmp_path / "t"
    flags = ("--end-at-latest", "--value-format", "json", "--value-schema", str(schema_file))
    flags += ("--min-bytes-per-commit", "100000")  # several commits, the crash in the second
    crashed = run_ingest(
        topic, table, bootstrap, *flags, env={"PARKA_TEST_CRASH_AT": point, "PARKA_TEST_CRASH_AFTER": "2"}, check=False
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    run_ingest(topic, table, bootstrap, *flags)
    ids = table_ids(table)
    assert len(ids) == 1000 and sorted(ids) == list(range(1000))
    assert_no_orphans(table)


def test_two_workers_racing_on_json_records_commit_each_record_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, schema_file: Path
) -> None:
    """Different consumer groups, one app id: both workers read every record and race to
    commit them. A run of records one of them committed part of (the other's txn falls inside
    it) is cut at that txn, its file written again with the rest only."""
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    fmt = ("--value-format", "json", "--value-schema", str(schema_file))
    produce_json(bootstrap, topic, 0, 100)
    run_ingest(topic, table, bootstrap, "--end-at-latest", "-a", "racers", *fmt)  # the table exists
    flags = ("-a", "racers", "--min-bytes-per-commit", "15000", "--allowed-latency", "0.2", *fmt)
    logs = [tmp_path / "r1.log", tmp_path / "r2.log"]

    def produce() -> int:
        for start in range(100, 3100, 500):
            produce_json(bootstrap, topic, start, 500)
        return 3100

    race_two_workers(topic, table, bootstrap, flags, logs, produce)
    ids = table_ids(table)
    assert len(ids) == 3100, f"{len(ids) - len(set(ids))} duplicates, {3100 - len(set(ids))} missing"
    assert sorted(ids) == list(range(3100))
    assert_no_orphans(table)


VALUE = {  # the row's Connect schema, as Debezium's JsonConverter writes it (schemas.enable=true)
    "type": "struct",
    "optional": True,
    "name": "shop.public.items.Value",
    "fields": [
        {"type": "int64", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
        {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "10"},
            "field": "price",
        },
        {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "at"},
    ],
}
ENVELOPE = {
    "type": "struct",
    "optional": False,
    "name": "shop.public.items.Envelope",
    "fields": [
        {**VALUE, "field": "before"},
        {**VALUE, "field": "after"},
        {
            "type": "struct",
            "optional": False,
            "name": "io.debezium.connector.postgresql.Source",
            "field": "source",
            "fields": [
                {"type": "string", "optional": False, "field": "connector"},
                {"type": "string", "optional": False, "field": "db"},
                {"type": "int64", "optional": True, "field": "lsn"},
            ],
        },
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}
KEY = {"type": "struct", "optional": False, "name": "shop.public.items.Key", "fields": [VALUE["fields"][0]]}
# the same envelope as an Avro schema, for --value-format json without schemas (schemas.enable=false)
ROW_AVRO = {
    "type": "record",
    "name": "Value",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    ],
}
ENVELOPE_AVRO = {
    "type": "record",
    "name": "Envelope",
    "fields": [
        {"name": "before", "type": ["null", ROW_AVRO]},
        {"name": "after", "type": ["null", "Value"]},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "fields": [
                    {"name": "connector", "type": "string"},
                    {"name": "db", "type": "string"},
                    {"name": "lsn", "type": ["null", "long"]},
                ],
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"]},
    ],
}


def _debezium_events() -> list[tuple[str, int, int, str | None]]:
    """(op, id, lsn, name): a snapshot, updates, a delete with its tombstone (op ""), a create."""
    events = [("r", k, 10 + k, f"item-{k}") for k in range(20)]
    events += [("u", 3, 100, "three"), ("d", 5, 101, "item-5"), ("", 5, 101, None)]
    return [*events, ("c", 42, 102, "new"), ("u", 3, 103, "three again")]


@pytest.mark.parametrize("schemas", [True, False], ids=["schemas-enable", "no-schemas"])
def test_debezium_json_envelopes_land_as_the_latest_row_per_key(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, schemas: bool
) -> None:
    """Debezium's JSON as Kafka Connect's JsonConverter writes it: with schemas.enable=true each
    value carries its Connect schema (--value-format connect-json), decimals as base64 bytes and
    MicroTimestamps as integers; without, plain envelopes read against a declared schema (an
    Avro schema with --value-format json, decimals then as their text)."""
    topic = new_topic()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for op, key, lsn, name in _debezium_events():
        key_json: Any = {"id": key}
        if schemas:
            key_json = {"schema": KEY, "payload": key_json}
        if not op:
            producer.produce(topic, value=None, key=json.dumps(key_json, separators=(",", ":")).encode())
            continue
        cents = 100 * key + lsn
        price = base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode() if schemas else f"{cents / 100:.2f}"
        at = 1_700_000_000_000_000 + lsn
        row = {"id": key, "name": name, "price": price, "at": at if schemas else f"2023-11-14T22:13:20.{lsn:06d}Z"}
        envelope = debezium_envelope(op, row, lsn)
        value = {"schema": ENVELOPE, "payload": envelope} if schemas else envelope
        producer.produce(
            topic,
            value=json.dumps(value, separators=(",", ":")).encode(),
            key=json.dumps(key_json, separators=(",", ":")).encode(),
        )
    assert producer.flush(30) == 0
    table = tmp_path / "t"
    if schemas:
        fmt: tuple[str, ...] = ("--value-format", "connect-json")
    else:
        schema = tmp_path / "envelope.avsc"
        schema.write_text(json.dumps(ENVELOPE_AVRO))
        fmt = ("--value-format", "json", "--value-schema", str(schema))
    run_ingest(topic, table, bootstrap, "--end-at-latest", *fmt, "--cdc", "debezium")
    reader = QueryBuilder().register("t", DeltaTable(str(table))).execute("select * from t")  # deletion vectors
    rows = {r["id"]: r for r in pa.table(reader.read_all()).to_pylist()}
    want = {k: f"item-{k}" for k in range(20) if k != 5} | {3: "three again", 42: "new"}
    assert {k: r["name"] for k, r in rows.items()} == want
    assert rows[3]["__source_lsn"] == 103 and rows[42]["__op"] == "c"
    assert rows[3]["price"] == decimal.Decimal("4.03") and rows[42]["price"] == decimal.Decimal("43.02")
    assert rows[42]["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 102, tzinfo=dt.timezone.utc)


def test_poll_buffers_hands_out_records_and_segments_raw_in_offset_order(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """The batch form of poll_buffer, sync and asyncio: every message once, in offset order, a
    segment with its headers read (info), a record and a segment with garbled headers without."""
    topic = new_topic()
    produce_json(bootstrap, topic, 0, 5)
    produce_events(bootstrap, topic, 5, 20, batch=10)  # two segments, offsets 5 and 6
    garbled = Producer({"bootstrap.servers": bootstrap})
    garbled.produce(topic, value=b"PAR1", headers=[("parka.format", b"parquet"), ("parka.records", b"x")])
    assert garbled.flush(30) == 0
    conf = {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}

    def kinds(raws: list[Any]) -> list[tuple[int, bool]]:
        return [(r.offset, r.info is not None) for r in raws]

    want = [*((o, False) for o in range(5)), (5, True), (6, True), (7, False)]
    consumer = ParquetConsumer(conf)
    consumer.subscribe([topic])
    got: list[Any] = []
    while len(got) < 8:
        got += consumer.poll_buffers(timeout=1.0, max_messages=3)
    consumer.close()
    assert kinds(got) == want
    assert (
        got[5].info is not None
        and got[5].info.num_records == 10
        and got[0].value == json_value(events(0, 1).to_pylist()[0])
    )

    async def take() -> list[Any]:
        aio = AIOParquetConsumer({**conf, "group.id": f"g2-{topic}"})
        await aio.subscribe([topic])
        out: list[Any] = []
        while len(out) < 8:
            out += await aio.poll_buffers(timeout=1.0)
        await aio.close()
        return out

    assert kinds(asyncio.run(take())) == want
