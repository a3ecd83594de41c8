"""``ParquetProducer``: a drop-in for ``confluent_kafka.Producer`` that sends Parquet segments.

With ``columnar.encoding=parquet`` records are buffered per topic-partition and each buffer is
cut into one Parquet segment (one Kafka message) at ``columnar.batch.records``,
``columnar.batch.bytes`` or ``linger.ms``, whichever comes first. With ``none`` every call goes
straight to the wrapped producer, unchanged.

Per record, ``produce()`` only appends the record to its topic's staging lists. Conversion to
Arrow, validation, partitioning and sizing happen once per few thousand records, in Arrow (see
``_pipeline``): a staging is *drained* when it holds ``drain_size`` records, when ``linger.ms``
expires, or at ``flush()``. A record that Arrow cannot take is isolated and reported through
its delivery callback with the topic, field and reason; the records around it go on.

confluent-kafka's model, kept:

* **Threads.** ``produce``/``poll``/``flush`` run in the caller's thread. A daemon thread drains
  and cuts buffers whose ``linger.ms`` expired, so a record is sent on time while the caller is
  idle (as librdkafka's own thread sends). Delivery callbacks never run on it: they run only
  inside ``poll()``, ``flush()`` and ``abort_transaction()``, in the caller's thread.
* **Partitioning** is librdkafka's, for every ``partitioner`` value (:mod:`parka.partitioner`);
  records without a key stick to one partition per segment.
* **Transactions** (``_transactions``). With ``transactional.id``, records are only taken inside a transaction (else
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

import logging
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import confluent_kafka
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException

from parka.config import ProducerSettings, parse_producer_config
from parka.errors import ConfigError, RecordError, RecordTypeError
from parka.registry import Registry, split_registry_config
from parka.swap import client_class, forward_missing

from ._batch import produce_messages
from ._buffer import DeliveryCallback
from ._compat import ClosedClient, ProducerConfigError, check_topic, client_config, pass_through, raise_closed
from ._inputs import conform_table, table_keys
from ._outbox import BatchCallback
from ._pipeline import Pipeline
from ._topics import TopicState, resolve_schema, topic_state
from ._transactions import Transactions

if TYPE_CHECKING:
    from parka.metrics import ProducerMetrics

__all__ = ["ParquetProducer"]

log = logging.getLogger("parka.producer")

# Bound at import, so that an application (or a test) that swaps ``confluent_kafka.Producer`` for
# parka's class still gets the real client here (parka.swap).
_KafkaProducer = confluent_kafka.Producer


def _kafka_exception(code: int, reason: str) -> KafkaException:
    return KafkaException(KafkaError(code, reason))


class ParquetProducer(Transactions):
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
    _columnar_topics: Mapping[str, TopicState] = MappingProxyType({})
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
        # A transactional producer takes records only inside a transaction, as librdkafka does.
        self._transactional = bool(client_conf.get("transactional.id"))
        self._outside_txn = self._transactional
        self._refuse = self._outside_txn  # _outside_txn or the outbox full: the one flag produce() reads
        # The pipeline and its linger thread reach this producer only weakly, so that one an
        # application drops without close() is freed (and its client with it), as
        # confluent-kafka's is; records it still held are logged as lost (_dropped).
        me = weakref.ref(self)

        def paused() -> bool:
            producer = me()
            return producer is not None and producer._transactional and producer._outside_txn

        def on_full() -> None:
            producer = me()
            if producer is not None:
                producer._update_refuse()

        self._pipeline = Pipeline(
            self._producer, settings, clock, self._default_callback, paused=paused, on_full=on_full
        )
        weakref.finalize(self, _dropped, self._pipeline, self._client_id)
        self._out = self._pipeline.out
        self._topics = self._pipeline.topics
        # produce() finds a topic's state here; empty with encoding none, so every call passes through
        self._columnar_topics: dict[str, TopicState] = self._topics if settings.columnar else {}
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
        schema: str | dict[str, Any] | pa.Schema | type | None = None,
        *,
        subject: str | None = None,
        register: bool = False,
    ) -> None:
        """Declare the schema of ``topic``'s records: an Avro record schema, a ``pyarrow.Schema``,
        or a generated Protobuf message class (the ``protobuf`` extra): ``produce()`` then takes
        its messages, or dicts of its fields, and the segments hold its fields as columns, typed
        as ``parka ingest --value-format protobuf`` types them (docs/row-topics.md).

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
        schema, schema_id = resolve_schema(self._registry, schema, subject, register)
        self._pipeline.set_topic(topic, topic_state(topic, schema, schema_id, self._settings))

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

        ``value`` is a dict matching the topic's schema (or a message of its Protobuf class); it
        is read later, when its buffer is converted, so do not change it after this call.
        ``key`` decides the partition as librdkafka's ``partitioner`` would.
        ``on_delivery(err, msg)`` fires once for this record, inside ``poll()``/``flush()``: with
        ``err=None`` when its segment is acknowledged (``msg`` is a
        :class:`~parka.message.RecordMessage`), else with the segment's ``KafkaError``, or a
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
            items.append(self._pipeline.side(topic, value, key, partition, on_delivery or callback, timestamp, headers))
        n = len(items)
        if n == 1:
            state.first_at = self._clock()
            if not self._pipeline.ticking:
                self._pipeline.start_ticker()
        elif n >= state.drain_at:
            self._pipeline.drain_now(topic, state)

    def _admit(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int,
        cb: DeliveryCallback | None,
        timestamp: int,
        headers: Any,
        state: TopicState | None,
    ) -> TopicState | None:
        """``produce()``'s checks off its fast path: encoding ``none`` (passed through; returns
        ``None``), a tombstone (sent as a plain message; returns ``None``), no schema, a value that
        is not a mapping, a refused or closed state. Raises as ``produce``."""
        if not self._open:
            raise_closed()
        if not self._columnar:
            pass_through(self._producer, topic, value, key, partition, cb, timestamp, headers)
            return None
        if state is None:
            raise RecordError("no schema set for this topic: call set_schema(topic, schema) first", topic=topic)
        if value is not None and not isinstance(value, Mapping):
            records = state.protobuf
            if records is None:
                raise RecordTypeError(f"value must be a dict of fields, not {type(value).__name__}", topic=topic)
            if not records.takes(value):
                raise RecordTypeError(
                    f"value must be a {records.name} message or a dict of its fields, not {type(value).__name__}",
                    topic=topic,
                )
        if self._outside_txn:
            raise _kafka_exception(KafkaError._STATE, "Unable to produce message: Local: Erroneous state")
        if self._out.full:
            raise BufferError("parka: too many segments wait for the Kafka client; call poll() or flush()")
        if value is None:
            self._pipeline.tombstone(topic, state, key, partition, headers, timestamp, cb)
            return None
        return state

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
        keys = None if key_column is None else table_keys(table, topic, key_column)
        explicit = -1 if partition is None or partition < 0 else partition
        return self._pipeline.add_table(topic, state, table, keys, explicit, on_segment)

    # -- client lifecycle ----------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> int:
        """Serve delivery callbacks, like ``confluent_kafka.Producer.poll``; returns the number of
        records reported. Also drains and cuts buffers whose ``linger.ms`` expired.
        Raises ``RuntimeError`` once closed."""
        if not self._open:
            raise_closed()
        if not self._columnar:
            return int(self._producer.poll(-1 if timeout is None else timeout))
        with self._pipeline.lock:
            self._pipeline.cut_due()
            self._out.retry()
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
        self._pipeline.flush(None if timeout is None else self._clock() + timeout)
        # not len(self), which is 0 once close() began: close(timeout) purges what this counts
        return self._pipeline.unreported()

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Purge like ``confluent_kafka.Producer.purge``; with ``in_queue`` parka's own buffers too.

        Each purged record is reported ``_PURGE_QUEUE`` (or ``_PURGE_INFLIGHT``) through its
        callback at the next ``poll()``/``flush()``, as confluent-kafka reports purged messages.
        Raises ``RuntimeError`` once closed.
        """
        if not self._open:
            raise_closed()
        if self._columnar and in_queue:
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
                    self._drop_buffered()
                self._producer.purge()
        finally:
            self._pipeline.stop()
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
        return self._pipeline.unreported()

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
            ImportError: prometheus_client is not installed (parka's ``metrics`` extra).
            ValueError: the registry has metrics of the same name that are not parka's.
        """
        from parka.metrics import ProducerMetrics

        self._metrics = ProducerMetrics(registry, client_id=str(self._client_id), buffered=self._pipeline.buffered)
        self._pipeline.segments.metrics = self._metrics

    def stats(self) -> dict[str, int]:
        """Counters: segments and records sent, segment bytes, segments split for size, bad records."""
        with self._pipeline.lock:
            return {**self._out.stats, **self._pipeline.counters}

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped client's ``list_topics``; partition counts it returns for topics with a
        schema are kept, so the first batch of records needs no metadata round trip of its own."""
        md = self._producer.list_topics(*args, **kwargs)
        if self._columnar:
            self._pipeline.learn(md)
        return md

    # -- the wrapped client's -----------------------------------------------------------------

    def cluster_id(self, *args: Any, **kwargs: Any) -> Any:
        return self._producer.cluster_id(*args, **kwargs)

    def set_sasl_credentials(self, *args: Any, **kwargs: Any) -> Any:
        return self._producer.set_sasl_credentials(*args, **kwargs)

    if TYPE_CHECKING:  # any other method of confluent-kafka's client: forward_missing below

        def __getattr__(self, name: str) -> Any: ...


forward_missing(ParquetProducer, _KafkaProducer, "_producer")


def _dropped(pipeline: Pipeline, client_id: str) -> None:
    """A producer was freed (dropped by the application, or at the interpreter's exit): stop its
    linger thread; when it had not been closed and still held records, say how many were lost."""
    if pipeline.stopped:
        return  # closed: close() reported every record
    try:
        left = pipeline.unreported()
    except Exception:  # the interpreter is shutting down
        left = 0
    pipeline.stop()
    if left:
        log.warning(
            "parka producer %s was freed without close() or flush(): %d record(s) it held were not sent",
            client_id,
            left,
        )
