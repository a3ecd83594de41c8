"""Protobuf and JSON Schema on the client. ``ParquetProducer.set_schema(topic, MessageClass)`` takes messages of
the class (or dicts of its fields) and writes segments; ``ParquetConsumer.set_reader_schema(topic,
MessageClass)`` gives each record back as a message of the class. Checked against
confluent-kafka's own ``ProtobufSerializer`` and ``ProtobufDeserializer`` on the same messages
through the real registry: the shim gives what a plain consumer with the deserializer gives, and
``parka ingest`` lands the producer's segments as the same table as the serializer's records."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from deltalake import DeltaTable
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from parka.errors import RecordError
from parka.segment import SCHEMA_ID_HEADER

from .._ingest_util import last_json, run_ingest
from ._client import TestRegistryClient
from .test_ingest_rows import ORDER_PROTO, _order, _order_class

pytestmark = pytest.mark.timeout(900)  # a first run builds the registry (see test_registry.py)

N = 120


def _consume(consumer: Any, n: int) -> list[Any]:
    """``n`` messages of the subscribed topic, waiting on the assignment and the data."""
    got: list[Any] = []
    for _ in range(600):
        for msg in consumer.consume(n - len(got), timeout=0.5):
            assert msg.error() is None, msg.error()
            got.append(msg)
        if len(got) >= n:
            return got
    raise AssertionError(f"{len(got)} of {n} messages consumed")


def test_protobuf_messages_round_trip_as_confluents_serializer_and_deserializer_give_them(
    bootstrap: str, registry_url: str, new_topic: Callable[..., str], group_id: str, tmp_path: Path
) -> None:
    cls = _order_class()
    orders = [_order(cls, i) for i in range(N)]
    as_dicts = {5, 17}  # produce() takes a dict of the class's fields too
    values = [{"id": o.id, "customer": o.customer, "status": o.status} if i in as_dicts else o
              for i, o in enumerate(orders)]  # fmt: skip
    for i in as_dicts:
        orders[i] = cls(id=orders[i].id, customer=orders[i].customer, status=orders[i].status)

    # parka: the messages as segments, read back by the shim
    segments_topic = new_topic()
    errors: list[Any] = []
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 50}
    with ParquetProducer(conf) as producer:
        producer.set_schema(segments_topic, cls)
        for value in values:
            producer.produce(segments_topic, value=value)
        producer.produce(segments_topic, value={"id": "seven"}, on_delivery=lambda err, msg: errors.append(err))
        with pytest.raises(RecordError, match=r"shop\.Order message or a dict of its fields"):
            producer.produce(segments_topic, value=b"\x08\x01")
        assert producer.flush(30) == 0
    [error] = errors  # the record the class refuses: its callback names the field, the rest are sent
    assert isinstance(error, RecordError) and error.field == "id"
    shim = ParquetConsumer({"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest"})
    try:
        shim.set_reader_schema(segments_topic, cls)
        shim.subscribe([segments_topic])
        from_shim = [m.value() for m in _consume(shim, N)]
    finally:
        shim.close()

    # confluent-kafka: the same messages by its serializer, read by a plain consumer with its deserializer
    records_topic = new_topic()
    context = SerializationContext(records_topic, MessageField.VALUE)
    client = TestRegistryClient({"url": registry_url})
    try:
        serialize = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
        plain = Producer({"bootstrap.servers": bootstrap})
        for order in orders:
            plain.produce(records_topic, value=serialize(order, context))
        assert plain.flush(30) == 0
    finally:
        client.close()
    deserialize = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([records_topic])
        from_confluent = [deserialize(m.value(), context) for m in _consume(consumer, N)]
    finally:
        consumer.close()

    assert all(type(v) is cls for v in from_shim)
    assert from_shim == from_confluent == orders
    # parka ingest lands both topics as one table: the segments raw, the records decoded in bulk
    flags = ("--end-at-latest", "--value-format", "protobuf", "--schema-registry-url", registry_url)
    tables = {}
    for name, topic in (("segments", segments_topic), ("records", records_topic)):
        assert last_json(run_ingest(topic, tmp_path / name, bootstrap, *flags))["records"] == N
        table = DeltaTable(str(tmp_path / name)).to_pyarrow_table().sort_by("id")
        tables[name] = table.select([c for c in table.column_names if not c.startswith("__parka_")])
    assert tables["segments"].schema == tables["records"].schema
    assert tables["segments"].to_pylist() == tables["records"].to_pylist()


JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "sensor": {"type": "string"}, "value": {"type": ["number", "null"]}},
    "required": ["id", "sensor"],
}


@pytest.mark.parametrize("kind", ["JSON", "PROTOBUF"])
def test_set_schema_by_a_json_schema_or_protobuf_subject_and_the_shim_checks_the_writer_schema(
    bootstrap: str, registry_url: str, new_topic: Callable[..., str], group_id: str, kind: str
) -> None:
    """``set_schema(topic, subject=...)`` takes a subject whose latest version is a JSON Schema
    or a Protobuf schema (its first message): segments carry its id, and a shim with the
    registry checks each segment's columns against it, as for an Avro subject."""
    topic = new_topic()
    subject = f"{topic}-value"
    client = TestRegistryClient({"url": registry_url})
    try:
        text = json.dumps(JSON_SCHEMA) if kind == "JSON" else ORDER_PROTO
        schema_id = client.register_schema(subject, Schema(text, kind))
    finally:
        client.close()
    cls = _order_class()
    if kind == "JSON":
        values: list[Any] = [{"id": i, "sensor": f"s{i % 3}", "value": None if i % 4 else i / 2} for i in range(50)]
    else:  # dicts of its fields, and messages of the application's own class of the same type
        values = [{"id": i, "customer": f"c{i}"} if i % 2 else _order(cls, i) for i in range(50)]
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 20}
    with ParquetProducer({**conf, "schema.registry.url": registry_url}) as producer:
        producer.set_schema(topic, subject=subject)
        for value in values:
            producer.produce(topic, value=value)
        assert producer.flush(30) == 0
    shim = ParquetConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest",
         "schema.registry.url": registry_url}
    )  # fmt: skip
    try:
        if kind == "PROTOBUF":
            shim.set_reader_schema(topic, cls)
        shim.subscribe([topic])
        got = _consume(shim, len(values))
    finally:
        shim.close()
    # the shim checked each segment's columns against the writer schema its id names; the id:
    raw = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group_id}-raw", "auto.offset.reset": "earliest"})
    try:
        raw.subscribe([topic])
        assert {dict(m.headers())[SCHEMA_ID_HEADER] for m in _consume(raw, 3)} == {str(schema_id).encode()}
    finally:
        raw.close()
    if kind == "JSON":
        assert [m.value() for m in got] == values
    else:
        assert [m.value() for m in got] == [cls(**v) if isinstance(v, dict) else v for v in values]
