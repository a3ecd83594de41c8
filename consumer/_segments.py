"""What the messaging shim knows about one segment: the objects it returns per segment
(:class:`RawSegment`, :class:`SegmentTable`), a partition's cursor, and record-precise positions.

A position is what a commit sends for a partition: ``(Kafka offset, commit metadata, leader
epoch)``. Once the first ``index`` records of the segment at ``offset`` are handed out it is
``(offset, "parka:1:<offset>:<index>", epoch)``, once all are ``(offset + 1, "", epoch)`` (see
``_shim.py``), ``epoch`` being the leader epoch of the segment's message, as librdkafka keeps it
with a position it stores itself: it lets the client detect a log truncated under a committed
offset after a leader change (KIP-320). ``None`` when the client had no epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from parka.message import RecordMessage, SegmentRecords
from parka.segment import SegmentInfo

__all__ = ["Cursor", "Key", "Position", "RawSegment", "SegmentTable", "decode_position", "position_after"]

META_PREFIX = "parka:1:"

Key = tuple[str, int]
Position = tuple[int, str, int | None]


@dataclass(frozen=True, slots=True)
class RawSegment:
    """One Kafka message as the ingestion API returns it: the bytes, untouched.

    ``info`` describes the segment; it is ``None`` for a plain (non-parka) message, which
    the caller must handle (parka's ingestion dead-letters it, or with ``--upsert`` takes one
    without a value as a tombstone of its ``key``).
    """

    value: bytes | None
    headers: Any
    topic: str
    partition: int
    offset: int
    timestamp: tuple[int, int]
    info: SegmentInfo | None
    key: bytes | None = None

    @property
    def num_records(self) -> int | None:
        return None if self.info is None else self.info.num_records


class SegmentTable:
    """Records of one segment as one ``pyarrow.Table``, from :meth:`ParquetConsumer.poll_table`.

    ``value()`` is the table: the segment's user columns, then its reserved ``__parka_key``,
    ``__parka_timestamp`` and ``__parka_headers`` columns when it has them. Its rows are the
    segment's records ``index()`` to ``index() + len(self) - 1``; the segment is the Kafka
    message at ``offset()`` and holds ``segment_records()`` records. ``commit(message=t)`` and
    ``store_offsets(message=t)`` take the position after its last row.
    """

    __slots__ = (
        "_index",
        "_leader_epoch",
        "_offset",
        "_partition",
        "_segment_records",
        "_table",
        "_timestamp",
        "_topic",
    )

    def __init__(
        self,
        table: pa.Table,
        *,
        topic: str,
        partition: int,
        offset: int,
        index: int,
        segment_records: int,
        timestamp: tuple[int, int | None],
        leader_epoch: int | None = None,
    ) -> None:
        self._table = table
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._index = index
        self._segment_records = segment_records
        self._timestamp = timestamp
        self._leader_epoch = leader_epoch

    def value(self) -> pa.Table:
        """The records as a ``pyarrow.Table``."""
        return self._table

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        """Kafka offset of the segment."""
        return self._offset

    def index(self) -> int:
        """Index of the first row inside the segment."""
        return self._index

    def segment_records(self) -> int:
        """Number of records in the whole segment."""
        return self._segment_records

    def timestamp(self) -> tuple[int, int | None]:
        """The segment's Kafka ``(timestamp type, ms)``; per-record ones are in ``__parka_timestamp``."""
        return self._timestamp

    def leader_epoch(self) -> int | None:
        """The partition leader's epoch of the segment's Kafka message (``None``: unknown)."""
        return self._leader_epoch

    def error(self) -> None:
        """Always ``None``: errors come back as confluent-kafka messages, as from ``poll``."""
        return None

    def __len__(self) -> int:
        return int(self._table.num_rows)

    def __repr__(self) -> str:
        return (
            f"SegmentTable(topic={self._topic!r}, partition={self._partition}, offset={self._offset}, "
            f"rows={self._index}..{self._index + len(self)}/{self._segment_records})"
        )


class Cursor:
    """Where one partition stands: its last segment and the index of the next record to hand out.

    A plain message, or a segment that could not be decoded, is a cursor with no records
    (``stop == 0``): its position is the next offset. Only ``next`` changes once a cursor is
    made (and ``records`` is filled in once), so the auto-commit thread can read a position
    from it without a lock.
    """

    __slots__ = ("epoch", "message", "next", "offset", "partition", "records", "stop", "table", "topic", "values_of")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        message: Any = None,
        table: pa.Table | None = None,
        start: int = 0,
        epoch: int | None = None,
        values_of: Callable[[pa.Table], list[Any]] | None = None,
    ) -> None:
        self.topic = topic
        self.values_of = values_of  # the records' values from the table: set_reader_schema's messages
        self.epoch = epoch
        self.partition = partition
        self.offset = offset
        self.message = message
        self.table = table
        self.stop: int = 0 if table is None else table.num_rows
        self.next = min(start, self.stop)
        self.records: SegmentRecords | None = None

    def position(self) -> Position:
        index = self.next
        if index >= self.stop:
            return (self.offset + 1, "", self.epoch)
        return (self.offset, encode_position(self.offset, index), self.epoch)


def encode_position(offset: int, index: int) -> str:
    return f"{META_PREFIX}{offset}:{index}" if index else ""


def decode_position(metadata: str | None) -> tuple[int, int] | None:
    if not metadata or not metadata.startswith(META_PREFIX):
        return None
    try:
        offset, index = metadata[len(META_PREFIX) :].split(":")
        return int(offset), int(index)
    except ValueError:
        return None


def position_after(message: Any) -> Position:
    """Where consuming resumes after ``message`` (a record, a segment table or a plain message)."""
    epoch = message.leader_epoch()
    if isinstance(message, (RecordMessage, SegmentTable)):
        end = message.index() + (1 if isinstance(message, RecordMessage) else len(message))
        if end >= message.segment_records():
            return (message.offset() + 1, "", epoch)
        return (message.offset(), encode_position(message.offset(), end), epoch)
    return (message.offset() + 1, "", epoch)
