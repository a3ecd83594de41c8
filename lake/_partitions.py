"""Which table partition a segment belongs to, and the split of one that spans several.

:func:`segment_partition_values` decides from the Parquet footer's min/max and null counts when
it can (no data page read), else from the source columns alone (a ``bucket`` mostly: bounds do
not settle a hash); either way a segment whose rows share one partition goes into the table byte
for byte. :func:`split_by_partition` divides decoded rows by their partition values.
The specs themselves (``day=date(ts)``) are :mod:`parka.partitioning`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parka.errors import SegmentDecodeError
from parka.partitioning import PartitionSpec, partition_keys

from ._plan import partition_value_string
from ._stats import RecentCache

__all__ = ["footer_value", "segment_partition_values", "split_by_partition"]

PartitionValues = dict[str, str | None]

_SPANS = object()  # the footer shows the segment spans several values of a spec
_UNKNOWN = object()  # the footer cannot tell


def _exact_bounds(t: pa.DataType) -> bool:
    """Types whose Parquet min/max are exact values, ordered as the transforms assume. Not
    floats (NaN is left out of min/max, -0.0 and 0.0 compare equal), not binary or decimals."""
    t = t.value_type if pa.types.is_dictionary(t) else t
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
    )


_leaves: RecentCache[dict[str, int]] = RecentCache()


def _top_level_leaves(meta: pq.FileMetaData) -> dict[str, int]:
    """Footer column index of each top-level primitive column, by name (once per file schema)."""

    def build() -> dict[str, int]:
        out = {}
        for i in range(meta.num_columns):
            column = meta.schema.column(i)
            if column.max_repetition_level == 0 and column.path == column.name:
                out[column.name] = i
        return out

    return _leaves.get((meta.schema,), build)


def footer_value(
    meta: pq.FileMetaData, spec: PartitionSpec, source_type: pa.DataType, encrypted: frozenset[int] = frozenset()
) -> Any:
    """``spec``'s one value for every row of the file described by ``meta``, from its column
    statistics alone; :data:`_SPANS` when it has several, :data:`_UNKNOWN` when the footer
    cannot tell (no statistics, a type whose statistics are not exact, or a ``bucket`` whose
    smallest and largest values differ: a hash of values in between can be any bucket).
    ``None``: every source value is null.

    Raises:
        SegmentDecodeError: the source column is encrypted (``encrypted``: footer indexes).
    """
    index = _top_level_leaves(meta).get(spec.source)
    if index is not None and index in encrypted:
        raise SegmentDecodeError(
            f"partition column '{spec.source}' is encrypted: its values cannot be read without "
            "the key, so the segment's table partition cannot be decided"
        )
    if index is None or not _exact_bounds(source_type):
        return _UNKNOWN
    nulls, lo, hi = 0, None, None
    for r in range(meta.num_row_groups):
        chunk = meta.row_group(r).column(index)
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            return _UNKNOWN
        nulls += stats.null_count
        if stats.null_count == meta.row_group(r).num_rows:  # no value in this row group
            continue
        if not stats.has_min_max:
            return _UNKNOWN
        lo = stats.min if lo is None else min(lo, stats.min)
        hi = stats.max if hi is None else max(hi, stats.max)
    if lo is None or hi is None:
        return None if nulls == meta.num_rows else _UNKNOWN
    if nulls:
        return _SPANS  # nulls and values: the null partition and at least one more
    value = spec.value_of_range(lo, hi, source_type)
    if value is not None:
        return value
    # a monotonic transform's bounds with two values prove two partitions; a hash's prove nothing
    return _SPANS if spec.monotonic else _UNKNOWN


def segment_partition_values(
    meta: pq.FileMetaData,
    value: bytes,
    specs: Sequence[PartitionSpec],
    schema: pa.Schema,
    encrypted: frozenset[int] = frozenset(),
) -> PartitionValues | None:
    """The partition values (as Delta's ``partitionValues`` hold them) shared by every row of
    the segment ``value`` (footer ``meta``, source column types in ``schema``), or ``None`` when
    its rows span several partitions. Decided from the footer's statistics when they tell (no
    data page read); otherwise only the source columns the footer could not settle are read.

    Raises:
        SchemaError: a source column is missing or of a type its transform cannot take.
        SegmentDecodeError: the source columns cannot be read (or are encrypted).
    """
    values: dict[str, Any] = {}
    unsettled: list[PartitionSpec] = []
    for spec in specs:
        found = footer_value(meta, spec, schema.field(spec.source).type, encrypted)
        if found is _SPANS:
            return None
        if found is _UNKNOWN:
            unsettled.append(spec)
        else:
            values[spec.name] = found
    if unsettled:
        data = _read(value, sorted({s.source for s in unsettled}))
        keys = partition_keys(data, unsettled)
        groups = keys.group_by(keys.column_names, use_threads=False).aggregate([])
        if groups.num_rows > 1:
            return None
        first = groups.to_pylist()[0] if groups.num_rows else dict.fromkeys(keys.column_names)
        values.update(first)
    return {s.name: partition_value_string(values[s.name]) for s in specs}


def split_by_partition(data: pa.Table, specs: Sequence[PartitionSpec]) -> list[tuple[PartitionValues, pa.Table]]:
    """``data``'s rows divided by partition values, in each part in their order. Derived
    partition columns are not added: Delta readers fill partition columns from the log.

    Raises:
        SchemaError: a source column is missing or of a type its transform cannot take.
        SegmentDecodeError: the parts would not hold every row exactly once (a value grouping
            cannot tell apart); nothing is written then.
    """
    keys = partition_keys(data, specs).append_column("__row", pa.array(range(data.num_rows), pa.int64()))
    names = [s.name for s in specs]
    groups = keys.group_by(names, use_threads=False).aggregate([("__row", "list")])
    out = []
    taken = 0
    for group in groups.to_pylist():
        rows = group["__row_list"]
        taken += len(rows)
        out.append(({n: partition_value_string(group[n]) for n in names}, data.take(pa.array(rows, pa.int64()))))
    if taken != data.num_rows:
        raise SegmentDecodeError(f"splitting {data.num_rows} rows by partition gave {taken}: not written")
    return out


def _read(value: bytes, columns: list[str]) -> pa.Table:
    try:
        return pq.read_table(pa.BufferReader(value), columns=columns)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise SegmentDecodeError(f"cannot read the partition source columns {columns}: {exc}") from exc
