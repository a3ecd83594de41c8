"""Schema conversion: Avro record schemas (or Arrow schemas) to the Arrow schema of a topic.

Every topic has one explicit schema; parka never infers one from a batch. The mapping favours
what Delta Lake can store:

=====================================  ==========================================
Avro                                   Arrow
=====================================  ==========================================
``["null", T]`` / ``[T, "null"]``      nullable field of T (anything else: not null)
boolean, int, long                     bool, int32, int64
float, double                          float32, float64
string, enum, uuid                     string
bytes, fixed                           binary (Delta has no fixed-size binary)
array / map / record                   list<element> / map<string, value> / struct
date                                   date32
time-millis / time-micros              int32 ms / int64 µs since midnight (*)
timestamp-{millis,micros,nanos}        timestamp[us, tz=UTC] (Delta keeps microseconds)
local-timestamp-{millis,micros,nanos}  timestamp[us] (no time zone)
decimal(p, s) on bytes or fixed        decimal128(p, s), decimal256 when p > 38
=====================================  ==========================================

(*) Delta Lake and Spark have no time-of-day type (Spark's ``from_avro`` maps these to int
and long too), so a time column stays the Avro value: records may give ``datetime.time`` or
that int. An Arrow schema given with ``time32``/``time64`` columns works for Kafka, but such a
topic cannot be ingested into Delta; ``ParquetProducer.set_schema`` warns about it.

As the Avro specification asks, an unknown logical type, or one on a base type it does not
apply to, is ignored and the base type is used. Avro ``doc``, ``default`` and ``aliases`` are
not carried over. Field metadata parka sets: ``parka.int.unit`` on timestamp fields from
``*-millis``/``*-nanos``, so that plain ints given for them are scaled to microseconds, and
``parka.time.unit`` (``ms``, ``us``) on time fields, so that ``datetime.time`` values are
turned into that int.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import fastavro
import pyarrow as pa
from fastavro.schema import SchemaParseException, UnknownType

from parka.errors import SchemaError

__all__ = [
    "INT_UNIT_KEY",
    "RESERVED_PREFIX",
    "TIME_UNIT_KEY",
    "ParkaSchemaWarning",
    "child_fields",
    "is_message_class",
    "json_schema_to_arrow",
    "schema_fingerprint",
    "time_of_day_fields",
    "to_arrow_schema",
]

# Field metadata key: the unit of plain ints given for a timestamp column (see _int_unit).
INT_UNIT_KEY = b"parka.int.unit"
_INT_UNITS = {
    "timestamp-millis": b"ms",
    "local-timestamp-millis": b"ms",
    "timestamp-nanos": b"ns",
    "local-timestamp-nanos": b"ns",
}

# Field metadata key: an int column holding an Avro time of day, in this unit (ms or us).
TIME_UNIT_KEY = b"parka.time.unit"
_TIME_UNITS = {"time-millis": (b"ms", "int"), "time-micros": (b"us", "long")}

RESERVED_PREFIX = "__parka_"
"""Top-level column names starting with this are parka's own (see :mod:`parka.segment`)."""

_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}

# logical type -> (base Avro type it applies to, Arrow type)
_LOGICAL: dict[str, tuple[str, pa.DataType]] = {
    "date": ("int", pa.date32()),
    "time-millis": ("int", pa.int32()),
    "time-micros": ("long", pa.int64()),
    "timestamp-millis": ("long", pa.timestamp("us", tz="UTC")),
    "timestamp-micros": ("long", pa.timestamp("us", tz="UTC")),
    "timestamp-nanos": ("long", pa.timestamp("us", tz="UTC")),
    "local-timestamp-millis": ("long", pa.timestamp("us")),
    "local-timestamp-micros": ("long", pa.timestamp("us")),
    "local-timestamp-nanos": ("long", pa.timestamp("us")),
    "uuid": ("string", pa.string()),
}

_MAX_DECIMAL256_PRECISION = 76


def is_message_class(schema: Any) -> bool:
    """Whether ``schema`` is a generated Protobuf message class (:mod:`parka.protodecode` reads
    it; checked here without importing protobuf, whose extra may be missing)."""
    return isinstance(schema, type) and hasattr(schema, "DESCRIPTOR") and hasattr(schema, "FromString")


def to_arrow_schema(schema: str | Mapping[str, Any] | pa.Schema) -> pa.Schema:
    """Return the Arrow schema for ``schema``: an Avro record schema (JSON text or dict) or an Arrow schema.

    An Arrow schema is returned unchanged once its types are known to be supported.

    Raises:
        SchemaError: the schema is not valid Avro, its top level is not a record, a field name
            repeats or starts with ``__parka_``, or a type has no supported Arrow equivalent
            (``field`` is the dotted path of the culprit).
    """
    if isinstance(schema, pa.Schema):
        _check_fields(list(schema))
        for field in schema:
            _check_arrow_type(field.type, field.name)
        return schema
    schema = _document(schema, "an Avro record schema")
    try:
        parsed = fastavro.parse_schema(dict(schema))
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError) as exc:
        raise SchemaError(f"invalid Avro schema: {exc}") from exc
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SchemaError("the top level of an Avro schema must be a record")
    converter = _AvroConverter(parsed.get("__named_schemas", {}))
    fields = converter.record_fields(parsed, path="", defining=(parsed["name"],))
    _check_fields(fields)
    return pa.schema(fields)


def _document(schema: str | Mapping[str, Any], what: str) -> Mapping[str, Any]:
    """A schema document given as JSON text or as its parsed mapping, as a mapping.

    Raises:
        SchemaError: the text is not JSON, or the document is not an object (``what`` says
            which it must be).
    """
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"schema is not valid JSON: {exc}") from exc
    if not isinstance(schema, Mapping):
        raise SchemaError(f"schema must be {what}, got {type(schema).__name__}")
    return schema


def json_schema_to_arrow(schema: str | Mapping[str, Any]) -> pa.Schema:
    """Return the Arrow schema a JSON Schema document describes (JSON text or dict): what a topic
    of JSON values is read against (:class:`parka.rowdecode.JsonRows`).

    The top level is an ``object`` with ``properties``, one column each, in their order. Types:
    ``string`` to string (``format: date-time`` to a UTC microsecond timestamp; a ``date`` stays
    a string), ``integer`` to int64, ``number`` to float64, ``boolean`` to bool, ``object`` with
    ``properties`` to a struct, ``object`` with only ``additionalProperties`` (a schema) to a map
    of strings to it, ``array`` with ``items`` (one schema) to a list, a string ``enum`` to
    string. A property is non-nullable when ``required`` names it and it admits no ``null``;
    ``null`` is admitted by ``"type": [T, "null"]`` or ``anyOf``/``oneOf`` of one schema and
    ``{"type": "null"}``. ``$ref`` to ``#/definitions/...`` or ``#/$defs/...`` is followed.

    Raises:
        SchemaError: not valid JSON, a top level that is not an object with properties, or a
            type with no single Arrow equivalent: several non-null types, a union of schemas,
            a tuple of ``items``, an ``object`` with neither properties nor
            ``additionalProperties``, an external or recursive ``$ref`` (``field`` is the dotted
            path of the culprit).
    """
    schema = _document(schema, "a JSON Schema object")
    converter = _JsonSchemaConverter(schema)
    node, _ = converter.resolve(schema, "", ())
    if _json_types(node, "") != ["object"] or not isinstance(node.get("properties"), Mapping):
        raise SchemaError("the top level of a JSON Schema must be an object with properties")
    fields = converter.fields(node, "", ())
    _check_fields(fields)
    return pa.schema(fields)


def _json_types(node: Mapping[str, Any], path: str) -> list[str]:
    kind = node.get("type")
    if kind is None and "enum" in node:
        kind = "string" if all(isinstance(v, str) for v in node["enum"]) else None
    if kind is None and "properties" in node:
        kind = "object"
    if kind is None:
        raise SchemaError("no type (give 'type')", field=path or None)
    return [kind] if isinstance(kind, str) else list(kind)


class _JsonSchemaConverter:
    """Converts JSON Schema nodes, following local ``$ref``s (see :func:`json_schema_to_arrow`)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root

    def resolve(
        self, node: Mapping[str, Any], path: str, refs: tuple[str, ...]
    ) -> tuple[Mapping[str, Any], tuple[str, ...]]:
        """``node`` with its ``$ref`` followed (and the refs followed so far, for recursion)."""
        while "$ref" in node:
            ref = node["$ref"]
            prefix = next((p for p in ("#/definitions/", "#/$defs/") if ref.startswith(p)), None)
            if prefix is None:
                raise SchemaError(
                    f"$ref {ref!r}: only '#/definitions/...' and '#/$defs/...' are read", field=path or None
                )
            if ref in refs:
                raise SchemaError(f"$ref {ref!r} is recursive: an Arrow type cannot nest itself", field=path or None)
            target = self._root.get(prefix[2:-1], {}).get(ref[len(prefix) :])
            if not isinstance(target, Mapping):
                raise SchemaError(f"$ref {ref!r} names no definition", field=path or None)
            node, refs = target, (*refs, ref)
        return node, refs

    def fields(self, node: Mapping[str, Any], path: str, refs: tuple[str, ...]) -> list[pa.Field]:
        required = set(node.get("required", ()))
        out = []
        for name, child in node["properties"].items():
            child_path = f"{path}.{name}" if path else name
            arrow, nullable = self.type(child, child_path, refs)
            out.append(pa.field(name, arrow, nullable=nullable or name not in required))
        return out

    def type(self, node: Any, path: str, refs: tuple[str, ...]) -> tuple[pa.DataType, bool]:
        """The Arrow type of ``node`` and whether it admits ``null``."""
        if not isinstance(node, Mapping):
            raise SchemaError("a schema must be an object", field=path)
        node, refs = self.resolve(node, path, refs)
        for union in ("anyOf", "oneOf"):
            if union in node:
                options = [self.resolve(o, path, refs)[0] for o in node[union]]
                choices = [o for o in options if o.get("type") != "null"]
                if len(choices) != 1:
                    many = f"{union} of {len(choices)} non-null schemas"
                    raise SchemaError(f"{many} has no single Arrow type", field=path)
                arrow, _ = self.type(choices[0], path, refs)
                return arrow, len(choices) < len(options)
        kinds = _json_types(node, path)
        nullable = "null" in kinds
        real = [k for k in kinds if k != "null"]
        if len(real) != 1:
            raise SchemaError(f"types {real} have no single Arrow type", field=path)
        kind = real[0]
        if kind == "string":
            fmt = node.get("format")
            # a "date" stays text: the JSON reader takes dates as day numbers, not as JSON's text
            return (pa.timestamp("us", tz="UTC") if fmt == "date-time" else pa.string()), nullable
        scalar = {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}
        if kind in scalar:
            return scalar[kind], nullable
        if kind == "array":
            items = node.get("items")
            if not isinstance(items, Mapping):
                raise SchemaError("an array needs one 'items' schema (tuples have no Arrow type)", field=path)
            element, element_nullable = self.type(items, f"{path}[]", refs)
            return pa.list_(pa.field("element", element, nullable=element_nullable)), nullable
        if kind == "object":
            if isinstance(node.get("properties"), Mapping) and node["properties"]:
                return pa.struct(self.fields(node, path, refs)), nullable
            values = node.get("additionalProperties")
            if isinstance(values, Mapping):
                value, value_nullable = self.type(values, f"{path}{{}}", refs)
                return pa.map_(pa.string(), pa.field("value", value, nullable=value_nullable)), nullable
            raise SchemaError("an object needs 'properties' or an 'additionalProperties' schema", field=path)
        raise SchemaError(f"type {kind!r} has no Arrow equivalent", field=path)


def _check_fields(fields: list[pa.Field]) -> None:
    if not fields:
        raise SchemaError("schema has no fields")
    seen: set[str] = set()
    for field in fields:
        if field.name.startswith(RESERVED_PREFIX):
            raise SchemaError(f"names starting with '{RESERVED_PREFIX}' are reserved", field=field.name)
        if field.name in seen:
            raise SchemaError("duplicate field name", field=field.name)
        seen.add(field.name)


class _AvroConverter:
    """Converts parsed (``fastavro.parse_schema``) Avro types, resolving named-type references."""

    def __init__(self, named: Mapping[str, Any]) -> None:
        self._named = named

    def record_fields(self, record: Mapping[str, Any], path: str, defining: tuple[str, ...]) -> list[pa.Field]:
        fields = []
        seen: set[str] = set()
        for avro_field in record["fields"]:
            name = avro_field["name"]
            field_path = f"{path}.{name}" if path else name
            if name in seen:
                raise SchemaError("duplicate field name", field=field_path)
            seen.add(name)
            arrow_type, nullable = self.convert(avro_field["type"], field_path, defining)
            fields.append(pa.field(name, arrow_type, nullable=nullable, metadata=self._int_unit(avro_field["type"])))
        return fields

    def _int_unit(self, avro: Any) -> dict[bytes, bytes] | None:
        """Field metadata saying in which unit a plain int given for a timestamp is meant.

        Avro ``timestamp-millis`` values are epoch milliseconds; the Arrow column is in
        microseconds (Delta's unit), so the validator must scale ints, or they would land
        1000 times off. ``datetime`` values need no hint.
        """
        if isinstance(avro, list):
            non_null = [b for b in avro if b != "null"]
            avro = non_null[0] if len(non_null) == 1 else None
        if isinstance(avro, str):
            avro = self._named.get(avro)
        if not isinstance(avro, Mapping):
            return None
        if not isinstance(avro.get("type"), str):
            return self._int_unit(avro.get("type"))
        logical = str(avro.get("logicalType"))
        time_unit = _TIME_UNITS.get(logical)
        if time_unit is not None and avro.get("type") == time_unit[1]:
            return {TIME_UNIT_KEY: time_unit[0]}
        unit = _INT_UNITS.get(logical)
        return None if unit is None or avro.get("type") != "long" else {INT_UNIT_KEY: unit}

    def convert(self, avro: Any, path: str, defining: tuple[str, ...]) -> tuple[pa.DataType, bool]:
        """Return ``(arrow_type, nullable)`` for one Avro type."""
        if isinstance(avro, list):
            return self._union(avro, path, defining)
        return self._non_union(avro, path, defining), False

    def _union(self, branches: list[Any], path: str, defining: tuple[str, ...]) -> tuple[pa.DataType, bool]:
        non_null = [b for b in branches if b != "null"]
        if len(non_null) > 1:
            raise SchemaError(
                f"union of several non-null types {json.dumps(branches)} is not supported; "
                'only ["null", T] (an optional T) is',
                field=path,
            )
        if not non_null:
            raise SchemaError("a field that is always null has no Arrow or Delta type", field=path)
        return self._non_union(non_null[0], path, defining), len(non_null) < len(branches)

    def _non_union(self, avro: Any, path: str, defining: tuple[str, ...]) -> pa.DataType:
        if isinstance(avro, list):
            raise SchemaError("a union directly inside a union is not valid Avro", field=path)
        if isinstance(avro, str):
            if avro in _PRIMITIVES:
                return _PRIMITIVES[avro]
            if avro == "null":
                raise SchemaError("a field that is always null has no Arrow or Delta type", field=path)
            if avro not in self._named:
                raise SchemaError(f"unknown Avro type {avro!r}", field=path)
            avro = self._named[avro]
        if not isinstance(avro, Mapping):
            raise SchemaError(f"unexpected Avro type {avro!r}", field=path)
        kind = avro["type"]
        if not isinstance(kind, str):  # {"type": {...}}: a wrapped type
            return self._non_union(kind, path, defining)
        logical = avro.get("logicalType")
        if logical is not None:
            arrow_type = self._logical(avro, kind, logical, path)
            if arrow_type is not None:
                return arrow_type
        if kind == "record":
            name = avro["name"]
            if name in defining:
                raise SchemaError(f"recursive record {name!r} cannot be represented in Arrow", field=path)
            return pa.struct(self.record_fields(avro, path, (*defining, name)))
        if kind == "enum":
            return pa.string()
        if kind == "fixed":
            return pa.binary()
        if kind == "array":
            item_type, item_nullable = self.convert(avro["items"], f"{path}[]", defining)
            return pa.list_(pa.field("element", item_type, nullable=item_nullable))
        if kind == "map":
            value_type, value_nullable = self.convert(avro["values"], f"{path}{{}}", defining)
            return pa.map_(pa.string(), pa.field("value", value_type, nullable=value_nullable))
        return self._non_union(kind, path, defining)

    @staticmethod
    def _logical(avro: Mapping[str, Any], kind: str, logical: str, path: str) -> pa.DataType | None:
        """Arrow type of a logical type, or ``None`` to fall back to the base type (Avro spec)."""
        if logical == "decimal":
            if kind not in ("bytes", "fixed"):
                return None
            precision, scale = avro.get("precision"), avro.get("scale", 0)
            if not isinstance(precision, int) or not isinstance(scale, int):
                return None
            if not 0 <= scale <= precision or precision < 1:
                return None
            if precision > _MAX_DECIMAL256_PRECISION:
                raise SchemaError(
                    f"decimal precision {precision} exceeds the maximum of {_MAX_DECIMAL256_PRECISION}",
                    field=path,
                )
            if precision > 38:
                return pa.decimal256(precision, scale)
            return pa.decimal128(precision, scale)
        base, arrow_type = _LOGICAL.get(logical, (None, None))
        return arrow_type if base == kind else None


# Types an Arrow schema given by the user may contain (nested types are checked recursively).
_SUPPORTED_LEAVES = (
    pa.types.is_boolean,
    pa.types.is_integer,
    pa.types.is_float32,
    pa.types.is_float64,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_binary,
    pa.types.is_large_binary,
    pa.types.is_fixed_size_binary,
    pa.types.is_decimal,
    pa.types.is_date,
    pa.types.is_time,
    pa.types.is_timestamp,
)


def _check_arrow_type(arrow_type: pa.DataType, path: str) -> None:
    if isinstance(arrow_type, pa.ExtensionType):
        raise SchemaError(f"extension type {arrow_type} is not supported", field=path)
    if pa.types.is_dictionary(arrow_type):
        _check_arrow_type(arrow_type.value_type, path)
    elif pa.types.is_struct(arrow_type):
        if arrow_type.num_fields == 0:
            raise SchemaError("a struct needs at least one field", field=path)
        for child in arrow_type:
            _check_arrow_type(child.type, f"{path}.{child.name}")
    elif pa.types.is_map(arrow_type):
        _check_arrow_type(arrow_type.key_type, f"{path}{{key}}")
        _check_arrow_type(arrow_type.item_type, f"{path}{{}}")
    elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        _check_arrow_type(arrow_type.value_type, f"{path}[]")
    elif not any(check(arrow_type) for check in _SUPPORTED_LEAVES):
        raise SchemaError(f"Arrow type {arrow_type} is not supported", field=path)


def schema_fingerprint(schema: pa.Schema) -> str:
    """Return a stable 16-hex-digit fingerprint of the field names, types and nullability of ``schema``.

    Metadata and the names Arrow gives list items and map entries are ignored (Parquet renames
    them), field order is not. The canonical form is built here, so the fingerprint does not
    depend on the process or on the pyarrow version.
    """
    canonical = json.dumps([_canonical_field(f) for f in schema], separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _canonical_field(field: pa.Field) -> list[Any]:
    return [field.name, _canonical_type(field.type), field.nullable]


def _canonical_type(t: pa.DataType) -> Any:
    if pa.types.is_struct(t):
        return ["struct", [_canonical_field(child) for child in t]]
    if pa.types.is_map(t):
        return ["map", _canonical_type(t.key_type), _canonical_type(t.item_type), t.item_field.nullable]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        kind = "list" if pa.types.is_list(t) else "large_list"
        return [kind, _canonical_type(t.value_type), t.value_field.nullable]
    if pa.types.is_dictionary(t):
        return ["dictionary", _canonical_type(t.index_type), _canonical_type(t.value_type)]
    if pa.types.is_timestamp(t):
        return ["timestamp", t.unit, t.tz]
    if pa.types.is_time(t):
        return ["time", t.bit_width, t.unit]
    if pa.types.is_decimal(t):
        return ["decimal", t.bit_width, t.precision, t.scale]
    if pa.types.is_fixed_size_binary(t):
        return ["fixed_size_binary", t.byte_width]
    return str(t)


def child_fields(t: pa.DataType) -> list[pa.Field]:
    """The fields directly inside ``t``: a struct's fields, a list's item, a map's key and value."""
    t = t.storage_type if isinstance(t, pa.ExtensionType) else t
    if pa.types.is_struct(t):
        return list(t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_field]
    return [t.key_field, t.item_field] if pa.types.is_map(t) else []


class ParkaSchemaWarning(UserWarning):
    """A schema parka accepts for Kafka but that a Delta table cannot store as it is."""


def time_of_day_fields(schema: pa.Schema) -> list[str]:
    """Dotted paths of ``time32``/``time64`` columns: Delta Lake has no time-of-day type, so a
    topic with them can be produced and consumed, not ingested."""
    out: list[str] = []

    def visit(field: pa.Field, path: str) -> None:
        if pa.types.is_time(field.type):
            out.append(path)
        for child in child_fields(field.type):
            visit(child, f"{path}.{child.name}")

    for field in schema:
        visit(field, field.name)
    return out
