"""The producer's pipeline: staged records, in one direction, to segments in Kafka's hands.

::

    produce() ──► TopicState.items ──drain──► convert ──► Placement.assign ──► Segmenter ──► Outbox
                  (staged, no lock)          (_topics)    (_placement)         (_segmenter)  (_outbox)

A *drain* takes a topic's staged records (one atomic slice and delete: ``produce()`` appends
without the lock), converts them to Arrow, places each row in a Kafka partition and adds the
rows to that partition's buffer; a full buffer is cut into segments at once, the others by
``linger.ms`` (:meth:`Pipeline.cut_due`) or a flush. :class:`Pipeline` owns the lock that
guards all of it, and holds it only for work in memory: partition counts are looked up by
:class:`~._placement.Placement` on a thread of its own, and a drain that needs a count not yet
known leaves its records staged until it is (a caller that must drain, such as ``flush()``,
waits for it with the lock released). So nothing waits for the broker while holding the lock.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import confluent_kafka
import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException

from parka.background import every
from parka.config import ProducerSettings
from parka.errors import KafkaClientError
from parka.partitioner import STICKY

from ._buffer import CutPolicy, DeliveryCallback, RowBatch, Side, Staging
from ._inputs import normalize_headers, normalize_key
from ._outbox import BatchCallback, Outbox
from ._placement import Placement, needs_metadata
from ._segmenter import Segmenter
from ._topics import TopicState, convert

__all__ = ["Pipeline"]

log = logging.getLogger("parka.producer")

T = TypeVar("T")


def unknown_partition() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION, "Local: Unknown partition"))


class Pipeline:
    """Topic states, placement, segmenting and the outbox, under one lock (:attr:`lock`).

    ``paused()`` tells the linger thread not to send (a transactional producer outside a
    transaction); ``on_full()`` hears whenever the outbox may have become full or room again.
    """

    def __init__(
        self,
        client: confluent_kafka.Producer,
        settings: ProducerSettings,
        clock: Callable[[], float],
        default_callback: DeliveryCallback | None,
        *,
        paused: Callable[[], bool],
        on_full: Callable[[], None],
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._default_callback = default_callback
        self._paused = paused
        # Guards topic states, buffers, the outbox and counters; never taken twice by one
        # thread, never held while waiting for the broker.
        self.lock = threading.Lock()
        self.topics: dict[str, TopicState] = {}
        self.counters = {"splits": 0, "bad_records": 0}
        self.policy = CutPolicy(
            max_records=settings.batch_records, max_bytes=settings.batch_bytes, linger_s=settings.linger_ms / 1000.0
        )
        self.out = Outbox(client, self.lock, on_full)
        self.placement = Placement(client.list_topics, settings.partitioner)
        self.segments = Segmenter(
            settings, self.policy, self.topics, self.out, clock, self.placement.advance, self.counters
        )
        self._ticker: threading.Thread | None = None
        self._closed = threading.Event()

    # -- into the pipeline (each takes the lock) ------------------------------------------------

    def set_topic(self, topic: str, state: TopicState) -> None:
        """Install ``state``; records staged or buffered under the topic's previous schema are
        cut into segments first, so every segment has exactly one schema."""

        def install() -> None:
            if topic in self.topics:
                self.segments.cut_topic(topic)
            self.topics[topic] = state

        self._after_drain(topic, self.topics.get(topic), install)

    def drain_now(self, topic: str, state: TopicState) -> None:
        """Drain a full staging (``produce()``), waiting for the partition count if need be."""
        self._after_drain(topic, state, lambda: None)

    def side(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        cb: DeliveryCallback | None,
        timestamp: int,
        headers: Any,
    ) -> Side:
        """The staged form of a record with a key, partition, callback, timestamp or headers.
        Raises as ``produce`` for a key or headers of a wrong type or an unknown partition."""
        if key is not None and type(key) is not bytes:
            key = normalize_key(key, topic)
        if partition is None:
            partition = -1
        elif partition >= 0 and 0 < self.placement.known(topic) <= partition:
            raise unknown_partition()
        hdrs = None if headers is None else normalize_headers(headers, topic)
        return (value, key, partition, cb, int(timestamp) if timestamp else None, hdrs)

    def tombstone(
        self,
        topic: str,
        state: TopicState,
        key: Any,
        partition: int | None,
        headers: Any,
        timestamp: int,
        callback: DeliveryCallback | None,
    ) -> None:
        """Send ``value=None`` as a plain Kafka message, in order with the segments of its
        partition: that partition's staged and buffered records are cut into segments first
        (``columnar.tombstone.order=key``: only when one of them has the tombstone's key).

        Raises :class:`~parka.errors.RecordError` for a key or headers of a wrong type,
        ``KafkaException`` (``_UNKNOWN_PARTITION``) for a partition the topic lacks, and
        :class:`~parka.errors.KafkaClientError` when the partition count cannot be had."""
        kbytes = None if key is None else normalize_key(key, topic)
        hdrs = None if headers is None else normalize_headers(headers, topic)
        report = self.out.plain_report(topic, callback or self._default_callback)
        if partition is None or partition < 0:
            partition = -1
            self._count_known(topic)

        def send() -> None:
            part = partition
            if part >= 0:
                if 0 < self.placement.known(topic) <= part:
                    raise unknown_partition()
            else:
                keys = None if kbytes is None else pa.array([kbytes], pa.binary())
                part = self.placement.assign(topic, 1, keys, None)[0][0][0]
            if (
                self._settings.tombstone_order == "partition"
                or kbytes is None
                or self.segments.holds_key(topic, part, kbytes)
            ):
                self.segments.cut_partition(topic, part)
            self.out.send_plain(topic, part, kbytes, hdrs, int(timestamp or 0), report)

        self._after_drain(topic, state, send)

    def add_table(
        self,
        topic: str,
        state: TopicState,
        table: pa.Table,
        keys: pa.Array | None,
        partition: int,
        on_segment: BatchCallback | None,
    ) -> int:
        """``produce_batch``'s table: rows placed, each partition's sent as segments at once
        behind the records staged and buffered before. Returns the number of segments queued.
        Raises as :meth:`~._segmenter.Segmenter.send_now` and :meth:`~._placement.Placement.assign`."""
        if partition < 0:
            self._count_known(topic)

        def send() -> int:
            if partition >= 0:
                parts = [(partition, np.arange(len(table)))]
            else:
                parts = self.placement.assign(topic, len(table), keys, None)[0]
            queued = 0
            for part, rows in parts:
                batch = RowBatch(table, keys=keys)
                if len(rows) != len(table):
                    batch = batch.take(rows)
                queued += self.segments.send_now(topic, part, state, batch, on_segment)
            return queued

        return self._after_drain(topic, state, send)

    def _count_known(self, topic: str) -> None:
        if not self.placement.wait(topic):
            raise KafkaClientError(f"no partition metadata for topic '{topic}': the producer is closing")

    def _after_drain(self, topic: str, state: TopicState | None, action: Callable[[], T]) -> T:
        """``action()`` with the lock held, right after ``topic``'s staged records were drained;
        a drain that waits for the partition count waits with the lock released."""
        while True:
            with self.lock:
                if state is None or self.drain(topic, state):
                    return action()
            self._count_known(topic)

    # -- drains and cuts (the lock held) -----------------------------------------------------------

    def drain(self, topic: str, state: TopicState) -> bool:
        """Convert ``topic``'s staged records and move them into partition buffers. Lock held.

        Returns ``False``, leaving the records staged and a lookup started, when they need the
        topic's partition count and it is not known yet. The items are taken with one slice and
        one delete (each atomic): a record appended meanwhile stays, in order, for the next
        drain. Records that cannot be converted are reported to their callbacks; should anything
        else fail here (no partition metadata for the topic, ...), every taken record is
        reported with that error: a staging is never dropped in silence.
        """
        items = state.items
        n = len(items)
        if not n:
            return True
        if not self.placement.resolved(topic) and needs_metadata(items[:n]):
            self.placement.request(topic)
            return False
        taken = items[:n]
        del items[:n]
        first_at = state.first_at
        if items:
            state.first_at = self._clock()
        stg = Staging.unpack(taken, self._default_callback)
        try:
            self._place(topic, state, stg, first_at)
        except Exception as exc:
            log.exception("cannot buffer %d record(s) for %s", len(stg), topic)
            err = exc.kafka_error if isinstance(exc, KafkaClientError) and exc.kafka_error is not None else exc
            self.out.fail(
                topic, STICKY, len(stg), stg.callbacks, stg.values, stg.keys, stg.timestamps, stg.headers, err
            )
        return True

    def _place(self, topic: str, state: TopicState, stg: Staging, staged_at: float) -> None:
        converted = convert(topic, state, stg, self._settings)
        for record, err in converted.bad:
            self.counters["bad_records"] += 1
            self.out.fail_staged(topic, record, err)
        batch = converted.batch
        if batch is None:
            return
        rows = len(batch)
        parts, unknown, n = self.placement.assign(topic, rows, batch.keys, converted.partitions)
        if unknown is not None:
            lacking = KafkaError(KafkaError._UNKNOWN_PARTITION, f"Local: Unknown partition (topic has {n})")
            self.out.fail_rows(topic, unknown[0], batch.take(unknown[1]), lacking)
        for part, idx in parts:
            self.segments.add(topic, part, state, batch if len(idx) == rows else batch.take(idx), staged_at)

    def cut_due(self) -> None:
        """Drain the stagings and cut the buffers whose ``linger.ms`` expired. Lock held."""
        now = self._clock()
        for topic, state in list(self.topics.items()):
            if state.items and now - state.first_at >= self.policy.linger_s:
                self.drain(topic, state)
        self.segments.cut_due(now)

    def cut_all(self, deadline: float | None = None) -> bool:
        """Drain every staging and cut every buffer (takes the lock), waiting with the lock
        released for partition counts still looked up; ``False`` when ``deadline`` (of the
        producer's clock) passed first, or the producer closes."""
        while True:
            with self.lock:
                waiting = [topic for topic, state in list(self.topics.items()) if not self.drain(topic, state)]
                self.segments.cut_all()
            if not waiting:
                return True
            for topic in waiting:
                left = None if deadline is None else deadline - self._clock()
                if (left is not None and left <= 0) or not self.placement.wait(topic, left):
                    return False

    def flush(self, deadline: float | None) -> None:
        """Send every staged and buffered record and wait for every report (serving callbacks on
        this thread), or until ``deadline`` (of the producer's clock). Takes the lock in turns."""
        client = self.out.producer
        if not self.cut_all(deadline):
            self.out.serve()
            return  # records still wait for their topic's partition count
        while True:
            self.out.serve()
            with self.lock:
                self.out.retry()
                pending = self.out.waiting
            if not pending:
                break
            if deadline is not None and self._clock() >= deadline:
                return
            client.poll(0.05)
        remaining = None if deadline is None else max(0.0, deadline - self._clock())
        if remaining is None:
            client.flush()
        else:
            client.flush(remaining)
        self.out.serve()

    def hand_over(self) -> None:
        """Hand the segments that wait for room in librdkafka's queue over, polling it meanwhile."""
        while True:
            with self.lock:
                self.out.retry()
                if not self.out.waiting:
                    return
            self.out.producer.poll(0.05)

    def drop_all(self, err: KafkaError) -> None:
        """Drop every staged, buffered and waiting record, each reported with ``err``. Lock held."""
        for topic, state in self.topics.items():
            if state.items:
                taken = state.items[:]
                del state.items[: len(taken)]
                self.out.fail_staged(topic, Staging.unpack(taken, self._default_callback), err)
        for buf in self.segments.drop():
            self.out.fail_rows(buf.topic, buf.partition, RowBatch.concat(buf.pieces), err)
        self.out.drop_waiting(err)

    # -- counts -----------------------------------------------------------------------------------

    def buffered(self) -> int:
        """Records produced and not yet cut into a segment (staged or in a partition buffer)."""
        with self.lock:
            return sum(len(t.items) for t in self.topics.values()) + self.segments.buffered()

    def unreported(self) -> int:
        """Records staged, buffered, in flight, or with a report waiting for ``poll``."""
        with self.lock:
            staged = sum(len(t.items) for t in self.topics.values())
            return staged + self.segments.buffered() + self.out.unreported()

    def learn(self, metadata: Any) -> None:
        """Keep the partition counts of an application's ``list_topics`` answer (topics with a schema)."""
        for name, tmd in getattr(metadata, "topics", {}).items():
            if name in self.topics and tmd.error is None and tmd.partitions:
                self.placement.learn(name, len(tmd.partitions))

    # -- the linger thread ---------------------------------------------------------------------------

    def start_ticker(self) -> None:
        """Start the thread that drains and cuts what ``linger.ms`` made due (once; none for 0)."""
        with self.lock:
            if self._ticker is not None or self.policy.linger_s <= 0:
                return
            interval = min(max(self.policy.linger_s / 4, 0.005), 0.1)
            # a weak reference: the thread keeps neither the pipeline nor its producer alive, so an
            # application's producer it dropped without close() is freed, as confluent-kafka's is
            self._ticker = threading.Thread(
                target=every,
                args=(weakref.ref(self), self._closed, interval, Pipeline.tick),
                name="parka-linger",
                daemon=True,
            )
            self._ticker.start()

    @property
    def ticking(self) -> bool:
        return self._ticker is not None

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` ran (the producer closed)."""
        return self._closed.is_set()

    def tick(self) -> None:
        """The linger thread's turn: cut what ``linger.ms`` made due, hand over what waits."""
        try:
            with self.lock:
                if self._paused():
                    return  # never send outside an open transaction
                self.cut_due()
                self.out.retry()
        except Exception:  # a background failure must not kill the thread silently
            log.exception("parka linger thread failed to cut a segment")

    def stop(self) -> None:
        """Stop the linger thread and the metadata lookups (the producer closes)."""
        self._closed.set()
        self.placement.stop()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
