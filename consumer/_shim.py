"""``ParquetConsumer``: a drop-in for ``confluent_kafka.Consumer`` that yields segment records.

Record-precise offsets
----------------------
Kafka offsets address segments, not records. parka keeps, per partition, the position of
the next record to hand out as ``(segment offset, index)`` and commits it as:

* ``index == 0``: Kafka offset ``segment offset`` with empty metadata (a plain position);
* ``index > 0``: Kafka offset ``segment offset`` (so the segment is fetched again) and the
  commit metadata ``parka:1:<segment offset>:<index>``. When that segment arrives again
  after a restart or rebalance, its first ``index`` records are skipped.

So a commit taken in the middle of a segment neither loses nor repeats records. The wrapped
client runs with ``enable.auto.offset.store=false``; parka stores the precise positions
itself (at segment boundaries, at most every 100 ms, and before close or revocation), so
``enable.auto.commit`` keeps working as users expect.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import confluent_kafka
from confluent_kafka import TopicPartition

from parka.errors import KafkaClientError, SegmentDecodeError, SegmentError
from parka.message import RecordMessage, SegmentRecords
from parka.segment import SegmentInfo, decode_segment, is_segment, read_segment_info, split_reserved

__all__ = ["ParquetConsumer", "RawSegment"]

log = logging.getLogger("parka.consumer")

_META_PREFIX = "parka:1:"
_STORE_INTERVAL_S = 0.1


@dataclass(frozen=True)
class RawSegment:
    """One Kafka message as the ingestion API returns it: the bytes, untouched.

    ``info`` describes the segment; it is ``None`` for a plain (non-parka) message, which
    the caller must handle (parka's ingestion dead-letters it).
    """

    value: bytes | None
    headers: Any
    topic: str
    partition: int
    offset: int
    timestamp: tuple[int, int]
    info: SegmentInfo | None

    @property
    def num_records(self) -> int | None:
        return None if self.info is None else self.info.num_records


def _encode_position(offset: int, index: int) -> str:
    return f"{_META_PREFIX}{offset}:{index}" if index else ""


def _decode_position(metadata: str | None) -> tuple[int, int] | None:
    if not metadata or not metadata.startswith(_META_PREFIX):
        return None
    try:
        offset, index = metadata[len(_META_PREFIX) :].split(":")
        return int(offset), int(index)
    except ValueError:
        return None


class ParquetConsumer:
    """Consume parka segments as individual records; plain messages pass through unchanged.

    ``conf`` is a confluent-kafka consumer config; it is copied, never modified.
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        client = dict(conf)
        self._auto_store = str(client.pop("enable.auto.offset.store", True)).lower() not in ("false", "0")
        client["enable.auto.offset.store"] = False
        self._consumer = confluent_kafka.Consumer(client)
        self._pending: deque[RecordMessage] = deque()
        # (topic, partition) -> (segment offset, index of the next record); plain messages
        # and finished segments are stored as (offset + 1, 0).
        self._positions: dict[tuple[str, int], tuple[int, int]] = {}
        self._dirty: set[tuple[str, int]] = set()
        self._last_store = 0.0
        # Partitions whose committed metadata was already consulted since assignment.
        self._resume_checked: set[tuple[str, int]] = set()
        self._explicit: set[tuple[str, int]] = set()

    # -- subscription --------------------------------------------------------------------

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: Callable[..., None] | None = None,
        on_revoke: Callable[..., None] | None = None,
        on_lost: Callable[..., None] | None = None,
    ) -> None:
        """Subscribe like ``confluent_kafka.Consumer.subscribe``; callbacks receive this shim."""

        def assigned(_: Any, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                self._resume_checked.discard((tp.topic, tp.partition))
            if on_assign is not None:
                on_assign(self, partitions)

        def revoked(_: Any, partitions: list[TopicPartition]) -> None:
            self._release(partitions, store=True)
            if on_revoke is not None:
                on_revoke(self, partitions)

        def lost(_: Any, partitions: list[TopicPartition]) -> None:
            self._release(partitions, store=False)
            if on_lost is not None:
                on_lost(self, partitions)
            elif on_revoke is not None:
                on_revoke(self, partitions)

        self._consumer.subscribe(list(topics), on_assign=assigned, on_revoke=revoked, on_lost=lost)

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Assign partitions; an explicit offset is taken literally (no mid-segment resume)."""
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._resume_checked.discard(key)
            if tp.offset >= 0:
                self._explicit.add(key)
                self._resume_checked.add(key)
            else:
                self._explicit.discard(key)
        self._consumer.assign(partitions)

    def unassign(self) -> None:
        self._release(self._consumer.assignment(), store=True)
        self._consumer.unassign()

    def _release(self, partitions: list[TopicPartition], *, store: bool) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        if store and self._auto_store:
            self._store(gone)
        self._pending = deque(m for m in self._pending if (m.topic(), m.partition()) not in gone)
        for key in gone:
            self._positions.pop(key, None)
            self._dirty.discard(key)
            self._resume_checked.discard(key)

    # -- consuming -------------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Any:
        """Return the next record (a :class:`RecordMessage`), a plain message, an error message, or None.

        Raises :class:`~parka.errors.SegmentDecodeError` for a segment that cannot be decoded;
        the error keeps the raw bytes, topic, partition and offset, and consuming continues
        after it on the next call.
        """
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            if self._pending:
                return self._hand_out(self._pending.popleft())
            remaining = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            msg: Any = self._consumer.poll(remaining)
            self._maybe_store()
            if msg is None:
                return None
            if msg.error() is not None:
                return msg
            key = (msg.topic(), msg.partition())
            headers = msg.headers()
            if not is_segment(headers):
                self._advance(key, msg.offset() + 1, 0)
                return msg
            self._advance(key, msg.offset(), 0)
            records = self._decode(msg)
            skip = self._resume_index(msg)
            if skip:
                records = records[skip:]
            if records:
                self._pending.extend(records)
                return self._hand_out(self._pending.popleft())
            self._advance(key, msg.offset() + 1, 0)
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        """Up to ``num_messages`` records or messages, waiting at most ``timeout`` seconds."""
        out: list[Any] = []
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while len(out) < num_messages:
            remaining = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            msg = self.poll(remaining)
            if msg is None:
                break
            out.append(msg)
        return out

    def poll_buffer(self, timeout: float | None = None) -> RawSegment | None:
        """The KIP's ingestion API: the next message's raw bytes, undecoded.

        Returns ``None`` when nothing arrived in time (or at a partition end event). Raises
        :class:`~parka.errors.SegmentDecodeError` when segment headers are garbled (the error
        keeps the raw message) and :class:`~parka.errors.KafkaClientError` for client errors.
        """
        if self._pending:
            raise SegmentError("records of a decoded segment are still pending: call poll() until it returns them")
        msg: Any = self._consumer.poll(-1 if timeout is None else timeout)
        self._maybe_store()
        if msg is None:
            return None
        err = msg.error()
        if err is not None:
            if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                return None
            raise KafkaClientError(f"consume failed: {err}", kafka_error=err)
        key = (msg.topic(), msg.partition())
        self._advance(key, msg.offset() + 1, 0)
        headers = msg.headers()
        info = None
        if is_segment(headers):
            info = read_segment_info(
                headers, value=msg.value(), topic=msg.topic(), partition=msg.partition(), offset=msg.offset()
            )
        return RawSegment(
            value=msg.value(),
            headers=headers,
            topic=msg.topic(),
            partition=msg.partition(),
            offset=msg.offset(),
            timestamp=msg.timestamp(),
            info=info,
        )

    # -- offsets ---------------------------------------------------------------------------

    def commit(
        self,
        message: Any = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit record-precise positions.

        With no argument, the position after the last record handed out on every partition;
        with ``message``, the position after that record; ``offsets`` pass through unchanged.
        Returns the committed partitions when ``asynchronous=False``.
        """
        if offsets is not None:
            tps = offsets
        elif message is not None:
            tps = [self._position_after(message)]
        else:
            tps = [self._tp(key) for key in self._positions]
            if not tps:
                raise KafkaClientError("nothing to commit: no record has been consumed yet")
        if asynchronous:
            self._consumer.commit(offsets=tps, asynchronous=True)
            return None
        return list(self._consumer.commit(offsets=tps, asynchronous=False))

    def store_offsets(self, message: Any = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store the position after ``message`` (record-precise) or the given ``offsets``."""
        if offsets is not None:
            self._consumer.store_offsets(offsets=offsets)
        elif message is not None:
            self._consumer.store_offsets(offsets=[self._position_after(message)])
        else:
            raise TypeError("store_offsets needs message or offsets")

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        args = () if timeout is None else (timeout,)
        return list(self._consumer.committed(partitions, *args))

    def close(self) -> None:
        """Store precise positions (so auto-commit on close commits them) and close the client."""
        if self._auto_store:
            self._store(set(self._dirty))
        self._consumer.close()

    def __enter__(self) -> ParquetConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # assignment, position, seek, pause, resume, list_topics, ...: the wrapped client's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._consumer, name)

    # -- internals -------------------------------------------------------------------------

    def _decode(self, msg: Any) -> list[RecordMessage]:
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        try:
            table = decode_segment(msg.value(), msg.headers(), topic=topic, partition=partition, offset=offset)
            data, meta = split_reserved(table)
            values = data.to_pylist(maps_as_pydicts="strict")
        except SegmentError:
            self._advance((topic, partition), offset + 1, 0)
            raise
        except Exception as exc:  # anything pyarrow raises on odd data: keep the raw bytes
            self._advance((topic, partition), offset + 1, 0)
            raise SegmentDecodeError(
                f"cannot decode segment records: {exc}",
                value=msg.value(),
                headers=msg.headers(),
                topic=topic,
                partition=partition,
                offset=offset,
            ) from exc
        return SegmentRecords(
            topic=topic,
            partition=partition,
            offset=offset,
            values=values,
            keys=meta.keys,
            timestamps=meta.timestamps,
            headers=meta.headers,
            segment_timestamp=msg.timestamp(),
        ).records()

    def _resume_index(self, msg: Any) -> int:
        """Records of this segment already consumed before a restart, per committed metadata."""
        key = (msg.topic(), msg.partition())
        if key in self._resume_checked:
            return 0
        self._resume_checked.add(key)
        try:
            [tp] = self._consumer.committed([TopicPartition(*key)], timeout=10)
        except confluent_kafka.KafkaException as exc:
            raise KafkaClientError(f"cannot read committed offset of {key[0]}[{key[1]}]: {exc}") from exc
        pos = _decode_position(getattr(tp, "metadata", None))
        if pos is None or tp.offset != msg.offset() or pos[0] != msg.offset():
            return 0
        return pos[1]

    def _hand_out(self, rec: RecordMessage) -> RecordMessage:
        key = (rec.topic(), rec.partition())
        if rec.index() + 1 >= rec.segment_records():
            self._advance(key, rec.offset() + 1, 0)
        else:
            self._advance(key, rec.offset(), rec.index() + 1)
        return rec

    def _advance(self, key: tuple[str, int], offset: int, index: int) -> None:
        self._positions[key] = (offset, index)
        self._dirty.add(key)

    def _tp(self, key: tuple[str, int]) -> TopicPartition:
        offset, index = self._positions[key]
        return TopicPartition(key[0], key[1], offset, _encode_position(offset, index))

    def _position_after(self, message: Any) -> TopicPartition:
        if isinstance(message, RecordMessage):
            if message.index() + 1 >= message.segment_records():
                return TopicPartition(message.topic(), message.partition(), message.offset() + 1)
            offset, index = message.offset(), message.index() + 1
            return TopicPartition(message.topic(), message.partition(), offset, _encode_position(offset, index))
        return TopicPartition(message.topic(), message.partition(), message.offset() + 1)

    def _maybe_store(self) -> None:
        if not self._auto_store or not self._dirty:
            return
        now = time.monotonic()
        if now - self._last_store >= _STORE_INTERVAL_S:
            self._store(set(self._dirty))
            self._last_store = now

    def _store(self, keys: set[tuple[str, int]]) -> None:
        tps = [self._tp(k) for k in keys if k in self._positions]
        if not tps:
            return
        try:
            self._consumer.store_offsets(offsets=tps)
        except confluent_kafka.KafkaException as exc:
            # A partition revoked a moment ago cannot be stored: not an error for the caller.
            log.debug("store_offsets skipped: %s", exc)
        self._dirty.difference_update(keys)
