"""A decoded segment as Python records: :func:`segment_records`, once per segment.

The messaging shim hands records out one by one, but converts a segment's columns to Python in
one pass per column. Four things make that pass cheaper than ``pyarrow.Table.to_pylist``:

* Temporal and decimal values become Python objects through a slow per-value path (about 4 µs
  for a timestamp with a time zone, more than a whole row of numbers). Segments repeat such
  values a lot (an hourly timestamp, a date), so each distinct value of a column is converted
  once: dictionary-encode the column, convert the dictionary, index into it. The objects are
  immutable, so records may share them; a column whose values are all distinct costs a hash
  per value more than before.
* Structs holding such values are converted field by field, their dicts built as rows are.
* ``to_pylist(maps_as_pydicts="strict")`` converts through a Python scalar object per value,
  even for a column without maps (pyarrow 26, GH-50429); without that argument pyarrow has
  fast paths. So only columns that hold maps pass it.
* Rows are built by a function made for the column names, ``lambda _0, _1: {'a': _0, 'b': _1}``
  mapped over the columns: a dict display with constant keys is CPython's cheapest way to
  build a dict, about half the cost of ``dict(zip(names, row))`` and of ``to_pylist``'s
  comprehension that looks each cell up by column name.

Values are exactly what ``to_pylist(maps_as_pydicts="strict")`` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import pyarrow as pa

from parka.message import SegmentRecords
from parka.segment import split_reserved

__all__ = ["column_values", "rows", "segment_records"]


def segment_records(
    table: pa.Table,
    start: int,
    *,
    topic: str,
    partition: int,
    offset: int,
    segment_timestamp: tuple[int, int | None],
    leader_epoch: int | None = None,
) -> SegmentRecords:
    """The records of ``table`` (a decoded segment, reserved columns included) from row ``start``.

    Indexes stay the segment's: rows before ``start`` are not converted and read as ``None``.

    Raises:
        SegmentDecodeError: a reserved column is malformed.
        pyarrow.ArrowException, KeyError, ValueError, OverflowError: a value has no Python
            equivalent (a map with duplicate keys, a date out of Python's range); the caller
            wraps it.
    """
    part = table.slice(start) if start else table
    data, meta = split_reserved(part)
    values = rows(data)
    keys, timestamps, headers = meta.keys, meta.timestamps, meta.headers
    if start:
        pad: list[Any] = [None] * start
        values = pad + values
        keys = None if keys is None else pad + keys
        timestamps = None if timestamps is None else pad + timestamps
        headers = None if headers is None else pad + headers
    return SegmentRecords(
        topic=topic,
        partition=partition,
        offset=offset,
        values=values,
        keys=keys,
        timestamps=timestamps,
        headers=headers,
        segment_timestamp=segment_timestamp,
        leader_epoch=leader_epoch,
    )


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """``table.to_pylist(maps_as_pydicts="strict")``, computed column by column."""
    names = table.column_names
    n = table.num_rows
    if not names:
        return [{} for _ in range(n)]
    columns = [column_values(column) for column in table.columns]
    return list(map(_row_builder(tuple(names)), *columns))


@lru_cache(maxsize=64)
def _row_builder(names: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """``lambda _0, _1, ...: {names[0]: _0, names[1]: _1, ...}`` (a repeated name: the last wins,
    as in ``to_pylist``). The names come from segments, so each enters the source only as
    ``repr(name)``, a string literal whatever the name holds."""
    params = ", ".join(f"_{i}" for i in range(len(names)))
    items = ", ".join(f"{name!r}: _{i}" for i, name in enumerate(names))
    builder: Callable[..., dict[str, Any]] = eval(f"lambda {params}: {{{items}}}")  # noqa: S307
    return builder


def column_values(column: pa.ChunkedArray) -> list[Any]:
    """The values of one column as Python objects (see the module docstring)."""
    kind = column.type
    if _has_map(kind):
        return column.to_pylist(maps_as_pydicts="strict")
    if not _converted_here(kind):
        return column.to_pylist()
    out: list[Any] = []
    for chunk in column.chunks:
        out += _array_values(chunk)
    return out


def _converted_here(kind: pa.DataType) -> bool:
    """Temporal and decimal types, and structs holding them (with distinct field names, which
    pyarrow requires too); pyarrow's own conversion is quicker for other structs."""
    if pa.types.is_temporal(kind) or pa.types.is_decimal(kind):
        return True
    if not pa.types.is_struct(kind):
        return False
    fields = [kind.field(i) for i in range(kind.num_fields)]
    unique = len({f.name for f in fields}) == len(fields)
    return unique and any(_converted_here(f.type) for f in fields)


def _array_values(array: pa.Array) -> list[Any]:
    kind = array.type
    if pa.types.is_struct(kind) and _converted_here(kind):
        names = tuple(kind.field(i).name for i in range(kind.num_fields))
        # StructArray.field() applies the array's offset but not its validity
        children = [_array_values(array.field(i)) for i in range(len(names))]
        values: list[Any] = list(map(_row_builder(names), *children))
        if array.null_count:
            values = [v if valid else None for v, valid in zip(values, array.is_valid().to_pylist(), strict=True)]
        return values
    if not (pa.types.is_temporal(kind) or pa.types.is_decimal(kind)):
        return array.to_pylist()
    encoded = array.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    distinct.append(None)  # where null indices point
    indices = encoded.indices.fill_null(len(distinct) - 1).to_pylist()
    return list(map(distinct.__getitem__, indices))


def _has_map(kind: pa.DataType) -> bool:
    """Whether values of ``kind`` contain a map (anywhere inside lists and structs)."""
    if pa.types.is_map(kind):
        return True
    if pa.types.is_struct(kind) or pa.types.is_union(kind):
        return any(_has_map(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_dictionary(kind):
        return _has_map(kind.value_type)
    value_type = getattr(kind, "value_type", None)  # the list types
    return value_type is not None and _has_map(value_type)
