"""Kafka values in a row format decoded into Arrow in bulk: Confluent-framed Avro, and JSON.

A topic that holds Avro records from a schema registry carries each value as Confluent's
serializers frame it: the magic byte 0, the writer schema's registry id (4 bytes, big-endian),
then the record's Avro binary encoding (:func:`confluent_schema_id` reads the frame).
:class:`AvroRows` turns a batch of such bodies, all of one writer schema, into one Arrow table of
that schema's Arrow form (:func:`parka.schema.to_arrow_schema`, the mapping ``set_schema`` uses),
without a Python object per record on the common path:

* **In bulk** (polars, the ``rows`` extra): the bodies are laid end to end as the one block of an
  Avro object container file, whose header carries the writer schema, and polars' Avro reader
  (Rust) decodes the block into Arrow columns. Changes to the schema it is given, none of which
  changes the bytes a record is: a map is read as an array of ``{key, value}`` records (the
  two have the same binary encoding, and polars reads no maps), then rebuilt as an Arrow map;
  a named type's references are replaced by its definition (polars resolves none); and
  a ``long`` field is appended to every record, whose value (:data:`SENTINEL`) is written after
  each body. Avro has no record boundaries, so a body shorter or longer than its schema says
  would shift every record after it and still decode; with the sentinel after each body, such a
  shift reads a sentinel that is not :data:`SENTINEL`, and the batch goes the per-record way.
  Decimals are checked against their precision (Avro's bytes may hold more digits).
* **Per record** (fastavro and parka's record validator, :class:`parka.records.RecordConverter`),
  when the bulk path fails or polars is missing: each body is decoded on its own, must be read to
  its last byte, and its values are checked against the Arrow schema; a body that fails names
  its index in the batch and why (:attr:`parka.records.Conversion.bad`), and the others are the table.

:class:`ConfluentAvroRows` takes framed values of any writer schemas: it splits a batch into
runs of one schema id and decodes each with the :class:`AvroRows` of that id's writer schema,
fetched once per id (from the registry: :meth:`parka.registry.Registry.writer_avro`); a value
without the frame, or with an id the registry does not hold, is a bad value, and a registry that
cannot be reached is raised. :class:`ConfluentJsonRows` does the same for JSON values framed by
confluent-kafka's ``JSONSerializer``, each run read by the :class:`JsonRows` of its JSON Schema
(:meth:`parka.registry.Registry.writer_json_schema`).

:class:`JsonRows` reads JSON values (one object each, UTF-8) against an Arrow schema with
pyarrow's JSON reader, all of a batch at once; when that fails, each value alone with the same
reader, so that a value is read the same way whatever its neighbours are. What it takes per
type is pyarrow's: numbers for numeric columns (an integer must fit its column), strings for
string and binary columns (a binary value is the string's UTF-8 bytes), ISO-8601 strings for
timestamps (with a zone offset, converted to UTC), integer days since 1970-01-01 for dates,
numbers or strings for decimals, objects for records, arrays for lists; ``null`` or a missing
field for a nullable column. A field the schema does not have, or a missing non-nullable one,
makes the value bad. pyarrow's reader has no maps: a schema with a map is read value by value
(``json.loads``, then the record validator, which takes an object for a map). The Arrow schema
may come from a JSON Schema document (:func:`parka.schema.json_schema_to_arrow`), or be inferred
from a first batch and then fixed (:meth:`JsonRows.inferred`).

``benchmarks/row_decode.py`` measures both formats' paths side by side
(``benchmarks/results/2026-11-30-row-decode/``). ``parka ingest --value-format`` decodes a topic's
row records with these (``ops/row_values.py``, for both daemons).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import io
import itertools
import json
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from parka.errors import RecordError, RegistryError, SchemaError
from parka.records import Conversion, RecordConverter, _null_violation, struct_with_placeholders
from parka.schema import json_schema_to_arrow, to_arrow_schema

__all__ = [
    "SENTINEL",
    "AvroRows",
    "ConfluentAvroRows",
    "ConfluentJsonRows",
    "ConnectJsonRows",
    "JsonRows",
    "Run",
    "Runs",
    "avro_long",
    "confluent_schema_id",
    "connect_schema_to_arrow",
]

CONFLUENT_MAGIC = 0
_FRAME = struct.Struct(">bI")

# The value of the field appended to every record for the bulk read (see the module docstring):
# "PARKA" as a number, ten bytes as an Avro long, so that a shifted read matching it is unlikely
SENTINEL = 0x5041524B41
_SENTINEL_FIELD = "__parka_record_end"


def avro_long(n: int) -> bytes:
    """An Avro ``long``: zigzag, then a little-endian base-128 varint."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bytes(b: bytes) -> bytes:
    return avro_long(len(b)) + b


_SENTINEL_BYTES = avro_long(SENTINEL)


def confluent_schema_id(value: bytes | None) -> int | None:
    """The registry id in Confluent's frame of ``value``, or ``None`` when it is not one (no
    value, shorter than the frame, or a first byte other than the magic byte 0)."""
    if value is None or len(value) < _FRAME.size or value[0] != CONFLUENT_MAGIC:
        return None
    return int(_FRAME.unpack_from(value)[1])


@dataclass(frozen=True)
class Run:
    """Consecutive values of a batch with one writer schema id, decoded: ``schema`` is the Arrow
    form of that writer schema, ``table`` its good records, ``indexes`` the batch index of each of
    the table's rows."""

    schema_id: int
    schema: pa.Schema
    table: pa.Table
    indexes: list[int]


@dataclass(frozen=True)
class Runs:
    """A batch of Confluent-framed values decoded: its runs of one schema id, in batch order,
    and ``bad``, ``(index in the batch, error)`` of every value that is not in one."""

    runs: list[Run]
    bad: list[tuple[int, RecordError]]


class _FramedRows:
    """Decoder of Confluent-framed values of any writer schemas, one format: a batch is split
    into runs of one schema id, each decoded by the decoder a subclass's ``_make`` builds from that
    id's writer schema (``writer_schema``: id -> schema text), made once per id.

    A value without the frame, or whose id the registry does not hold (HTTP 404), is a bad value
    (the input's fault); any other registry failure is raised (:class:`~parka.errors.RegistryError`:
    an outage is not the data's fault, and nothing may be dead-lettered for it).
    """

    format_name = ""

    def __init__(self, writer_schema: Callable[[int], str]) -> None:
        self._writer_schema = writer_schema
        self._decoders: dict[int, AvroRows | JsonRows | RecordError] = {}

    def _make(self, schema_text: str) -> AvroRows | JsonRows:
        raise NotImplementedError

    def decode(self, values: Sequence[bytes | None]) -> Runs:
        runs: list[Run] = []
        bad: list[tuple[int, RecordError]] = []
        at = 0
        for schema_id, group in itertools.groupby(values, key=confluent_schema_id):
            run = list(group)
            start, at = at, at + len(run)
            if schema_id is None:
                bad.extend((start + i, self._unframed(v)) for i, v in enumerate(run))
                continue
            decoder = self._decoder(schema_id)
            if isinstance(decoder, RecordError):
                bad.extend((i, decoder) for i in range(start, at))
                continue
            conversion = decoder.decode([v[_FRAME.size :] for v in run if v is not None])  # framed: never None
            bad.extend((start + i, error) for i, error in conversion.bad)
            if conversion.table.num_rows:
                kept = conversion.kept if conversion.kept is not None else range(len(run))
                runs.append(Run(schema_id, decoder.schema, conversion.table, [start + i for i in kept]))
        bad.sort(key=lambda item: item[0])
        return Runs(runs, bad)

    def _decoder(self, schema_id: int) -> AvroRows | JsonRows | RecordError:
        known = self._decoders.get(schema_id)
        if known is None:
            try:
                known = self._make(self._writer_schema(schema_id))
            except RegistryError as exc:
                if exc.http_status != 404:
                    raise
                known = RecordError(f"schema id {schema_id} is not in the registry: {exc}")
            except SchemaError as exc:
                known = RecordError(f"schema id {schema_id}'s writer schema has no Arrow form: {exc}")
            self._decoders[schema_id] = known
        return known

    def _unframed(self, value: bytes | None) -> RecordError:
        what = f"Confluent-framed {self.format_name}"
        if value is None:
            return RecordError(f"no value: not a {what} record")
        return RecordError(f"not {what} (magic byte 0, then a 4-byte schema id): starts {value[:5]!r}")


class ConfluentAvroRows(_FramedRows):
    """Confluent-framed Avro values of any writer schemas (see :class:`_FramedRows`), each run
    decoded by the :class:`AvroRows` of its writer schema
    (:meth:`parka.registry.Registry.writer_avro` gives the schemas)."""

    format_name = "Avro"

    def _make(self, schema_text: str) -> AvroRows:
        return AvroRows(schema_text)


class ConfluentJsonRows(_FramedRows):
    """Confluent-framed JSON values (confluent-kafka's ``JSONSerializer``: the frame, then the JSON
    text) of any writer schemas (see :class:`_FramedRows`), each run read by the :class:`JsonRows`
    of its JSON Schema's Arrow form (:func:`parka.schema.json_schema_to_arrow`;
    :meth:`parka.registry.Registry.writer_json_schema` gives the schemas)."""

    format_name = "JSON"

    def _make(self, schema_text: str) -> JsonRows:
        return JsonRows(json_schema_to_arrow(schema_text))


class ConnectJsonRows:
    """JSON values as Kafka Connect's ``JsonConverter`` writes them with ``schemas.enable=true``
    (Debezium's JSON, for one): each value is ``{"schema": <a Connect schema>, "payload": <the
    record>}``. A batch is split into runs of one schema (its text), and each run's payloads are
    read by the :class:`JsonRows` of the schema's Arrow form (:func:`connect_schema_to_arrow`), in
    bulk; then the Connect logical types are made their Arrow types (``Timestamp`` and Debezium's
    ``Timestamp``/``MicroTimestamp``/``NanoTimestamp`` to UTC timestamps, ``Date`` to dates,
    ``Decimal`` from its base64 bytes to decimals, ``bytes`` from base64 to binary).

    The converter writes ``{"schema":...,"payload":...}`` without spaces, schema first: the
    payload is cut from the value's text at the first ``,"payload":``; a value of another form is
    parsed whole (``json.loads``) and its payload written again. A value that is not an object
    with a schema and a payload, or whose schema has no Arrow form, is a bad value, named.
    """

    _HEAD = b'{"schema":'
    _CUT = b',"payload":'

    def __init__(self) -> None:
        self._decoders: dict[bytes, tuple[JsonRows, pa.Schema, Callable[[pa.Table], pa.Table]] | RecordError] = {}

    def decode(self, values: Sequence[bytes | None]) -> Runs:
        split = [self._split(v) for v in values]
        runs: list[Run] = []
        bad: list[tuple[int, RecordError]] = []
        at = 0
        for schema_text, group in itertools.groupby(split, key=lambda x: x[0]):
            parts = list(group)
            start, at = at, at + len(parts)
            if schema_text is None:  # not a Connect value: each says why
                bad.extend((start + i, RecordError(str(why))) for i, (_, why) in enumerate(parts))
                continue
            decoder = self._decoder(schema_text)
            if isinstance(decoder, RecordError):
                bad.extend((i, decoder) for i in range(start, at))
                continue
            rows, schema, logical = decoder
            payloads: list[bytes] = [payload for _, payload in parts]
            conversion = rows.decode(payloads)
            bad.extend((start + i, error) for i, error in conversion.bad)
            if not conversion.table.num_rows:
                continue
            kept = list(conversion.kept if conversion.kept is not None else range(len(parts)))
            try:
                table = logical(conversion.table)
            except (ValueError, pa.ArrowException):  # one value at a time, to name the bad ones
                tables = []
                for i, row in zip(list(kept), conversion.table.to_batches(max_chunksize=1), strict=True):
                    try:
                        tables.append(logical(pa.Table.from_batches([row])))
                    except (ValueError, pa.ArrowException) as exc:
                        bad.append((start + i, RecordError(f"a value its Connect schema does not allow: {exc}")))
                        kept.remove(i)
                if not tables:
                    continue
                table = pa.concat_tables(tables)
            runs.append(Run(0, schema, table, [start + i for i in kept]))
        bad.sort(key=lambda item: item[0])
        return Runs(runs, bad)

    def _split(self, value: bytes | None) -> tuple[bytes | None, Any]:
        """``(schema text, payload text)``, or ``(None, why)`` for a value of another form."""
        if value is None:
            return None, "no value: not a Kafka Connect JSON record"
        if value.startswith(self._HEAD) and value.endswith(b"}"):
            cut = value.find(self._CUT)
            if cut > 0:
                return value[len(self._HEAD) : cut], value[cut + len(self._CUT) : -1]
        try:
            whole = json.loads(value)
        except ValueError as exc:
            return None, f"not one JSON object: {exc}"
        if not isinstance(whole, dict) or set(whole) != {"schema", "payload"}:
            return None, 'not a Kafka Connect JSON record ({"schema": ..., "payload": ...}; schemas.enable=true)'
        schema = json.dumps(whole["schema"], separators=(",", ":")).encode()
        return schema, json.dumps(whole["payload"], separators=(",", ":")).encode()

    def _decoder(self, schema_text: bytes) -> tuple[JsonRows, pa.Schema, Callable[[pa.Table], pa.Table]] | RecordError:
        known = self._decoders.get(schema_text)
        if known is None:
            try:
                connect = json.loads(schema_text)
                schema = connect_schema_to_arrow(connect)
                read = pa.schema([pa.field(f.name, _connect_read_type(f.type), f.nullable) for f in schema])
                known = (JsonRows(read), schema, functools.partial(_connect_logical, schema=schema))
            except (ValueError, SchemaError) as exc:
                known = RecordError(f"its Connect schema has no Arrow form: {exc}")
            self._decoders[schema_text] = known
        return known


_CONNECT_TIMESTAMPS = {
    "org.apache.kafka.connect.data.Timestamp": "ms",
    "io.debezium.time.Timestamp": "ms",
    "io.debezium.time.MicroTimestamp": "us",
    "io.debezium.time.NanoTimestamp": "ns",
}
_CONNECT_PRIMITIVES = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}


def connect_schema_to_arrow(schema: Mapping[str, Any]) -> pa.Schema:
    """A Kafka Connect schema (``JsonConverter``'s JSON form) of a struct as an Arrow schema: its
    types as Arrow's (``optional`` fields nullable), its logical types as named in
    :class:`ConnectJsonRows`; a map must have string keys (a JSON object).

    Raises:
        SchemaError: not a struct, or a type it does not know.
    """
    if schema.get("type") != "struct":
        raise SchemaError(f"a record's Connect schema is a struct, not {schema.get('type')!r}")
    return pa.schema(_connect_field(f) for f in schema.get("fields", []))


def _connect_field(field: Mapping[str, Any]) -> pa.Field:
    name = field.get("field")
    if not isinstance(name, str):
        raise SchemaError(f"a Connect struct field without a name: {json.dumps(field)[:200]}")
    return pa.field(name, _connect_type(field, name), nullable=bool(field.get("optional", False)))


def _connect_type(schema: Mapping[str, Any], path: str) -> pa.DataType:
    kind, logical = schema.get("type"), schema.get("name")
    if logical in _CONNECT_TIMESTAMPS and kind == "int64":
        return pa.timestamp(_CONNECT_TIMESTAMPS[logical], tz="UTC")
    if logical in ("org.apache.kafka.connect.data.Date", "io.debezium.time.Date") and kind == "int32":
        return pa.date32()
    if logical == "org.apache.kafka.connect.data.Decimal" and kind == "bytes":
        parameters = schema.get("parameters") or {}
        scale = int(parameters.get("scale", 0))
        precision = int(parameters.get("connect.decimal.precision", 38))
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if kind == "struct":
        return pa.struct([_connect_field(f) for f in schema.get("fields", [])])
    if kind == "array":
        return pa.list_(_connect_type(schema["items"], f"{path}[]"))
    if kind == "map":
        if (schema.get("keys") or {}).get("type") != "string":
            raise SchemaError("a map's keys must be strings (JsonConverter writes others as arrays)", field=path)
        return pa.map_(pa.string(), _connect_type(schema["values"], f"{path}{{}}"))
    if kind in _CONNECT_PRIMITIVES:
        return _CONNECT_PRIMITIVES[kind]
    raise SchemaError(f"a Connect type parka does not know: {kind!r} ({logical!r})", field=path)


def _connect_read_type(t: pa.DataType) -> pa.DataType:
    """The type the JSON text of a value of Arrow type ``t`` is read as: a timestamp or date as
    its integer, a decimal and binary as their base64 text; containers alike."""
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_date(t):
        return pa.int32()
    if pa.types.is_decimal(t) or pa.types.is_binary(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _connect_read_type(f.type), f.nullable) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_connect_read_type(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _connect_read_type(t.item_type))
    return t


def _connect_logical(table: pa.Table, *, schema: pa.Schema) -> pa.Table:
    """``table`` (read with :func:`_connect_read_type`'s types) with ``schema``'s types."""
    columns = [_connect_array(c.combine_chunks(), f.type) for c, f in zip(table.columns, schema, strict=True)]
    return pa.Table.from_arrays(columns, schema=schema)


def _relaxed(t: pa.DataType) -> pa.DataType:
    """``t`` with every field inside a struct nullable, at any depth."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _relaxed(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _relaxed(t.value_type), t.value_field.nullable))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _relaxed(t.item_type))
    return t


def _nested_nulls(array: pa.Array, t: pa.DataType, path: str) -> pa.Array:
    """``array``, read with :func:`_relaxed`'s types, as type ``t``: placeholders under null structs
    for the fields that may not be null (:func:`parka.records.struct_with_placeholders`).

    Raises:
        ValueError: such a field is null where its struct is there, naming it.
    """
    if array.type == t:
        return array
    mask = pc.is_null(array) if array.null_count else None
    if pa.types.is_struct(t):
        children = [_nested_nulls(array.field(f.name), f.type, f"{path}.{f.name}") for f in t]
        return _checked_struct(children, t, mask, path)
    if pa.types.is_list(t):
        offsets, values = _list_parts(array)
        return pa.ListArray.from_arrays(offsets, _nested_nulls(values, t.value_type, f"{path}[]"), type=t, mask=mask)
    if pa.types.is_map(t):
        offsets, entries = _list_parts(array)
        items = _nested_nulls(entries.field("value"), t.item_type, f"{path}{{}}")
        return pa.MapArray.from_arrays(offsets, entries.field("key"), items, type=t, mask=mask)
    return array


def _checked_struct(children: list[pa.Array], t: pa.DataType, mask: pa.Array | None, path: str) -> pa.Array:
    """A struct array of ``children``, null where ``mask`` says, with placeholders under the null
    structs; a field that may not be null and is, where its struct is there, raises ValueError."""
    for child, f in zip(children, t, strict=True):
        if f.nullable or not child.null_count:
            continue
        if mask is None or pc.any(pc.and_not(child.is_null(), mask)).as_py():  # under a struct that is there
            where = f"{path}.{f.name}" if path else f.name
            raise ValueError(f"field {where!r}: null where the schema allows none")
    return struct_with_placeholders(children, t, mask)


def _connect_decimal(text: str, scale: int) -> decimal.Decimal:
    """A Connect ``Decimal``: the unscaled value's big-endian two's complement bytes, in base64."""
    return decimal.Decimal(int.from_bytes(base64.b64decode(text), "big", signed=True)).scaleb(-scale)


def _connect_array(array: pa.Array, t: pa.DataType) -> pa.Array:
    if array.type == t:
        return array
    mask = pc.is_null(array) if array.null_count else None
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return array.view(t) if not pa.types.is_date(t) else array.cast(pa.int32()).view(t)
    if pa.types.is_binary(t):
        return pa.array([None if v is None else base64.b64decode(v) for v in array.to_pylist()], t)
    if pa.types.is_decimal(t):
        return pa.array([None if v is None else _connect_decimal(v, t.scale) for v in array.to_pylist()], t)
    if pa.types.is_struct(t):
        return _checked_struct([_connect_array(array.field(f.name), f.type) for f in t], t, mask, "")
    if pa.types.is_list(t):
        offsets, values = _list_parts(array)
        return pa.ListArray.from_arrays(offsets, _connect_array(values, t.value_type), type=t, mask=mask)
    if pa.types.is_map(t):
        offsets, entries = _list_parts(array)
        items = _connect_array(entries.field("value"), t.item_type)
        return pa.MapArray.from_arrays(offsets, entries.field("key"), items, type=t, mask=mask)
    return array.cast(t)


class _BulkFailed(Exception):
    """The bulk path could not decode this batch; the per-record path decides."""


class AvroRows:
    """Decoder of Avro bodies (without Confluent's frame) of one writer schema.

    Raises:
        SchemaError: the writer schema has no Arrow form (:func:`parka.schema.to_arrow_schema`).
    """

    def __init__(self, writer_schema: str | Mapping[str, Any]) -> None:
        schema = json.loads(writer_schema) if isinstance(writer_schema, str) else dict(writer_schema)
        self.schema: pa.Schema = to_arrow_schema(schema)
        self._parsed = fastavro.parse_schema(schema)
        self._converter = RecordConverter(self.schema)
        expanded = fastavro.schema.expand_schema(schema)
        if not isinstance(expanded, Mapping):
            raise SchemaError(f"a writer schema of records is a record, not {json.dumps(schema)[:200]}")
        bulk = _BulkSchema().record(expanded)
        bulk["fields"] = [*bulk["fields"], {"name": _SENTINEL_FIELD, "type": "long"}]
        meta = avro_long(2) + _bytes(b"avro.schema") + _bytes(json.dumps(bulk).encode())
        self._header = b"Obj\x01" + meta + _bytes(b"avro.codec") + _bytes(b"null") + avro_long(0)
        # why the bulk path is off for this schema (polars missing, or a type it reads otherwise)
        self.bulk_off: str | None = None

    def decode(self, bodies: Sequence[bytes]) -> Conversion:
        """The records of ``bodies`` (each one record's Avro binary encoding); never raises for a
        bad body (see :attr:`parka.records.Conversion.bad`)."""
        if not bodies:
            return Conversion(self.schema.empty_table(), [], None)
        if self.bulk_off is None:
            try:
                return Conversion(self._bulk(bodies), [], None)
            except _BulkFailed as exc:
                decoded = self._per_record(bodies)
                if not decoded.bad:
                    # every record is good, so the bulk path failed for the schema, not the data
                    self.bulk_off = str(exc)
                return decoded
        return self._per_record(bodies)

    def _bulk(self, bodies: Sequence[bytes]) -> pa.Table:
        try:
            import polars as pl
        except ImportError:
            raise _BulkFailed("polars is not installed (the rows extra)") from None
        block = _SENTINEL_BYTES.join(bodies) + _SENTINEL_BYTES
        sync = os.urandom(16)
        data = b"".join((self._header, sync, avro_long(len(bodies)), avro_long(len(block)), block, sync))
        try:
            table = pl.read_avro(io.BytesIO(data)).to_arrow()
        except BaseException as exc:  # polars raises a PanicException (a BaseException) on what it cannot read
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise _BulkFailed(f"polars: {type(exc).__name__}: {str(exc)[:200]}") from None
        if table.num_rows != len(bodies):
            raise _BulkFailed(f"{table.num_rows} records read from {len(bodies)} bodies")
        ends = table.column(_SENTINEL_FIELD)
        if ends.null_count or not pc.all(pc.equal(ends, SENTINEL)).as_py():
            raise _BulkFailed("a body is not one record of the writer schema")
        try:
            columns = [_conform(table.column(f.name).combine_chunks(), f.type, f.name) for f in self.schema]
        except (pa.ArrowException, _BulkFailed) as exc:
            raise _BulkFailed(f"converting polars' columns: {exc}") from None
        for column, field in zip(columns, self.schema, strict=True):
            if _holds(field.type, pa.types.is_decimal):
                # Avro's bytes may hold more digits than the precision; polars does not check
                try:
                    column.validate(full=True)
                except pa.ArrowInvalid as exc:
                    raise _BulkFailed(f"{field.name}: {exc}") from None
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _per_record(self, bodies: Sequence[bytes]) -> Conversion:
        records: list[Mapping[str, Any]] = []
        where: list[int] = []
        bad: list[tuple[int, RecordError]] = []
        read = fastavro.schemaless_reader
        for index, body in enumerate(bodies):
            stream = io.BytesIO(body)
            try:
                record = read(stream, self._parsed, None)
            except Exception as exc:  # fastavro raises what its reads raise: EOFError, ValueError...
                bad.append((index, RecordError(f"not a record of the writer schema: {type(exc).__name__}: {exc}")))
                continue
            if stream.tell() != len(body):
                extra = len(body) - stream.tell()
                bad.append((index, RecordError(f"{extra} byte(s) after the record: not a record of the writer schema")))
                continue
            if not isinstance(record, Mapping):
                bad.append((index, RecordError(f"decodes to {type(record).__name__}, not a record")))
                continue
            records.append(record)
            where.append(index)
        return _converted(self._converter, records, where, bad)


def _is_json_object(value: bytes) -> bool:
    try:
        return isinstance(json.loads(value), dict)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False


class JsonRows:
    """Decoder of JSON values against the Arrow ``schema`` (see the module docstring)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._by_value = any(_holds(f.type, pa.types.is_map) for f in schema)
        self._fix = _json_fix(pa.struct(list(schema)))
        self._converter = RecordConverter(schema)
        # pyarrow's reader refuses a null struct whose fields may not be null: it reads every
        # field inside a struct as nullable, and the placeholders go in after (_nested_nulls)
        read = pa.schema([pa.field(f.name, _relaxed(f.type), f.nullable) for f in schema])
        self._relaxed = None if read == schema else read
        self._options = pa_json.ParseOptions(explicit_schema=read, unexpected_field_behavior="error")
        self._multiline = pa_json.ParseOptions(
            explicit_schema=read, unexpected_field_behavior="error", newlines_in_values=True
        )

    @classmethod
    def inferred(cls, values: Sequence[bytes]) -> JsonRows:
        """A decoder whose schema is the one pyarrow's JSON reader infers from ``values`` (a first
        batch), every field nullable and every timestamp in UTC microseconds (the reader infers
        seconds, which would refuse a later value's fractions; a time without an offset is read as
        UTC), then fixed: a later value with a field the first batch did not have, or of another
        type, is a bad value, named.

        Raises:
            SchemaError: the values are not read as JSON objects, or a field is null in all of
                them (no type to infer: declare the schema), or an inferred type is not one
                parka stores.
        """
        if not values:
            raise SchemaError("no values to infer a schema from")
        options = pa_json.ParseOptions(newlines_in_values=True)
        try:
            table = pa_json.read_json(pa.BufferReader(b"\n".join(values)), parse_options=options)
        except (pa.ArrowException, UnicodeDecodeError) as exc:
            # a bad value among them: inferred from the JSON objects alone (the others are
            # refused by decode, each named), not every value refused for one
            objects = [v for v in values if _is_json_object(v)]
            if not objects:
                raise SchemaError(f"none of the first {len(values)} value(s) is a JSON object: {exc}") from None
            try:
                table = pa_json.read_json(pa.BufferReader(b"\n".join(objects)), parse_options=options)
            except (pa.ArrowException, UnicodeDecodeError) as again:
                raise SchemaError(f"the first {len(values)} value(s) are not read as JSON objects: {again}") from None
        fields = []
        for field in table.schema:
            if _holds(field.type, pa.types.is_null):
                raise SchemaError("null in every value of the first batch: no type to infer", field=field.name)
            fields.append(pa.field(field.name, _in_utc_microseconds(field.type)))
        return cls(to_arrow_schema(pa.schema(fields)))

    def decode(self, values: Sequence[bytes]) -> Conversion:
        """The records of ``values``; never raises for a bad value (see :attr:`parka.records.Conversion.bad`)."""
        if not values:
            return Conversion(self.schema.empty_table(), [], None)
        if self._by_value:
            return self._loads(values)
        try:
            return Conversion(self._read(values), [], None)
        except _BulkFailed:
            return self._each(values)

    def _each(self, values: Sequence[bytes]) -> Conversion:
        """The bad values found by halving: a half that reads in bulk is good, a half that does
        not is halved again, down to single values, each then read as in bulk (a reader call
        per value costs some 300 µs, so one bad value in 10,000 costs some 30 bulk reads, not
        10,000 single ones)."""
        tables: list[pa.Table] = []
        kept: list[int] = []
        bad: list[tuple[int, RecordError]] = []
        pending = [(0, len(values))]
        while pending:
            first, end = pending.pop()
            try:
                tables.append(self._read(values[first:end]))
            except _BulkFailed as exc:
                if end - first == 1:
                    bad.append((first, RecordError(self._name_fields(values[first], str(exc)))))
                    continue
                middle = (first + end) // 2
                pending += [(middle, end), (first, middle)]  # the first half next: batch order kept
                continue
            kept.extend(range(first, end))
        table = pa.concat_tables(tables) if tables else self.schema.empty_table()
        return Conversion(table, bad, kept if bad else None)

    def _read(self, values: Sequence[bytes]) -> pa.Table:
        data = b"\n".join(values)
        options = self._options if data.count(b"\n") == len(values) - 1 else self._multiline
        try:
            table = pa_json.read_json(pa.BufferReader(data), parse_options=options)
        except (pa.ArrowException, UnicodeDecodeError) as exc:
            raise _BulkFailed(str(exc)) from None
        if table.num_rows != len(values):
            raise _BulkFailed(f"{table.num_rows} objects in {len(values)} value(s): each value must be one JSON object")
        table = table.combine_chunks()
        for column, field in zip(table.columns, self.schema, strict=True):
            # the reader takes null for a non-nullable field, and gives every field as nullable
            if _null_violation(column.chunk(0), field, None):  # one chunk: num_rows >= 1, combined
                raise _BulkFailed(f"{field.name}: null where the schema allows none")
            if _holds(field.type, _is_text):
                # the reader copies a string's bytes without checking that they are UTF-8
                try:
                    column.validate(full=True)
                except pa.ArrowInvalid as exc:
                    raise _BulkFailed(f"{field.name}: {exc}") from None
        columns = table.columns
        if self._relaxed is not None:
            try:
                columns = [_nested_nulls(c.chunk(0), f.type, f.name) for c, f in zip(columns, self.schema, strict=True)]
            except ValueError as exc:
                raise _BulkFailed(str(exc)) from None
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _name_fields(self, value: bytes, reason: str) -> str:
        """pyarrow's reason, with the top-level fields to blame when it names none."""
        try:
            record = json.loads(value)
        except ValueError as exc:  # UnicodeDecodeError included
            return f"{reason} (not one JSON object: {exc})"
        if not isinstance(record, dict):
            return f"{reason} (a JSON {type(record).__name__}, not an object)"
        unknown = sorted(set(record) - set(self.schema.names))
        missing = [f.name for f in self.schema if not f.nullable and record.get(f.name) is None]
        if unknown:
            reason += f" (field(s) the schema does not have: {', '.join(unknown)})"
        if missing:
            reason += f" (non-nullable field(s) missing or null: {', '.join(missing)})"
        return reason

    def _loads(self, values: Sequence[bytes]) -> Conversion:
        records: list[Mapping[str, Any]] = []
        where: list[int] = []
        bad: list[tuple[int, RecordError]] = []
        for index, value in enumerate(values):
            try:
                record = json.loads(value)
            except ValueError as exc:
                bad.append((index, RecordError(f"not one JSON object: {exc}")))
                continue
            if not isinstance(record, dict):
                bad.append((index, RecordError(f"a JSON {type(record).__name__}, not an object")))
                continue
            try:
                records.append(record if self._fix is None else self._fix(record))
            except ValueError as exc:
                bad.append((index, RecordError(str(exc))))
                continue
            where.append(index)
        return _converted(self._converter, records, where, bad)


_EPOCH = dt.date(1970, 1, 1)


_Fix = Callable[[Any], Any]


def _in_utc_microseconds(t: pa.DataType) -> pa.DataType:
    """``t`` with each timestamp in it, at any depth, made ``timestamp[us, UTC]`` (an inferred
    schema's: :meth:`JsonRows.inferred`)."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _in_utc_microseconds(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _in_utc_microseconds(f.type)) for f in t])
    return t


def _json_fix(t: pa.DataType, path: str = "") -> _Fix | None:
    """What turns a value ``json.loads`` gave into what the record validator takes for the Arrow
    type ``t``, where JSON has no such type: the forms pyarrow's JSON reader reads (ISO-8601 text
    for a timestamp, days since 1970-01-01 for a date, text for binary and decimals). ``None``
    when nothing inside ``t`` needs it; made once per schema. A value of the wrong kind is left
    as it is, for the validator to name."""
    if pa.types.is_struct(t):
        fixes = {f.name: fix for f in t if (fix := _json_fix(f.type, f"{path}.{f.name}" if path else f.name))}
        if not fixes:
            return None

        def struct(value: Any) -> Any:
            if not isinstance(value, dict):
                return value
            out = dict(value)
            for name, fix in fixes.items():
                item = out.get(name)
                if item is not None:
                    out[name] = fix(item)
            return out

        return struct
    if pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        is_map = pa.types.is_map(t)
        inner = _json_fix(t.item_type if is_map else t.value_type, f"{path}{{}}" if is_map else f"{path}[]")
        if inner is None:
            return None
        if is_map:
            return lambda v: (
                {k: inner(x) if x is not None else None for k, x in v.items()} if isinstance(v, dict) else v
            )
        return lambda v: [inner(x) if x is not None else None for x in v] if isinstance(v, list) else v
    if pa.types.is_timestamp(t):
        return functools.partial(_timestamp, aware=t.tz is not None, path=path)
    if pa.types.is_date(t):
        return lambda v: _EPOCH + dt.timedelta(days=v) if isinstance(v, int) and not isinstance(v, bool) else v
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return lambda v: v.encode() if isinstance(v, str) else v
    if pa.types.is_decimal(t):
        return functools.partial(_decimal, path=path)
    return None


def _timestamp(value: Any, *, aware: bool, path: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        stamp = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"field {path!r}: {value!r} is not an ISO-8601 timestamp") from None
    if aware and stamp.tzinfo is None:
        return stamp.replace(tzinfo=dt.timezone.utc)
    if not aware and stamp.tzinfo is not None:
        return stamp.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return stamp


def _decimal(value: Any, *, path: str) -> Any:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return value
    try:
        return decimal.Decimal(str(value))
    except decimal.InvalidOperation:
        raise ValueError(f"field {path!r}: {value!r} is not a decimal") from None


def _converted(
    converter: RecordConverter, records: list[Mapping[str, Any]], where: list[int], bad: list[tuple[int, RecordError]]
) -> Conversion:
    """``records`` (batch indexes ``where``) through the record validator, the values already
    found bad (``bad``) merged with the ones it refuses."""
    conversion = converter.convert(records)
    bad.extend((where[i], error) for i, error in conversion.bad)
    bad.sort(key=lambda item: item[0])
    if not bad:
        return Conversion(conversion.table, [], None)
    kept = [where[i] for i in (conversion.kept if conversion.kept is not None else range(len(where)))]
    return Conversion(conversion.table, bad, kept)


class _BulkSchema:
    """The writer schema as the bulk read takes it, from its expanded form (every reference to a
    named type replaced by its definition, which polars' reader needs): every map an array of
    ``{key, value}`` records, and every named type a name of its own (``parka_<n>``), since an
    expanded schema defines a type once per use. Names are not part of the binary encoding."""

    def __init__(self) -> None:
        self._names = 0

    def _name(self) -> str:
        self._names += 1
        return f"parka_{self._names}"

    def record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        fields = [{"name": f["name"], "type": self.type(f["type"])} for f in record["fields"]]
        return {"type": "record", "name": self._name(), "fields": fields}

    def type(self, avro: Any) -> Any:
        if isinstance(avro, list):
            return [self.type(branch) for branch in avro]
        if not isinstance(avro, Mapping):
            return avro  # a primitive
        kind = avro.get("type")
        if kind == "map":
            fields = [{"name": "key", "type": "string"}, {"name": "value", "type": self.type(avro["values"])}]
            return {"type": "array", "items": {"type": "record", "name": self._name(), "fields": fields}}
        if kind == "record":
            return self.record(avro)
        if kind == "array":
            return {**avro, "items": self.type(avro["items"])}
        if kind in ("enum", "fixed"):
            return {**avro, "name": self._name(), "namespace": ""}
        if isinstance(kind, (Mapping, list)):
            return {**avro, "type": self.type(kind)}
        return avro


def _conform(array: pa.Array, target: pa.DataType, path: str) -> pa.Array:
    """``array`` (as polars' reader gives it) as the Arrow type ``target``."""
    source = array.type
    if source == target:
        return array
    mask = pc.is_null(array) if array.null_count else None
    if pa.types.is_map(target):
        if not (pa.types.is_list(source) or pa.types.is_large_list(source)):
            raise _BulkFailed(f"{path}: a map read as {source}")
        offsets, entries = _list_parts(array)
        keys = _conform(entries.field("key"), target.key_type, f"{path}{{}}")
        items = _conform(entries.field("value"), target.item_type, f"{path}{{}}")
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    if pa.types.is_struct(target):
        if not pa.types.is_struct(source):
            raise _BulkFailed(f"{path}: a record read as {source}")
        children = [_conform(array.field(f.name), f.type, f"{path}.{f.name}") for f in target]
        return struct_with_placeholders(children, target, mask)
    if pa.types.is_list(target):
        if not (pa.types.is_list(source) or pa.types.is_large_list(source)):
            raise _BulkFailed(f"{path}: an array read as {source}")
        offsets, values = _list_parts(array)
        return pa.ListArray.from_arrays(
            offsets, _conform(values, target.value_type, f"{path}[]"), type=target, mask=mask
        )
    if pa.types.is_integer(target) and pa.types.is_time(source):
        unit = "ms" if target.bit_width == 32 else "us"
        return array.cast(pa.time32(unit) if unit == "ms" else pa.time64(unit)).view(target)
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(source):
        # nanoseconds to Delta's microseconds, as the per-record path scales a nanos int
        return pc.cast(array, target, safe=False)
    return pc.cast(array, target)


def _holds(t: pa.DataType, kind: Callable[[pa.DataType], bool]) -> bool:
    """Whether ``t`` or a type inside it is of ``kind``."""
    return kind(t) or any(_holds(t.field(i).type, kind) for i in range(t.num_fields))


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _list_parts(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    """A list array's offsets (int32, from 0) and the values they index, for this array's own
    slice of its child."""
    offsets = array.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    values = array.values.slice(first, last - first)
    if first:
        offsets = pc.subtract(offsets, first)
    return offsets.cast(pa.int32()), values
