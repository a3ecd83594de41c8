"""Pure pieces of the producer: where records wait, and the decision when to cut a segment.

Records travel in two stages. ``produce()`` appends a record to its topic's list of staged
items (no conversion, no validation, no size estimate per record). A full staging is *drained*:
unpacked (:meth:`Staging.unpack`), converted to Arrow in one go, split by partition and appended
to :class:`PartitionBuffer` s as :class:`RowBatch` pieces. A partition buffer is cut into a
segment by :class:`CutPolicy`.

No Kafka and no I/O here, and time comes from an injected clock, so these rules are tested
without a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["CutPolicy", "DeliveryCallback", "PartitionBuffer", "RowBatch", "Side", "SizeModel", "Staging", "drain_size"]

DeliveryCallback = Callable[[Any, Any], None]
Headers = list[tuple[str, bytes | None]]

# Records converted per drain, at most: large enough that Arrow's per-call costs vanish per row
# (each column's conversion has a fixed cost per call), small enough that the produce() call that
# drains pauses for milliseconds, not tens of them.
_MAX_DRAIN = 8192
_MIN_DRAIN = 16


def drain_size(batch_records: int, batch_bytes: int, arrow_bytes_per_row: float | None) -> int:
    """How many staged records to convert at once: at most half a segment's bytes (so a staging
    of huge records stays small, and a partition's buffer fills in steps below a segment), at
    most a segment's records, 16 to 8,192."""
    by_records = max(1, batch_records)
    if arrow_bytes_per_row is None:
        return max(1, min(_MIN_DRAIN, by_records))
    by_bytes = int(batch_bytes / 2 / max(arrow_bytes_per_row, 1.0))
    return max(1, min(_MAX_DRAIN, by_records, max(_MIN_DRAIN, by_bytes)))


@dataclass
class SizeModel:
    """Learns encoded bytes per Arrow byte for one topic (an exponential average).

    Starts at 1.0: Parquet with any codec is rarely larger than the Arrow data, so the first
    segment is cut early rather than late; later segments use what was observed.
    """

    ratio: float = 1.0
    alpha: float = 0.3
    observed: bool = False

    def predict(self, raw_bytes: int) -> float:
        return raw_bytes * self.ratio

    def observe(self, raw_bytes: int, encoded_bytes: int) -> None:
        if raw_bytes <= 0:
            return
        seen = encoded_bytes / raw_bytes
        self.ratio = (1 - self.alpha) * self.ratio + self.alpha * seen if self.observed else seen
        self.observed = True


@dataclass(frozen=True)
class CutPolicy:
    """When a buffer becomes a segment: ``max_records``, ``max_bytes`` or ``linger_s``, first wins.

    ``fill`` is the share of ``max_bytes`` at which the predicted size triggers a cut; it leaves
    room for the prediction being low (an oversized segment is split and re-encoded).
    """

    max_records: int
    max_bytes: int
    linger_s: float
    fill: float = 0.9

    def full(self, records: int, predicted_bytes: float) -> bool:
        return records >= self.max_records or predicted_bytes >= self.max_bytes * self.fill

    def due(self, first_at: float, now: float) -> bool:
        return now - first_at >= self.linger_s


Side = tuple[Any, "bytes | None", int, "DeliveryCallback | None", "int | None", "Headers | None"]
"""A staged record with more than a value: ``(value, key, partition, callback, timestamp, headers)``."""


class Staging:
    """Staged records unpacked for conversion: ``values`` has one entry per record; each other
    list is ``None`` when no record has anything for it, else has one entry per record."""

    __slots__ = ("callbacks", "headers", "keys", "partitions", "timestamps", "values")

    def __init__(self, values: list[Any]) -> None:
        self.values = values
        self.keys: list[bytes | None] | None = None
        self.partitions: list[int] | None = None
        self.timestamps: list[int | None] | None = None
        self.headers: list[Headers | None] | None = None
        self.callbacks: list[DeliveryCallback | None] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def pick(self, rows: Sequence[int]) -> Staging:
        """The records at ``rows``."""
        out = Staging([self.values[i] for i in rows])
        for name in ("keys", "partitions", "timestamps", "headers", "callbacks"):
            col = getattr(self, name)
            if col is not None:
                setattr(out, name, [col[i] for i in rows])
        return out

    @staticmethod
    def unpack(items: list[Any], default_callback: DeliveryCallback | None) -> Staging:
        """``produce()`` appends a record's value alone (the common case: one atomic list append,
        no lock) or, when it has a key, partition, callback, timestamp or headers, a :data:`Side`
        tuple. Values are mappings, never tuples, so the two cannot be confused."""
        if tuple not in set(map(type, items)):
            out = Staging(items)
            if default_callback is not None:
                out.callbacks = [default_callback] * len(items)
            return out
        sides = [x if type(x) is tuple else (x, None, -1, None, None, None) for x in items]
        values, keys, partitions, callbacks, timestamps, headers = (list(col) for col in zip(*sides, strict=True))
        out = Staging(values)
        n = len(values)
        # list.count and max run in C; these columns are all None (-1) in most batches
        if keys.count(None) != n:
            out.keys = keys
        if max(partitions) >= 0:
            out.partitions = partitions
        if default_callback is not None:
            callbacks = [default_callback if cb is None else cb for cb in callbacks]
        if callbacks.count(None) != n:
            out.callbacks = callbacks
        if timestamps.count(None) != n:
            out.timestamps = timestamps
        if headers.count(None) != n:
            out.headers = headers
        return out


@dataclass
class RowBatch:
    """Converted records: the Arrow ``table`` and, row for row, what travels beside it.

    ``keys`` (binary) and ``timestamps`` (int64, ms) are Arrow arrays, ready for the segment's
    reserved columns and the partitioner; ``headers``, ``callbacks`` and ``values`` (the records
    as given, kept for delivery reports only when some row has a callback) are lists. Each is
    ``None`` when no row has one.
    """

    table: pa.Table
    keys: pa.Array | None = None
    timestamps: pa.Array | None = None
    headers: list[Headers | None] | None = None
    callbacks: list[DeliveryCallback | None] | None = None
    values: list[Any] | None = None

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def take(self, rows: np.ndarray) -> RowBatch:
        """The rows at ``rows`` (indices, in any order), in that order."""
        index = pa.array(rows, pa.int64())
        listed = rows.tolist()

        def pick(col: list[Any] | None) -> list[Any] | None:
            return None if col is None else [col[i] for i in listed]

        return RowBatch(
            self.table.take(index),
            None if self.keys is None else self.keys.take(index),
            None if self.timestamps is None else self.timestamps.take(index),
            pick(self.headers),
            pick(self.callbacks),
            pick(self.values),
        )

    def slice(self, start: int, stop: int) -> RowBatch:
        n = stop - start
        return RowBatch(
            self.table.slice(start, n),
            None if self.keys is None else self.keys.slice(start, n),
            None if self.timestamps is None else self.timestamps.slice(start, n),
            None if self.headers is None else self.headers[start:stop],
            None if self.callbacks is None else self.callbacks[start:stop],
            None if self.values is None else self.values[start:stop],
        )

    @staticmethod
    def concat(batches: Sequence[RowBatch]) -> RowBatch:
        if len(batches) == 1:
            return batches[0]

        def arrays(name: str, t: pa.DataType) -> pa.Array | None:
            cols = [getattr(b, name) for b in batches]
            if all(c is None for c in cols):
                return None
            filled = [c if c is not None else pa.nulls(len(b), t) for b, c in zip(batches, cols, strict=True)]
            return pa.concat_arrays(filled)

        def lists(name: str) -> list[Any] | None:
            cols = [getattr(b, name) for b in batches]
            if all(c is None for c in cols):
                return None
            merged: list[Any] = []
            for b, c in zip(batches, cols, strict=True):
                merged.extend(c if c is not None else [None] * len(b))
            return merged

        return RowBatch(
            pa.concat_tables([b.table for b in batches]),
            arrays("keys", pa.binary()),
            arrays("timestamps", pa.int64()),
            lists("headers"),
            lists("callbacks"),
            lists("values"),
        )


@dataclass
class PartitionBuffer:
    """Converted records waiting for one (topic, partition[, table partition values]) segment."""

    topic: str
    partition: int
    created_at: float
    pieces: list[RowBatch] = field(default_factory=list)
    staged: list[float] = field(default_factory=list)  # when each piece's first record was staged
    rows: int = 0
    arrow_bytes: int = 0

    def append(self, batch: RowBatch, staged_at: float) -> None:
        self.pieces.append(batch)
        self.staged.append(staged_at)
        self.rows += len(batch)
        self.arrow_bytes += int(batch.table.nbytes)
        self.created_at = min(self.created_at, staged_at)

    def staged_at_of_last(self, rows: int) -> float:
        """When the first of the buffer's last ``rows`` rows was staged: the staging time of the
        earliest piece they reach into (pieces are kept in the order they were staged)."""
        at, seen = self.created_at, 0
        for piece, staged_at in zip(reversed(self.pieces), reversed(self.staged), strict=True):
            at, seen = staged_at, seen + len(piece)
            if seen >= rows:
                break
        return at

    def __len__(self) -> int:
        return self.rows
