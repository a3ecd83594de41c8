"""``RecordMessage``: one record of a segment, with confluent-kafka's ``Message`` accessors.

The messaging shim returns these from ``poll``/``consume``; the producer passes them to delivery
callbacks. ``offset()`` is the Kafka offset of the segment the record travels in, and
``index()`` its position inside that segment, so ``(partition, offset, index)`` identifies a
record exactly.

A segment carries thousands of records, so a record is two references: the
:class:`SegmentRecords` it belongs to (columns shared by all its records, built once per segment)
and its index. Creating one costs no more than a small tuple; every accessor reads the shared
columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parka.collector import gc_paused

__all__ = [
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "RecordMessage",
    "SegmentRecords",
]

# Same values as confluent_kafka.TIMESTAMP_*; repeated here to keep the core free of the client.
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

Headers = list[tuple[str, bytes | None]]


class SegmentRecords:
    """What the records of one segment share: coordinates, and per-record columns as lists.

    ``values[i]`` is record ``i``'s value; ``keys``, ``timestamps`` (milliseconds) and
    ``headers`` are ``None`` when no record of the segment has one. ``segment_timestamp`` is the
    Kafka message's ``(type, ms)``, used for records without their own timestamp, and
    ``leader_epoch`` its partition leader's epoch (``None`` when the client had none). ``error`` is
    set for delivery reports of records that were not delivered.
    """

    __slots__ = (
        "error",
        "headers",
        "keys",
        "leader_epoch",
        "offset",
        "partition",
        "segment_timestamp",
        "timestamps",
        "topic",
        "values",
    )

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        values: Sequence[Any],
        keys: Sequence[bytes | None] | None = None,
        timestamps: Sequence[int | None] | None = None,
        headers: Sequence[Headers | None] | None = None,
        segment_timestamp: tuple[int, int | None] = (TIMESTAMP_NOT_AVAILABLE, 0),
        leader_epoch: int | None = None,
        error: Any = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.values = values
        self.keys = keys
        self.timestamps = timestamps
        self.headers = headers
        self.segment_timestamp = segment_timestamp
        self.leader_epoch = leader_epoch
        self.error = error

    def __len__(self) -> int:
        return len(self.values)

    def record(self, index: int) -> RecordMessage:
        return RecordMessage(self, index)

    def records(self, start: int = 0, stop: int | None = None) -> list[RecordMessage]:
        """Records ``start`` to ``stop`` (exclusive), built in one pass."""
        stop = len(self.values) if stop is None else stop
        with gc_paused():  # thousands of objects, no cycle: parka.collector
            return [RecordMessage(self, i) for i in range(start, stop)]


class RecordMessage:
    """A record decoded from (or delivered inside) a parka segment."""

    __slots__ = ("_index", "_segment")

    def __init__(self, segment: SegmentRecords, index: int) -> None:
        self._segment = segment
        self._index = index

    def topic(self) -> str:
        return self._segment.topic

    def partition(self) -> int:
        return self._segment.partition

    def offset(self) -> int:
        """Kafka offset of the segment that carries this record (-1 when it was not delivered)."""
        return self._segment.offset

    def index(self) -> int:
        """Position of this record inside its segment, from 0."""
        return self._index

    def segment_records(self) -> int:
        """Number of records in this record's segment."""
        return len(self._segment.values)

    def value(self) -> Any:
        return self._segment.values[self._index]

    def key(self) -> bytes | None:
        keys = self._segment.keys
        return None if keys is None else keys[self._index]

    def timestamp(self) -> tuple[int, int | None]:
        """``(timestamp type, milliseconds since epoch)`` as in confluent-kafka: the record's own
        (``TIMESTAMP_CREATE_TIME``) when it was produced with one, else its segment's."""
        stamps = self._segment.timestamps
        if stamps is not None:
            own = stamps[self._index]
            if own is not None:
                return (TIMESTAMP_CREATE_TIME, own)
        return self._segment.segment_timestamp

    def headers(self) -> Headers | None:
        headers = self._segment.headers
        return None if headers is None else headers[self._index]

    def leader_epoch(self) -> int | None:
        """The partition leader's epoch of the message that carries this record, as confluent's
        ``Message.leader_epoch()`` (``None`` when the client had none)."""
        return self._segment.leader_epoch

    def error(self) -> Any:
        return self._segment.error

    def __len__(self) -> int:
        value = self.value()
        return 0 if value is None else len(value)

    def __repr__(self) -> str:
        s = self._segment
        return (
            f"RecordMessage(topic={s.topic!r}, partition={s.partition}, offset={s.offset}, "
            f"index={self._index}/{len(s.values)}, error={s.error!r})"
        )
