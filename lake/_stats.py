"""Delta add-action statistics from a Parquet footer: ``numRecords``, ``minValues``,
``maxValues`` and ``nullCount`` as delta-spark writes them, without reading a data page.

Which columns are described, and how long string bounds get, is the table's to say
(:class:`StatsConfig`, from the properties delta-spark reads). A stream's segments share their
schema, so the work that depends only on it (which footer column describes which table column,
how its values render) is planned once per schema and kept in a small most-recent cache.

Where a footer cannot tell what delta-spark's writer would compute, the bound is left out
(readers then keep the file): a float column's max from a writer that leaves NaN out of its
statistics (parquet-cpp, so pyarrow and every parka segment; delta-spark's own footer-based
collection drops these too), a string max too long to cut, a row group without statistics.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import struct
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from parka.errors import ConfigError, SegmentDecodeError
from parka.schema import child_fields

__all__ = [
    "DEFAULT_STATS",
    "NUM_INDEXED_COLS_KEY",
    "STATS_COLUMNS_KEY",
    "STRING_PREFIX_LENGTH_KEY",
    "RecentCache",
    "StatsConfig",
    "data_file_stats",
]

NUM_INDEXED_COLS_KEY = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS_KEY = "delta.dataSkippingStatsColumns"
STRING_PREFIX_LENGTH_KEY = "delta.dataSkippingStringPrefixLength"

V = TypeVar("V")

_INT = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.parseInt takes
# One part of a column name in Spark SQL's multipartIdentifierList: a word, or backquoted with
# `` for a backquote. Spaces may surround it (Spark's lexer skips them).
_NAME_PART = re.compile(r"\s*(?:`((?:[^`]|``)+)`|([A-Za-z0-9_]+))\s*")
_COLUMNS_ALLOWED = (
    "a comma-separated list of column names (letters, digits and _; a.b for a field of a struct; "
    "`backquoted` for other characters, `` for a backquote)"
)


def _java_int(key: str, value: str, minimum: int) -> int:
    if _INT.fullmatch(value) is None or not minimum <= int(value) < 2**31:
        raise ConfigError(key, value, f"an integer from {minimum} to {2**31 - 1}")
    return int(value)


def _bad_columns(value: str, reason: str) -> ConfigError:
    return ConfigError(STATS_COLUMNS_KEY, value, _COLUMNS_ALLOWED, reason=reason)


def _column_list(value: str) -> tuple[tuple[str, ...], ...]:
    """``delta.dataSkippingStatsColumns`` as name paths, lower-cased (delta-spark matches them
    case-insensitively); blank: no column.

    Raises:
        ConfigError: not a list of column names.
    """
    if not value.strip():
        return ()
    columns: list[tuple[str, ...]] = []
    pos = 0
    while True:
        parts: list[str] = []
        while True:
            m = _NAME_PART.match(value, pos)
            if m is None or (m.group(2) or "x").isdigit():  # Spark's lexer reads 123 as a number
                raise _bad_columns(value, f"no column name at character {pos}")
            parts.append((m.group(2) or m.group(1).replace("``", "`")).lower())
            pos = m.end()
            if value.startswith(".", pos):
                pos += 1
                continue
            break
        columns.append(tuple(parts))
        if pos == len(value):
            return tuple(columns)
        if value[pos] != ",":
            raise _bad_columns(value, f"unexpected {value[pos]!r} at character {pos}")
        pos += 1


@dataclass(frozen=True)
class StatsConfig:
    """What the add actions' statistics describe, as the table's properties say
    (:meth:`from_properties`): the first ``num_indexed_cols`` leaf columns (-1: all) or, when
    given, the columns named in ``stats_columns`` (lower-cased name paths; a struct stands for
    all its leaves), and string bounds cut to ``string_prefix_length`` characters.

    Raises:
        ConfigError: a count below its minimum.
    """

    num_indexed_cols: int = 32
    stats_columns: tuple[tuple[str, ...], ...] | None = None
    string_prefix_length: int = 32

    def __post_init__(self) -> None:
        if self.num_indexed_cols < -1:
            raise ConfigError("num_indexed_cols", self.num_indexed_cols, "an integer >= -1 (-1: all)")
        if self.string_prefix_length < 0:
            raise ConfigError("string_prefix_length", self.string_prefix_length, "an integer >= 0")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str | None]) -> StatsConfig:
        """The statistics a Delta table with these properties (its ``configuration``) asks
        for: ``delta.dataSkippingNumIndexedCols`` (default 32), ``delta.dataSkippingStatsColumns``
        (which overrides it) and ``delta.dataSkippingStringPrefixLength`` (default 32), read as
        delta-spark reads them. Other properties are not looked at.

        Raises:
            ConfigError: a value delta-spark would refuse, naming the property.
        """
        count = properties.get(NUM_INDEXED_COLS_KEY)
        columns = properties.get(STATS_COLUMNS_KEY)
        prefix = properties.get(STRING_PREFIX_LENGTH_KEY)
        return cls(
            num_indexed_cols=32 if count is None else _java_int(NUM_INDEXED_COLS_KEY, count, -1),
            stats_columns=None if columns is None else _column_list(columns),
            string_prefix_length=32 if prefix is None else _java_int(STRING_PREFIX_LENGTH_KEY, prefix, 0),
        )


DEFAULT_STATS = StatsConfig()
"""What a table without data-skipping properties asks for."""


class _Raw(str):
    """JSON text written as is: a decimal number that must not round-trip through float."""


def _dumps(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + _dumps(v) for k, v in value.items()) + "}"
    return str(value) if isinstance(value, _Raw) else json.dumps(value, allow_nan=False)


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
    if pa.types.is_float32(t):
        return "float" if physical == "FLOAT" else None
    if pa.types.is_float64(t):
        return "double" if physical in ("FLOAT", "DOUBLE") else None
    return None  # binary (delta-spark keeps no bounds for it either), anything else: no min/max


def _value(kind: str, raw: Any) -> Any:
    return int.from_bytes(raw, "big", signed=True) if kind == "decimal" and isinstance(raw, bytes) else raw


def _order_key(kind: str, value: Any) -> Any:
    # Spark orders NaN above every number (its min skips NaN, its max is NaN if there is one)
    return (math.isnan(value), value) if kind in ("float", "double") else value


def _float32_text(value: float) -> float:
    """The shortest decimal of two digits or more that reads back as the same float32, as Java's
    ``Float.toString`` renders it: 0.1, not the float64 0.10000000149011612 it widens to."""
    for digits in range(2, 10):
        short = float(f"{value:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", short))[0] == value:
            return short
    return value


def _float(kind: str, value: float, is_max: bool) -> Any:
    # JSON has no NaN or infinities; delta-spark (Jackson) writes them as these strings.
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:  # Parquet's rule: a zero min reads as -0.0, a zero max as +0.0
        return 0.0 if is_max else -0.0
    return _float32_text(value) if kind == "float" else value


def _utf16_len(text: str) -> int:
    return len(text) + sum(1 for c in text if c > "\uffff")


_MAX_CHAR = "\U0010ffff"


def _truncate_max(text: str, prefix: int) -> str | None:
    """delta-spark's ``truncateMaxStringAgg``: a string no shorter than ``text`` in UTF-8 order,
    about ``prefix`` UTF-16 units long (Java strings count those), or ``None`` when none fits
    in twice that. A tie-breaker follows the kept prefix: U+007F when the next character is
    below it, else U+10FFFF (itself skipped over, as nothing is above it)."""
    if _utf16_len(text) <= prefix:
        return text
    if prefix <= 0:
        return None
    cut = units = 0
    while units < prefix:  # the prefix, never splitting a surrogate pair
        units += 2 if text[cut] > "\uffff" else 1
        cut += 1
    while units <= 2 * prefix:
        if cut >= len(text):
            return text
        if text[cut] != _MAX_CHAR:
            return text[:cut] + ("\x7f" if text[cut] < "\x7f" else _MAX_CHAR)
        cut, units = cut + 1, units + 2
    return None


def _ceil_div(value: int, by: int, up: bool) -> int:
    return -(-value // by) if up else value // by


def _render(kind: str, t: pa.DataType, value: Any, is_max: bool, prefix: int) -> Any:
    """The JSON value of a min or max (``is_max``) statistic, or ``None`` to leave it out;
    strings are cut to ``prefix`` characters."""
    if kind in ("float", "double"):
        return _float(kind, value, is_max)
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
    # delta-spark's writer cuts the min with SQL substring (code points), the max by UTF-16 units
    return _truncate_max(text, prefix) if is_max else text[:prefix]


def _column_stats(
    md: pq.FileMetaData, index: int, t: pa.DataType, kind: str | None, *, nan_in_max: bool, prefix: int
) -> tuple[int | None, Any, Any]:
    """(nullCount, min, max) of column ``index`` over all row groups, ``None`` where unknown;
    ``kind`` is :func:`_stat_kind` of the column, ``nan_in_max``: the writer puts NaN in a
    float column's max when it has one (as Spark orders them), ``prefix``: strings' length."""
    nulls: int | None = 0
    low = high = None
    for rg in range(md.num_row_groups):
        group = md.row_group(rg)
        rows = group.num_rows
        stats = group.column(index).statistics
        null_count = stats.null_count if stats is not None and stats.has_null_count else None
        nulls = None if nulls is None or null_count is None else nulls + null_count
        if kind is not None and stats is not None and stats.has_min_max:
            rg_low, rg_high = _value(kind, stats.min_raw), _value(kind, stats.max_raw)
            low = rg_low if low is None or _order_key(kind, rg_low) < _order_key(kind, low) else low
            high = rg_high if high is None or _order_key(kind, rg_high) > _order_key(kind, high) else high
        elif rows and null_count != rows:
            kind = None  # this row group has values its statistics do not describe (all NaN, say)
    if kind is None or low is None:
        return nulls, None, None
    if kind in ("float", "double") and not nan_in_max:
        # NaN was left out: the max may hide one, which Spark's data skipping takes as above any
        # value (a file with max 3 and a NaN must be read for x > 5). The min is Spark's min.
        return nulls, None if math.isnan(low) else _render(kind, t, low, False, prefix), None
    return nulls, _render(kind, t, low, False, prefix), _render(kind, t, high, True, prefix)


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
    md: pq.FileMetaData, table_schema: pa.Schema, partition_by: Collection[str], config: StatsConfig
) -> _StatsPlan:
    parts = tuple(partition_by)
    arrow_meta = (md.metadata or {}).get(b"ARROW:schema")  # decides the Arrow types of the leaves
    return _plans.get(
        (parts, config.num_indexed_cols, config.stats_columns, arrow_meta, md.schema, table_schema),
        lambda: _build_stats_plan(md, table_schema, parts, config),
    )


def _leaves(fields: Collection[pa.Field], path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], pa.DataType]]:
    """The table's leaf columns (a list or a map is one) in schema order, with their types."""
    for f in fields:
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if pa.types.is_struct(t):
            yield from _leaves(list(t), (*path, f.name))
        else:
            yield (*path, f.name), t


def _named_leaves(
    fields: Collection[pa.Field], wanted: Collection[tuple[str, ...]], path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], pa.DataType]]:
    """The leaves ``wanted`` names (lower-cased paths), in schema order, as delta-spark's
    ``filterSchema`` picks them: a struct named whole gives all its leaves; names of no column
    are ignored."""
    rests: dict[str, list[tuple[str, ...]]] = {}
    for name in wanted:
        rests.setdefault(name[0], []).append(name[1:])
    for f in fields:
        below = rests.get(f.name.lower())
        if below is None:
            continue
        if all(not rest for rest in below):
            yield from _leaves([f], path)
        elif pa.types.is_struct(f.type):
            yield from _named_leaves(list(f.type), [rest for rest in below if rest], (*path, f.name))


def _build_stats_plan(
    md: pq.FileMetaData, table_schema: pa.Schema, partition_by: Collection[str], config: StatsConfig
) -> _StatsPlan:
    leaves = _leaf_columns(md)
    fields = [f for f in table_schema if f.name not in partition_by]
    if config.stats_columns is not None:
        indexed = list(_named_leaves(fields, config.stats_columns, ()))
    else:
        count = config.num_indexed_cols
        indexed = list(_leaves(fields, ()))[: None if count < 0 else count]
    columns = [
        _StatColumn(path, leaves[path], t, _stat_kind(t, md.schema.column(leaves[path])))
        for path, t in indexed
        if path in leaves
    ]
    return _StatsPlan(tuple(columns), exact=any(c.kind == "decimal" for c in columns))


def data_file_stats(
    parquet: bytes | pq.FileMetaData,
    table_schema: pa.Schema,
    *,
    partition_by: Collection[str] = (),
    stats_config: StatsConfig = DEFAULT_STATS,
    encrypted: Collection[int] = (),
) -> str:
    """The add action's ``stats`` JSON, from the Parquet footer alone (no data is decoded).

    ``numRecords``; ``nullCount`` of every non-repeated leaf column of the table that the file
    has (structs as nested objects); ``minValues``/``maxValues`` for integers, booleans, dates,
    timestamps (milliseconds: min floored, max ceiled), decimals, floats and strings as
    delta-spark's writer renders them: NaN and infinities as the strings ``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``; a float max only from a writer that puts NaN in it (none
    from pyarrow: see the module docstring); strings cut to the prefix length (the min a prefix,
    the max a prefix and a tie-breaker, left out when none fits). Binary, lists and maps get no
    min/max, nor does a column whose statistics miss in a row group with values. Partition
    columns are skipped; ``stats_config`` says which leaf columns are described. Encrypted
    columns (``encrypted``: footer column indexes, see
    :func:`parka.lake._stitch.encrypted_columns`) get nothing: their values stay out of the
    log, and their metadata is not even touched (pyarrow aborts on it without the key).

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
    plan = _stats_plan(md, table_schema, partition_by, stats_config)
    # parquet-mr (Spark's writer) orders NaN above all numbers, as Spark does, so its float max
    # is NaN when there is one (delta-spark's StatsCollector trusts it for the same reason).
    nan_in_max = (md.created_by or "").startswith("parquet-mr")
    prefix = stats_config.string_prefix_length
    out: dict[str, dict[str, Any]] = {"minValues": {}, "maxValues": {}, "nullCount": {}}
    for column in plan.columns:
        if column.index in encrypted:
            continue
        for key, value in zip(
            ("nullCount", "minValues", "maxValues"),
            _column_stats(md, column.index, column.type, column.kind, nan_in_max=nan_in_max, prefix=prefix),
            strict=True,
        ):
            if value is not None:
                into = out[key]
                for name in column.path[:-1]:
                    into = into.setdefault(name, {})
                into[column.path[-1]] = value
    stats = {"numRecords": md.num_rows, **out}
    return _dumps(stats) if plan.exact else json.dumps(stats, separators=(",", ":"), allow_nan=False)
