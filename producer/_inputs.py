"""What the producer's callers hand it, checked and shaped: keys and headers of ``produce()``,
tables of ``produce_batch()``, and the cut of rows where ``columnar.partition.by`` values change. Pure
functions over Python values and Arrow; no Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from parka.errors import RecordError, RecordTypeError
from parka.partitioning import PartitionSpec, partition_keys, runs

from ._buffer import RowBatch

__all__ = ["Group", "conform_table", "key_bytes", "normalize_headers", "normalize_key", "split_by_values", "table_keys"]


@dataclass
class Group:
    """Consecutive rows of one table-partition value combination (``columnar.partition.by``)."""

    batch: RowBatch
    pvals: tuple[Any, ...]


def normalize_headers(
    headers: Mapping[str, Any] | Sequence[tuple[str, Any]], topic: str
) -> list[tuple[str, bytes | None]] | None:
    if type(headers) is list:  # the common form, already normalized: a copy
        for item in headers:
            if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str or type(item[1]) is not bytes:
                break
        else:
            return list(headers) or None
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise RecordTypeError("headers must be a dict or a list of (key, value)", topic=topic) from None
        if not isinstance(name, str):
            raise RecordTypeError(f"header key {name!r} is not a str", topic=topic, field="headers")
        if isinstance(value, str):
            value = value.encode()
        elif value is not None and not isinstance(value, (bytes, bytearray)):
            raise RecordTypeError(
                f"header {name!r} value must be bytes, str or None, not {type(value).__name__}",
                topic=topic,
                field="headers",
            )
        out.append((name, None if value is None else bytes(value)))
    return out or None


def normalize_key(key: Any, topic: str) -> bytes:
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    raise RecordTypeError(f"key must be bytes, str or None, not {type(key).__name__}", topic=topic, field="key")


def key_bytes(column: pa.Array | pa.ChunkedArray, topic: str, name: str) -> pa.Array:
    """A key column as Kafka key bytes, exactly what ``produce(key=...)`` sends for each value:
    strings as UTF-8, binary as is, integers as their decimal text (``str(v)``), nulls as no key.

    Raises:
        RecordError: any other type (``field`` is the column).
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_dictionary(t):
        column, t = column.cast(t.value_type), t.value_type
    if pa.types.is_binary(t):
        return column
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return column.cast(pa.binary())
    if pa.types.is_fixed_size_binary(t):
        return column.cast(pa.binary())
    if pa.types.is_integer(t):
        return column.cast(pa.string()).cast(pa.binary())
    raise RecordError(f"a key column must be string, binary or integer, not {t}", topic=topic, field=name)


def table_keys(table: pa.Table, topic: str, key_column: str) -> pa.Array:
    """``produce_batch``'s ``key_column`` of ``table`` as key bytes (:func:`key_bytes`).

    Raises:
        RecordError: the column is not in the table, or has no key encoding (``field`` names it).
    """
    if key_column not in table.column_names:
        raise RecordError("key_column is not a column of the data", topic=topic, field=key_column)
    return key_bytes(table[key_column], topic, key_column)


def split_by_values(partition_by: Sequence[PartitionSpec], batch: RowBatch) -> list[Group]:
    """With ``columnar.partition.by``, the batch cut where its partition values change (derived
    ones computed: ``day=date(ts)``), in row order: a value that comes back starts a new group,
    so that segments keep the records' order within their Kafka partition."""
    table = batch.table
    if not partition_by or table.num_rows == 0:
        return [Group(batch, ())]
    pieces = runs(partition_keys(table, partition_by))
    if len(pieces) == 1:
        return [Group(batch, pieces[0][2])]
    return [Group(batch.slice(start, stop), values) for start, stop, values in pieces]


def conform_table(topic: str, schema: pa.Schema, data: Any) -> pa.Table:
    """``produce_batch`` data (pyarrow Table/RecordBatch, pandas DataFrame) as a table of ``schema``.

    Raises:
        RecordError: naming the column that is unknown, missing, null where it may not be, or of
            a type that does not cast.
    """
    if isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, pa.Table):
        table = data
    elif type(data).__name__ == "DataFrame" and hasattr(data, "columns"):
        table = pa.Table.from_pandas(data, preserve_index=False)
    else:
        raise RecordTypeError(
            f"messages must be a list, a pyarrow Table/RecordBatch or a pandas DataFrame, not {type(data).__name__}",
            topic=topic,
        )
    extra = [c for c in table.column_names if c not in schema.names]
    if extra:
        raise RecordError("column is not in the topic's schema", topic=topic, field=extra[0])
    columns = []
    for f in schema:
        if f.name not in table.column_names:
            if not f.nullable:
                raise RecordError("required column is missing", topic=topic, field=f.name)
            columns.append(pa.nulls(len(table), f.type))
            continue
        col = table[f.name]
        if not col.type.equals(f.type):
            try:
                col = col.cast(f.type)
            except (pa.ArrowException, ValueError) as exc:
                raise RecordError(f"cannot cast {col.type} to {f.type}: {exc}", topic=topic, field=f.name) from exc
        if not f.nullable and col.null_count:
            raise RecordError(f"{col.null_count} nulls in a non-nullable column", topic=topic, field=f.name)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)
