"""Correctness checks that run with every measurement; a mismatch stops the run.

A table's *fingerprint* is a SHA-256 over its rows in a canonical order: nested structs are
flattened, lists and maps taken as canonical JSON text, timestamps taken as integers, the rows
sorted by every column, then each column's validity and values hashed. Two tables with the same
rows in any order, in any chunking, get the same fingerprint; one changed value, one lost or one
extra row changes it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset

__all__ = ["CheckFailed", "Checks", "column_sums", "fingerprint", "to_table"]


class CheckFailed(RuntimeError):
    """What a benchmark read back differs from what it produced."""


def to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Decoded records as a table of ``schema`` (for fingerprinting)."""
    return pa.Table.from_pylist(rows, schema=schema)


def _flat(table: pa.Table) -> pa.Table:
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    columns = []
    for col in table.columns:
        t = col.type
        if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
            col = col.cast(pa.int64() if t.bit_width == 64 else pa.int32())
        elif pa.types.is_string_view(t) or pa.types.is_large_string(t):
            col = col.cast(pa.string())
        elif pa.types.is_dictionary(t):
            col = col.cast(t.value_type)
        elif pa.types.is_boolean(t):
            col = col.cast(pa.int8())
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            col = _canonical_text(col)
        columns.append(col)
    return pa.Table.from_arrays(columns, names=table.column_names)


def _canonical_text(col: pa.ChunkedArray) -> pa.Array:
    """A list or map column as one JSON text per row (maps as their key-value pairs, timestamps as
    ISO text): such columns cannot be sorted or hashed as buffers; nulls stay null."""
    values = col.to_pylist()
    return pa.array(
        [None if v is None else json.dumps(v, sort_keys=True, default=str, separators=(",", ":")) for v in values],
        pa.string(),
    )


def fingerprint(table: pa.Table, schema: pa.Schema) -> str:
    """Order-independent content hash of ``table``'s columns named in ``schema``.

    Raises ``CheckFailed`` when a column of ``schema`` is missing.
    """
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise CheckFailed(f"column(s) missing: {', '.join(missing)}")
    flat = _flat(table.select(schema.names))
    if flat.num_rows:
        order = pc.sort_indices(flat, sort_keys=[(n, "ascending") for n in flat.column_names])
        flat = flat.take(order)
    digest = hashlib.sha256(f"rows={flat.num_rows}".encode())
    for name, chunked in zip(flat.column_names, flat.columns, strict=True):
        col = chunked.combine_chunks() if chunked.num_chunks != 1 else chunked.chunk(0)
        digest.update(name.encode())
        digest.update(np.packbits(np.asarray(col.is_valid())).tobytes())
        if pa.types.is_string(col.type) or pa.types.is_binary(col.type):
            col = col.cast(pa.large_binary()).fill_null(b"")
            offsets = np.frombuffer(col.buffers()[1], dtype=np.int64)[col.offset : col.offset + len(col) + 1]
            data = col.buffers()[2]
            digest.update((offsets - offsets[0]).tobytes())
            if data is not None:
                digest.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
        else:
            digest.update(np.asarray(col.fill_null(pa.scalar(0, col.type))).tobytes())
    return digest.hexdigest()[:20]


def column_sums(table: pa.Table | pa.dataset.Dataset, schema: pa.Schema) -> dict[str, str]:
    """Per leaf column: rows, nulls and an exact, order-independent sum (integers, timestamps;
    floats with ``math.fsum``; strings by total length). Cheaper than :func:`fingerprint` for
    tables of millions of rows, read column by column."""
    out: dict[str, str] = {}
    for name in schema.names:
        column = table.select([name]) if isinstance(table, pa.Table) else table.to_table(columns=[name])
        flat = _flat(column)
        for leaf, chunked in zip(flat.column_names, flat.columns, strict=True):
            t = chunked.type
            if pa.types.is_floating(t):
                total = repr(math.fsum(np.asarray(chunked.drop_null().combine_chunks())))
            elif pa.types.is_integer(t) or pa.types.is_boolean(t):
                total = str(pc.sum(chunked.cast(pa.int64())).as_py() or 0)
            elif pa.types.is_string(t) or pa.types.is_binary(t):
                total = str(pc.sum(pc.binary_length(chunked)).as_py() or 0)
            else:
                raise CheckFailed(f"column_sums: no rule for {leaf} of type {t}")
            out[leaf] = f"rows={len(chunked)} nulls={chunked.null_count} sum={total}"
    return out


@dataclass
class Checks:
    """Every check of a run, for results.json; :meth:`expect` raises on the first mismatch."""

    passed: list[dict[str, Any]] = field(default_factory=list)

    def expect(self, what: str, *, rows: int, expected_rows: int, got: str | None, expected: str | None) -> None:
        """Record a check of ``what``; raises ``CheckFailed`` when rows or fingerprints differ."""
        if rows != expected_rows:
            raise CheckFailed(f"{what}: {rows:,} rows, expected {expected_rows:,}")
        if got != expected:
            raise CheckFailed(f"{what}: content fingerprint {got} differs from the produced data's {expected}")
        self.passed.append({"what": what, "rows": rows, "fingerprint": got})

    def passed_elsewhere(self, what: str, **facts: Any) -> None:
        """Record a check made by its own function (which raised ``CheckFailed`` on a mismatch)."""
        self.passed.append({"what": what, **facts})
