"""JSON Schema documents to Arrow schemas (``parka.schema.json_schema_to_arrow``), JSON values
that a document admits read by ``parka.rowdecode.JsonRows`` against the result, a schema
inferred from a first batch, and Confluent-framed JSON values of several schema versions."""

from __future__ import annotations

import datetime as dt
import json
import struct
from typing import Any

import pyarrow as pa
import pytest

from parka.errors import RegistryError, SchemaError
from parka.rowdecode import ConfluentJsonRows, JsonRows
from parka.schema import json_schema_to_arrow

EVENT: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Event",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "integer"}},
        "actor": {"$ref": "#/definitions/actor"},
        "size": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "kind": {"enum": ["push", "issue"]},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
    },
    "required": ["id", "at", "actor", "size", "tags"],
    "definitions": {
        "actor": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "login": {"type": "string"}},
            "required": ["id"],
        }
    },
}


def test_each_json_type_maps_to_its_arrow_type_and_nullability_follows_required_and_null() -> None:
    schema = json_schema_to_arrow(json.dumps(EVENT))
    want = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("day", pa.string()),  # JSON's dates are text, and stay text
            pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
            pa.field("labels", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
            pa.field(
                "actor",
                pa.struct([pa.field("id", pa.int64(), nullable=False), pa.field("login", pa.string())]),
                nullable=False,
            ),
            pa.field("size", pa.int64()),  # required, but it admits null
            pa.field("kind", pa.string()),
            pa.field("score", pa.float64()),
            pa.field("ok", pa.bool_()),
        ]
    )
    assert schema.equals(want), schema


def test_values_the_document_admits_are_read_by_the_json_decoder_against_its_arrow_schema() -> None:
    flat = {k: v for k, v in EVENT["properties"].items() if k != "labels"}  # a map is read value by value
    document = {**EVENT, "properties": flat}
    rows = JsonRows(json_schema_to_arrow(document))
    values = [
        {"id": 1, "at": "2026-11-30T06:40:00Z", "tags": ["a"], "actor": {"id": 7, "login": "x"}, "size": 3},
        {"id": 2, "name": "n", "at": "2026-11-30T08:40:00+02:00", "day": "2026-11-30", "tags": [],
         "actor": {"id": 8}, "size": None, "kind": "push", "score": 1.5, "ok": True},
    ]  # fmt: skip
    decoded = rows.decode([json.dumps(v).encode() for v in values])
    assert decoded.bad == []
    got = decoded.table.to_pylist()
    utc = dt.timezone.utc
    assert [r["at"].astimezone(utc) for r in got] == [dt.datetime(2026, 11, 30, 6, 40, tzinfo=utc)] * 2
    assert [r["actor"] for r in got] == [{"id": 7, "login": "x"}, {"id": 8, "login": None}]
    assert [(r["day"], r["size"], r["kind"]) for r in got] == [(None, 3, None), ("2026-11-30", None, "push")]
    # a value the document refuses (no id) is a bad value, named
    refused = rows.decode([b'{"at": "2026-11-30T06:40:00Z", "tags": [], "actor": {"id": 1}}'])
    assert [i for i, _ in refused.bad] == [0] and "id" in str(refused.bad[0][1])


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}, "a", "no single Arrow type"),
        ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}, "a",
         "oneOf of 2 non-null schemas"),
        ({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}, "a",
         "one 'items' schema"),
        ({"type": "object", "properties": {"a": {"type": "object"}}}, "a", "'additionalProperties' schema"),
        ({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}, "a", "only '#/definitions/"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}},
          "$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}}, "a.next", "recursive"),
        ({"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}}, "a", "names no definition"),
        ({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}}, "a.b", "no type"),
    ],
)  # fmt: skip
def test_a_type_without_one_arrow_equivalent_is_refused_naming_its_field(
    document: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(SchemaError, match=words) as caught:
        json_schema_to_arrow(document)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "document",
    ["{not json", '["a"]', '{"type": "string"}', '{"type": "object"}', '{"type": "object", "properties": {}}'],
)
def test_a_document_that_is_not_an_object_with_properties_is_refused(document: str) -> None:
    with pytest.raises(SchemaError):
        json_schema_to_arrow(document)


def test_an_inferred_schema_is_the_first_batchs_then_fixed() -> None:
    """``JsonRows.inferred``: the reader's types, nullable, timestamps in UTC microseconds; a later
    value with another field or type is a bad value, named; a field null throughout the first
    batch has no type, and is refused naming it."""
    first = [
        json.dumps({"id": 1, "name": "a", "at": "2026-11-30T06:40:00Z", "tags": ["x"], "actor": {"id": 3}}).encode(),
        json.dumps({"id": 2, "name": None, "at": "2026-11-30T06:41:00", "tags": [], "actor": {"id": 4}}).encode(),
    ]
    rows = JsonRows.inferred(first)
    assert rows.schema.equals(
        pa.schema(
            [
                ("id", pa.int64()),
                ("name", pa.string()),
                ("at", pa.timestamp("us", tz="UTC")),
                ("tags", pa.list_(pa.string())),
                ("actor", pa.struct([("id", pa.int64())])),
            ]
        )
    ), rows.schema
    later = [b'{"id": 3, "at": "2026-11-30T06:42:00.250Z"}', b'{"id": 4, "extra": 1}', b'{"id": "x"}']
    decoded = rows.decode(later)
    assert decoded.table.to_pylist()[0]["at"] == dt.datetime(2026, 11, 30, 6, 42, 0, 250000, tzinfo=dt.timezone.utc)
    assert [i for i, _ in decoded.bad] == [1, 2] and "extra" in str(decoded.bad[0][1])
    with pytest.raises(SchemaError, match="no type to infer") as caught:
        JsonRows.inferred([b'{"a": 1, "b": null}'])
    assert caught.value.field == "b"
    # a bad value among the first: the schema is the JSON objects', and decode names the others
    mixed = [b'{"id": 1}', b"not json", b"[1, 2]", b'{"id": 2, "name": "b"}']
    rows = JsonRows.inferred(mixed)
    assert rows.schema.names == ["id", "name"]
    decoded = rows.decode(mixed)
    assert decoded.table.column("id").to_pylist() == [1, 2] and [i for i, _ in decoded.bad] == [1, 2]
    with pytest.raises(SchemaError, match="none of the first 2 value"):
        JsonRows.inferred([b"not json", b"[1]"])


def json_framed(schema_id: int, records: list[dict[str, Any]]) -> list[bytes]:
    """Values as confluent-kafka's JSONSerializer frames them: magic byte 0, the id, the JSON text."""
    return [struct.pack(">bI", 0, schema_id) + json.dumps(r).encode() for r in records]


V1_JSON = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
V2_JSON = {"type": "object", "properties": {"id": {"type": "integer"}, "unit": {"type": ["string", "null"]}},
           "required": ["id"]}  # fmt: skip


def test_framed_json_values_split_into_runs_of_one_schema_id_and_bad_ones_are_named() -> None:
    """``ConfluentJsonRows``: the same split as Avro's (one implementation), each run read by the
    JsonRows of its JSON Schema; unframed values, unknown ids, values their schema refuses are
    bad; a registry that cannot be reached is raised."""
    schemas = {7: json.dumps(V1_JSON), 8: json.dumps(V2_JSON)}

    def writer_schema(schema_id: int) -> str:
        if schema_id not in schemas:
            raise RegistryError(f"no schema {schema_id} (HTTP 404)", schema_id=schema_id, http_status=404)
        return schemas[schema_id]

    values: list[bytes | None] = [
        *json_framed(7, [{"id": 0}, {"id": 1}]),
        b'{"id": 2}',  # not framed
        *json_framed(8, [{"id": 3, "unit": "m"}, {"id": "x"}]),  # the second: the wrong type
        *json_framed(99, [{"id": 4}]),
    ]
    decoded = ConfluentJsonRows(writer_schema).decode(values)
    assert [(r.schema_id, r.indexes, r.table.to_pylist()) for r in decoded.runs] == [
        (7, [0, 1], [{"id": 0}, {"id": 1}]),
        (8, [3], [{"id": 3, "unit": "m"}]),
    ]
    assert [i for i, _ in decoded.bad] == [2, 4, 5]
    assert "not Confluent-framed JSON" in str(decoded.bad[0][1]) and "schema id 99" in str(decoded.bad[2][1])

    def unreachable(schema_id: int) -> str:
        raise RegistryError("schema registry at http://127.0.0.1:9 could not be reached", schema_id=schema_id)

    with pytest.raises(RegistryError, match="could not be reached"):
        ConfluentJsonRows(unreachable).decode(json_framed(7, [{"id": 0}]))
