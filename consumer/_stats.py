"""Delta add-action statistics from a Parquet footer: ``numRecords``, ``minValues``,
``maxValues`` and ``nullCount`` as delta-spark writes them, without reading a data page.

A stream's segments share their schema, so the work that depends only on it (which footer
column describes which table column, how its values render) is planned once per schema and
kept in a small most-recent cache.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Collection
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from parka.errors import SegmentDecodeError
from parka.schema import child_fields

__all__ = ["STRING_PREFIX_LENGTH", "RecentCache", "data_file_stats"]

STRING_PREFIX_LENGTH = 32  # Spark's delta.stats string prefix length

V = TypeVar("V")


class _Raw(str):
    """JSON text written as is: a decimal number that must not round-trip through float."""


def _dumps(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + _dumps(v) for k, v in value.items()) + "}"
    return str(value) if isinstance(value, _Raw) else json.dumps(value)


def _leaf_columns(md: pq.FileMetaData) -> dict[tuple[str, ...], int]:
    """Column index of each non-repeated leaf of the file, by name path."""
    out: dict[tuple[str, ...], int] = {}
    count = 0

    def walk(f: pa.Field, path: tuple[str, ...], repeated: bool) -> None:
        nonlocal count
        t = f.type.storage_type if isinstance(f.type, pa.ExtensionType) else f.type
        if pa.types.is_struct(t) or pa.types.is_nested(t):
            for child in child_fields(t):
                walk(child, (*path, child.name), repeated or not pa.types.is_struct(t))
            return
        if not repeated and count < md.num_columns:
            column = md.schema.column(count)
            if column.max_repetition_level == 0 and column.name == f.name:
                out[path] = count
        count += 1

    for f in md.schema.to_arrow_schema():
        walk(f, (f.name,), False)
    return out if count == md.num_columns else {}  # leaves did not line up: describe no column


def _stat_kind(t: pa.DataType, column: Any) -> str | None:
    """How min/max of a file column read as table type ``t`` are rendered; ``None``: not at all."""
    logical = json.loads(column.logical_type.to_json())
    kind, physical = logical.get("Type"), column.physical_type
    if pa.types.is_signed_integer(t) and physical in ("INT32", "INT64"):
        width = logical.get("bitWidth", 32 if physical == "INT32" else 64)
        signed = kind == "None" or (kind == "Int" and logical.get("isSigned"))
        return "int" if signed and width <= t.bit_width else None
    if pa.types.is_boolean(t):
        return "bool" if physical == "BOOLEAN" else None
    if pa.types.is_date(t):
        return "date" if kind == "Date" else None
    if pa.types.is_timestamp(t):
        unit = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}.get(logical.get("timeUnit"))
        if kind != "Timestamp" or unit is None or logical.get("isAdjustedToUTC") != (t.tz is not None):
            return None
        return ("ts-utc-" if t.tz is not None else "ts-ntz-") + unit
    if isinstance(t, pa.Decimal128Type):
        same = kind == "Decimal" and column.scale == t.scale and column.precision <= t.precision
        return "decimal" if same else None
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string" if kind == "String" else None
    return None  # floats (NaN ordering), binary, anything else: no min/max


def _order_key(kind: str, raw: Any) -> Any:
    return int.from_bytes(raw, "big", signed=True) if kind == "decimal" and isinstance(raw, bytes) else raw


def _ceil_div(value: int, by: int, up: bool) -> int:
    return -(-value // by) if up else value // by


def _render(kind: str, t: pa.DataType, value: Any, is_max: bool) -> Any:
    """The JSON value of a min or max (``is_max``) statistic, or ``None`` to leave it out."""
    if kind == "decimal":  # exact digits: decimal.Decimal arithmetic would round to 28 of them
        digits = str(abs(value)).rjust(t.scale + 1, "0")
        point = f"{digits[: -t.scale]}.{digits[-t.scale :]}" if t.scale else digits
        return _Raw(("-" if value < 0 else "") + point)
    if kind == "date":
        with suppress(OverflowError):
            return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
        return None
    if kind.startswith("ts-"):
        # Delta stats hold milliseconds. The min is floored and the max ceiled, so both stay bounds
        # even for a reader that does not widen a truncated max by 1 ms (Spark and kernel do).
        unit = kind[-2:]
        micros = value * 1000 if unit == "ms" else value if unit == "us" else _ceil_div(value, 1000, is_max)
        with suppress(OverflowError):
            utc = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
            moment = utc + dt.timedelta(milliseconds=_ceil_div(micros, 1000, is_max))
            text = moment.replace(tzinfo=None).isoformat(timespec="milliseconds")
            return text + ("Z" if kind.startswith("ts-utc") else "")
        return None
    if kind != "string":
        return value
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) <= STRING_PREFIX_LENGTH:
        return text
    # A prefix is a lower bound; an upper bound would need Spark's tie-breaker rule: leave it out.
    return None if is_max else text[:STRING_PREFIX_LENGTH]


def _column_stats(md: pq.FileMetaData, index: int, t: pa.DataType, kind: str | None) -> tuple[int | None, Any, Any]:
    """(nullCount, min, max) of column ``index`` over all row groups, ``None`` where unknown;
    ``kind`` is :func:`_stat_kind` of the column."""
    nulls: int | None = 0
    low = high = None
    for rg in range(md.num_row_groups):
        group = md.row_group(rg)
        rows = group.num_rows
        stats = group.column(index).statistics
        null_count = stats.null_count if stats is not None and stats.has_null_count else None
        nulls = None if nulls is None or null_count is None else nulls + null_count
        if kind is not None and stats is not None and stats.has_min_max:
            rg_low, rg_high = _order_key(kind, stats.min_raw), _order_key(kind, stats.max_raw)
            low = rg_low if low is None or rg_low < low else low
            high = rg_high if high is None or rg_high > high else high
        elif rows and null_count != rows:
            kind = None  # this row group has values its statistics do not describe
    if kind is None or low is None:
        return nulls, None, None
    return nulls, _render(kind, t, low, False), _render(kind, t, high, True)


@dataclass(frozen=True)
class _StatColumn:
    path: tuple[str, ...]  # the table field's names, outermost first (structs nest in the JSON)
    index: int  # the file's column
    type: pa.DataType  # the table's type
    kind: str | None  # how min/max render (:func:`_stat_kind`); None: nullCount only


@dataclass(frozen=True)
class _StatsPlan:
    """Which file columns describe which table columns, worked out once per (file schema, table
    schema): a stream's segments share their schema, so only the row-group numbers vary."""

    columns: tuple[_StatColumn, ...]
    exact: bool  # a decimal column: rendered by _dumps, which keeps its digits


class RecentCache(Generic[V]):
    """The last few values built, most recently used first, found by comparing keys in order.

    For keys that are costly to hash but cheap to compare, such as Parquet and Arrow schemas
    (``equals``); other key parts compare with ``==``. Put the cheapest parts first.
    """

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._entries: list[tuple[tuple[Any, ...], V]] = []

    def get(self, key: tuple[Any, ...], build: Callable[[], V]) -> V:
        for i, (cached, value) in enumerate(self._entries):
            if all(_same(a, b) for a, b in zip(cached, key, strict=True)):
                if i:
                    self._entries.insert(0, self._entries.pop(i))
                return value
        value = build()
        self._entries.insert(0, (key, value))
        del self._entries[self._size :]
        return value


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, (pa.Schema, pq.ParquetSchema)) and type(b) is type(a):
        return bool(a.equals(b))
    return bool(a == b)


_plans: RecentCache[_StatsPlan] = RecentCache()


def _stats_plan(
    md: pq.FileMetaData, table_schema: pa.Schema, partition_by: Collection[str], num_indexed_cols: int
) -> _StatsPlan:
    parts = tuple(partition_by)
    arrow_meta = (md.metadata or {}).get(b"ARROW:schema")  # decides the Arrow types of the leaves
    return _plans.get(
        (parts, num_indexed_cols, arrow_meta, md.schema, table_schema),
        lambda: _build_stats_plan(md, table_schema, parts, num_indexed_cols),
    )


def _build_stats_plan(
    md: pq.FileMetaData, table_schema: pa.Schema, partition_by: Collection[str], num_indexed_cols: int
) -> _StatsPlan:
    leaves = _leaf_columns(md)
    budget = math.inf if num_indexed_cols < 0 else num_indexed_cols
    columns: list[_StatColumn] = []

    def visit(f: pa.Field, path: tuple[str, ...]) -> None:
        nonlocal budget
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if pa.types.is_struct(t):
            for child in t:
                visit(child, (*path, child.name))
            return
        if budget <= 0:
            return
        budget -= 1
        if path in leaves:
            index = leaves[path]
            columns.append(_StatColumn(path, index, t, _stat_kind(t, md.schema.column(index))))

    for f in table_schema:
        if f.name not in partition_by:
            visit(f, (f.name,))
    return _StatsPlan(tuple(columns), exact=any(c.kind == "decimal" for c in columns))


def data_file_stats(
    parquet: bytes | pq.FileMetaData,
    table_schema: pa.Schema,
    *,
    partition_by: Collection[str] = (),
    num_indexed_cols: int = 32,
) -> str:
    """The add action's ``stats`` JSON, from the Parquet footer alone (no data is decoded).

    ``numRecords``; ``nullCount`` of every non-repeated leaf column of the table that the file
    has (structs as nested objects); ``minValues``/``maxValues`` for integers, booleans, dates,
    timestamps (milliseconds: min floored, max ceiled), decimals and strings (the min cut to 32
    characters, a longer max left out). Floats, binary, lists and maps get no min/max, nor does a
    column whose statistics miss in a row group with values. Partition columns are skipped; only
    the first ``num_indexed_cols`` leaf columns are described (-1: all), as
    ``delta.dataSkippingNumIndexedCols`` asks.

    Raises:
        SegmentDecodeError: ``parquet`` bytes without a readable footer.
    """
    if isinstance(parquet, pq.FileMetaData):
        md = parquet
    else:
        try:
            md = pq.read_metadata(pa.BufferReader(parquet))
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise SegmentDecodeError(f"no readable Parquet footer: {exc}", value=parquet) from exc
    plan = _stats_plan(md, table_schema, partition_by, num_indexed_cols)
    out: dict[str, dict[str, Any]] = {"minValues": {}, "maxValues": {}, "nullCount": {}}
    for column in plan.columns:
        for key, value in zip(
            ("nullCount", "minValues", "maxValues"),
            _column_stats(md, column.index, column.type, column.kind),
            strict=True,
        ):
            if value is not None:
                into = out[key]
                for name in column.path[:-1]:
                    into = into.setdefault(name, {})
                into[column.path[-1]] = value
    stats = {"numRecords": md.num_rows, **out}
    return _dumps(stats) if plan.exact else json.dumps(stats, separators=(",", ":"))
