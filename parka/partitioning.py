"""Table partitioning specs (``--partition-by``, ``columnar.partition.by``): parsed once, evaluated
on Arrow arrays and on a column's min/max. Pure: no I/O, no Kafka, no Delta.

A spec is ``name`` (an existing column, the identity) or ``name=<transform>(column)``:

==========================  ===========================================  ======================
spec                        value                                        partition column type
==========================  ===========================================  ======================
``country``                 the column's value                           the column's
``day=date(ts)``            the date of ``ts``: UTC for a timestamp      ``date``
                            with a time zone (Delta's ``timestamp``),
                            the wall-clock date for one without
                            (``timestamp_ntz``); a date as is
``hour=hour(ts)``           ``yyyy-MM-dd-HH`` of ``ts`` (UTC, as above)  ``string``
``month=month(ts)``         ``yyyy-MM`` of ``ts`` or of a date           ``string``
                            (UTC, as above)
``year=year(ts)``           the calendar year of ``ts`` or of a date     ``int32``
                            (UTC, as above): 2026
``b=truncate(id, 1000)``    integers: ``id`` rounded down to a multiple  the column's
                            of 1000 (-1 -> -1000, as Iceberg's); strings:
                            the first 1000 characters
``b=bucket(id, 16)``        Iceberg's bucket: murmur3 of the value's     ``int32``
                            bytes, modulo 16 (:mod:`parka._bucket`);
                            Iceberg tables only
==========================  ===========================================  ======================

Why a string for ``hour``: delta-spark reads a ``timestamp`` partition value written as
``yyyy-MM-dd HH:mm:ss`` in the reader's session time zone, so two readers in different zones
would see different hours; a ``yyyy-MM-dd-HH`` string means the same everywhere, sorts in time
order (``WHERE hour >= '2026-11-23-08'`` prunes) and is what Hive-style hourly layouts use.
A ``date`` has no such ambiguity, so ``day`` is a Spark/Delta ``date`` a user filters naturally.
``month`` is a ``yyyy-MM`` string for the reason ``hour`` is one, and ``year`` the calendar year
(``WHERE year = 2026``): each value is what Iceberg shows for its transform (its human-readable
partition value, the one in its directory names), so one segment gets the same partition in a
Delta table and in an Iceberg table; Iceberg's own numbers (years since 1970, months since
1970-01, days and hours since the epoch) are worked out from it where an Iceberg table is written.

``bucket`` is Iceberg's only: Delta has no bucket transform, and a Delta reader could not work
out the bucket of the rows it looks for (Iceberg's Spark runtime has ``system.bucket``), so no
query would ever prune by it; a Delta table cannot be partitioned by it (:meth:`PartitionSpec.delta_problem`).

Every transform but ``bucket`` is monotonic (non-decreasing in its input), so when the smallest
and largest values of a segment's column map to one value, so does every value between them:
that is how ingestion decides a segment's partition from its Parquet footer alone
(:meth:`PartitionSpec.value_of_range`). A bucket is a hash: the footer settles it only when the
smallest and largest values are one value; otherwise the column is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._bucket import bucket, bucket_problem
from .errors import ConfigError, SchemaError

__all__ = [
    "DELTA_ALLOWED",
    "EXPRESSION_KEY",
    "TRANSFORMS",
    "PartitionSpec",
    "parse_partition_by",
    "parse_spec",
    "partition_keys",
    "runs",
]

TRANSFORMS = ("date", "hour", "month", "year", "truncate", "bucket")
EXPRESSION_KEY = "parka.partition.expression"
"""Metadata key of a derived partition column in the table schema: its expression (``date(ts)``)."""

_NAME = r"[^\s=(),;{}]+"  # what Delta allows in a column name (no column mapping)
_DERIVED = re.compile(
    rf"^(?P<name>{_NAME})\s*=\s*(?P<fn>[A-Za-z_]+)\s*\(\s*(?P<col>{_NAME})\s*(?:,\s*(?P<arg>-?\d+)\s*)?\)$"
)
_IDENTITY = re.compile(rf"^{_NAME}$")
_ALLOWED = (
    "a column name, or name=date(col), name=hour(col), name=month(col), name=year(col), name=truncate(col, N) "
    "or name=bucket(col, N) with N >= 1"
)
_TIME = ("date", "hour", "month", "year")  # of a timestamp (or a date, except hour)
_WITH_N = ("truncate", "bucket")
_MAX_N = 2**31 - 1  # Iceberg's width and number of buckets are ints
DELTA_ALLOWED = "for a Delta table: column names, or date, hour, month, year and truncate specs"
"""What a Delta table can be partitioned by, for the errors refusing what :meth:`PartitionSpec.delta_problem` names."""


@dataclass(frozen=True)
class PartitionSpec:
    """One partition column of a table: ``name``, computed by ``transform`` (``None``: the
    identity) from ``source``; ``width`` is the N of ``truncate(col, N)`` and of
    ``bucket(col, N)`` (the number of buckets). Build with :func:`parse_spec`."""

    name: str
    source: str
    transform: str | None = None
    width: int | None = None

    @property
    def derived(self) -> bool:
        return self.transform is not None

    @property
    def monotonic(self) -> bool:
        """Whether the value never decreases as the source value grows (all but ``bucket``)."""
        return self.transform != "bucket"

    def delta_problem(self) -> str | None:
        """Why a Delta table cannot be partitioned by this spec (``bucket``, Iceberg-only: see the
        module docstring), or ``None``."""
        if self.transform != "bucket":
            return None
        return (
            f"{self.expression} is Iceberg-only: Delta has no bucket transform, and no Delta reader could work out "
            f"a row's bucket to prune by it; land in an Iceberg table (--catalog), or cluster a Delta table by "
            f"{self.source} with parka optimize --z-order {self.source}"
        )

    @property
    def expression(self) -> str:
        """What the table records for a derived column: ``date(ts)``, ``truncate(id, 10)``."""
        if self.transform is None:
            return self.source
        arg = f", {self.width}" if self.width is not None else ""
        return f"{self.transform}({self.source}{arg})"

    def __str__(self) -> str:
        return self.name if self.transform is None else f"{self.name}={self.expression}"

    def problem(self, source_type: pa.DataType) -> str | None:
        """Why this spec cannot be computed from a source column of ``source_type``, or ``None``."""
        t = _plain(source_type)
        if self.transform is None:
            return "a partition column must be a primitive column" if pa.types.is_nested(t) else None
        if self.transform in _TIME:
            if pa.types.is_timestamp(t) or (self.transform != "hour" and pa.types.is_date(t)):
                return None
            wanted = "a timestamp" if self.transform == "hour" else "a timestamp or a date"
            return f"{self.expression} needs {wanted}, not {source_type}"
        if self.transform == "bucket":
            needs = bucket_problem(t)
            return None if needs is None else f"{self.expression} needs {needs}, not {source_type}"
        if pa.types.is_integer(t) or _is_string(t):
            return None
        return f"{self.expression} needs an integer or a string, not {source_type}"

    def output_type(self, source_type: pa.DataType) -> pa.DataType:
        """The partition column's type for a source column of ``source_type``.

        Raises:
            SchemaError: the transform cannot take that type (``field`` is the source column).
        """
        problem = self.problem(source_type)
        if problem is not None:
            raise SchemaError(problem, field=self.source)
        if self.transform == "date":
            return pa.date32()
        if self.transform in ("hour", "month"):
            return pa.string()
        if self.transform in ("year", "bucket"):
            return pa.int32()
        t = _plain(source_type)
        return pa.string() if _is_string(t) else t

    def output_field(self, source: pa.Field) -> pa.Field:
        """The table's partition column for the source column ``source``: nullable (a null source
        value is the partition ``__HIVE_DEFAULT_PARTITION__``); a derived one carries its
        expression under :data:`EXPRESSION_KEY`, so the table says how it is computed.

        Raises:
            SchemaError: the transform cannot take the source column's type.
        """
        t = self.output_type(source.type)
        if self.transform is None:
            return source.with_type(t)
        return pa.field(self.name, t, nullable=True, metadata={EXPRESSION_KEY: self.expression})

    def evaluate(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """This spec's value for each of ``values`` (the source column); nulls stay null.

        Raises:
            SchemaError: the transform cannot take the array's type.
        """
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        self.output_type(values.type)
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        if self.transform is None:
            return values
        t = values.type
        if self.transform in _TIME:
            if pa.types.is_timestamp(t) and t.tz is not None:
                # A zoned timestamp is an instant: its UTC wall clock is the stored value.
                values = values.cast(pa.timestamp(t.unit))
            if self.transform == "date":
                return values.cast(pa.date32())
            if self.transform == "year":
                return pc.year(values).cast(pa.int32())
            return pc.strftime(values, format="%Y-%m-%d-%H" if self.transform == "hour" else "%Y-%m")
        assert self.width is not None  # parse_spec gives truncate and bucket their N
        if self.transform == "bucket":
            return bucket(values, self.width)
        if _is_string(t):
            return pc.utf8_slice_codeunits(values.cast(pa.string()), 0, self.width)
        width = pa.scalar(self.width, t)
        quotient = pc.divide(values, width)  # truncates towards zero; the floor differs below 0
        rest = pc.subtract(values, pc.multiply(quotient, width))
        floor = pc.if_else(pc.less(rest, pa.scalar(0, t)), pc.subtract(quotient, pa.scalar(1, t)), quotient)
        return pc.multiply(floor, width)

    def value_of_range(self, lo: Any, hi: Any, source_type: pa.DataType) -> Any | None:
        """The one value this spec gives every source value in ``[lo, hi]`` (both not null), or
        ``None`` when it cannot tell: ``lo`` and ``hi`` map to different values, or (``bucket``,
        a hash) ``lo != hi``. Sound because the other transforms are monotonic; for the identity
        only when ``lo == hi``.

        Raises:
            SchemaError: the transform cannot take ``source_type``.
        """
        if not self.monotonic and lo != hi:
            return None
        pair = self.evaluate(pa.array([lo, hi], type=_plain(source_type))).to_pylist()
        return pair[0] if pair[0] == pair[1] and pair[0] is not None else None


def _plain(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def parse_spec(text: str, *, key: str = "--partition-by") -> PartitionSpec:
    """One spec: ``name`` or ``name=date(col)``, ``name=hour(col)``, ``name=month(col)``,
    ``name=year(col)``, ``name=truncate(col, N)``, ``name=bucket(col, N)``.

    Raises:
        ConfigError: naming ``key`` and the spec, with what is allowed.
    """
    spec = text.strip()
    if _IDENTITY.match(spec):
        return PartitionSpec(spec, spec)
    m = _DERIVED.match(spec)
    if m is None:
        raise ConfigError(key, text, _ALLOWED)
    name, fn, col, arg = m.group("name"), m.group("fn").lower(), m.group("col"), m.group("arg")
    if fn not in TRANSFORMS:
        raise ConfigError(key, text, _ALLOWED, reason=f"unknown transform '{fn}'")
    if name.lower() == col.lower():
        raise ConfigError(key, text, _ALLOWED, reason="a derived column needs a name of its own")
    if fn in _WITH_N:
        what = "a width" if fn == "truncate" else "a number of buckets"
        if arg is None or int(arg) < 1:
            raise ConfigError(key, text, _ALLOWED, reason=f"{fn} needs {what} N >= 1")
        if int(arg) > _MAX_N:
            raise ConfigError(key, text, _ALLOWED, reason=f"{fn} needs {what} N <= {_MAX_N} (an Iceberg int)")
        return PartitionSpec(name, col, fn, int(arg))
    if arg is not None:
        raise ConfigError(key, text, _ALLOWED, reason=f"{fn}() takes one column")
    return PartitionSpec(name, col, fn)


def _split_top_level(text: str) -> list[str]:
    """``text`` split at commas outside parentheses (``truncate(id, 10)`` holds one)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_partition_by(
    value: str | Iterable[str | PartitionSpec], *, key: str = "--partition-by"
) -> tuple[PartitionSpec, ...]:
    """Specs from a comma-separated text (``day=date(ts),country``) or a list of texts and specs.

    Raises:
        ConfigError: a malformed spec, or two specs with one name (``key`` and the text named).
    """
    items: list[str | PartitionSpec] = []
    if isinstance(value, str):
        items.extend(p for p in _split_top_level(value) if p.strip())
    else:
        for item in value:
            if isinstance(item, PartitionSpec):
                items.append(item)
            elif isinstance(item, str):
                items.extend(p for p in _split_top_level(item) if p.strip())
            else:
                raise ConfigError(key, item, _ALLOWED)
    specs = tuple(i if isinstance(i, PartitionSpec) else parse_spec(i, key=key) for i in items)
    seen: dict[str, str] = {}
    for i, s in enumerate(specs):
        other = seen.setdefault(s.name.lower(), s.name)  # Delta names are case-insensitive
        if len(seen) <= i:
            twice = f"'{s.name}' is named twice" if other == s.name else f"'{other}' and '{s.name}' name one column"
            raise ConfigError(key, value, _ALLOWED, reason=twice)
    return specs


def partition_keys(table: pa.Table, specs: Sequence[PartitionSpec]) -> pa.Table:
    """Each row's partition values: one column per spec, named by it.

    Raises:
        SchemaError: a source column is missing, or of a type its transform cannot take.
    """
    columns = []
    for s in specs:
        if s.source not in table.column_names:
            raise SchemaError(f"partition column '{s.name}' needs it, and the data lacks it", field=s.source)
        columns.append(s.evaluate(table[s.source]))
    return pa.table(columns, names=[s.name for s in specs])


def runs(keys: pa.Table) -> list[tuple[int, int, tuple[Any, ...]]]:
    """Maximal stretches of consecutive rows with equal partition values, in row order, as
    ``(start, stop, values)``. Rows keep their order: a value that comes back starts a new run.
    (Two NaNs differ, so each starts a run of its own: smaller pieces, no row lost.)"""
    n = keys.num_rows
    if n == 0:
        return []
    if keys.num_columns == 0:
        return [(0, n, ())]
    changed = np.zeros(n - 1, dtype=bool)
    for column in keys.columns:
        col = column.combine_chunks()
        a, b = col.slice(1), col.slice(0, n - 1)
        differs = pc.fill_null(pc.not_equal(a, b), pc.xor(pc.is_null(a), pc.is_null(b)))
        changed |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
    starts = [0, *(np.nonzero(changed)[0] + 1).tolist()]
    stops = [*starts[1:], n]
    return [(s, e, tuple(keys.slice(s, 1).to_pylist()[0].values())) for s, e in zip(starts, stops, strict=True)]
