"""A decoded segment as Python records: :func:`segment_records`, once per segment.

The messaging shim hands records out one by one, but converts a segment's columns to Python in
one pass per column. Five things make that pass cheaper than ``pyarrow.Table.to_pylist``:

* Temporal and decimal values become Python objects through a slow per-value path (about 4 µs
  for a timestamp with a time zone, more than a whole row of numbers). Segments repeat such
  values a lot (an hourly timestamp, a date), so each distinct value of a column is converted
  once: dictionary-encode the column, convert the dictionary, index into it. The objects are
  immutable, so records may share them. A timestamp (UTC or naive, to the microsecond) or date
  column of mostly distinct values goes through numpy's conversion instead, the zone attached
  after.
* ``to_pylist(maps_as_pydicts="strict")`` converts through a Python scalar object per value
  (pyarrow 26, GH-50429). Maps are converted here from
  their keys and items, each a column of its own.
* Structs holding such values, and lists of structs, are converted child by child, their dicts
  built as rows are; numbers and strings without nulls inside them go through numpy.
* Other columns take ``to_pylist()`` without that argument, which has fast paths.
* Rows are built by a function made for the column names, ``lambda _0, _1: {'a': _0, 'b': _1}``
  mapped over the columns: a dict display with constant keys is CPython's cheapest way to
  build a dict, about half the cost of ``dict(zip(names, row))`` and of ``to_pylist``'s
  comprehension that looks each cell up by column name.

Values are exactly what ``to_pylist(maps_as_pydicts="strict")`` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parka.collector import gc_paused
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
    values_of: Callable[[pa.Table], list[Any]] | None = None,
) -> SegmentRecords:
    """The records of ``table`` (a decoded segment, reserved columns included) from row ``start``;
    their values are dicts (:func:`rows`), or what ``values_of`` makes of the user columns (a
    Protobuf message class's messages).

    Indexes stay the segment's: rows before ``start`` are not converted and read as ``None``.

    Raises:
        SegmentDecodeError: a reserved column is malformed.
        pyarrow.ArrowException, KeyError, ValueError, OverflowError: a value has no Python
            equivalent (a map with duplicate keys, a date out of Python's range); the caller
            wraps it.
    """
    part = table.slice(start) if start else table
    data, meta = split_reserved(part)
    values = rows(data) if values_of is None else values_of(data)
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
    with gc_paused():  # a dict per row, no cycle: parka.collector
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
    if not _converted_here(kind):
        return column.to_pylist(maps_as_pydicts="strict") if _has_map(kind) else column.to_pylist()
    out: list[Any] = []
    for chunk in column.chunks:
        out += _array_values(chunk)
    return out


def _converted_here(kind: pa.DataType) -> bool:
    """Maps, temporal and decimal types, lists of structs, and lists and structs holding any of
    them (structs with distinct field names, which pyarrow requires too); pyarrow's own
    conversion is quicker for the other types."""
    if pa.types.is_map(kind):
        return True
    if pa.types.is_temporal(kind) or pa.types.is_decimal(kind):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.types.is_struct(kind.value_type) or _converted_here(kind.value_type)
    if not pa.types.is_struct(kind):
        return False
    fields = [kind.field(i) for i in range(kind.num_fields)]
    unique = len({f.name for f in fields}) == len(fields)
    return unique and any(_converted_here(f.type) for f in fields)


def _array_values(array: pa.Array) -> list[Any]:
    kind = array.type
    values: list[Any]
    if not _converted_here(kind):
        return _plain_values(array)
    if pa.types.is_struct(kind):
        names = tuple(kind.field(i).name for i in range(kind.num_fields))
        # StructArray.field() applies the array's offset but not its validity
        children = [_array_values(array.field(i)) for i in range(len(names))]
        values = list(map(_row_builder(names), *children))
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        # offsets are the slice's own, into the whole child array
        offsets = array.offsets.to_numpy().tolist()
        base = offsets[0]
        inner = _array_values(array.values.slice(base, offsets[-1] - base))
        values = [inner[a - base : b - base] for a, b in pairwise(offsets)]
    elif pa.types.is_map(kind):
        values = _map_values(array)
    else:
        return _temporal_values(array)
    if array.null_count:
        values = [v if valid else None for v, valid in zip(values, array.is_valid().to_pylist(), strict=True)]
    return values


def _plain_values(array: pa.Array) -> list[Any]:
    """``to_pylist()`` of a type converted by pyarrow: through numpy for numbers, bools and
    strings without nulls (a C loop, where ``to_pylist`` makes a scalar object per value)."""
    kind = array.type
    if _numpy_leaf(kind) and not array.null_count:
        return array.to_numpy(zero_copy_only=False).tolist()
    if _has_map(kind):
        return array.to_pylist(maps_as_pydicts="strict")
    return array.to_pylist()


def _numpy_leaf(kind: pa.DataType) -> bool:
    return (
        pa.types.is_integer(kind)
        or pa.types.is_float32(kind)
        or pa.types.is_float64(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def _map_values(array: pa.MapArray) -> list[Any]:
    """Dicts of a map array's entries; a duplicate key raises ``KeyError``, as
    ``to_pylist(maps_as_pydicts="strict")`` does."""
    offsets = array.offsets.to_numpy().tolist()
    base, end = offsets[0], offsets[-1]
    keys = _array_values(array.keys.slice(base, end - base))
    items = _array_values(array.items.slice(base, end - base))
    out = []
    for a, b in pairwise(offsets):
        entries = dict(zip(keys[a - base : b - base], items[a - base : b - base]))  # noqa: B905
        if len(entries) != b - a:
            seen: set[Any] = set()
            duplicate = next(k for k in keys[a - base : b - base] if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise KeyError(
                "Converting to Python dictionary is not supported in strict mode when duplicate keys are "
                f"present (duplicate key was {duplicate!r})."
            )
        out.append(entries)
    return out


# The time zones whose values pyarrow gives as the UTC wall time: there a naive datetime from
# numpy with the zone attached is pyarrow's value
_UTC_ZONES = frozenset({"UTC", "Etc/UTC", "+00:00"})
# numpy's datetime64 becomes datetime.datetime (datetime.date for days) between the years 1 and
# 9999 only, as Python's types: the bounds per unit, from the epoch (other values: pyarrow's path)
_BOUNDS = {
    "D": (-719_162, 2_932_896),
    "s": (-62_135_596_800, 253_402_300_799),
    "ms": (-62_135_596_800_000, 253_402_300_799_999),
    "us": (-62_135_596_800_000_000, 253_402_300_799_999_999),
}


def _temporal_values(array: pa.Array) -> list[Any]:
    """Temporal and decimal values. Converting one through pyarrow's scalars is slow (see the
    module docstring), so a column of repeated values (an hourly timestamp, a
    date) converts each distinct value once (dictionary-encoded, then indexed); a timestamp or
    date column of mostly distinct values goes through numpy's C conversion instead, its time
    zone attached after."""
    encoded = array.dictionary_encode()
    if len(encoded.dictionary) * 4 > len(array) and _through_numpy(array):
        return _numpy_temporal(array)
    distinct = encoded.dictionary.to_pylist()
    distinct.append(None)  # where null indices point
    indices = encoded.indices.fill_null(len(distinct) - 1).to_pylist()
    return list(map(distinct.__getitem__, indices))


def _through_numpy(array: pa.Array) -> bool:
    kind = array.type
    if pa.types.is_date32(kind):
        unit, ints = "D", array.view(pa.int32())
    elif pa.types.is_timestamp(kind) and kind.unit != "ns" and (kind.tz is None or kind.tz in _UTC_ZONES):
        unit, ints = kind.unit, array.view(pa.int64())
    else:
        return False
    low, high = pc.min_max(ints).values()
    first, last = _BOUNDS[unit]
    return low.is_valid and first <= low.as_py() and high.as_py() <= last


def _numpy_temporal(array: pa.Array) -> list[Any]:
    kind = array.type
    naive = array.cast(pa.timestamp(kind.unit)) if pa.types.is_timestamp(kind) and kind.tz is not None else array
    values: list[Any] = naive.to_numpy(zero_copy_only=False).tolist()  # NaT: None
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        zone = array.filter(array.is_valid())[0].as_py().tzinfo
        values = [None if v is None else v.replace(tzinfo=zone) for v in values]
    return values


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
