"""How a segment's columns are laid out in Parquet: per-column encodings and the row order.

:func:`choose_encodings` picks, per Parquet leaf column, a dictionary or one Parquet encoding
from the column's Arrow type and a sample of its values (the first :data:`SAMPLE_ROWS` rows):

==========================  ===============================================================
column                      chosen
==========================  ===============================================================
integer, timestamp, date,   dictionary when few distinct values; ``DELTA_BINARY_PACKED``
time, duration              when neighbours are close compared with the range (sorted or
                            smooth: ids, event times); else dictionary when values repeat,
                            else ``PLAIN``
float, double               dictionary when values repeat, else ``PLAIN``
string, binary              dictionary when values repeat; else ``DELTA_BYTE_ARRAY`` (shared
                            prefixes of ISO times and paths are saved; for uuids and free text
                            it is DELTA_LENGTH_BYTE_ARRAY's layout plus zero prefix lengths)
boolean                     ``PLAIN`` (bit-packed already)
inside a list or map,       dictionary, as pyarrow does by default
dictionary-typed, decimal,
other fixed-width binary
==========================  ===============================================================

Every encoding chosen is one that Spark 4.0's vectorized Parquet reader, parquet-mr, DuckDB and
pyarrow all read. ``BYTE_STREAM_SPLIT`` is never chosen, although it shrinks some float columns:
Spark 4.0.0's vectorized reader (its default) refuses it ("Unsupported encoding:
BYTE_STREAM_SPLIT"), and a Delta table of parka segments must stay readable by Spark. Nor is
``DELTA_LENGTH_BYTE_ARRAY``: that reader misreads it wherever a column chunk has nulls (values
after a null come back empty or shifted: 3,990 of 5,000 strings wrong in a check on 2026-11-23),
silently.

:func:`sort_order` is the optional row order within a segment (``columnar.sort.by``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = [
    "AUTO_ZSTD_LEVEL",
    "DEFAULT_TUNING",
    "DICTIONARY",
    "SAMPLE_ROWS",
    "TUNINGS",
    "ColumnEncodings",
    "LayoutCache",
    "choose_encodings",
    "sort_order",
]

TUNINGS = ("auto", "none")
DEFAULT_TUNING = "auto"
SAMPLE_ROWS = 2048
# pyarrow writes level 1; zstd's own default (and Kafka's for its batches) is 3. Level 2 wrote as
# few bytes as 3 on the benchmark data sets at 10,000 rows per segment (within 1% on flights,
# web_requests and gps, 3% fewer on github_events) for 4-15% less CPU, and 2-5% fewer than level 1
# on the flat sets (benchmarks/results/2026-11-30-zstd-level/).
AUTO_ZSTD_LEVEL = 2
DICTIONARY = "DICTIONARY"  # what ColumnEncodings.of says for a dictionary-encoded column
PLAIN = "PLAIN"
DELTA_INT = "DELTA_BINARY_PACKED"
DELTA_PREFIX = "DELTA_BYTE_ARRAY"

# Measured on the benchmark data sets (flights, web_requests, GPS) at 10,000 rows per segment,
# zstd: a dictionary pays for itself while the sample's distinct values are at most these
# fractions of its rows. Below _FEW_DISTINCT it wins for integers whatever their order.
_FEW_DISTINCT = 0.05
_DICT_NUMBERS = 0.7
_DICT_STRINGS = 0.5
# A column whose repeated values come in about one run each (rows sorted or grouped by it, as
# columnar.sort.by does): at most this many runs per distinct value.
_CLUSTERED_RUNS = 1.5
# DELTA_BINARY_PACKED stores each difference in about log2(step) bits instead of log2(range):
# worth it when that saves at least this many bits per value.
_DELTA_MIN_SAVED_BITS = 3.5


@dataclass(frozen=True)
class ColumnEncodings:
    """Per-leaf Parquet layout: dictionary-encoded leaves, and the encoding of the others.

    Leaves are named by their Parquet path (``meta.producer.timestamp``, ``tags.list.element``).
    A leaf in neither is written ``PLAIN``.
    """

    dictionary: tuple[str, ...]
    encodings: tuple[tuple[str, str], ...]

    def writer_options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`pyarrow.parquet.write_table`."""
        return {"use_dictionary": list(self.dictionary), "column_encoding": dict(self.encodings)}

    def of(self, path: str) -> str:
        """What leaf ``path`` gets: :data:`DICTIONARY` or a Parquet encoding name."""
        if path in self.dictionary:
            return DICTIONARY
        return dict(self.encodings).get(path, PLAIN)


def choose_encodings(table: pa.Table, *, sample_rows: int = SAMPLE_ROWS) -> ColumnEncodings:
    """Per-leaf encodings for writing ``table``, judged on its first ``sample_rows`` rows.

    Pure: the same table gives the same choice. Never raises for a table pyarrow can write.
    """
    sample = table.slice(0, sample_rows)
    chosen: dict[str, str] = {}
    for field, column in zip(sample.schema, sample.columns, strict=True):
        for path, array in _struct_leaves(field.name, column.combine_chunks()):
            chosen[path] = _choose(array)
    dictionary = []
    encodings = []
    for path in _leaf_paths(table.schema):
        # leaves under a list or map were not walked: dictionary, pyarrow's default
        choice = chosen.get(path, DICTIONARY)
        if choice == DICTIONARY:
            dictionary.append(path)
        elif choice != PLAIN:
            encodings.append((path, choice))
    return ColumnEncodings(tuple(dictionary), tuple(encodings))


class LayoutCache:
    """A producer's memory of :func:`choose_encodings`: judged on one segment, reused for the
    next ``every - 1`` segments of the same schema, then judged again (the data may change).

    Judging costs about half a millisecond per column on a busy 2-core machine, as much as
    encoding a few thousand rows; a topic's data rarely changes its nature between segments.
    Not thread-safe: the producer calls it under its lock.
    """

    def __init__(self, every: int = 16) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self._every = every
        self._schema: pa.Schema | None = None
        self._layout = ColumnEncodings((), ())
        self._uses = 0

    def layout(self, table: pa.Table) -> ColumnEncodings:
        """The layout for ``table``: the remembered one, or a new judgement of ``table``."""
        if self._uses >= self._every or self._schema is None or not self._schema.equals(table.schema):
            self._layout = choose_encodings(table)
            self._schema = table.schema
            self._uses = 0
        self._uses += 1
        return self._layout


@functools.lru_cache(maxsize=64)
def _leaf_paths(schema: pa.Schema) -> tuple[str, ...]:
    """The Parquet leaf column paths pyarrow writes for ``schema`` (compliant nested types)."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink, use_compliant_nested_type=True)
    parquet_schema = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
    return tuple(parquet_schema.column(i).path for i in range(len(parquet_schema)))


def _struct_leaves(path: str, array: pa.Array) -> Iterator[tuple[str, pa.Array]]:
    """``(Parquet path, values)`` of the leaves reached through structs only."""
    if pa.types.is_struct(array.type):
        for i in range(array.type.num_fields):
            child = array.type.field(i)
            # a null struct hides its children's values: flatten() applies the parent's nulls
            yield from _struct_leaves(f"{path}.{child.name}", array.flatten()[i])
    elif not pa.types.is_nested(array.type):
        yield path, array


def _choose(array: pa.Array) -> str:
    t = array.type
    values = array.drop_null()
    if len(values) < 2 or pa.types.is_dictionary(t):
        return DICTIONARY
    if pa.types.is_boolean(t):
        return PLAIN
    distinct_count = pc.count_distinct(values).as_py()
    distinct = distinct_count / len(values)
    if distinct > _FEW_DISTINCT and _runs(values) <= min(_CLUSTERED_RUNS * distinct_count, len(values) / 2):
        # values repeat, each in about one run (rows sorted or grouped by it): the compressor
        # takes a run for the cost of one value, a dictionary would pay for the value twice
        return PLAIN
    if _is_int64_like(t):
        if distinct <= _FEW_DISTINCT:
            return DICTIONARY
        if _delta_saved_bits(values) >= _DELTA_MIN_SAVED_BITS:
            return DELTA_INT
        return DICTIONARY if distinct <= _DICT_NUMBERS else PLAIN
    if pa.types.is_floating(t) and t.bit_width in (32, 64):
        return DICTIONARY if distinct <= _DICT_NUMBERS else PLAIN
    if _is_byte_array(t):
        if distinct <= _DICT_STRINGS:
            return DICTIONARY
        # DELTA_BYTE_ARRAY even without shared prefixes: its lengths are DELTA_LENGTH_BYTE_ARRAY's
        # (which Spark misreads, see above) plus prefix lengths of 0, which cost next to nothing
        return DELTA_PREFIX
    return DICTIONARY  # decimals, float16, fixed-size binary: pyarrow's default


def _runs(values: pa.Array) -> int:
    """How many runs of equal neighbours ``values`` (no nulls, at least two) make."""
    changes = pc.not_equal(values.slice(1), values.slice(0, len(values) - 1))
    return 1 + int(pc.sum(changes.cast(pa.int64())).as_py() or 0)


def _is_int64_like(t: pa.DataType) -> bool:
    """Written as Parquet INT32 or INT64 (intervals are not: they are fixed-size byte arrays)."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    )


def _is_byte_array(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _delta_saved_bits(values: pa.Array) -> float:
    """log2 of the value range minus log2 of the mean step between neighbours."""
    width = values.type.bit_width
    numbers = values.view(pa.int32() if width <= 32 else pa.int64()) if pa.types.is_temporal(values.type) else values
    x = np.asarray(numbers.to_numpy(zero_copy_only=False), dtype=np.float64)
    steps = float(np.abs(np.diff(x)).mean())
    return float(np.log2(x.max() - x.min() + 1.0) - np.log2(steps + 1.0))


def sort_order(table: pa.Table, by: Sequence[str], keys: pa.Array | None = None) -> pa.Array | None:
    """The row order that sorts ``table`` by the columns ``by`` (ascending, nulls last: Arrow's default, stable).

    ``keys`` are the rows' Kafka keys (``None`` or null for records without one). Kafka keeps
    the records of one key in order, and so must a segment: when the sort would put two records
    with the same key in another order than they came, the rows stay as they are. Rows without a
    key may move. Returns ``None`` when the rows stay as they are (already sorted, or kept for
    a key's sake), else the indices for ``table.take``.

    Raises:
        KeyError: a column of ``by`` is not in ``table``.
        pyarrow.ArrowNotImplementedError: a column of ``by`` has a type Arrow cannot sort.
    """
    n = table.num_rows
    if not by or n < 2:
        return None
    missing = [c for c in by if c not in table.column_names]
    if missing:
        raise KeyError(f"sort column {missing[0]!r} is not in the segment")
    # the row number as the last key: equal rows keep their order whatever Arrow's sort does
    row = pa.array(np.arange(n, dtype=np.uint64))  # the type sort_indices returns
    keyed = pa.table([*(table.column(c) for c in by), row], names=[*(f"k{i}" for i in range(len(by))), "row"])
    order = pc.sort_indices(
        keyed,
        sort_keys=[*((f"k{i}", "ascending") for i in range(len(by))), ("row", "ascending")],
    )
    if order.equals(row):
        return None
    if keys is not None and keys.null_count < len(keys) and _reorders_a_key(keys, order):
        return None
    return order


def _reorders_a_key(keys: pa.Array, order: pa.Array) -> bool:
    """Whether ``order`` puts two rows with the same (non-null) key out of their first order."""
    moved = pa.table({"key": keys.take(order), "at": pa.array(np.arange(len(order))), "was": order})
    moved = moved.filter(pc.is_valid(moved["key"]))
    if moved.num_rows < 2:
        return False
    by_key = moved.take(pc.sort_indices(moved, sort_keys=[("key", "ascending"), ("at", "ascending")]))
    key = by_key["key"].combine_chunks()
    was = np.asarray(by_key["was"].to_numpy())
    same = np.asarray(
        pc.equal(key.slice(1), key.slice(0, len(key) - 1)).fill_null(False).to_numpy(zero_copy_only=False)
    )
    return bool(np.any(same & (was[1:] < was[:-1])))
