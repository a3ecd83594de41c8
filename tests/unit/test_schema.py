from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest

from parka.errors import SchemaError
from parka.schema import RESERVED_PREFIX, schema_fingerprint, to_arrow_schema


def record(*fields: dict[str, Any], name: str = "R", namespace: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "record", "name": name, "fields": list(fields)}
    if namespace:
        schema["namespace"] = namespace
    return schema


def one_field(avro_type: Any) -> pa.Field:
    return to_arrow_schema(record({"name": "f", "type": avro_type})).field("f")


@pytest.mark.parametrize(
    ("avro_type", "arrow_type"),
    [
        ("boolean", pa.bool_()),
        ("int", pa.int32()),
        ("long", pa.int64()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("string", pa.string()),
        ("bytes", pa.binary()),
        ({"type": "int"}, pa.int32()),
        ({"type": "fixed", "name": "F", "size": 16}, pa.binary()),
        ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, pa.string()),
    ],
)
def test_primitive_and_named_types_are_not_nullable(avro_type: Any, arrow_type: pa.DataType) -> None:
    field = one_field(avro_type)
    assert field.type == arrow_type
    assert field.nullable is False


@pytest.mark.parametrize("union", [["null", "long"], ["long", "null"]])
def test_null_union_is_a_nullable_field(union: list[str]) -> None:
    field = one_field(union)
    assert field.type == pa.int64()
    assert field.nullable is True


def test_single_branch_union_is_not_nullable() -> None:
    field = one_field(["string"])
    assert (field.type, field.nullable) == (pa.string(), False)


@pytest.mark.parametrize(
    ("avro_type", "arrow_type"),
    [
        ({"type": "int", "logicalType": "date"}, pa.date32()),
        # Delta and Spark have no time of day: the Avro int stays (as Spark's from_avro keeps it)
        ({"type": "int", "logicalType": "time-millis"}, pa.int32()),
        ({"type": "long", "logicalType": "time-micros"}, pa.int64()),
        ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("us", tz="UTC")),
        ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC")),
        ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("us")),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us")),
        ({"type": "string", "logicalType": "uuid"}, pa.string()),
        ({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}, pa.decimal128(10, 2)),
        ({"type": "bytes", "logicalType": "decimal", "precision": 5}, pa.decimal128(5, 0)),
        ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 38}, pa.decimal128(38, 38)),
        (
            {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4},
            pa.decimal128(18, 4),
        ),
        ({"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 3}, pa.decimal256(39, 3)),
        (
            {
                "type": "fixed",
                "name": "D",
                "size": 32,
                "logicalType": "decimal",
                "precision": 76,
                "scale": 10,
            },
            pa.decimal256(76, 10),
        ),
    ],
)
def test_logical_types(avro_type: dict[str, Any], arrow_type: pa.DataType) -> None:
    field = one_field(avro_type)
    assert field.type == arrow_type
    assert field.nullable is False


def test_nullable_logical_type() -> None:
    field = one_field(["null", {"type": "long", "logicalType": "timestamp-millis"}])
    assert field.type == pa.timestamp("us", tz="UTC")
    assert field.nullable is True


@pytest.mark.parametrize(
    ("avro_type", "arrow_type"),
    [
        ({"type": "string", "logicalType": "no-such-type"}, pa.string()),  # unknown logical type
        ({"type": "string", "logicalType": "date"}, pa.string()),  # known, wrong base type
        ({"type": "int", "logicalType": "timestamp-millis"}, pa.int32()),
        ({"type": "long", "logicalType": "uuid"}, pa.int64()),
        ({"type": "string", "logicalType": "decimal", "precision": 4}, pa.string()),
        ({"type": "bytes", "logicalType": "decimal"}, pa.binary()),  # no precision: invalid, ignored
        ({"type": "fixed", "name": "U", "size": 16, "logicalType": "uuid"}, pa.binary()),
    ],
)
def test_unknown_or_misplaced_logical_type_falls_back_to_base_type(
    avro_type: dict[str, Any], arrow_type: pa.DataType
) -> None:
    assert one_field(avro_type).type == arrow_type


def test_arrays_and_maps() -> None:
    schema = to_arrow_schema(
        record(
            {"name": "ints", "type": {"type": "array", "items": "int"}},
            {"name": "maybe_ints", "type": {"type": "array", "items": ["null", "int"]}},
            {"name": "prices", "type": {"type": "map", "values": "double"}},
            {"name": "labels", "type": ["null", {"type": "map", "values": ["null", "string"]}]},
            {"name": "matrix", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
        )
    )
    assert schema.field("ints").type == pa.list_(pa.field("element", pa.int32(), nullable=False))
    assert schema.field("ints").type.value_field.nullable is False
    assert schema.field("maybe_ints").type.value_field.nullable is True
    prices = schema.field("prices").type
    assert pa.types.is_map(prices)
    assert (prices.key_type, prices.item_type, prices.item_field.nullable) == (
        pa.string(),
        pa.float64(),
        False,
    )
    labels = schema.field("labels")
    assert labels.nullable is True
    assert labels.type.item_field.nullable is True
    assert schema.field("matrix").type.value_type.value_type == pa.int64()


def test_nested_record_and_named_type_reuse() -> None:
    address = {
        "type": "record",
        "name": "Address",
        "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}],
    }
    schema = to_arrow_schema(
        record(
            {"name": "home", "type": address},
            {"name": "work", "type": ["null", "Address"]},  # short name, same namespace
            {"name": "past", "type": {"type": "array", "items": "com.example.Address"}},  # full name
            {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 4}},
            {"name": "other_id", "type": "Id"},
            namespace="com.example",
        )
    )
    expected_struct = pa.struct([pa.field("city", pa.string(), nullable=False), pa.field("zip", pa.int32())])
    assert schema.field("home").type == expected_struct
    assert schema.field("home").nullable is False
    assert schema.field("work").type == expected_struct
    assert schema.field("work").nullable is True
    past = schema.field("past").type
    assert past.value_type == expected_struct
    assert past.value_field.nullable is False
    assert schema.field("other_id").type == pa.binary()


def test_json_string_and_dict_give_the_same_schema() -> None:
    avro = record({"name": "a", "type": "int"}, {"name": "b", "type": ["null", "string"]})
    assert to_arrow_schema(json.dumps(avro)).equals(to_arrow_schema(avro))
    assert to_arrow_schema(avro).names == ["a", "b"]


@pytest.mark.parametrize(
    ("avro_type", "field", "message"),
    [
        (["null", "int", "string"], "outer.inner", "union"),
        (["int", "string"], "outer.inner", "union"),
        ("null", "outer.inner", "null"),
        (["null"], "outer.inner", "null"),
        ({"type": "array", "items": ["int", "string"]}, "outer.inner[]", "union"),
        ({"type": "map", "values": ["int", "string"]}, "outer.inner{}", "union"),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 77, "scale": 0},
            "outer.inner",
            "precision 77",
        ),
    ],
)
def test_unsupported_types_name_the_field(avro_type: Any, field: str, message: str) -> None:
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "inner", "type": avro_type}]}
    with pytest.raises(SchemaError, match=re.escape(message)) as info:
        to_arrow_schema(record({"name": "ok", "type": "int"}, {"name": "outer", "type": inner}))
    assert info.value.field == field
    assert f"'{field}'" in str(info.value)


def test_recursive_record_is_rejected() -> None:
    node = record({"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"]}, name="Node")
    with pytest.raises(SchemaError, match="recursive") as info:
        to_arrow_schema(node)
    assert info.value.field == "next"


def test_reserved_prefix_is_rejected() -> None:
    with pytest.raises(SchemaError, match="reserved") as info:
        to_arrow_schema(record({"name": RESERVED_PREFIX + "key", "type": "bytes"}))
    assert info.value.field == "__parka_key"


def test_duplicate_field_is_rejected() -> None:
    with pytest.raises(SchemaError, match="duplicate") as info:
        to_arrow_schema(record({"name": "a", "type": "int"}, {"name": "a", "type": "long"}))
    assert info.value.field == "a"


@pytest.mark.parametrize(
    "schema",
    [
        '"int"',
        {"type": "array", "items": "int"},
        ["null", "int"],
        "{not json",
        record({"name": "a", "type": "NoSuchType"}),
        record(),
    ],
)
def test_invalid_or_non_record_schemas_raise_schema_error(schema: Any) -> None:
    with pytest.raises(SchemaError):
        to_arrow_schema(schema)


def test_arrow_schema_is_returned_as_is() -> None:
    schema = pa.schema(
        [
            pa.field("a", pa.int64(), nullable=False),
            pa.field("tag", pa.dictionary(pa.int32(), pa.string())),
            pa.field("s", pa.struct([pa.field("x", pa.large_string())])),
            pa.field("m", pa.map_(pa.string(), pa.list_(pa.decimal128(5, 2)))),
        ]
    )
    assert to_arrow_schema(schema) is schema


@pytest.mark.parametrize(
    ("arrow_type", "field"),
    [
        (pa.dense_union([pa.field("i", pa.int32()), pa.field("s", pa.string())]), "x"),
        (pa.sparse_union([pa.field("i", pa.int32())]), "x"),
        (pa.null(), "x"),
        (pa.duration("us"), "x"),
        (pa.struct([pa.field("inner", pa.dense_union([pa.field("i", pa.int32())]))]), "x.inner"),
        (pa.list_(pa.null()), "x[]"),
        (pa.map_(pa.string(), pa.month_day_nano_interval()), "x{}"),
    ],
)
def test_unsupported_arrow_types_name_the_field(arrow_type: pa.DataType, field: str) -> None:
    with pytest.raises(SchemaError, match="not supported") as info:
        to_arrow_schema(pa.schema([pa.field("ok", pa.int32()), pa.field("x", arrow_type)]))
    assert info.value.field == field


def test_arrow_schema_reserved_prefix_and_empty_are_rejected() -> None:
    with pytest.raises(SchemaError, match="reserved"):
        to_arrow_schema(pa.schema([pa.field("__parka_x", pa.int32())]))
    with pytest.raises(SchemaError, match="no fields"):
        to_arrow_schema(pa.schema([]))


AB = pa.schema([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.list_(pa.string()))])


def test_fingerprint_is_16_hex_digits_and_pinned() -> None:
    fingerprint = schema_fingerprint(AB)
    assert re.fullmatch("[0-9a-f]{16}", fingerprint)
    # Pinned: the fingerprint is part of the wire format and must not drift between releases.
    canonical = '[["a","int32",false],["b",["list","string",true],true]]'
    assert fingerprint == hashlib.sha256(canonical.encode()).hexdigest()[:16] == "bd33cbf1b20d4b0e"


def test_fingerprint_is_stable_across_processes() -> None:
    code = (
        "import pyarrow as pa; from parka.schema import schema_fingerprint; "
        "print(schema_fingerprint(pa.schema([pa.field('a', pa.int32(), nullable=False), "
        "pa.field('b', pa.list_(pa.string()))])))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == schema_fingerprint(AB)


def test_fingerprint_is_sensitive_to_order_names_types_and_nullability() -> None:
    base = schema_fingerprint(AB)
    variants = [
        pa.schema([AB.field("b"), AB.field("a")]),
        pa.schema([AB.field("a").with_name("c"), AB.field("b")]),
        pa.schema([AB.field("a").with_type(pa.int64()), AB.field("b")]),
        pa.schema([AB.field("a").with_nullable(True), AB.field("b")]),
        pa.schema([AB.field("a"), AB.field("b").with_type(pa.list_(pa.field("item", pa.string(), False)))]),
    ]
    fingerprints = {schema_fingerprint(v) for v in variants}
    assert base not in fingerprints
    assert len(fingerprints) == len(variants)


def test_fingerprint_ignores_metadata_and_list_item_names() -> None:
    renamed = pa.schema([AB.field("a"), AB.field("b").with_type(pa.list_(pa.field("element", pa.string())))])
    with_metadata = AB.with_metadata({"k": "v"})
    assert schema_fingerprint(renamed) == schema_fingerprint(AB)
    assert schema_fingerprint(with_metadata) == schema_fingerprint(AB)
    doc_field = pa.schema([AB.field("a").with_metadata({"doc": "x"}), AB.field("b")])
    assert schema_fingerprint(doc_field) == schema_fingerprint(AB)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (pa.timestamp("us"), pa.timestamp("us", tz="UTC")),
        (pa.timestamp("us"), pa.timestamp("ms")),
        (pa.decimal128(10, 2), pa.decimal128(10, 3)),
        (pa.decimal128(10, 2), pa.decimal256(10, 2)),
        (pa.string(), pa.large_string()),
        (pa.time32("ms"), pa.time64("us")),
        (pa.map_(pa.string(), pa.int32()), pa.list_(pa.int32())),
    ],
)
def test_fingerprint_distinguishes_parameterised_types(left: pa.DataType, right: pa.DataType) -> None:
    assert schema_fingerprint(pa.schema([("x", left)])) != schema_fingerprint(pa.schema([("x", right)]))


def test_avro_times_of_day_become_ints_a_delta_table_can_store() -> None:
    """time-millis/time-micros become integers, not Arrow time types, which Delta cannot store,
    so such a topic can be ingested."""
    import datetime as dt

    from parka.lake.delta._rs import check_schema as delta_check_schema

    from parka.errors import RecordError
    from parka.records import compile_validator

    avro = {
        "type": "record",
        "name": "T",
        "fields": [
            {"name": "ms", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "us", "type": ["null", {"type": "long", "logicalType": "time-micros"}]},
        ],
    }
    schema = to_arrow_schema(avro)
    delta_check_schema(schema)  # raised SchemaMismatchError ("Delta has no time-of-day ... type") before
    validate = compile_validator(schema)
    row = validate({"ms": dt.time(1, 2, 3, 4000), "us": dt.time(0, 0, 1, 5)})
    assert row == {"ms": 3_723_004, "us": 1_000_005}
    assert validate({"ms": 5, "us": None}) == {"ms": 5, "us": None}
    with pytest.raises(RecordError, match="sub-millisecond"):
        validate({"ms": dt.time(0, 0, 0, 1)})
    with pytest.raises(RecordError, match="not a time of day"):
        validate({"ms": 86_400_000})


def test_set_schema_warns_about_arrow_times_of_day() -> None:
    from parka.producer import ParquetProducer

    from parka.schema import ParkaSchemaWarning

    producer = ParquetProducer({"bootstrap.servers": "127.0.0.1:9", "columnar.encoding": "parquet"})
    with pytest.warns(ParkaSchemaWarning, match=r"column s\.at is a time of day.*parka ingest will refuse"):
        producer.set_schema("t", pa.schema([("id", pa.int64()), ("s", pa.struct([("at", pa.time64("us"))]))]))
    producer.set_schema("u", pa.schema([("id", pa.int64())]))  # no warning: pytest's filter makes one an error
