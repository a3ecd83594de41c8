"""Producing while faults happen, and remembering what was acknowledged.

:class:`Ledger` records, from the producers' delivery reports, which ids were acknowledged and
where each bad message landed (partition, offset). :class:`Feeder` is a thread producing good
segments (an idempotent :class:`~parka.producer.ParquetProducer`, one segment per call to an
explicit partition) and, every few segments, a bad message, until stopped.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from parka.producer import ParquetProducer

from .catalogue import (
    EVENTS,
    EVENTS_VERSIONS,
    RAW_INPUTS,
    TOPIC_MAX_MESSAGE_BYTES,
    BadInput,
    data_input,
    events,
    evolved_events,
)

__all__ = [
    "CLIENT_LOG",
    "BadSent",
    "Feeder",
    "end_problems",
    "IdSource",
    "Ledger",
    "create_topic",
    "high_watermarks",
    "producer_conf",
    "raw_producer_conf",
]

log = logging.getLogger("reliability")
# librdkafka's own log lines (a broker away: "Connection refused" every second) go here; the
# suite sends them to a file instead of the terminal
CLIENT_LOG = logging.getLogger("reliability.kafka")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create ``name`` (every suite topic has the same ``max.message.bytes``) and wait for leaders."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG}
    admin = AdminClient(conf)
    config = {"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)}
    admin.create_topics([NewTopic(name, partitions, 1, config=config)], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        leaders = [] if md is None or md.error is not None else [p.leader for p in md.partitions.values()]
        if len(leaders) == partitions and all(leader >= 0 for leader in leaders):
            return
        time.sleep(0.1)  # between metadata reads
    raise RuntimeError(f"topic {name} has no leader for every partition")


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark (the offset the next message gets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reliability-watermarks", "logger": CLIENT_LOG})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    finally:
        consumer.close()


def producer_conf(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """An idempotent parka producer that waits out a broker restart (5 minutes per message)."""
    return {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "message.timeout.ms": 300_000,
        "message.max.bytes": TOPIC_MAX_MESSAGE_BYTES,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
        "linger.ms": 5,
        "logger": CLIENT_LOG,
        **extra,
    }


def raw_producer_conf(bootstrap: str) -> dict[str, Any]:
    """A plain idempotent confluent-kafka producer, for messages that are not segments."""
    return {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "message.timeout.ms": 300_000,
        "logger": CLIENT_LOG,
    }


class IdSource:
    """Unique record ids, handed out in ranges."""

    def __init__(self, start: int = 0) -> None:
        self._next = start
        self._lock = threading.Lock()

    def take(self, n: int) -> range:
        with self._lock:
            out = range(self._next, self._next + n)
            self._next += n
            return out


@dataclass(frozen=True)
class BadSent:
    kind: str
    partition: int
    offset: int


@dataclass
class Ledger:
    """What the producers were told, per delivery report (thread-safe)."""

    acknowledged: set[int] = field(default_factory=set)
    failed: set[int] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    segments: int = 0
    bad: list[BadSent] = field(default_factory=list)
    bad_failures: list[str] = field(default_factory=list)
    data_inputs: dict[str, range] = field(default_factory=dict)  # valid but unusual segments sent
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def segment_report(self, ids: range) -> Any:
        """The delivery callback of one ``produce_batch`` call of ``ids`` (once per segment; a
        call the producer split is acknowledged once all its segments are)."""
        delivered = 0

        def report(err: Any, msg: Any, n: int) -> None:
            nonlocal delivered
            with self._lock:
                if err is None:
                    delivered += n
                    self.segments += 1
                    if delivered == len(ids):
                        self.acknowledged.update(ids)
                else:
                    self.failed.update(ids)
                    self.failures.append(f"{len(ids)} records: {err}")

        return report

    def bad_report(self, kind: str) -> Any:
        def report(err: Any, msg: Any) -> None:
            with self._lock:
                if err is None:
                    self.bad.append(BadSent(kind, msg.partition(), msg.offset()))
                else:
                    self.bad_failures.append(f"{kind}: {err}")

        return report


def end_problems(
    known: Iterable[str],
    ledger: Ledger,
    orphans: list[str],
    *,
    unexpected_dead_letters: Iterable[Any] = (),
    unexpected_ids: int = 0,
) -> list[str]:
    """A chaos scenario's problems at its end: ``known`` (what it saw on the way), then the checks
    every scenario makes: segments the producer never got acknowledged, dead letters for good
    messages, orphan files under the table, ids in the table nobody produced."""
    problems = list(known)
    unexpected = list(unexpected_dead_letters)
    if ledger.failures:
        problems.append(f"{len(ledger.failures)} segments not acknowledged: {ledger.failures[:3]}")
    if unexpected:
        problems.append(f"dead letters for messages that were not bad: {unexpected[:5]}")
    if orphans:
        problems.append(f"{len(orphans)} orphan files under the table: {orphans[:5]}")
    if unexpected_ids:
        problems.append(f"{unexpected_ids} ids in the table nobody produced")
    return problems


class Feeder(threading.Thread):
    """Produces good segments to random partitions every ``interval_s``, a bad message (cycling
    through :data:`RAW_INPUTS`) every ``bad_every`` segments, and each of ``data_kinds`` once
    (after ``data_after`` segments), until :meth:`finish`. At each of ``evolve_at`` (segment
    counts) the producer's schema moves to the next of :data:`~.catalogue.EVENTS_VERSIONS`."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        ledger: Ledger,
        ids: IdSource,
        rng: random.Random,
        *,
        interval_s: float = 0.25,
        records: tuple[int, int] = (20, 100),
        bad_every: int = 0,
        bad_kinds: Sequence[BadInput] = RAW_INPUTS,
        data_kinds: Sequence[str] = (),
        data_after: int = 20,
        evolve_at: Sequence[int] = (),
    ) -> None:
        super().__init__(name=f"feeder-{topic}", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.ledger = ledger
        self.ids = ids
        self.rng = rng
        self.interval_s = interval_s
        self.records = records
        self.bad_every = bad_every
        self.bad_kinds = list(bad_kinds)
        self.data_kinds = list(data_kinds)
        self.data_after = data_after
        self.batches = 0
        self.bad_sent = 0
        # the batch counts at which the producer moves to the next EVENTS_VERSIONS schema
        self.evolve_at = list(evolve_at)
        self.version = 0
        self.error: BaseException | None = None
        # bad messages and data inputs wait for this (set once the table exists, so that no bad
        # message is the first segment a worker sees: a new table takes the first one's schema)
        self.bad_enabled = threading.Event()
        self._stop_event = threading.Event()
        self.producer = ParquetProducer(producer_conf(bootstrap, **{"columnar.batch.records": records[1]}))
        self.producer.set_schema(topic, EVENTS)
        self.raw = Producer(raw_producer_conf(bootstrap))

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                self.produce_one()
                self._stop_event.wait(self.interval_s)  # the production rate, not a synchronisation
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def produce_one(self) -> None:
        n = self.rng.randint(*self.records)
        ids = self.ids.take(n)
        partition = self.rng.randrange(self.partitions)
        if self.evolve_at and self.batches >= self.evolve_at[0]:
            self.evolve_at.pop(0)
            self.version += 1
            self.producer.set_schema(self.topic, EVENTS_VERSIONS[self.version])  # cuts what v-1 buffered
            log.info("producer of %s: schema v%d", self.topic, self.version + 1)
        rows = evolved_events(ids, self.version) if self.version else events(ids)
        self.producer.produce_batch(self.topic, rows, partition=partition, on_delivery=self.ledger.segment_report(ids))
        self.batches += 1
        if self.bad_enabled.is_set():
            if self.bad_every and self.batches % self.bad_every == 0:
                bad = self.bad_kinds[self.bad_sent % len(self.bad_kinds)]
                self.send_bad(bad, self.rng.randrange(self.partitions))
            elif self.data_kinds and self.batches >= self.data_after:
                self.send_data(self.data_kinds.pop(0), self.rng.randrange(self.partitions))
        self.producer.poll(0)
        self.raw.poll(0)

    def evolve(self) -> None:
        """Move the producer to the next schema version before its next segment."""
        self.evolve_at.append(self.batches)

    def send_bad(self, bad: BadInput, partition: int) -> None:
        assert bad.build is not None
        value, headers = bad.build(self.rng, self.bad_sent)
        self.bad_sent += 1
        self.raw.produce(
            self.topic, value=value, headers=headers, partition=partition, on_delivery=self.ledger.bad_report(bad.kind)
        )

    def send_data(self, kind: str, partition: int) -> None:
        """A valid but unusual segment (:data:`~.catalogue.DATA_INPUTS`), as one message."""
        first = self.ids.take(200_000 if kind == "large-segment" else 3)
        table = data_input(kind, self.rng, first.start)
        ids = range(first.start, first.start + table.num_rows)
        self.ledger.data_inputs[kind] = ids
        big = producer_conf(self.bootstrap, **{"columnar.batch.records": table.num_rows})
        with ParquetProducer(big) as producer:
            producer.set_schema(self.topic, EVENTS)
            producer.produce_batch(self.topic, table, partition=partition, on_delivery=self.ledger.segment_report(ids))
            producer.flush(300)
        log.info("sent %s (%d records) to %s[%d]", kind, table.num_rows, self.topic, partition)

    def finish(self, timeout_s: float = 300) -> None:
        """Stop producing and wait until every message has its delivery report.

        Raises:
            RuntimeError: the thread failed, or reports are still missing after ``timeout_s``.
        """
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout_s)
        left = self.producer.flush(timeout_s) + self.raw.flush(timeout_s)
        if self.error is not None:
            raise RuntimeError(f"the feeder of {self.topic} failed: {self.error!r}") from self.error
        if left:
            raise RuntimeError(f"{left} messages to {self.topic} without a delivery report after {timeout_s} s")
