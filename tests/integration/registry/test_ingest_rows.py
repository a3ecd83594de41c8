"""``parka ingest --value-format avro``: Avro records as confluent-kafka's own ``AvroSerializer``
writes them (Confluent's frame, the schema in the real registry) land in bulk; a second schema
version (a field added) lands with ``--schema-evolution merge``; a value whose schema id the
registry does not hold is a dead letter; Debezium's Avro change events (the envelope, keyed, as
Debezium's Avro converter frames them) feed ``--cdc debezium``."""

from __future__ import annotations

import json
import signal
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from deltalake import DeltaTable, QueryBuilder

from .._ingest_util import (
    EVENTS_AVRO,
    assert_no_orphans,
    events,
    last_json,
    produce_events,
    run_ingest,
)

pytestmark = pytest.mark.timeout(900)  # a first run builds the registry (see test_registry.py)

V1 = {
    "type": "record",
    "name": "Reading",
    "namespace": "plant",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
    ],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "unit", "type": ["null", "string"], "default": None}]}

ROW = {
    "type": "record",
    "name": "Value",
    "namespace": "shop.public.items",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"], "default": None}],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "shop.public.items",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "namespace": "io.debezium.connector.postgresql",
                "fields": [
                    {"name": "connector", "type": "string"},
                    {"name": "db", "type": "string"},
                    {"name": "lsn", "type": ["null", "long"], "default": None},
                ],
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}
KEY = {"type": "record", "name": "Key", "namespace": "shop.public.items", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture
def client(registry_url: str) -> Iterator[SchemaRegistryClient]:
    c = SchemaRegistryClient({"url": registry_url})
    yield c
    c.close()


def _produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in items:
        producer.produce(topic, value=value, key=key)
    assert producer.flush(30) == 0


def test_avro_records_of_two_schema_versions_land_and_an_unknown_id_is_a_dead_letter(
    bootstrap: str, registry_url: str, client: SchemaRegistryClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    context = SerializationContext(topic, MessageField.VALUE)
    first = [{"id": i, "sensor": f"s{i % 3}", "tags": {"k": str(i)}} for i in range(300)]
    second = [{"id": 300 + i, "sensor": "s9", "tags": {}, "unit": None if i % 2 else "m"} for i in range(200)]
    v1, v2 = AvroSerializer(client, json.dumps(V1)), AvroSerializer(client, json.dumps(V2))
    values: list[bytes | None] = [v1(r, context) for r in first]
    unknown = struct.pack(">bI", 0, 987_654_321) + b"\x02"  # a frame naming no schema the registry holds
    values += [unknown, *(v2(r, context) for r in second)]
    _produce(bootstrap, topic, [(None, v) for v in values])
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    flags = ("--end-at-latest", "--value-format", "avro", "--schema-registry-url", registry_url)
    flags += ("--schema-evolution", "merge", "--dlq-table", str(dlq))
    result = last_json(run_ingest(topic, table, bootstrap, *flags))
    assert (result["records"], result["dead_letters"]) == (500, 1)
    rows = DeltaTable(str(table)).to_pyarrow_table().sort_by("id").to_pylist()
    assert [r["id"] for r in rows] == list(range(500))
    got = [{"id": r["id"], "sensor": r["sensor"], "tags": dict(r["tags"]), "unit": r["unit"]} for r in rows]
    assert got == [{**r, "unit": None} for r in first] + second
    [dead] = DeltaTable(str(dlq)).to_pyarrow_table().to_pylist()
    assert (dead["offset"], dead["value"]) == (300, unknown)
    assert "schema id 987654321 is not in the registry" in dead["error"]


def test_debezium_avro_envelopes_land_as_the_latest_row_per_key(
    bootstrap: str, registry_url: str, client: SchemaRegistryClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    value_ser = AvroSerializer(client, json.dumps(ENVELOPE))
    key_ser = AvroSerializer(client, json.dumps(KEY))
    vctx, kctx = SerializationContext(topic, MessageField.VALUE), SerializationContext(topic, MessageField.KEY)

    def event(op: str, key: int, lsn: int, name: str | None) -> tuple[bytes | None, bytes | None]:
        row: dict[str, Any] = {"id": key, "name": name}
        envelope = {
            "before": row if op == "d" else None,
            "after": None if op == "d" else row,
            "source": {"connector": "postgresql", "db": "shop", "lsn": lsn},
            "op": op,
            "ts_ms": 1_700_000_000_000 + lsn,
        }
        return key_ser({"id": key}, kctx), value_ser(envelope, vctx)

    items = [event("r", k, 10 + k, f"item-{k}") for k in range(20)]
    items += [event("u", 3, 100, "three"), event("d", 5, 101, "item-5"), (key_ser({"id": 5}, kctx), None)]
    items += [event("c", 42, 102, "new"), event("u", 3, 103, "three again")]
    _produce(bootstrap, topic, items)
    table = tmp_path / "t"
    flags = ("--end-at-latest", "--value-format", "avro", "--schema-registry-url", registry_url)
    run_ingest(topic, table, bootstrap, *flags, "--cdc", "debezium")
    reader = QueryBuilder().register("t", DeltaTable(str(table))).execute("select * from t")  # deletion vectors
    rows = {r["id"]: r for r in pa.table(reader.read_all()).to_pylist()}
    want = {k: f"item-{k}" for k in range(20) if k != 5} | {3: "three again", 42: "new"}
    assert {k: r["name"] for k, r in rows.items()} == want
    assert rows[3]["__source_lsn"] == 103 and rows[42]["__op"] == "c"


@pytest.mark.parametrize(
    "point", ["before-write", "mid-write", "after-write", "after-dead-letters", "after-delta-commit"]
)
def test_a_topic_migrating_from_avro_records_to_segments_killed_at_each_point_lands_each_record_once(
    bootstrap: str, registry_url: str, client: SchemaRegistryClient, new_topic: Callable[..., str], tmp_path: Path,
    point: str,
) -> None:  # fmt: skip
    """Each partition: Avro records, a bad one (a dead letter), segments from a producer moved to
    ParquetProducer, then Avro again from one not moved yet; SIGKILL at the point, in the second
    commit, then a run to the end: every record once, equal to what was produced."""
    topic = new_topic(partitions=2)
    serialize = AvroSerializer(client, json.dumps(EVENTS_AVRO))
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for p in (0, 1):
        for row in events(p * 1000, 300).to_pylist():
            producer.produce(topic, value=serialize(row, context), key=row["device"], partition=p)
        producer.produce(topic, value=b"\x00\x00\x00\x00\x01 torn", partition=p)  # a frame, a body of nothing
    assert producer.flush(30) == 0
    produce_events(bootstrap, topic, 5000, 400, batch=50)
    for p in (0, 1):
        for row in events(8000 + p * 1000, 200).to_pylist():
            producer.produce(topic, value=serialize(row, context), key=row["device"], partition=p)
    assert producer.flush(30) == 0
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    flags = ("--end-at-latest", "--value-format", "avro", "--schema-registry-url", registry_url)
    flags += ("--dlq-table", str(dlq), "--min-bytes-per-commit", "100000")
    env = {"PARKA_TEST_CRASH_AT": point, "PARKA_TEST_CRASH_AFTER": "2" if point != "after-dead-letters" else "1"}
    crashed = run_ingest(topic, table, bootstrap, *flags, env=env, check=False)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    run_ingest(topic, table, bootstrap, *flags)
    want = pa.concat_tables([events(s, n) for s, n in [(0, 300), (1000, 300), (5000, 400), (8000, 200), (9000, 200)]])
    got = DeltaTable(str(table)).to_pyarrow_table().select(want.column_names).sort_by("id")
    assert got.to_pylist() == want.sort_by("id").to_pylist()
    dead = DeltaTable(str(dlq)).to_pyarrow_table()
    assert sorted(dead["value"].to_pylist()) == [b"\x00\x00\x00\x00\x01 torn"] * 2
    assert_no_orphans(table)
