"""Kafka rows in, records out, all in Arrow: the part of the Spark decoder that runs in the Python
workers. No pyspark here (it is tested without Spark); :mod:`._reader` hands
:meth:`SegmentDecoder.__call__` to ``DataFrame.mapInArrow``.

A batch of Kafka rows (``value``, ``headers``, ``topic``, ``partition``, ``offset``,
``timestamp``; one row is one segment) becomes one Arrow record batch per segment, shaped to
:attr:`SegmentDecoder.output_schema`: the user columns of the target schema, then the reserved
columns (``reserved="keep"``), then the metadata columns asked for. Python touches each segment
and each Kafka header, never a record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parka.encryption import KmsSettings
from parka.errors import ConfigError, SchemaError, SchemaMismatchError, SegmentError
from parka.schema import RESERVED_PREFIX
from parka.segment import RESERVED_FIELDS, TIMESTAMP_COLUMN, decode_segment, is_segment

__all__ = ["KAFKA_COLUMNS", "METADATA_COLUMNS", "RESERVED_MODES", "SegmentDecoder", "spark_arrow_type", "type_shape"]

KAFKA_COLUMNS = ("value", "headers", "topic", "partition", "offset", "timestamp")
"""The Kafka source's columns the decoder reads (``headers`` needs ``includeHeaders=true``)."""

_UTC_US = pa.timestamp("us", tz="UTC")
METADATA_COLUMNS: dict[str, pa.Field] = {
    "topic": pa.field("kafka_topic", pa.string(), nullable=False),
    "partition": pa.field("kafka_partition", pa.int32(), nullable=False),
    "offset": pa.field("kafka_offset", pa.int64(), nullable=False),
    "index": pa.field("kafka_index", pa.int32(), nullable=False),
    "timestamp": pa.field("kafka_timestamp", _UTC_US),
}
"""Metadata a caller may ask for, and the column each becomes. ``offset`` is the segment's
Kafka offset and ``index`` the record's position in it, so (partition, offset, index) is unique;
``timestamp`` is the record's own Kafka timestamp when the producer set one, else the
segment message's."""

RESERVED_MODES = ("keep", "drop")


def spark_arrow_type(t: pa.DataType, path: str) -> pa.DataType:
    """The Arrow type Spark reads back for a column of type ``t`` (what the decoder emits).

    Raises:
        SchemaError: Spark (4.0) has no type for ``t``; ``field`` is ``path``.
    """
    if pa.types.is_dictionary(t):
        return spark_arrow_type(t.value_type, path)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz is not None else None)
    if pa.types.is_unsigned_integer(t):
        raise SchemaError(f"Spark has no unsigned integers ({t})", field=path)
    if pa.types.is_time(t):
        raise SchemaError(f"Spark 4.0 has no time-of-day type ({t})", field=path)
    if pa.types.is_decimal(t) and t.precision > 38:
        raise SchemaError(f"Spark decimals hold at most 38 digits ({t})", field=path)
    if pa.types.is_float16(t) or pa.types.is_duration(t) or pa.types.is_interval(t):
        raise SchemaError(f"Spark cannot read {t} from Arrow", field=path)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field
        return pa.list_(pa.field("element", spark_arrow_type(item.type, f"{path}[]"), nullable=item.nullable))
    if pa.types.is_map(t):
        key = spark_arrow_type(t.key_type, f"{path}{{key}}")
        item = t.item_field
        return pa.map_(key, pa.field("value", spark_arrow_type(item.type, f"{path}{{}}"), nullable=item.nullable))
    if pa.types.is_struct(t):
        return pa.struct([_spark_field(f, f"{path}.{f.name}") for f in t])
    return t


def _spark_field(field: pa.Field, path: str) -> pa.Field:
    return pa.field(field.name, spark_arrow_type(field.type, path), nullable=field.nullable)


def type_shape(t: pa.DataType) -> Any:
    """A type's identity for fitting a segment column to the target: ignores large/dictionary
    variants, child field names and timestamp units, keeps everything else."""
    if pa.types.is_dictionary(t):
        return type_shape(t.value_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_timestamp(t):
        return ("timestamp", t.tz is not None)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ("list", type_shape(t.value_type))
    if pa.types.is_map(t):
        return ("map", type_shape(t.key_type), type_shape(t.item_type))
    if pa.types.is_struct(t):
        return ("struct", tuple((f.name, type_shape(f.type)) for f in t))
    return str(t)


class SegmentDecoder:
    """Decode Kafka rows holding parka segments into records of one fixed schema.

    ``schema`` is the target's user columns (an Arrow schema, e.g. from
    :func:`parka.schema.to_arrow_schema`). A segment fits when each of its user columns is in
    ``schema`` with the same type (up to string/binary width, timestamp unit and child names)
    and every target column it lacks is nullable (filled with nulls: a segment written before
    a column was added). ``reserved``: ``"keep"`` appends the three reserved columns (null where
    a segment has none), ``"drop"`` leaves them out. ``metadata``: keys of
    :data:`METADATA_COLUMNS`, appended last in that order. ``kms``: decrypts encrypted
    segments (:mod:`parka.encryption`; picklable, so each executor builds its own key cache).

    Raises (at construction):
        SchemaError: a type Spark cannot hold, or a column named like a reserved or metadata one.
        ConfigError: an unknown ``reserved`` mode or metadata name.
    """

    def __init__(
        self,
        schema: pa.Schema,
        *,
        reserved: str = "keep",
        metadata: Sequence[str] = (),
        kms: KmsSettings | None = None,
    ) -> None:
        self.kms = kms
        if reserved not in RESERVED_MODES:
            raise ConfigError("reserved", reserved, ", ".join(RESERVED_MODES))
        unknown = [m for m in metadata if m not in METADATA_COLUMNS]
        if unknown:
            raise ConfigError("metadata", unknown[0], ", ".join(METADATA_COLUMNS))
        self.schema = pa.schema([_spark_field(f, f.name) for f in schema])
        self.reserved = reserved
        self.metadata = tuple(m for m in METADATA_COLUMNS if m in metadata)
        extra = [f.with_nullable(True) for f in RESERVED_FIELDS] if reserved == "keep" else []
        extra += [METADATA_COLUMNS[m] for m in self.metadata]
        for field in schema:
            if field.name.startswith(RESERVED_PREFIX):
                raise SchemaError(f"names starting with '{RESERVED_PREFIX}' are reserved", field=field.name)
            if field.name in {f.name for f in extra}:
                raise SchemaError(
                    "a user column has the name of a metadata column; drop that metadata", field=field.name
                )
        self.output_schema = pa.schema([*self.schema, *(_spark_field(f, f.name) for f in extra)])

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``mapInArrow``'s function: Kafka row batches in, record batches out."""
        for batch in batches:
            yield from self.decode_batch(batch)

    def decode_batch(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """One output batch per segment in ``batch``, in order; empty segments yield nothing.

        Every error below carries the row's topic, partition, offset and raw value.

        Raises:
            SegmentError: a row without a ``parka.format`` header (not a segment).
            SegmentDecodeError: corrupt headers or Parquet bytes.
            SchemaMismatchError: a segment that does not fit the schema.
        """
        names = batch.schema.names
        missing = [c for c in KAFKA_COLUMNS if c not in names]
        if missing:
            hint = " (read Kafka with includeHeaders=true)" if "headers" in missing else ""
            raise ConfigError("columns", names, ", ".join(KAFKA_COLUMNS), reason=f"missing {missing}{hint}")
        values = batch.column(names.index("value"))
        headers = batch.column(names.index("headers"))
        topics = batch.column(names.index("topic"))
        partitions = batch.column(names.index("partition"))
        offsets = batch.column(names.index("offset"))
        stamps = batch.column(names.index("timestamp"))
        if pa.types.is_timestamp(stamps.type):
            stamps = stamps.cast(_UTC_US)
        for i in range(batch.num_rows):
            topic, partition, offset = topics[i].as_py(), partitions[i].as_py(), offsets[i].as_py()
            raw_headers = [(h["key"], h["value"]) for h in headers[i].as_py() or ()]
            value: bytes | None = values[i].as_py()
            where: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
            if not is_segment(raw_headers):
                raise SegmentError(
                    "not a parka segment (no parka.format header)", value=value, headers=raw_headers, **where
                )
            table = decode_segment(value, raw_headers, kms=self.kms, **where)
            if table.num_rows == 0:
                continue
            columns = self._fit(table, value, raw_headers, where)
            columns += self._metadata(table, stamps[i], where)
            yield pa.RecordBatch.from_arrays(columns, schema=self.output_schema)

    def _fit(
        self, table: pa.Table, value: bytes | None, headers: list[tuple[str, Any]], where: dict[str, Any]
    ) -> list[pa.Array]:
        def mismatch(message: str, name: str) -> SchemaMismatchError:
            return SchemaMismatchError(
                f"the target schema cannot take this segment: {message}",
                field=name,
                value=value,
                headers=headers,
                **where,
            )

        n = table.num_rows
        for name in table.column_names:
            if not name.startswith(RESERVED_PREFIX) and name not in self.schema.names:
                raise mismatch(f"column '{name}' is not in the schema ({', '.join(self.schema.names)})", name)
        out: list[pa.Array] = []
        fields = list(self.schema)
        if self.reserved == "keep":
            fields += [f.with_nullable(True) for f in RESERVED_FIELDS]
        for field in fields:
            if field.name not in table.column_names:
                if not field.nullable:
                    raise mismatch(f"non-nullable column '{field.name}' is missing from the segment", field.name)
                out.append(pa.nulls(n, field.type))
                continue
            column = table.column(field.name).combine_chunks()
            if type_shape(column.type) != type_shape(field.type):
                raise mismatch(
                    f"column '{field.name}' is {column.type} in the segment, {field.type} in the schema", field.name
                )
            if column.type != field.type:
                column = column.cast(field.type)
            if not field.nullable and column.null_count:
                raise mismatch(f"column '{field.name}' holds nulls but is not nullable in the schema", field.name)
            out.append(column)
        return out

    def _metadata(self, table: pa.Table, stamp: pa.Scalar, where: dict[str, Any]) -> list[pa.Array]:
        n = table.num_rows
        out: list[pa.Array] = []
        for name in self.metadata:
            if name == "topic":
                out.append(pa.array([where["topic"]], pa.string()).take(np.zeros(n, dtype=np.int32)))
            elif name == "partition":
                out.append(pa.array(np.full(n, where["partition"], dtype=np.int32)))
            elif name == "offset":
                out.append(pa.array(np.full(n, where["offset"], dtype=np.int64)))
            elif name == "index":
                out.append(pa.array(np.arange(n, dtype=np.int32)))
            else:
                out.append(self._timestamps(table, stamp, n))
        return out

    @staticmethod
    def _timestamps(table: pa.Table, stamp: pa.Scalar, n: int) -> pa.Array:
        segment_us = stamp.value if stamp.is_valid else None
        fallback = pa.array(
            np.full(n, segment_us or 0, dtype=np.int64), mask=None if segment_us is not None else np.ones(n, bool)
        )
        if TIMESTAMP_COLUMN not in table.column_names:
            return fallback.cast(_UTC_US)
        own_us = pc.multiply(table.column(TIMESTAMP_COLUMN).combine_chunks(), 1000)  # ms -> us
        return pc.coalesce(own_us, fallback).cast(_UTC_US)
