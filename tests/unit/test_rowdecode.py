"""Confluent-framed Avro decoded in bulk (:mod:`parka.rowdecode`): the bulk path gives the table
the per-record path gives (fastavro and parka's record validator), for the benchmarks' data sets
and for every Avro type parka maps; a body that is not one record of its schema is named, never
read into its neighbours."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks import encodings as enc
from benchmarks.datasets import DATASET_NAMES, load
from benchmarks.row_decode import json_values
from parka.errors import RegistryError
from parka.rowdecode import AvroRows, ConfluentAvroRows, ConnectJsonRows, JsonRows, confluent_schema_id


def bodies(schema: dict[str, Any], records: list[dict[str, Any]]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for record in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        out.append(buf.getvalue())
    return out


def both_ways(schema: dict[str, Any], values: list[bytes]) -> tuple[pa.Table, pa.Table, AvroRows]:
    bulk = AvroRows(schema)
    decoded = bulk.decode(values)
    assert decoded.bad == [] and bulk.bulk_off is None, (decoded.bad, bulk.bulk_off)
    per_record = AvroRows(schema)._per_record(values)
    assert per_record.bad == []
    return decoded.table, per_record.table, bulk


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_the_bulk_path_gives_the_per_record_table_on_each_data_set(name: str) -> None:
    dataset = load(name, 300)
    values = [v[5:] for v in enc.serialize(dataset, "avro", enc.rows_for(dataset, "avro"))]
    bulk, per_record, _ = both_ways(dataset.avro_schema, values)
    assert bulk.schema == per_record.schema
    assert bulk.equals(per_record)


EVERY_TYPE: dict[str, Any] = {
    "type": "record",
    "name": "Every",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": ["null", "long"]},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ts_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "tags", "type": {"type": "map", "values": "long"}},
        {"name": "maybe_map", "type": ["null", {"type": "map", "values": ["null", "string"]}]},
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [
                        {"name": "n", "type": "int"},
                        {"name": "attrs", "type": {"type": "map", "values": "string"}},
                    ],
                },
            },
        },
        {"name": "again", "type": ["null", "Item"]},
        {"name": "lists", "type": {"type": "array", "items": {"type": "array", "items": "string"}}},
    ],
}


def every_type_records(n: int) -> list[dict[str, Any]]:
    base = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
    out = []
    for k in range(n):
        out.append(
            {
                "b": k % 2 == 0,
                "i": -k,
                "l": None if k % 3 == 0 else k * 10**12,
                "f": k / 4,
                "d": k / 3,
                "s": f"é{k}" * (k % 4),
                "raw": bytes([k % 256]) * (k % 3),
                "fx": struct.pack(">I", k),
                "e": "RED" if k % 2 else "GREEN",
                "day": dt.date(2026, 1, 1) + dt.timedelta(days=k),
                "ts_ms": base + dt.timedelta(milliseconds=k),
                "ts_us": None if k % 5 == 0 else base + dt.timedelta(microseconds=k),
                "local": dt.datetime(2026, 1, 1) + dt.timedelta(seconds=k),
                "t_ms": dt.time(1, 2, 3, (k % 1000) * 1000),
                "t_us": dt.time(4, 5, 6, k % 1_000_000),
                "dec": decimal.Decimal(k) / 100,
                "tags": {f"t{j}": j for j in range(k % 3)},
                "maybe_map": None if k % 2 else {"a": None, "b": "x"},
                "items": [{"n": j, "attrs": {"k": str(j)}} for j in range(k % 3)],
                "again": None if k % 2 else {"n": k, "attrs": {}},
                "lists": [[str(j)] * j for j in range(k % 3)],
            }
        )
    return out


def test_the_bulk_path_gives_the_per_record_table_for_every_avro_type() -> None:
    values = bodies(EVERY_TYPE, every_type_records(50))
    bulk, per_record, decoder = both_ways(EVERY_TYPE, values)
    assert bulk.equals(per_record), (bulk.schema, per_record.schema)
    assert pa.types.is_map(decoder.schema.field("tags").type)
    assert bulk.column("tags")[1].as_py() == [("t0", 0)]
    # a slice of a batch (as a fetch hands out) decodes the same as that slice alone
    assert decoder.decode(values[7:19]).table.equals(per_record.slice(7, 12))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda body: body + b"\x02\x04", "2 byte(s) after the record"),
        (lambda body: body[:-3], "not a record of the writer schema"),
        (lambda body: b"", "not a record of the writer schema"),
    ],
    ids=["trailing-bytes", "truncated", "empty"],
)
def test_a_body_that_is_not_one_record_is_named_and_its_neighbours_decode(damage: Any, reason: str) -> None:
    """Avro has no record boundaries: in one block, a damaged body would shift the records after
    it. The sentinel after each body catches that; the per-record path names the body."""
    dataset = load("github_events", 40)
    records = enc.rows_for(dataset, "avro")
    values = [v[5:] for v in enc.serialize(dataset, "avro", records)]
    values[13] = damage(values[13])
    decoder = AvroRows(dataset.avro_schema)
    decoded = decoder.decode(values)
    assert [i for i, _ in decoded.bad] == [13]
    assert reason in str(decoded.bad[0][1])
    assert decoded.kept == [i for i in range(40) if i != 13]
    good = AvroRows(dataset.avro_schema).decode([v for i, v in enumerate(values) if i != 13])
    assert decoded.table.equals(good.table)
    assert decoder.bulk_off is None  # a bad body is the data's fault: the next batch goes in bulk


def test_a_record_the_schema_cannot_hold_in_arrow_is_named() -> None:
    """A value in range for Avro but not for its Arrow column (a date past Arrow's date32 is
    not possible; a decimal wider than its precision is)."""
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}}],
    }
    wide = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}],
    }
    values = bodies(schema, [{"dec": decimal.Decimal("1.25")}]) + bodies(wide, [{"dec": decimal.Decimal("123456.78")}])
    decoded = AvroRows(schema).decode(values)
    assert [i for i, _ in decoded.bad] == [1]
    assert decoded.table.column("dec").to_pylist() == [decimal.Decimal("1.25")]


def test_confluent_frame() -> None:
    assert confluent_schema_id(b"\x00\x00\x00\x01\x02rest") == 258
    assert confluent_schema_id(b"\x00\x00\x01") is None
    assert confluent_schema_id(b"PAR1") is None
    assert confluent_schema_id(None) is None


# -- JSON ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_json_values_read_back_as_the_table_they_came_from(name: str) -> None:
    """In bulk; github_events' schema has a map, read value by value (``json.loads``, the
    validator) with its timestamps given as pyarrow's reader takes them."""
    table = load(name, 300).table
    decoded = JsonRows(table.schema).decode(json_values(table))
    assert decoded.bad == []
    assert decoded.table.equals(table)


def test_a_bad_json_value_is_named_and_read_alone_its_neighbours_are_the_same() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("at", pa.timestamp("us", tz="UTC")),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("user", pa.struct([pa.field("name", pa.string()), pa.field("age", pa.int32())])),
        ]
    )
    good = [
        json.dumps(
            {"id": i, "at": f"2026-11-30T12:00:0{i % 10}+01:00", "tags": ["a"] * i, "user": {"name": "x", "age": i}}
        ).encode()
        for i in range(12)
    ]
    good[4] = b'{\n  "id": 4,\n  "at": null\n}'  # pretty-printed: several lines
    broken = {
        2: (b'{"id": 2, "colour": "red"}', "colour"),
        5: (b'{"at": "2026-11-30T12:00:00Z"}', "id"),
        7: (b'{"id": "seven"}', "id"),
        8: (b'{"id": 8}{"id": 9}', "one JSON object"),
        9: (b"[1, 2]", "not an object"),
        10: (b'{"id": 10', "not one JSON object"),
        11: (b'{"id": 11, "user": {"name": "\xff"}}', "utf"),
    }
    values = list(good)
    for index, (value, _) in broken.items():
        values[index] = value
    decoded = JsonRows(schema).decode(values)
    assert [i for i, _ in decoded.bad] == sorted(broken)
    for (index, reason), (_, expected) in zip(decoded.bad, sorted(broken.items()), strict=True):
        assert expected[1].lower() in str(reason).lower(), (index, reason)
    assert decoded.kept == [i for i in range(12) if i not in broken]
    alone = JsonRows(schema).decode([good[i] for i in decoded.kept])
    assert alone.bad == [] and decoded.table.equals(alone.table)
    assert decoded.table.column("at")[1].as_py() == dt.datetime(2026, 11, 30, 11, 0, 1, tzinfo=dt.timezone.utc)


def test_a_schema_with_a_map_reads_value_by_value_with_the_record_validator() -> None:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("labels", pa.map_(pa.string(), pa.int64()))]
    )
    values = [b'{"id": 1, "labels": {"a": 1, "b": 2}}', b'{"id": 2, "labels": {"a": "x"}}', b'{"id": 3}']
    decoded = JsonRows(schema).decode(values)
    assert [i for i, _ in decoded.bad] == [1] and "labels" in str(decoded.bad[0][1])
    assert decoded.table.to_pylist() == [{"id": 1, "labels": [("a", 1), ("b", 2)]}, {"id": 3, "labels": None}]


# -- Confluent-framed values of several writer schemas --------------------------------------

V1 = {"type": "record", "name": "Reading", "fields": [{"name": "id", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "id", "type": "long"}, {"name": "unit", "type": ["null", "string"], "default": None}],
}


def framed(schema_id: int, schema: dict[str, Any], records: list[dict[str, Any]]) -> list[bytes]:
    return [struct.pack(">bI", 0, schema_id) + body for body in bodies(schema, records)]


def test_a_batch_splits_into_runs_of_one_schema_id_and_unframed_or_unknown_ids_are_bad() -> None:
    schemas = {7: json.dumps(V1), 8: json.dumps(V2)}
    asked: list[int] = []

    def writer_schema(schema_id: int) -> str:
        asked.append(schema_id)
        if schema_id not in schemas:
            raise RegistryError(f"no schema {schema_id} (HTTP 404)", schema_id=schema_id, http_status=404)
        return schemas[schema_id]

    values: list[bytes | None] = [
        *framed(7, V1, [{"id": 0}, {"id": 1}]),
        b'{"id": 2}',  # JSON on an Avro topic
        *framed(8, V2, [{"id": 3, "unit": "m"}]),
        *framed(99, V1, [{"id": 4}]),  # an id the registry does not hold
        *framed(7, V1, [{"id": 5}]),
        None,
    ]
    decoded = ConfluentAvroRows(writer_schema).decode(values)
    assert [(r.schema_id, r.indexes, r.table.to_pylist()) for r in decoded.runs] == [
        (7, [0, 1], [{"id": 0}, {"id": 1}]),
        (8, [3], [{"id": 3, "unit": "m"}]),
        (7, [5], [{"id": 5}]),
    ]
    assert [i for i, _ in decoded.bad] == [2, 4, 6]
    assert "not Confluent-framed" in str(decoded.bad[0][1]) and "schema id 99" in str(decoded.bad[1][1])
    assert sorted(set(asked)) == [7, 8, 99] and len(asked) == 3  # once per id


def test_a_registry_that_cannot_be_reached_is_raised_not_a_bad_value() -> None:
    def writer_schema(schema_id: int) -> str:
        raise RegistryError("schema registry at http://127.0.0.1:9 could not be reached", schema_id=schema_id)

    with pytest.raises(RegistryError, match="could not be reached"):
        ConfluentAvroRows(writer_schema).decode(framed(7, V1, [{"id": 0}]))


def test_json_a_null_struct_whose_fields_may_not_be_null_reads_and_a_missing_field_is_named() -> None:
    inner = pa.struct([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    rows = JsonRows(pa.schema([pa.field("before", inner), pa.field("op", pa.string(), nullable=False)]))
    values = [
        b'{"before": null, "op": "c"}',
        b'{"before": {"id": 1, "name": "a"}, "op": "u"}',
        b'{"before": {"name": "b"}, "op": "u"}',
    ]
    got = rows.decode(values)
    assert got.table.to_pylist() == [{"before": None, "op": "c"}, {"before": {"id": 1, "name": "a"}, "op": "u"}]
    assert [i for i, _ in got.bad] == [2] and "before: null where the schema allows none" in str(got.bad[0][1])
    assert got.table.schema == rows.schema  # the placeholders under the null struct: a Parquet writer takes it
    pq.write_table(got.table, io.BytesIO())


CONNECT = {
    "type": "struct",
    "fields": [
        {"type": "int64", "optional": False, "field": "id"},
        {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "price"},
        {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp", "field": "at"},
        {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "field": "day"},
        {"type": "bytes", "optional": True, "field": "raw"},
        {"type": "array", "optional": True, "items": {"type": "string"}, "field": "tags"},
    ],
}  # fmt: skip


def _connect_value(payload: dict[str, Any], *, spaced: bool = False) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps({"schema": CONNECT, "payload": payload}, separators=separators).encode()


def test_connect_json_values_read_with_their_logical_types_and_bad_ones_named() -> None:
    price = base64.b64encode((-1234).to_bytes(2, "big", signed=True)).decode()
    good = {
        "id": 1,
        "price": price,
        "at": 1_700_000_000_123,
        "day": 19_000,
        "raw": base64.b64encode(b"\x00\xff").decode(),
    }
    values = [
        _connect_value({**good, "tags": ["a"]}),
        _connect_value({**good, "id": 2, "tags": None}, spaced=True),  # not the converter's form: parsed whole
        _connect_value({**good, "id": None}),  # a null where the schema allows none
        b'{"id": 4}',  # not a Connect value
        None,
    ]
    got = ConnectJsonRows().decode(values)
    assert [i for i, _ in got.bad] == [2, 3, 4]
    assert "missing or null: id" in str(got.bad[0][1]) and "schemas.enable" in str(got.bad[1][1])
    [run] = got.runs
    assert run.indexes == [0, 1]
    row = run.table.to_pylist()[0]
    assert row["price"] == decimal.Decimal("-12.34") and row["raw"] == b"\x00\xff" and row["tags"] == ["a"]
    assert row["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.timezone.utc)
    assert row["day"] == dt.date(2022, 1, 8)
    assert run.table.schema.field("price").type == pa.decimal128(10, 2)


def test_a_connect_schema_parka_cannot_read_is_a_bad_value_not_a_crash() -> None:
    odd = {
        "type": "struct",
        "fields": [{"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}, "field": "m"}],
    }
    got = ConnectJsonRows().decode([json.dumps({"schema": odd, "payload": {"m": [[1, "a"]]}}).encode()])
    assert got.runs == [] and "keys must be strings" in str(got.bad[0][1])
