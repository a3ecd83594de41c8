"""The reserved columns: a segment's per-record Kafka metadata, after the user columns.

Each column is present only when at least one record of the segment has a value:
``__parka_key`` (binary), ``__parka_timestamp`` (int64, milliseconds since the epoch, like Kafka
timestamps) and ``__parka_headers`` (list of ``struct<key: string, value: binary>``).
:mod:`parka.segment` states the wire format and hands these names on; this module adds the
columns to a table (:func:`build_segment_table`), takes them off again (:func:`split_reserved`)
and says what is wrong with them (:func:`reserved_problem`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pyarrow as pa

from parka.errors import RecordError, SegmentDecodeError
from parka.schema import RESERVED_PREFIX, schema_fingerprint

__all__ = [
    "HEADERS_COLUMN",
    "KEY_COLUMN",
    "RESERVED_FIELDS",
    "TIMESTAMP_COLUMN",
    "HeaderValue",
    "RecordMeta",
    "build_segment_table",
    "reserved_problem",
    "split_reserved",
]

KEY_COLUMN = RESERVED_PREFIX + "key"
TIMESTAMP_COLUMN = RESERVED_PREFIX + "timestamp"
HEADERS_COLUMN = RESERVED_PREFIX + "headers"
_HEADER_STRUCT = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
RESERVED_FIELDS = (
    pa.field(KEY_COLUMN, pa.binary()),
    pa.field(TIMESTAMP_COLUMN, pa.int64()),
    pa.field(HEADERS_COLUMN, pa.list_(pa.field("element", _HEADER_STRUCT, nullable=False))),
)
_RESERVED_FINGERPRINTS = {f.name: schema_fingerprint(pa.schema([f])) for f in RESERVED_FIELDS}

HeaderValue = bytes | str | None


@dataclass(frozen=True)
class RecordMeta:
    """Per-record Kafka metadata from the reserved columns; each is ``None`` when its column is absent."""

    keys: list[bytes | None] | None
    timestamps: list[int | None] | None
    headers: list[list[tuple[str, bytes | None]] | None] | None


def reserved_problem(schema: pa.Schema) -> str | None:
    """Why the ``__parka_*`` columns of ``schema`` are wrong, or ``None`` when they are fine."""
    for field in schema:
        if not field.name.startswith(RESERVED_PREFIX):
            continue
        expected = _RESERVED_FINGERPRINTS.get(field.name)
        if expected is None:
            return f"unknown reserved column '{field.name}'"
        if schema_fingerprint(pa.schema([field.with_nullable(True)])) != expected:
            return f"reserved column '{field.name}' has type {field.type}"
    return None


def split_reserved(table: pa.Table) -> tuple[pa.Table, RecordMeta]:
    """Split a decoded segment into its user columns and the per-record Kafka metadata.

    Raises:
        SegmentDecodeError: a ``__parka_*`` column is unknown or has the wrong type.
    """
    problem = reserved_problem(table.schema)
    if problem:
        raise SegmentDecodeError(problem)
    names = table.column_names
    user = table.select([n for n in names if not n.startswith(RESERVED_PREFIX)])
    keys = table.column(KEY_COLUMN).to_pylist() if KEY_COLUMN in names else None
    timestamps = table.column(TIMESTAMP_COLUMN).to_pylist() if TIMESTAMP_COLUMN in names else None
    headers = None
    if HEADERS_COLUMN in names:
        headers = []
        for chunk in table.column(HEADERS_COLUMN).chunks:
            headers += _header_lists(chunk)
    return user, RecordMeta(keys=keys, timestamps=timestamps, headers=headers)


def _header_lists(array: pa.ListArray) -> list[list[tuple[str, bytes | None]] | None]:
    """Each record's ``(name, value)`` pairs from a ``__parka_headers`` array, built from its
    names and values as two flat columns (``None`` for a null list)."""
    offsets = array.offsets.to_pylist()  # the slice's own, into the whole child array
    base = offsets[0]
    entries = array.values.slice(base, offsets[-1] - base)
    pairs = list(zip(entries.field(0).to_pylist(), entries.field(1).to_pylist(), strict=True))
    out: list[list[tuple[str, bytes | None]] | None] = [pairs[a - base : b - base] for a, b in pairwise(offsets)]
    if array.null_count:
        out = [row if valid else None for row, valid in zip(out, array.is_valid().to_pylist(), strict=True)]
    return out


def build_segment_table(
    data: pa.Table,
    keys: Sequence[bytes | str | None] | pa.Array | None,
    timestamps: Sequence[int | None] | pa.Array | None,
    headers: Sequence[Sequence[tuple[str, HeaderValue]] | None] | None,
) -> pa.Table:
    """Append the reserved columns to ``data`` (user columns), each only when some value is set.

    Keys and header values given as ``str`` are stored UTF-8 encoded; keys and timestamps may
    also be given as Arrow arrays (binary, int64). An empty header list is stored as null, as
    Kafka does not tell an empty header list from none.

    Raises:
        ValueError: ``data`` already has ``__parka_*`` columns, or a list's length differs from
            the row count.
        RecordError: a key, timestamp or header of the wrong type (``field`` is ``key``,
            ``timestamp`` or ``headers``).
    """
    if any(name.startswith(RESERVED_PREFIX) for name in data.column_names):
        raise ValueError("data already has reserved columns")
    for name, given in (("keys", keys), ("timestamps", timestamps), ("headers", headers)):
        if given is not None and len(given) != data.num_rows:
            raise ValueError(f"{len(given)} {name} for a table of {data.num_rows} rows")
    rows: dict[pa.Field, Any] = {}
    if isinstance(keys, pa.Array):
        if keys.null_count < len(keys):
            rows[RESERVED_FIELDS[0]] = keys
    elif keys is not None and any(k is not None for k in keys):
        rows[RESERVED_FIELDS[0]] = [k.encode() if isinstance(k, str) else k for k in keys]
    if isinstance(timestamps, pa.Array):
        if timestamps.null_count < len(timestamps):
            rows[RESERVED_FIELDS[1]] = timestamps
    elif timestamps is not None and any(t is not None for t in timestamps):
        rows[RESERVED_FIELDS[1]] = list(timestamps)
    if headers is not None and any(headers):
        rows[RESERVED_FIELDS[2]] = headers
    for field, values in rows.items():
        try:
            if isinstance(values, pa.Array):
                array = values.cast(field.type)
            elif field is RESERVED_FIELDS[2]:
                array = _headers_array(values, field.type)
            else:
                array = pa.array(values, type=field.type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            what = field.name.removeprefix(RESERVED_PREFIX)
            raise RecordError(f"invalid Kafka {what}: {exc}", field=what) from exc
        data = data.append_column(field, array)
    return data


def _headers_array(headers: Sequence[Sequence[tuple[str, HeaderValue]] | None], kind: pa.DataType) -> pa.Array:
    """The ``__parka_headers`` column, built from its names and values as two flat columns rather
    than by Arrow's conversion of a list of dicts per record; an empty header list is null. Raises
    what Arrow raises for a name or value of a wrong type."""
    offsets = [0]
    names: list[Any] = []
    values: list[Any] = []
    for pairs in headers:
        if pairs:
            for name, value in pairs:
                names.append(name)
                values.append(value.encode() if isinstance(value, str) else value)
        offsets.append(len(names))
    entry = kind.value_type
    entries = pa.StructArray.from_arrays(
        [pa.array(names, entry.field(0).type), pa.array(values, entry.field(1).type)], fields=list(entry)
    )
    mask = pa.array([not pairs for pairs in headers], pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries, type=kind, mask=mask)
