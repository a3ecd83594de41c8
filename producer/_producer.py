"""``ParquetProducer``: a drop-in for ``confluent_kafka.Producer`` that sends Parquet segments.

With ``columnar.encoding=parquet`` records are buffered per topic-partition and each buffer is
cut into one Parquet segment (one Kafka message) at ``columnar.batch.records``,
``columnar.batch.bytes`` or ``linger.ms``, whichever comes first. With ``none`` every call goes
straight to the wrapped producer, unchanged.

Per record, ``produce()`` only appends the record to its topic's staging lists. Conversion to
Arrow, validation, partitioning and sizing happen once per few thousand records, in Arrow (see
``_buffer``): a staging is *drained* when it holds ``drain_size`` records, when ``linger.ms``
expires, or at ``flush()``. A record that Arrow cannot take is isolated and reported through
its delivery callback with the topic, field and reason; the records around it go on.

confluent-kafka's model, kept:

* **Threads.** ``produce``/``poll``/``flush`` run in the caller's thread. A daemon thread drains
  and cuts buffers whose ``linger.ms`` expired, so a record is sent on time while the caller is
  idle (as librdkafka's own thread sends). Delivery callbacks never run on it: they run only
  inside ``poll()``, ``flush()`` and ``abort_transaction()``, in the caller's thread.
* **Partitioning** is librdkafka's, for every ``partitioner`` value (:mod:`parka.partitioner`);
  records without a key stick to one partition per segment.
* **Transactions.** With ``transactional.id``, records are only taken inside a transaction (else
  ``KafkaException`` ``_STATE``, as confluent-kafka raises); the linger thread sends only while a
  transaction is open; ``commit_transaction`` sends every buffered record into the transaction
  first; ``abort_transaction`` and ``purge`` drop buffered records and report each with
  ``_PURGE_QUEUE``.
* ``len()``: records not yet reported (staged, buffered, in flight, or with a report waiting for
  ``poll``); ``flush()`` returns it; ``poll()`` returns the number of records reported.

Where parka differs: a value dict is read when its staging is drained (within ``linger.ms``), not
inside ``produce()``, so the caller must not change it after ``produce()`` (pass a fresh dict);
copying every record would cost more than the rest of ``produce()``.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import confluent_kafka
import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException

from parka._swap import client_class
from parka.config import ProducerSettings, parse_producer_config
from parka.encoding import LayoutCache, sort_order
from parka.errors import ConfigError, KafkaClientError, RecordError, RecordTooLargeError, RecordTypeError, SchemaError
from parka.partitioner import STICKY, partitions_for_keys
from parka.partitioning import PartitionSpec
from parka.records import RecordConverter
from parka.registry import Registry, split_registry_config
from parka.schema import ParkaSchemaWarning, schema_fingerprint, time_of_day_fields, to_arrow_schema
from parka.segment import Segment, build_segment_table, encode_segment

from ._batch import produce_messages
from ._buffer import CutPolicy, DeliveryCallback, PartitionBuffer, RowBatch, Side, SizeModel, Staging, drain_size
from ._compat import ClosedClient, ProducerConfigError, check_topic, client_config, raise_closed
from ._inputs import conform_table, key_bytes, normalize_headers, normalize_key, split_by_values
from ._outbox import BatchCallback, Outbox, SegmentReport

if TYPE_CHECKING:
    from parka.metrics import ProducerMetrics

__all__ = ["ParquetProducer"]

# Bound at import, so that an application (or a test) that swaps ``confluent_kafka.Producer`` for
# parka's class still gets the real client here (parka._swap).
_KafkaProducer = confluent_kafka.Producer

log = logging.getLogger("parka.producer")

_METADATA_TIMEOUT_S = 10.0
_METADATA_REFRESH_S = 300.0

BufferKey = tuple[str, int, tuple[Any, ...]]


def _kafka_exception(code: int, reason: str) -> KafkaException:
    return KafkaException(KafkaError(code, reason))


@dataclass
class _Topic:
    schema: pa.Schema
    fingerprint: str
    converter: RecordConverter
    partition_by: tuple[PartitionSpec, ...]
    drain_at: int
    items: list[Any] = field(default_factory=list)  # staged: values, or Side tuples (see _buffer)
    first_at: float = 0.0  # when the oldest staged item arrived
    arrow_size: SizeModel = field(default_factory=SizeModel)
    row_bytes: float | None = None
    num_partitions: int = 0
    metadata_at: float = float("-inf")
    sticky: int = -1
    layouts: LayoutCache = field(default_factory=LayoutCache)  # columnar.encoding.tuning=auto
    schema_id: int | None = None  # the registry's id of the schema: sent as parka.schema.id


class ParquetProducer:
    """Produce records as Parquet segments (KIP-1008), or plainly with ``columnar.encoding=none``.

    ``conf`` is a confluent-kafka producer config plus parka's ``columnar.*`` keys (see
    :mod:`parka.config`); it is copied, never modified. As with confluent-kafka, keyword arguments
    are config keys too (``ParquetProducer(conf, logger=log)``, ``ParquetProducer(**conf)``).
    No network I/O happens here.

    Raises ``TypeError`` without a config dict, :class:`~parka.errors.ConfigError` for an
    invalid or contradictory ``columnar.*`` setting, and ``KafkaException`` for a bad Kafka
    setting (parka's :class:`~parka.producer._compat.ProducerConfigError` when parka reads it).
    """

    # Before __init__ ran (a subclass that skipped it) and after close(): closed, as confluent-kafka's.
    _open = False
    _refuse = True
    _columnar = False
    _columnar_topics: Mapping[str, _Topic] = MappingProxyType({})
    _producer: Any = ClosedClient()

    def __init__(
        self,
        conf: Mapping[str, Any] | None = None,
        /,
        *,
        clock: Callable[[], float] = time.monotonic,
        **kwargs: Any,
    ) -> None:
        conf = client_config(conf, kwargs)
        registry_conf, conf = split_registry_config(conf)
        try:
            settings, client_conf = parse_producer_config(conf)
        except ConfigError as exc:
            if exc.key.startswith("columnar.") or exc.key.startswith("schema.registry."):
                raise
            raise ProducerConfigError(exc) from exc  # a Kafka key: KafkaException, as confluent-kafka's
        # schema.registry.* never reach librdkafka; the client makes no request until set_schema
        self._registry = None if registry_conf is None else Registry(registry_conf)
        self._settings: ProducerSettings = settings
        self._columnar = settings.columnar
        self._default_callback: DeliveryCallback | None = None
        if settings.columnar:
            self._default_callback = client_conf.pop("on_delivery", None) or client_conf.pop(
                "delivery.report.callback", None
            )
        self._producer = client_class(confluent_kafka.Producer, _KafkaProducer, ParquetProducer)(client_conf)
        self._client_id = client_conf.get("client.id", "rdkafka")
        self._clock = clock
        self._policy = CutPolicy(
            max_records=settings.batch_records,
            max_bytes=settings.batch_bytes,
            linger_s=settings.linger_ms / 1000.0,
        )
        self._topics: dict[str, _Topic] = {}
        self._buffers: dict[BufferKey, PartitionBuffer] = {}
        # Guards buffers, pending segments and counters; never taken twice by one thread.
        # produce() appends to a topic's staged items without it (see _drain).
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None
        self._closed = threading.Event()
        self._random = random.Random()
        # A transactional producer takes records only inside a transaction, as librdkafka does.
        self._transactional = bool(client_conf.get("transactional.id"))
        self._outside_txn = self._transactional
        self._out = Outbox(self._producer, self._lock)
        self._refuse = self._outside_txn  # _outside_txn or the outbox full: the one flag produce() reads
        # produce() finds a topic's state here; empty with encoding none, so every call passes through
        self._columnar_topics: dict[str, _Topic] = self._topics if settings.columnar else {}
        self._stats = {"splits": 0, "bad_records": 0}
        self._metrics: ProducerMetrics | None = None
        if settings.metrics_registry is not None:
            self.register_metrics(settings.metrics_registry)
        self._open = True

    # -- configuration -------------------------------------------------------------------

    @property
    def settings(self) -> ProducerSettings:
        return self._settings

    def set_schema(
        self,
        topic: str,
        schema: str | dict[str, Any] | pa.Schema | None = None,
        *,
        subject: str | None = None,
        register: bool = False,
    ) -> None:
        """Declare the schema of ``topic``'s records: an Avro record schema or a ``pyarrow.Schema``.

        With ``schema.registry.url`` configured, ``subject`` names a registry subject:
        ``set_schema(topic, subject=s)`` uses its latest version, and
        ``set_schema(topic, avro, subject=s, register=True)`` registers ``avro`` under it (or finds
        it there). Either way every segment carries the schema's id in ``parka.schema.id``.

        Records buffered under a previous schema are cut into segments first, so every
        segment has exactly one schema. Raises :class:`~parka.errors.SchemaError` naming the
        field when the schema cannot be used, :class:`~parka.errors.RegistryError` when the
        registry refuses (unknown subject, incompatible schema) or cannot be reached, and
        ``ValueError`` for a contradictory call.
        """
        schema_id: int | None = None
        if subject is not None:
            if self._registry is None:
                raise ConfigError("schema.registry.url", None, "a registry URL, to set a schema by subject")
            if register:
                if schema is None or isinstance(schema, pa.Schema):
                    raise ValueError("set_schema(register=True) needs the Avro schema to register")
                text = schema if isinstance(schema, str) else json.dumps(schema)
                to_arrow_schema(text)  # refuse a schema parka cannot use before registering it
                schema_id = self._registry.register(subject, text)
            elif schema is not None:
                raise ValueError("set_schema(subject=...) fetches the schema: give no schema, or register=True")
            else:
                schema_id, schema = self._registry.latest(subject)
        elif register:
            raise ValueError("set_schema(register=True) needs subject=")
        if schema is None:
            raise ValueError("set_schema needs a schema or subject=")
        arrow = to_arrow_schema(schema)
        times = time_of_day_fields(arrow)
        if times:
            warnings.warn(
                f"topic '{topic}': column {times[0]} is a time of day ({len(times)} such column(s)); Delta Lake "
                "has no time type, so parka ingest will refuse this topic's segments. Declare it as an int "
                "(ms or us since midnight), as an Avro time-millis/time-micros field becomes.",
                ParkaSchemaWarning,
                stacklevel=2,
            )
        for spec in self._settings.partition_by:
            if spec.source not in arrow.names:
                raise SchemaError(
                    f"columnar.partition.by ({spec}) names a column the schema of topic '{topic}' lacks",
                    field=spec.source,
                )
            problem = spec.problem(arrow.field(spec.source).type)
            if problem is not None:
                raise SchemaError(f"columnar.partition.by: {problem}", field=spec.source)
        for name in self._settings.sort_by:
            if name not in arrow.names:
                raise SchemaError(f"columnar.sort.by names a column the schema of topic '{topic}' lacks", field=name)
            if pa.types.is_nested(arrow.field(name).type):
                raise SchemaError(
                    f"columnar.sort.by names a {arrow.field(name).type} column of topic '{topic}'; "
                    "sort by columns of plain values",
                    field=name,
                )
        converter = RecordConverter(arrow)
        with self._lock:
            old = self._topics.get(topic)
            if old is not None:
                self._drain(topic, old)
                for bkey in [k for k in self._buffers if k[0] == topic]:
                    self._cut(bkey)
            state = _Topic(
                schema=arrow,
                fingerprint=schema_fingerprint(arrow),
                converter=converter,
                schema_id=schema_id,
                partition_by=self._settings.partition_by,
                drain_at=drain_size(self._settings.batch_records, self._settings.batch_bytes, None),
            )
            if old is not None:
                state.num_partitions, state.metadata_at = old.num_partitions, old.metadata_at
            self._topics[topic] = state

    def schema(self, topic: str) -> pa.Schema | None:
        """The Arrow schema set for ``topic``, or ``None``."""
        state = self._topics.get(topic)
        return None if state is None else state.schema

    # -- producing -----------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        *,
        callback: DeliveryCallback | None = None,
    ) -> None:
        """Add one record to its topic's buffer (or produce it as is with encoding ``none``).

        ``value`` is a dict matching the topic's schema; it is read later, when its buffer is
        converted, so do not change it after this call. ``key`` decides the partition as
        librdkafka's ``partitioner`` would. ``on_delivery(err, msg)`` fires once for this record,
        inside ``poll()``/``flush()``: with ``err=None`` when its segment is acknowledged (``msg``
        is a :class:`~parka.message.RecordMessage`), else with the segment's ``KafkaError``, or a
        :class:`~parka.errors.RecordError` naming the field when the record does not match the
        schema (the records around it are delivered).

        Raises :class:`~parka.errors.RecordError` (topic named) when no schema is set, the value
        is not a mapping, or the key or headers have a wrong type; ``BufferError`` when too many
        segments wait for the Kafka client (call ``poll``); ``KafkaException`` (``_STATE``) for a
        transactional producer outside a transaction.
        """
        state = self._columnar_topics.get(topic)
        if state is None or self._refuse or type(value) is not dict:
            state = self._admit(topic, value, key, partition, on_delivery or callback, timestamp, headers, state)
            if state is None:
                return  # encoding none: passed through
        items = state.items
        if (
            key is None
            and partition == -1
            and on_delivery is None
            and callback is None
            and not timestamp
            and headers is None
        ):
            items.append(value)  # atomic: the one thing the common case does
        else:
            items.append(self._side(topic, state, value, key, partition, on_delivery or callback, timestamp, headers))
        n = len(items)
        if n == 1:
            state.first_at = self._clock()
            if self._ticker is None:
                self._ensure_ticker()
        elif n >= state.drain_at:
            with self._lock:
                self._drain(topic, state)

    def _admit(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int,
        cb: DeliveryCallback | None,
        timestamp: int,
        headers: Any,
        state: _Topic | None,
    ) -> _Topic | None:
        """``produce()``'s checks off its fast path: encoding ``none`` (passed through; returns
        ``None``), a tombstone (sent as a plain message; returns ``None``), no schema, a value that
        is not a mapping, a refused or closed state. Raises as ``produce``."""
        if not self._open:
            raise_closed()
        if not self._columnar:
            kwargs: dict[str, Any] = {"value": value, "key": key, "headers": headers, "timestamp": timestamp}
            if partition is not None and partition >= 0:
                kwargs["partition"] = partition
            if cb is not None:
                kwargs["on_delivery"] = cb
            self._producer.produce(topic, **kwargs)
            return None
        if state is None:
            raise RecordError("no schema set for this topic: call set_schema(topic, schema) first", topic=topic)
        if value is not None and not isinstance(value, Mapping):
            raise RecordTypeError(f"value must be a dict of fields, not {type(value).__name__}", topic=topic)
        if self._outside_txn:
            raise _kafka_exception(KafkaError._STATE, "Unable to produce message: Local: Erroneous state")
        if self._out.full:
            raise BufferError("parka: too many segments wait for the Kafka client; call poll() or flush()")
        if value is None:
            self._tombstone(topic, state, key, partition, cb, timestamp, headers)
            return None
        return state

    def _tombstone(
        self,
        topic: str,
        state: _Topic,
        key: Any,
        partition: int,
        cb: DeliveryCallback | None,
        timestamp: int,
        headers: Any,
    ) -> None:
        """Send ``value=None`` as a plain Kafka message (a tombstone for compaction), in order with
        the segments of its partition: the records staged or buffered for that partition are cut
        into segments and queued first. Raises as ``produce``."""
        kbytes = None if key is None else normalize_key(key, topic)
        hdrs = None if headers is None else normalize_headers(headers, topic)
        with self._lock:
            self._drain(topic, state)
            if partition is not None and partition >= 0:
                part = partition
                if 0 < state.num_partitions <= part:
                    raise _kafka_exception(KafkaError._UNKNOWN_PARTITION, "Local: Unknown partition")
            else:
                keys = pa.array([kbytes], pa.binary())
                part = self._assign(topic, state, 1, None if kbytes is None else keys, None)[0][0]
            for bkey in [k for k in self._buffers if k[0] == topic and k[1] == part]:
                self._cut(bkey)
            self._out.send_plain(
                topic,
                part,
                kbytes,
                hdrs,
                int(timestamp or 0),
                self._out.plain_report(topic, cb or self._default_callback),
            )
            self._update_refuse()

    @staticmethod
    def _side(
        topic: str,
        state: _Topic,
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
        elif partition >= 0 and 0 < state.num_partitions <= partition:
            raise _kafka_exception(KafkaError._UNKNOWN_PARTITION, "Local: Unknown partition")
        hdrs = None if headers is None else normalize_headers(headers, topic)
        return (value, key, partition, cb, int(timestamp) if timestamp else None, hdrs)

    def produce_batch(
        self,
        topic: str,
        messages: Any,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        *,
        key_column: str | None = None,
    ) -> int:
        """Produce many records at once, in either of two forms.

        * ``messages`` a list of dicts, as ``confluent_kafka.Producer.produce_batch``: with
          encoding ``none`` it is that call; else each dict's ``value`` is a record
          mapping (``None``: a tombstone), with ``key``, ``partition``, ``timestamp``, ``headers``
          and ``callback`` per message, and each message is taken as ``produce()`` takes it.
          ``callback``/``on_delivery(err, msg)`` is the default per-message callback. Returns the
          number of messages taken; one refused (``BufferError``, ``KafkaException``) gets an
          ``_error`` entry, as confluent-kafka marks it.
        * ``messages`` a pyarrow Table/RecordBatch or pandas DataFrame, on a columnar topic: no
          per-record Python work; the data is cast to the topic's schema, split by partition and
          encoded in slices. ``key_column`` gives each row's key, turned into key bytes exactly as
          ``produce(key=...)`` sends the same value (:func:`key_bytes`), so a row lands where
          ``produce`` puts the same key. ``on_delivery(err, msg, records)`` fires once per
          segment. Returns the number of segments queued.

        Raises ``TypeError`` for a malformed call or message (confluent-kafka's words),
        ``RuntimeError`` once closed, :class:`~parka.errors.RecordError` naming the column when
        a table does not fit the schema or the key column has no key encoding, and
        ``KafkaException`` (``_STATE``) for a transactional producer outside a transaction.
        """
        check_topic(topic)
        if isinstance(messages, list):
            if key_column is not None:
                raise TypeError("key_column is for a table or DataFrame, not a list of messages")
            if not self._columnar:
                if not self._open:
                    raise_closed()
                # only what was given: confluent-kafka reads callback=None as "no callback given"
                # and would then ignore on_delivery
                given = {"callback": callback, "on_delivery": on_delivery}
                kwargs = {k: v for k, v in given.items() if v is not None}
                count: int = self._producer.produce_batch(topic, messages, partition=partition, **kwargs)
                return count  # the client's own answer, unconverted, as a drop-in owes
            if type(partition) is not int:
                raise TypeError("partition must be an int")
            if not messages:
                return 0
            if not self._open:
                raise_closed()
            return produce_messages(self.produce, topic, messages, partition, callback or on_delivery)
        if not self._open:
            raise_closed()
        if not self._columnar:
            raise TypeError("messages must be a list (a table or DataFrame needs columnar.encoding=parquet)")
        state = self._topics.get(topic)
        if state is None:
            raise RecordError("no schema set for this topic: call set_schema(topic, schema) first", topic=topic)
        on_segment: BatchCallback | None = on_delivery or callback
        if self._outside_txn:
            raise _kafka_exception(KafkaError._STATE, "Unable to produce message: Local: Erroneous state")
        table = conform_table(topic, state.schema, messages)
        keys: pa.Array | None = None
        if key_column is not None:
            if key_column not in table.column_names:
                raise RecordError("key_column is not a column of the data", topic=topic, field=key_column)
            keys = key_bytes(table[key_column], topic, key_column)
        with self._lock:
            self._drain(topic, state)  # records produce() staged go first
            if partition is not None and partition >= 0:
                parts = [(partition, np.arange(len(table)))]
            else:
                parts = self._assign(topic, state, len(table), keys, None)
            queued = 0
            for part, rows in parts:
                for bkey in [k for k in self._buffers if k[0] == topic and k[1] == part]:
                    self._cut(bkey)  # keep per-partition order: buffered records go first
                batch = RowBatch(table, keys=keys)
                if len(rows) != len(table):
                    batch = batch.take(rows)
                for group in split_by_values(state.partition_by, batch):
                    queued += self._emit(topic, part, state, group.batch, on_segment)[0]
                self._advance_sticky(topic, part)
        return queued

    # -- client lifecycle ----------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> int:
        """Serve delivery callbacks, like ``confluent_kafka.Producer.poll``; returns the number of
        records reported. Also drains and cuts buffers whose ``linger.ms`` expired.
        Raises ``RuntimeError`` once closed."""
        if not self._open:
            raise_closed()
        if not self._columnar:
            return int(self._producer.poll(-1 if timeout is None else timeout))
        with self._lock:
            self._cut_due()
            self._retry_pending()
        before = self._out.reported
        self._out.serve()
        wait = 0 if self._out.reported != before else (-1 if timeout is None else timeout)
        self._producer.poll(wait)
        return self._out.reported - before

    def flush(self, timeout: float | None = None) -> int:
        """Send every buffered record and wait until all are reported (serving callbacks), or
        until ``timeout`` seconds pass; returns the number of records not yet reported.
        Raises ``RuntimeError`` once closed."""
        if not self._open:
            raise_closed()
        return self._flush(timeout)

    def _flush(self, timeout: float | None) -> int:
        if not self._columnar:
            return int(self._producer.flush() if timeout is None else self._producer.flush(timeout))
        deadline = None if timeout is None else self._clock() + timeout
        with self._lock:
            self._cut_all()
        while True:
            self._out.serve()
            with self._lock:
                self._retry_pending()
                pending = self._out.waiting
            if not pending:
                break
            if deadline is not None and self._clock() >= deadline:
                return len(self)
            self._producer.poll(0.05)
        remaining = None if deadline is None else max(0.0, deadline - self._clock())
        if remaining is None:
            self._producer.flush()
        else:
            self._producer.flush(remaining)
        self._out.serve()
        return len(self)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Purge like ``confluent_kafka.Producer.purge``; with ``in_queue`` parka's own buffers too.

        Each purged record is reported ``_PURGE_QUEUE`` (or ``_PURGE_INFLIGHT``) through its
        callback at the next ``poll()``/``flush()``, as confluent-kafka reports purged messages.
        Raises ``RuntimeError`` once closed.
        """
        if not self._open:
            raise_closed()
        if self._columnar and in_queue:
            with self._lock:
                self._drop_buffered()
        self._producer.purge(in_queue=in_queue, in_flight=in_flight, blocking=blocking)

    def close(self, timeout: float | None = None) -> bool:
        """Send every buffered record, wait for their reports (serving callbacks), stop the linger
        thread and close the wrapped client; returns ``True``, as confluent-kafka's ``close()``.
        Afterwards every method raises ``RuntimeError`` and ``len()`` is 0; closing again is a no-op.

        With ``timeout``, records still undelivered after that many seconds are purged (each
        reported ``_PURGE_QUEUE``/``_PURGE_INFLIGHT``) rather than waited for; confluent-kafka's
        ``close()`` has no timeout and waits for all.
        """
        if not self._open:
            return True
        self._open = False
        self._refuse = True  # from here produce() takes its slow path, which raises RuntimeError
        try:
            if self._flush(timeout) and timeout is not None:
                if self._columnar:
                    with self._lock:
                        self._drop_buffered()
                self._producer.purge()
        finally:
            self._closed.set()
            if self._ticker is not None:
                self._ticker.join(timeout=1.0)
            if self._registry is not None:
                self._registry.close()
            client, self._producer = self._producer, ClosedClient()
            try:
                client.close()  # serves the delivery reports of what it still holds
            finally:
                self._out.serve()
        return True

    def __len__(self) -> int:
        if not self._open:
            return 0
        if not self._columnar:
            return len(self._producer)
        with self._lock:
            staged = sum(len(t.items) for t in self._topics.values())
            buffered = sum(len(b) for b in self._buffers.values())
            return staged + buffered + self._out.unreported()

    def __bool__(self) -> bool:
        return True  # a producer is truthy even with nothing in flight, as confluent-kafka's

    def __enter__(self) -> ParquetProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register_metrics(self, registry: Any) -> None:
        """Report this producer's ``parka_producer_*`` metrics (:class:`parka.metrics.ProducerMetrics`:
        segments, records per segment, encode seconds, bytes per record, buffered records) into
        ``registry``, a ``prometheus_client.CollectorRegistry``; labelled with ``client.id``
        (default ``rdkafka``, as librdkafka's), so give each producer of one registry its own.
        The same as ``columnar.metrics.registry`` in the config.

        Raises:
            ImportError: prometheus_client is not installed (``pip install 'parka[metrics]'``).
            ValueError: the registry has metrics of the same name that are not parka's.
        """
        from parka.metrics import ProducerMetrics

        self._metrics = ProducerMetrics(registry, client_id=str(self._client_id), buffered=self._buffered_records)

    def _buffered_records(self) -> int:
        """Records produced and not yet cut into a segment (staged or in a partition buffer)."""
        with self._lock:
            staged = sum(len(t.items) for t in self._topics.values())
            return staged + sum(len(b) for b in self._buffers.values())

    def stats(self) -> dict[str, int]:
        """Counters: segments and records sent, segment bytes, segments split for size, bad records."""
        with self._lock:
            return {**self._out.stats, **self._stats}

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped client's ``list_topics``; partition counts it returns for topics with a
        schema are kept, so the first batch of records needs no metadata round trip of its own."""
        md = self._producer.list_topics(*args, **kwargs)
        if not self._columnar:
            return md
        now = time.monotonic()
        with self._lock:
            for name, tmd in getattr(md, "topics", {}).items():
                state = self._topics.get(name)
                if state is not None and tmd.error is None and tmd.partitions:
                    state.num_partitions, state.metadata_at = len(tmd.partitions), now
        return md

    # -- transactions ----------------------------------------------------------------------

    def cluster_id(self, *args: Any, **kwargs: Any) -> Any:
        return self._producer.cluster_id(*args, **kwargs)

    def set_sasl_credentials(self, *args: Any, **kwargs: Any) -> Any:
        return self._producer.set_sasl_credentials(*args, **kwargs)

    def init_transactions(self, *args: Any) -> None:
        self._producer.init_transactions(*args)

    def begin_transaction(self) -> None:
        """Begin a transaction; from now until it ends, records are taken and segments sent."""
        self._producer.begin_transaction()
        with self._lock:
            self._set_outside_txn(False)

    def send_offsets_to_transaction(self, *args: Any, **kwargs: Any) -> None:
        self._producer.send_offsets_to_transaction(*args, **kwargs)

    def commit_transaction(self, *args: Any) -> None:
        """Send every buffered record into the transaction, then commit it.

        ``produce()`` refuses records (``_STATE``) while the commit runs, as librdkafka does.
        On a failure the transaction stays open (``KafkaException``, as confluent-kafka raises):
        retry, or abort when ``txn_requires_abort()``.
        """
        if not self._columnar or not self._open:
            self._producer.commit_transaction(*args)
            return
        with self._lock:
            self._set_outside_txn(True)
            try:
                self._cut_all()
            except BaseException:
                self._set_outside_txn(False)
                raise
        try:
            while True:  # hand over segments that wait for room in librdkafka's queue
                with self._lock:
                    self._retry_pending()
                    if not self._out.waiting:
                        break
                self._producer.poll(0.05)
            self._producer.commit_transaction(*args)
        except BaseException:
            with self._lock:
                self._set_outside_txn(False)
            raise

    def abort_transaction(self, *args: Any) -> None:
        """Drop every buffered record (each reported ``_PURGE_QUEUE`` to its callback, inside this
        call, as confluent-kafka reports the messages an abort purges), then abort."""
        if not self._columnar or not self._open:
            self._producer.abort_transaction(*args)
            return
        with self._lock:
            self._set_outside_txn(True)
            self._drop_buffered()
        self._out.serve()
        try:
            self._producer.abort_transaction(*args)
        finally:
            self._out.serve()

    def __getattr__(self, name: str) -> Any:
        # Everything else (set_sasl_credentials, ...) is the wrapped client's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._producer, name)

    # -- staging -> buffers ------------------------------------------------------------------

    def _drain(self, topic: str, state: _Topic) -> None:
        """Convert ``topic``'s staged records and move them into partition buffers. Lock held.

        ``produce()`` appends without the lock, so the staged items are taken with one slice and
        one delete (each atomic): a record appended meanwhile stays, in order, for the next drain.
        Records that cannot be converted are reported to their callbacks; should anything else
        fail here (no partition metadata for the topic, ...), every taken record is reported
        with that error: a staging is never dropped in silence.
        """
        items = state.items
        n = len(items)
        if not n:
            return
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
            self._out.fail(
                topic, STICKY, len(stg), stg.callbacks, stg.values, stg.keys, stg.timestamps, stg.headers, err
            )

    def _place(self, topic: str, state: _Topic, stg: Staging, first_at: float) -> None:
        conv = state.converter.convert(stg.values)
        kept = conv.kept
        for index, err in conv.bad:
            self._stats["bad_records"] += 1
            self._out.fail_staged(topic, stg.pick([index]), err.with_topic(topic))

        def keep(col: list[Any] | None) -> list[Any] | None:
            return col if col is None or kept is None else [col[i] for i in kept]

        callbacks = keep(stg.callbacks)
        rows = conv.table.num_rows
        if rows == 0:
            return
        keys = keep(stg.keys)
        stamps = keep(stg.timestamps)
        batch = RowBatch(
            conv.table,
            keys=None if keys is None else pa.array(keys, pa.binary()),
            timestamps=None if stamps is None else pa.array(stamps, pa.int64()),
            headers=keep(stg.headers),
            callbacks=callbacks,
            values=keep(stg.values) if callbacks is not None else None,
        )
        state.row_bytes = conv.table.nbytes / rows
        state.drain_at = drain_size(self._settings.batch_records, self._settings.batch_bytes, state.row_bytes)
        for part, idx in self._assign(topic, state, rows, batch.keys, keep(stg.partitions), batch):
            piece = batch if len(idx) == rows else batch.take(idx)
            for group in split_by_values(state.partition_by, piece):
                bkey: BufferKey = (topic, part, group.pvals)
                buf = self._buffers.get(bkey)
                if buf is None:
                    # One buffer per Kafka partition at a time: the partition's records buffered
                    # under other values go out first, so segments keep the records' order.
                    for other in [k for k in self._buffers if k[0] == topic and k[1] == part]:
                        self._cut(other)
                    buf = self._buffers[bkey] = PartitionBuffer(topic, part, first_at)
                buf.append(group.batch, first_at)
                if self._policy.full(buf.rows, state.arrow_size.predict(buf.arrow_bytes)):
                    self._cut(bkey, keep_tail=True)

    def _assign(
        self,
        topic: str,
        state: _Topic,
        rows: int,
        keys: pa.Array | None,
        explicit: list[int] | None,
        batch: RowBatch | None = None,
    ) -> list[tuple[int, np.ndarray]]:
        """Each row's partition, as ``(partition, row indices)`` in partition order. Rows with an
        explicit partition keep it, keyed rows go where librdkafka's partitioner puts them, the
        rest to the sticky partition. Rows naming a partition the topic lacks are reported
        ``_UNKNOWN_PARTITION`` (``batch`` given) and left out."""
        if explicit is not None and min(explicit) >= 0:
            # every row names its partition: no metadata needed (checked when known, as librdkafka does)
            parts = np.asarray(explicit, dtype=np.int64)
            n = state.num_partitions or int(parts.max()) + 1
        else:
            n = self._num_partitions(topic, state)
            if keys is None:
                parts = np.full(rows, STICKY, dtype=np.int64)
            else:
                parts = partitions_for_keys(self._settings.partitioner, keys, n)
            if explicit is not None:
                given = np.asarray(explicit, dtype=np.int64)
                parts = np.where(given >= 0, given, parts)
            sticky = parts == STICKY
            if sticky.any():
                parts[sticky] = self._sticky(state, n)
        bad = parts >= n
        if bad.any() and batch is not None:
            err = KafkaError(KafkaError._UNKNOWN_PARTITION, f"Local: Unknown partition (topic has {n})")
            rows_bad = np.nonzero(bad)[0]
            self._out.fail_rows(topic, int(parts[rows_bad[0]]), batch.take(rows_bad), err)
        out = []
        for p in np.unique(parts[~bad]):
            out.append((int(p), np.nonzero(parts == p)[0]))
        return out

    # -- buffers -> segments -------------------------------------------------------------------

    def _cut_due(self) -> None:
        now = self._clock()
        linger = self._policy.linger_s
        for topic, state in list(self._topics.items()):
            if state.items and now - state.first_at >= linger:
                self._drain(topic, state)
        for bkey, buf in list(self._buffers.items()):
            if self._policy.due(buf.created_at, now):
                self._cut(bkey)

    def _cut_all(self) -> None:
        for topic, state in list(self._topics.items()):
            self._drain(topic, state)
        for bkey in list(self._buffers):
            self._cut(bkey)

    def _cut(self, bkey: BufferKey, *, keep_tail: bool = False) -> None:
        """Encode one buffer into segment(s) and hand them to the Kafka client. Lock held.

        ``keep_tail``: the buffer filled up during a drain. A drain adds records in steps, so
        the buffer may hold a full segment and some; the rest, short of a full segment, stays
        buffered (else a segment of a few leftover records would follow every full one).
        """
        buf = self._buffers.pop(bkey, None)
        if buf is None or not buf.rows:
            return
        state = self._topics[buf.topic]
        self._advance_sticky(buf.topic, buf.partition)
        _, tail = self._emit(buf.topic, buf.partition, state, RowBatch.concat(buf.pieces), None, keep_tail=keep_tail)
        if tail is not None:
            rest = PartitionBuffer(buf.topic, buf.partition, self._clock())
            rest.append(tail, buf.created_at)
            self._buffers[bkey] = rest

    def _emit(
        self,
        topic: str,
        partition: int,
        state: _Topic,
        batch: RowBatch,
        on_batch: BatchCallback | None,
        *,
        keep_tail: bool = False,
    ) -> tuple[int, RowBatch | None]:
        """Encode ``batch`` as segments of at most ``columnar.batch.records`` rows and
        ``columnar.batch.bytes`` bytes and send them. ``on_batch`` set: a ``produce_batch``
        call (one callback per segment; a row too large raises), else per-record callbacks (a
        row too large is reported to its callback). With ``keep_tail``, rows short of a full
        segment at the end are returned unsent instead. Returns the number of segments queued and
        that tail. Lock held."""
        queued = 0
        start = 0
        total = len(batch)
        limit = self._settings.batch_bytes
        bytes_per_row = max(1.0, batch.table.nbytes / max(total, 1))
        while start < total:
            by_bytes = int(limit * self._policy.fill / max(state.arrow_size.predict(int(bytes_per_row)), 1e-9))
            full = max(1, min(self._settings.batch_records, by_bytes))
            if keep_tail and start > 0 and total - start < full:
                return queued, batch.slice(start, total)
            size = min(full, total - start)
            while True:
                part = batch.slice(start, start + size)
                if self._settings.sort_by:
                    # the rows, keys, callbacks and values move together: a record's delivery
                    # report gives its index in the sorted segment
                    order = sort_order(part.table, self._settings.sort_by, part.keys)
                    if order is not None:
                        part = part.take(order.to_numpy())
                table = build_segment_table(part.table, part.keys, part.timestamps, part.headers)
                encode_started = time.perf_counter()
                seg = encode_segment(
                    table,
                    codec=self._settings.compression,
                    fingerprint=state.fingerprint,
                    compression_level=self._settings.compression_level,
                    tuning=self._settings.tuning,
                    layout=state.layouts.layout(table) if self._settings.tuning == "auto" else None,
                    encryption=self._settings.encryption,
                    schema_id=state.schema_id,
                )
                if self._metrics is not None:
                    self._metrics.encoded(topic, time.perf_counter() - encode_started)
                if len(seg.value) <= limit or size == 1:
                    break
                self._stats["splits"] += 1
                size = max(1, size // 2)
            state.arrow_size.observe(int(part.table.nbytes), len(seg.value))
            start += size
            if len(seg.value) > limit:
                err = RecordTooLargeError(
                    f"one record encodes to {len(seg.value)} bytes, more than columnar.batch.bytes={limit}",
                    topic=topic,
                )
                if on_batch is not None:
                    raise err
                self._stats["bad_records"] += 1
                self._out.fail_rows(topic, partition, part, err)
                continue
            if on_batch is not None:
                self._send(topic, partition, seg, self._out.batch_report(topic, size, on_batch))
            else:
                self._send(topic, partition, seg, self._out.record_report(topic, partition, part))
            if self._metrics is not None:
                self._metrics.segment(topic, rows=size, nbytes=len(seg.value))
            queued += 1
        return queued, None

    def _drop_buffered(self) -> None:
        """Drop every staged, buffered and waiting record, each reported ``_PURGE_QUEUE``. Lock held."""
        err = KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue")
        for topic, state in self._topics.items():
            if state.items:
                taken = state.items[:]
                del state.items[: len(taken)]
                stg = Staging.unpack(taken, self._default_callback)
                self._out.fail_staged(topic, stg, err)
        for bkey in list(self._buffers):
            buf = self._buffers.pop(bkey)
            self._out.fail_rows(buf.topic, buf.partition, RowBatch.concat(buf.pieces), err)
        self._out.drop_waiting(err)
        self._update_refuse()

    def _update_refuse(self) -> None:
        self._refuse = self._outside_txn or self._out.full or not self._open

    def _set_outside_txn(self, outside: bool) -> None:
        self._outside_txn = outside
        self._update_refuse()

    def _send(self, topic: str, partition: int, seg: Segment, on_delivery: SegmentReport) -> None:
        self._out.send(topic, partition, seg, on_delivery)
        self._update_refuse()

    def _retry_pending(self) -> None:
        self._out.retry()
        self._update_refuse()

    def _num_partitions(self, topic: str, state: _Topic) -> int:
        now = time.monotonic()  # a real timeout, whatever clock decides cuts
        if state.num_partitions and now - state.metadata_at < _METADATA_REFRESH_S:
            return state.num_partitions
        deadline = now + _METADATA_TIMEOUT_S
        last_error: Any = None
        while True:
            try:
                md = self._producer.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
                tmd = md.topics.get(topic)
                if tmd is not None and tmd.error is None and tmd.partitions:
                    state.num_partitions = len(tmd.partitions)
                    state.metadata_at = time.monotonic()
                    return state.num_partitions
                last_error = tmd.error if tmd is not None else "topic missing from metadata"
            except KafkaException as exc:
                last_error = exc
            if time.monotonic() >= deadline:
                if state.num_partitions:  # keep using the last known count
                    return state.num_partitions
                raise KafkaClientError(
                    f"no partition metadata for topic '{topic}' within {_METADATA_TIMEOUT_S:.0f} s: {last_error}",
                    kafka_error=last_error,
                )
            time.sleep(0.2)

    def _sticky(self, state: _Topic, n: int) -> int:
        if state.sticky < 0 or state.sticky >= n:
            state.sticky = self._random.randrange(n)
        return state.sticky

    def _advance_sticky(self, topic: str, partition: int) -> None:
        state = self._topics.get(topic)
        if state is not None and state.sticky == partition and state.num_partitions > 1:
            state.sticky = (partition + 1) % state.num_partitions

    # -- the linger thread ---------------------------------------------------------------------

    def _ensure_ticker(self) -> None:
        with self._lock:
            if self._ticker is not None or self._policy.linger_s <= 0:
                return
            self._ticker = threading.Thread(target=self._tick, name="parka-linger", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        interval = min(max(self._policy.linger_s / 4, 0.005), 0.1)
        while not self._closed.wait(interval):
            try:
                with self._lock:
                    if self._transactional and self._outside_txn:
                        continue  # never send outside an open transaction
                    self._cut_due()
                    self._retry_pending()
            except Exception:  # a background failure must not kill the thread silently
                log.exception("parka linger thread failed to cut a segment")
