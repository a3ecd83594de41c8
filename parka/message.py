"""``RecordMessage``: one record of a segment, with confluent-kafka's ``Message`` accessors.

The messaging shim returns these from ``poll``; the producer passes them to delivery
callbacks. ``offset()`` is the Kafka offset of the segment the record travels in, and
``index()`` its position inside that segment, so ``(partition, offset, index)`` identifies a
record exactly.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "TIMESTAMP_NOT_AVAILABLE", "RecordMessage"]

# Same values as confluent_kafka.TIMESTAMP_*; repeated here to keep the core free of the client.
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2


class RecordMessage:
    """A record decoded from (or delivered inside) a parka segment."""

    __slots__ = (
        "_error",
        "_headers",
        "_index",
        "_key",
        "_offset",
        "_partition",
        "_segment_records",
        "_timestamp",
        "_topic",
        "_value",
    )

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        index: int,
        segment_records: int,
        value: dict[str, Any] | None,
        key: bytes | None = None,
        timestamp: tuple[int, int | None] = (TIMESTAMP_NOT_AVAILABLE, 0),
        headers: list[tuple[str, bytes | None]] | None = None,
        error: Any = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._index = index
        self._segment_records = segment_records
        self._value = value
        self._key = key
        self._timestamp = timestamp
        self._headers = headers
        self._error = error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        """Kafka offset of the segment that carries this record."""
        return self._offset

    def index(self) -> int:
        """Position of this record inside its segment, from 0."""
        return self._index

    def segment_records(self) -> int:
        """Number of records in this record's segment."""
        return self._segment_records

    def value(self) -> dict[str, Any] | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def timestamp(self) -> tuple[int, int | None]:
        """``(timestamp type, milliseconds since epoch)`` as in confluent-kafka."""
        return self._timestamp

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def error(self) -> Any:
        return self._error

    def __len__(self) -> int:
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return (
            f"RecordMessage(topic={self._topic!r}, partition={self._partition}, offset={self._offset}, "
            f"index={self._index}/{self._segment_records}, error={self._error!r})"
        )
