"""The Kafka clients each benchmark runs, timed: producers of each encoding, messaging
consumers that decode, and the raw fetch that decodes nothing.

Every function builds its own client and closes it before returning, so no measurement holds
another client's threads. Producers and messaging consumers are timed as a long-running
application sees them: created and assigned before the clock starts (that costs a few ms of
CPU once), then produce-and-flush or consume-and-decode. The raw fetch is timed whole, group
join included, like the ``parka ingest`` run it is compared with.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import confluent_kafka
import pyarrow as pa
from confluent_kafka import Consumer, Producer, TopicPartition
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from .checks import CheckFailed
from .measure import Span, measured

__all__ = [
    "Fetched",
    "FileSink",
    "Sink",
    "consume_decoded",
    "drain",
    "consume_shim",
    "consume_shim_poll",
    "consume_shim_tables",
    "fetch_raw",
    "produce_parquet",
    "produce_parquet_records",
    "produce_values",
    "produce_with_backpressure",
    "value_name",
]

_CONSUME_BATCH = 10_000
_IDLE_LIMIT_S = 30.0
_FLUSH_TIMEOUT_S = 300.0


def group_id() -> str:
    return f"parka-bench-{uuid.uuid4().hex[:10]}"


def consumer_conf(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group_id(),
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **extra,
    }


def produce_with_backpressure(produce: Callable[..., Any], poll: Callable[[float], Any], *args: Any) -> None:
    """``produce(*args)``, serving delivery reports with ``poll`` while the queue is full."""
    while True:
        try:
            produce(*args)
            return
        except BufferError:
            poll(0.05)


def produce_values(conf: dict[str, Any], topic: str, values: list[bytes]) -> Span:
    """Produce pre-serialized values with a plain confluent-kafka producer, timed from the first
    ``produce`` to the end of ``flush`` (the producer is created and knows the topic's leader
    before, as in a long-running application). Raises ``CheckFailed`` when records are left
    undelivered."""
    producer = Producer(conf)
    producer.list_topics(topic, timeout=30)
    produce = producer.produce
    with measured() as span:
        for value in values:
            try:
                produce(topic, value)
            except BufferError:
                produce_with_backpressure(produce, producer.poll, topic, value)
        left = producer.flush(_FLUSH_TIMEOUT_S)
    del producer, produce
    if left:
        raise CheckFailed(f"{topic}: {left} records not delivered")
    return span


def _parka_producer(conf: dict[str, Any], topic: str, schema: dict[str, Any]) -> ParquetProducer:
    producer = ParquetProducer(conf)
    producer.set_schema(topic, schema)
    producer.list_topics(topic, timeout=30)
    return producer


def produce_parquet(
    conf: dict[str, Any], topic: str, schema: dict[str, Any], table: pa.Table
) -> tuple[Span, dict[str, int], list[int]]:
    """``ParquetProducer.produce_batch`` of a whole Arrow table, timed like
    :func:`produce_values`; returns the producer's stats and the rows of each segment."""
    rows_per_segment: list[int] = []
    producer = _parka_producer(conf, topic, schema)
    with measured() as span:
        producer.produce_batch(topic, table, on_delivery=lambda _err, _msg, n: rows_per_segment.append(n))
        left = producer.flush(_FLUSH_TIMEOUT_S)
    producer.close()
    stats = producer.stats()
    if left:
        raise CheckFailed(f"{topic}: {left} records not delivered")
    return span, stats, rows_per_segment


def produce_parquet_records(
    conf: dict[str, Any], topic: str, schema: dict[str, Any], rows: list[dict[str, Any]]
) -> tuple[Span, dict[str, int]]:
    """``ParquetProducer.produce`` one dict at a time, the drop-in path, timed like
    :func:`produce_values`."""
    producer = _parka_producer(conf, topic, schema)
    produce = producer.produce
    with measured() as span:
        for row in rows:
            try:
                produce(topic, row)
            except BufferError:
                produce_with_backpressure(produce, producer.poll, topic, row)
        left = producer.flush(_FLUSH_TIMEOUT_S)
    producer.close()
    stats = producer.stats()
    if left:
        raise CheckFailed(f"{topic}: {left} records not delivered")
    return span, stats


def drain(
    consumer: Any, want: int, take: Callable[[Any], None], topic: str, *, batch_size: int = _CONSUME_BATCH
) -> None:
    """Consume exactly ``want`` messages (records, for the shim) from the assigned partition,
    ``batch_size`` per ``consume`` call. Raises ``CheckFailed`` when they stop coming."""
    got = 0
    idle_since = time.monotonic()
    while got < want:
        batch = consumer.consume(min(batch_size, want - got), 1.0)
        if not batch:
            if time.monotonic() - idle_since > _IDLE_LIMIT_S:
                raise CheckFailed(f"{topic}: only {got:,} of {want:,} records arrived")
            continue
        idle_since = time.monotonic()
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    continue
                raise CheckFailed(f"{topic}: consume error {err}")
            take(msg)
            got += 1


def consume_decoded(
    bootstrap: str, topic: str, want: int, decode: Callable[[bytes], dict[str, Any]]
) -> tuple[Span, list[dict[str, Any]]]:
    """A plain confluent-kafka consumer decoding the first ``want`` values of partition 0."""
    out: list[dict[str, Any]] = []
    append = out.append
    consumer = Consumer(consumer_conf(bootstrap))
    consumer.assign([TopicPartition(topic, 0, 0)])
    with measured() as span:
        drain(consumer, want, lambda msg: append(decode(msg.value())), topic)
    consumer.close()
    return span, out


def consume_shim(bootstrap: str, topic: str, want: int) -> tuple[Span, list[dict[str, Any]]]:
    """``ParquetConsumer``, record by record, over the first ``want`` records of partition 0."""
    out: list[dict[str, Any]] = []
    append = out.append
    consumer = ParquetConsumer(consumer_conf(bootstrap))
    consumer.assign([TopicPartition(topic, 0, 0)])
    with measured() as span:
        drain(consumer, want, lambda msg: append(msg.value()), topic)
    consumer.close()
    return span, out


def consume_shim_poll(bootstrap: str, topic: str, want: int) -> tuple[Span, list[dict[str, Any]]]:
    """``ParquetConsumer.poll()``, one record per call (the per-record consumer), over the first
    ``want`` records of partition 0. Raises ``CheckFailed`` when they stop coming."""
    out: list[dict[str, Any]] = []
    append = out.append
    consumer = ParquetConsumer(consumer_conf(bootstrap))
    consumer.assign([TopicPartition(topic, 0, 0)])
    poll = consumer.poll
    with measured() as span:
        got = 0
        idle_since: float | None = None  # no clock read per record
        while got < want:
            msg = poll(1.0)
            if msg is None:
                now = time.monotonic()
                idle_since = now if idle_since is None else idle_since
                if now - idle_since > _IDLE_LIMIT_S:
                    raise CheckFailed(f"{topic}: only {got:,} of {want:,} records arrived")
                continue
            idle_since = None
            err = msg.error()
            if err is not None:
                if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    continue
                raise CheckFailed(f"{topic}: consume error {err}")
            append(msg.value())
            got += 1
    consumer.close()
    return span, out


def consume_shim_tables(bootstrap: str, topic: str, want: int) -> tuple[Span, list[pa.Table]]:
    """``ParquetConsumer.poll_table()``, one Arrow table per segment, until ``want`` rows of
    partition 0 arrived (whole segments: ``want`` should be a multiple of the segment size).
    Raises ``CheckFailed`` when they stop coming."""
    out: list[pa.Table] = []
    consumer = ParquetConsumer(consumer_conf(bootstrap))
    consumer.assign([TopicPartition(topic, 0, 0)])
    with measured() as span:
        got = 0
        idle_since = time.monotonic()
        while got < want:
            batch = consumer.poll_table(1.0)
            if batch is None:
                if time.monotonic() - idle_since > _IDLE_LIMIT_S:
                    raise CheckFailed(f"{topic}: only {got:,} of {want:,} records arrived")
                continue
            err = batch.error()
            if err is not None:
                if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    continue
                raise CheckFailed(f"{topic}: consume error {err}")
            out.append(batch.value())
            got += len(batch)
            idle_since = time.monotonic()
    consumer.close()
    return span, out


class Sink(Protocol):
    """Where :func:`fetch_raw` puts each value it fetches: ``take`` as each arrives, ``finish``
    once all have (returns when every value is durable)."""

    def take(self, name: str, value: bytes) -> None: ...

    def finish(self) -> None: ...


def value_name(partition: int, offset: int) -> str:
    """The file or object name of the value at ``partition``, ``offset``."""
    return f"{partition}-{offset}.parquet"


class FileSink:
    """Each value written to a file of its own in ``folder``, then one ``syncfs`` of its file
    system so all are durable, as a Delta commit needs them (the least a local ingester does)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def take(self, name: str, value: bytes) -> None:
        with open(os.path.join(self.folder, name), "wb") as f:
            f.write(value)

    def finish(self) -> None:
        _sync_filesystem(self.folder)


@dataclass
class Fetched:
    """A raw fetch: messages and value bytes, timed in total and from the first message on."""

    span: Span
    messages: int
    value_bytes: int
    first_bytes: int
    steady_wall_s: float
    digest: str | None
    values: list[bytes] | None


def fetch_raw(
    bootstrap: str,
    topic: str,
    messages: int,
    *,
    subscribe: bool = True,
    digest: bool = False,
    keep: bool = False,
    batch_size: int = _CONSUME_BATCH,
    sink: Sink | None = None,
) -> Fetched:
    """The physical reference: fetch ``messages`` messages of ``topic`` and discard them.

    With ``subscribe`` the consumer joins a fresh group, like ``parka ingest`` does; otherwise it
    assigns partition 0. ``batch_size=1`` polls message by message as ``parka ingest`` does
    (and times the first message exactly). ``digest`` hashes the values in order (for content
    checks; do not combine it with a timed reference); ``keep`` returns them. A ``sink`` makes
    it the least an ingester must do: each value goes to the sink under a name of its own
    (:func:`value_name`) as it arrives, and the clock stops once the sink's ``finish`` has
    returned (every value durable: :class:`FileSink`'s one ``syncfs``, an object store's
    acknowledged PUTs).
    """
    hasher = hashlib.sha256() if digest else None
    kept: list[bytes] | None = [] if keep else None
    total = 0
    first_bytes = 0
    first_at: float | None = None

    def take(msg: Any) -> None:
        nonlocal total, first_at, first_bytes
        value = msg.value()
        size = len(value) if value is not None else 0
        if first_at is None:
            first_at, first_bytes = time.perf_counter(), size
        total += size
        if hasher is not None:
            hasher.update(len(value).to_bytes(8, "big"))
            hasher.update(value)
        if kept is not None:
            kept.append(value)
        if sink is not None:
            sink.take(value_name(msg.partition(), msg.offset()), value)

    with measured() as span:
        consumer = Consumer(consumer_conf(bootstrap))
        if subscribe:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, 0, 0)])
        drain(consumer, messages, take, topic, batch_size=batch_size)
        if sink is not None:
            sink.finish()
        done_at = time.perf_counter()
        consumer.close()
    steady = done_at - first_at if first_at is not None else 0.0
    return Fetched(
        span=span,
        messages=messages,
        value_bytes=total,
        first_bytes=first_bytes,
        steady_wall_s=steady,
        digest=hasher.hexdigest()[:20] if hasher is not None else None,
        values=kept,
    )


def _sync_filesystem(folder: str) -> None:
    """One ``syncfs`` of the file system holding ``folder`` (Linux), else ``os.sync``: the same
    barrier ``parka ingest`` takes before a Delta commit."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        if not hasattr(libc, "syncfs") or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def values_digest(values: list[bytes]) -> str:
    """The digest :func:`fetch_raw` computes, over values held in memory."""
    hasher = hashlib.sha256()
    for value in values:
        hasher.update(len(value).to_bytes(8, "big"))
        hasher.update(value)
    return hasher.hexdigest()[:20]
