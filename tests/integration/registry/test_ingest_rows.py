"""``parka ingest --value-format avro``: Avro records as confluent-kafka's own ``AvroSerializer``
writes them (Confluent's frame, the schema in the real registry) land in bulk; a second schema
version (a field added) lands with ``--schema-evolution merge``; a value whose schema id the
registry does not hold is a dead letter; Debezium's Avro change events (the envelope, keyed, as
Debezium's Avro converter frames them) feed ``--cdc debezium``."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import signal
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from deltalake import DeltaTable, QueryBuilder

from parka.protodecode import registered_class

from .._ingest_util import (
    EVENTS_AVRO,
    assert_no_orphans,
    debezium_envelope,
    events,
    last_json,
    produce_events,
    run_ingest,
)
from ._client import TestRegistryClient

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
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {"id": {"type": "integer"}},
}
KEY = {"type": "record", "name": "Key", "namespace": "shop.public.items", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture
def client(registry_url: str) -> Iterator[TestRegistryClient]:
    c = TestRegistryClient({"url": registry_url})
    yield c
    c.close()


def _produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in items:
        producer.produce(topic, value=value, key=key)
    assert producer.flush(30) == 0


def test_avro_records_of_two_schema_versions_land_and_an_unknown_id_is_a_dead_letter(
    bootstrap: str, registry_url: str, client: TestRegistryClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    context = SerializationContext(topic, MessageField.VALUE)
    first = [{"id": i, "sensor": f"s{i % 3}", "tags": {"k": str(i)}} for i in range(300)]
    second = [{"id": 300 + i, "sensor": "s9", "tags": {}, "unit": None if i % 2 else "m"} for i in range(200)]
    v1, v2 = AvroSerializer(client, json.dumps(V1)), AvroSerializer(client, json.dumps(V2))
    values: list[bytes | None] = [v1(r, context) for r in first]
    unknown = struct.pack(">bI", 0, 987_654_321) + b"\x02"  # a frame naming no schema the registry holds
    json_id = client.register_schema(f"{topic}-json-value", Schema(json.dumps(JSON_SCHEMA), "JSON"))
    not_avro = struct.pack(">bI", 0, json_id) + b"{}"  # a frame naming a JSON Schema: not this format's
    values += [unknown, *(v2(r, context) for r in second), not_avro]
    _produce(bootstrap, topic, [(None, v) for v in values])
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    flags = ("--end-at-latest", "--value-format", "avro", "--schema-registry-url", registry_url)
    flags += ("--schema-evolution", "merge", "--dlq-table", str(dlq))
    result = last_json(run_ingest(topic, table, bootstrap, *flags))
    assert (result["records"], result["dead_letters"]) == (500, 2)
    rows = DeltaTable(str(table)).to_pyarrow_table().sort_by("id").to_pylist()
    assert [r["id"] for r in rows] == list(range(500))
    got = [{"id": r["id"], "sensor": r["sensor"], "tags": dict(r["tags"]), "unit": r["unit"]} for r in rows]
    assert got == [{**r, "unit": None} for r in first] + second
    dead, other = DeltaTable(str(dlq)).to_pyarrow_table().sort_by("offset").to_pylist()
    assert (dead["offset"], dead["value"]) == (300, unknown)
    assert "schema id 987654321 is not in the registry" in dead["error"]
    assert (other["offset"], other["value"]) == (501, not_avro) and "not an Avro schema" in other["error"]


def test_debezium_avro_envelopes_land_as_the_latest_row_per_key(
    bootstrap: str, registry_url: str, client: TestRegistryClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    value_ser = AvroSerializer(client, json.dumps(ENVELOPE))
    key_ser = AvroSerializer(client, json.dumps(KEY))
    vctx, kctx = SerializationContext(topic, MessageField.VALUE), SerializationContext(topic, MessageField.KEY)

    def event(op: str, key: int, lsn: int, name: str | None) -> tuple[bytes | None, bytes | None]:
        row: dict[str, Any] = {"id": key, "name": name}
        envelope = debezium_envelope(op, row, lsn)
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
    bootstrap: str, registry_url: str, client: TestRegistryClient, new_topic: Callable[..., str], tmp_path: Path,
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
        torn = serialize(events(0, 1).to_pylist()[0], context)[:5] + b" torn"  # its frame, a body of nothing
        producer.produce(topic, value=torn, partition=p)
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
    assert sorted(dead["value"].to_pylist()) == [torn] * 2
    assert_no_orphans(table)


ORDER_PROTO = """
syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  int64 id = 1;
  string customer = 2;
  repeated Item items = 3;
  map<string, string> tags = 4;
  google.protobuf.Timestamp at = 5;
  google.protobuf.Int64Value discount = 6;
  oneof payment {
    string card = 7;
    string iban = 8;
  }
  Status status = 9;
  uint64 checksum = 10;
  optional int32 priority = 11;

  message Item {
    string sku = 1;
    int32 qty = 2;
  }
}

enum Status {
  STATUS_UNKNOWN = 0;
  PAID = 1;
}
"""


def _order_class() -> Any:
    """``shop.Order`` as a class, from :data:`ORDER_PROTO` (parka's .proto reader, no protoc)."""
    return registered_class(ORDER_PROTO, [], 0)  # the file's first message


def _order(cls: Any, i: int) -> Any:
    order = cls(id=i, customer=f"c{i % 5}", status=1, checksum=2**64 - 1 - i)
    order.items.add(sku=f"s{i}", qty=i % 3)
    order.tags["shop"] = f"t{i % 2}"
    order.at.FromMilliseconds(1_700_000_000_000 + i)
    if i % 2:
        order.discount.value = i
        order.card = f"card-{i}"
    else:
        order.iban = f"NL{i}"
        order.priority = i
    return order


@pytest.mark.parametrize("registered", ["by-serializer", "as-proto-source"])
def test_protobuf_records_land_with_their_types_and_a_bad_one_is_a_dead_letter(
    bootstrap: str,
    registry_url: str,
    client: TestRegistryClient,
    new_topic: Callable[..., str],
    tmp_path: Path,
    registered: str,
) -> None:
    """Protobuf values as confluent-kafka's ProtobufSerializer writes them (its schema the base64
    of a FileDescriptorProto), or framed by hand against .proto source registered as text: the
    nested message, map, oneof, enum, well-known types and uint64 land as their documented
    types; a body that is not an Order is a dead letter; then segments continue the topic."""
    topic = new_topic()
    cls = _order_class()
    context = SerializationContext(topic, MessageField.VALUE)
    if registered == "by-serializer":
        serialize = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
        values = [serialize(_order(cls, i), context) for i in range(200)]
    else:
        schema_id = client.register_schema(f"{topic}-value", Schema(ORDER_PROTO, "PROTOBUF"))
        frame = struct.pack(">bI", 0, schema_id) + b"\x00"  # the file's first message
        values = [frame + _order(cls, i).SerializeToString() for i in range(200)]
    torn = values[0][:6] + b"\xff\xff\xff"
    _produce(bootstrap, topic, [(None, v) for v in [*values[:100], torn, *values[100:]]])
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    flags = ("--end-at-latest", "--value-format", "protobuf", "--schema-registry-url", registry_url)
    result = last_json(run_ingest(topic, table, bootstrap, *flags, "--dlq-table", str(dlq)))
    assert (result["records"], result["dead_letters"]) == (200, 1)
    got = DeltaTable(str(table)).to_pyarrow_table().sort_by("id")
    assert got["id"].to_pylist() == list(range(200))
    schema = got.schema
    assert schema.field("at").type == pa.timestamp("us", tz="UTC") and schema.field("checksum").type == pa.decimal128(
        20, 0
    )
    assert schema.field("discount").type == pa.int64() and schema.field("status").type == pa.int32()
    rows = got.to_pylist()
    assert [dict(r["tags"]) for r in rows[:2]] == [{"shop": "t0"}, {"shop": "t1"}]
    assert rows[1]["items"] == [{"sku": "s1", "qty": 1}] and rows[1]["checksum"] == decimal.Decimal(2**64 - 2)
    assert (rows[0]["card"], rows[0]["iban"], rows[1]["card"], rows[1]["iban"]) == (None, "NL0", "card-1", None)
    assert (rows[0]["discount"], rows[1]["discount"], rows[0]["priority"], rows[1]["priority"]) == (None, 1, 0, None)
    assert rows[3]["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 3000, tzinfo=dt.timezone.utc)
    [dead] = DeltaTable(str(dlq)).to_pyarrow_table().to_pylist()
    assert (dead["offset"], dead["value"]) == (100, torn) and "not a shop.Order message" in dead["error"]
