"""The producer's Kafka side: segments handed to librdkafka, and every record's report.

:class:`Outbox` owns the wrapped ``confluent_kafka.Producer``. It sends encoded segments (keeping
those that find librdkafka's queue full, in order, until there is room), counts the records in
flight, and turns each segment's one delivery report into one report per record. Records that
never become part of a sent segment (a bad record, a purge, an abort, a refused produce) get a
report too, queued here and served by :meth:`Outbox.serve` from ``poll``/``flush``: every record
is reported exactly once, always on the application's thread.

The producer's lock guards the Outbox's state; methods say where they expect it held.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException

from parka.message import RecordMessage, SegmentRecords
from parka.segment import Segment

from ._buffer import DeliveryCallback, RowBatch, Staging

__all__ = ["BatchCallback", "Outbox"]

log = logging.getLogger("parka.producer")

# Encoded segments that could not be queued (librdkafka queue full) wait here; past this many
# produce() raises BufferError, as confluent-kafka does, so memory stays bounded.
_MAX_PENDING_SEGMENTS = 1000

BatchCallback = Callable[[Any, Any, int], None]
SegmentReport = Callable[[Any, Any], None]


@dataclass
class _Pending:
    """A Kafka message to hand over: a segment, or a plain message (a tombstone)."""

    topic: str
    partition: int
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    num_records: int
    on_delivery: SegmentReport
    key: bytes | None = None
    timestamp: int = 0


class Outbox:
    """Segments on their way to Kafka and the reports owed to the application."""

    def __init__(
        self, producer: confluent_kafka.Producer, lock: threading.Lock, on_full: Callable[[], None] | None = None
    ) -> None:
        self.producer = producer
        self._lock = lock
        self._on_full = on_full  # told whenever ``full`` may have changed
        self._pending: deque[_Pending] = deque()
        self._reports: deque[tuple[int, Callable[[], None]]] = deque()  # (records, report)
        self.full = False  # too many segments wait: produce() raises BufferError
        self.in_flight = 0  # records inside segments librdkafka holds, not yet reported
        self.reported = 0  # records whose outcome reached the application
        self.stats = {"segments": 0, "records": 0, "segment_bytes": 0}
        # A segment's Kafka key: unique to it, so that a compacted topic (which refuses keyless
        # messages) takes segments and its cleaner never drops one for another's key. The records'
        # own keys travel inside the segment; readers ignore this one.
        self._key_prefix = f"parka:{uuid.uuid4().hex}:".encode()
        self._segments_sent = 0

    # -- sending (lock held) -------------------------------------------------------------------

    def send(self, topic: str, partition: int, seg: Segment, on_delivery: SegmentReport) -> None:
        """Hand ``seg`` to librdkafka, or keep it (in order) while librdkafka's queue is full."""
        self._segments_sent += 1
        key = self._key_prefix + str(self._segments_sent).encode()
        self._queue(_Pending(topic, partition, seg.value, list(seg.headers), seg.num_records, on_delivery, key=key))

    def send_plain(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        timestamp: int,
        on_delivery: SegmentReport,
    ) -> None:
        """Hand over a tombstone (``value=None``) behind the segments that wait, as :meth:`send`."""
        self._queue(_Pending(topic, partition, None, headers, 1, on_delivery, key=key, timestamp=timestamp))

    def _queue(self, pending: _Pending) -> None:
        if self._pending or not self._try_send(pending):  # keep order behind segments that wait
            self._pending.append(pending)
            self.retry()

    def retry(self) -> None:
        """Hand over the segments that wait, in order, as long as librdkafka takes them."""
        while self._pending and self._try_send(self._pending[0]):
            self._pending.popleft()
        self.full = len(self._pending) >= _MAX_PENDING_SEGMENTS
        if self._on_full is not None:
            self._on_full()

    @property
    def waiting(self) -> bool:
        return bool(self._pending)

    def _try_send(self, p: _Pending) -> bool:
        headers: Any = p.headers  # the client's stub wants a wider, invariant list type
        try:
            self.producer.produce(
                p.topic,
                value=p.value,
                key=p.key,
                partition=p.partition,
                headers=headers,
                on_delivery=p.on_delivery,
                timestamp=p.timestamp,
            )
        except BufferError:
            return False
        except KafkaException as exc:
            # refused outright (no transaction, unknown partition, ...): never lost in silence
            self._refused(p, exc.args[0] if exc.args else exc)
            return True
        self.in_flight += p.num_records
        if p.value is not None:
            self.stats["segments"] += 1
            self.stats["records"] += p.num_records
            self.stats["segment_bytes"] += len(p.value)
        return True

    def _refused(self, p: _Pending, err: Any) -> None:
        """The segment never reached librdkafka: report its records as its delivery report would."""
        self.in_flight += p.num_records  # its report subtracts them again
        self._reports.append((0, lambda: p.on_delivery(err, None)))

    def drop_waiting(self, err: Any) -> None:
        """Report every waiting segment's records with ``err`` instead of sending them."""
        while self._pending:
            self._refused(self._pending.popleft(), err)
        self.full = False
        if self._on_full is not None:
            self._on_full()

    # -- a segment's delivery report, per record ------------------------------------------------

    def _settled(self, n: int, topic: str, err: Any) -> None:
        with self._lock:
            self.in_flight -= n
        self.reported += n
        if err is not None:
            log.error("segment of %d records to %s failed: %s", n, topic, err)

    def batch_report(self, topic: str, n: int, on_batch: BatchCallback | None) -> SegmentReport:
        """The delivery report of a ``produce_batch`` segment: one callback for its ``n`` rows."""

        def delivered(err: Any, msg: Any) -> None:
            self._settled(n, topic, err)
            if on_batch is not None:
                on_batch(err, msg, n)

        return delivered

    def plain_report(self, topic: str, callback: DeliveryCallback | None) -> SegmentReport:
        """The delivery report of a plain message: the caller's callback gets the client's own."""

        def delivered(err: Any, msg: Any) -> None:
            self._settled(1, topic, err)
            if callback is not None:
                callback(err, msg)

        return delivered

    def record_report(self, topic: str, partition: int, part: RowBatch) -> SegmentReport:
        """The delivery report of a segment of ``produce()`` records: each record's callback,
        with the segment's offset and the record's index."""
        n = len(part)

        def delivered(err: Any, msg: Any) -> None:
            self._settled(n, topic, err)
            if part.callbacks is None:
                return
            records = SegmentRecords(
                topic=topic,
                partition=msg.partition() if msg is not None else partition,
                offset=msg.offset() if msg is not None and err is None else -1,
                values=part.values if part.values is not None else [None] * n,
                keys=None if part.keys is None else part.keys.to_pylist(),
                timestamps=None if part.timestamps is None else part.timestamps.to_pylist(),
                headers=part.headers,
                segment_timestamp=msg.timestamp() if msg is not None else (0, 0),
                leader_epoch=msg.leader_epoch() if msg is not None else None,
                error=err,
            )
            self._dispatch(part.callbacks, records)

        return delivered

    def _dispatch(self, callbacks: Sequence[DeliveryCallback | None], records: SegmentRecords, start: int = 0) -> None:
        """Each record's callback. One that raises ends the call with its exception, as a raising
        delivery callback ends confluent-kafka's ``poll``; the records after it are reported at the
        next ``poll``/``flush``."""
        for i in range(start, len(callbacks)):
            cb = callbacks[i]
            if cb is None:
                continue
            try:
                cb(records.error, RecordMessage(records, i))
            except BaseException:
                if i + 1 < len(callbacks):
                    with self._lock:
                        self._reports.appendleft((0, partial(self._dispatch, callbacks, records, i + 1)))
                raise

    # -- records that are not sent ------------------------------------------------------------

    def fail_staged(self, topic: str, stg: Staging, err: Any) -> None:
        """Queue the report that staged records (not yet given a partition) failed with ``err``."""
        self.fail(topic, -1, len(stg), stg.callbacks, stg.values, stg.keys, stg.timestamps, stg.headers, err)

    def fail_rows(self, topic: str, partition: int, part: RowBatch, err: Any) -> None:
        """Queue the report that every row of ``part`` failed with ``err``."""
        keys = None if part.keys is None else part.keys.to_pylist()
        stamps = None if part.timestamps is None else part.timestamps.to_pylist()
        self.fail(topic, partition, len(part), part.callbacks, part.values, keys, stamps, part.headers, err)

    def fail(
        self,
        topic: str,
        partition: int,
        n: int,
        callbacks: Sequence[DeliveryCallback | None] | None,
        values: Sequence[Any] | None,
        keys: Sequence[bytes | None] | None,
        timestamps: Sequence[int | None] | None,
        headers: Sequence[Any] | None,
        err: Any,
    ) -> None:
        """Queue, for the next ``poll``/``flush``, the report that ``n`` records failed with ``err``."""
        log.error("%d record(s) to %s not sent: %s", n, topic, err)

        def report() -> None:
            self.reported += n
            if callbacks is None:
                return
            records = SegmentRecords(
                topic=topic,
                partition=partition,
                offset=-1,
                values=values if values is not None else [None] * n,
                keys=keys,
                timestamps=timestamps,
                headers=headers,
                error=err,
            )
            self._dispatch(callbacks, records)

        self._reports.append((n, report))

    def serve(self) -> None:
        """Run the queued reports (lock not held: callbacks may call ``produce``)."""
        while True:
            with self._lock:
                if not self._reports:
                    return
                _, report = self._reports.popleft()
            report()

    def unreported(self) -> int:
        """Records waiting in segments to send, in flight, or with a report queued (lock held)."""
        waiting = sum(p.num_records for p in self._pending)
        return waiting + self.in_flight + sum(n for n, _ in self._reports)
