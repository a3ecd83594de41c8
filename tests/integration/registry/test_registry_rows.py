"""Avro row records as confluent-kafka's own ``AvroSerializer`` writes them, through the real
registry: :class:`parka.rowdecode.ConfluentAvroRows` finds each value's writer schema by the id in
its frame (:meth:`parka.registry.Registry.writer_avro`) and decodes the values in bulk, a schema
version per run, equal to the records serialized. The same for JSON values and JSON Schemas
(``JSONSerializer``, :class:`parka.rowdecode.ConfluentJsonRows`)."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from parka.registry import Registry
from parka.rowdecode import ConfluentAvroRows

from ._client import TestRegistryClient

pytestmark = pytest.mark.timeout(900)  # a first run builds the registry (see test_registry.py)

V1 = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
    ],
}
# a later version: a field added with a default (backward compatible)
V2 = {**V1, "fields": [*V1["fields"], {"name": "unit", "type": ["null", "string"], "default": None}]}


def test_values_of_two_schema_versions_decode_to_the_records_serialized(registry_url: str) -> None:
    topic = f"rows-{uuid.uuid4().hex[:8]}"
    context = SerializationContext(topic, MessageField.VALUE)
    first = [{"id": i, "sensor": f"s{i % 3}", "tags": {"k": str(i)}} for i in range(30)]
    second = [{**r, "id": 30 + i, "unit": None if i % 2 else "m"} for i, r in enumerate(first[:20])]
    client = TestRegistryClient({"url": registry_url})
    registry = Registry({"url": registry_url})
    try:
        values = [AvroSerializer(client, json.dumps(V1))(r, context) for r in first]
        values += [AvroSerializer(client, json.dumps(V2))(r, context) for r in second]
        decoded = ConfluentAvroRows(registry.writer_avro).decode(values)
    finally:
        client.close()
        registry.close()
    assert decoded.bad == []
    assert [len(r.indexes) for r in decoded.runs] == [30, 20]
    assert decoded.runs[0].schema_id != decoded.runs[1].schema_id
    as_given = [
        {k: dict(v) if k == "tags" else v for k, v in row.items()}
        for run in decoded.runs
        for row in run.table.to_pylist(maps_as_pydicts="strict")
    ]
    assert as_given == [*first, *second]
    assert "unit" not in decoded.runs[0].schema.names and decoded.runs[1].schema.field("unit").nullable


J1 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "sensor": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
    },
    "required": ["id", "sensor"],
}
# a later version: an optional property added
J2 = {**J1, "properties": {**J1["properties"], "unit": {"type": ["string", "null"]}}}


def test_json_values_of_two_schema_versions_decode_to_the_records_serialized(registry_url: str) -> None:
    """confluent-kafka's own ``JSONSerializer`` (the frame, then the JSON text) with two JSON
    Schema versions: :class:`parka.rowdecode.ConfluentJsonRows` reads each run against its
    version's Arrow form (:meth:`parka.registry.Registry.writer_json_schema`). A value framed
    with an Avro schema's id is a bad value, named."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    from parka.rowdecode import ConfluentJsonRows

    topic = f"json-rows-{uuid.uuid4().hex[:8]}"
    context = SerializationContext(topic, MessageField.VALUE)
    first = [{"id": i, "sensor": f"s{i % 3}", "at": f"2026-11-30T06:{i:02d}:00Z"} for i in range(30)]
    second = [{"id": 30 + i, "sensor": "t", "unit": None if i % 2 else "m"} for i in range(20)]
    client = TestRegistryClient({"url": registry_url})
    registry = Registry({"url": registry_url})
    try:
        values = [JSONSerializer(json.dumps(J1), client)(r, context) for r in first]
        values += [JSONSerializer(json.dumps(J2), client)(r, context) for r in second]
        avro_id = client.register_schema(f"{topic}-avro", Schema(json.dumps(V1), "AVRO"))
        values.append(b"\x00" + avro_id.to_bytes(4, "big") + b'{"id": 99, "sensor": "x"}')
        decoded = ConfluentJsonRows(registry.writer_json_schema).decode(values)
    finally:
        client.close()
        registry.close()
    assert [len(r.indexes) for r in decoded.runs] == [30, 20]
    assert decoded.runs[0].schema_id != decoded.runs[1].schema_id
    assert [i for i, _ in decoded.bad] == [50] and "not a JSON Schema" in str(decoded.bad[0][1])
    got = [row for run in decoded.runs for row in run.table.to_pylist()]
    assert [(r["id"], r["sensor"]) for r in got] == [(r["id"], r["sensor"]) for r in [*first, *second]]
    assert [r["at"].isoformat() for r in got[:2]] == ["2026-11-30T06:00:00+00:00", "2026-11-30T06:01:00+00:00"]
    assert [r["unit"] for r in got[30:32]] == ["m", None] and "unit" not in decoded.runs[0].schema.names
