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

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException

from parka.config import ProducerSettings, parse_producer_config
from parka.errors import KafkaClientError, RecordError, RecordTooLargeError, SchemaError
from parka.message import RecordMessage, SegmentRecords
from parka.partitioner import STICKY, partitions_for_keys
from parka.records import RecordConverter
from parka.schema import schema_fingerprint, to_arrow_schema
from parka.segment import Segment, build_segment_table, encode_segment

from ._buffer import CutPolicy, DeliveryCallback, PartitionBuffer, RowBatch, Side, SizeModel, Staging, drain_size

__all__ = ["ParquetProducer"]

log = logging.getLogger("parka.producer")

_METADATA_TIMEOUT_S = 10.0
_METADATA_REFRESH_S = 300.0
# Encoded segments that could not be queued (librdkafka queue full) wait here; past this many
# produce() raises BufferError, as confluent-kafka does, so memory stays bounded.
_MAX_PENDING_SEGMENTS = 1000

BufferKey = tuple[str, int, tuple[Any, ...]]
BatchCallback = Callable[[Any, Any, int], None]


def _kafka_exception(code: int, reason: str) -> KafkaException:
    return KafkaException(KafkaError(code, reason))


@dataclass
class _Topic:
    schema: pa.Schema
    fingerprint: str
    converter: RecordConverter
    partition_by: tuple[str, ...]
    drain_at: int
    items: list[Any] = field(default_factory=list)  # staged: values, or Side tuples (see _buffer)
    first_at: float = 0.0  # when the oldest staged item arrived
    arrow_size: SizeModel = field(default_factory=SizeModel)
    row_bytes: float | None = None
    num_partitions: int = 0
    metadata_at: float = float("-inf")
    sticky: int = -1


@dataclass
class _Group:
    """Rows of one table-partition value combination (``columnar.partition.by``)."""

    batch: RowBatch
    pvals: tuple[Any, ...]


@dataclass
class _Pending:
    topic: str
    partition: int
    segment: Segment
    on_delivery: Callable[[Any, Any], None]
    records: int
    on_refused: Callable[[Any], None]


def _normalize_headers(
    headers: Mapping[str, Any] | Sequence[tuple[str, Any]], topic: str
) -> list[tuple[str, bytes | None]] | None:
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise RecordError("headers must be a dict or a list of (key, value)", topic=topic) from None
        if not isinstance(name, str):
            raise RecordError(f"header key {name!r} is not a str", topic=topic, field="headers")
        if isinstance(value, str):
            value = value.encode()
        elif value is not None and not isinstance(value, (bytes, bytearray)):
            raise RecordError(
                f"header {name!r} value must be bytes, str or None, not {type(value).__name__}",
                topic=topic,
                field="headers",
            )
        out.append((name, None if value is None else bytes(value)))
    return out or None


def _normalize_key(key: Any, topic: str) -> bytes:
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    raise RecordError(f"key must be bytes, str or None, not {type(key).__name__}", topic=topic, field="key")


def key_bytes(column: pa.Array | pa.ChunkedArray, topic: str, name: str) -> pa.Array:
    """A key column as Kafka key bytes, exactly what ``produce(key=...)`` sends for each value:
    strings as UTF-8, binary as is, integers as their decimal text (``str(v)``), nulls as no key.

    Raises:
        RecordError: any other type (``field`` is the column).
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_dictionary(t):
        column, t = column.cast(t.value_type), t.value_type
    if pa.types.is_binary(t):
        return column
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return column.cast(pa.binary())
    if pa.types.is_fixed_size_binary(t):
        return column.cast(pa.binary())
    if pa.types.is_integer(t):
        return column.cast(pa.string()).cast(pa.binary())
    raise RecordError(f"a key column must be string, binary or integer, not {t}", topic=topic, field=name)


class ParquetProducer:
    """Produce records as Parquet segments (KIP-1008), or plainly with ``columnar.encoding=none``.

    ``conf`` is a confluent-kafka producer config plus parka's ``columnar.*`` keys (see
    :mod:`parka.config`); it is copied, never modified. No network I/O happens here.

    Raises :class:`~parka.errors.ConfigError` for an invalid or contradictory setting.
    """

    def __init__(
        self,
        conf: Mapping[str, Any],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        settings, client_conf = parse_producer_config(conf)
        self._settings: ProducerSettings = settings
        self._columnar = settings.columnar
        self._default_callback: DeliveryCallback | None = None
        if settings.columnar:
            self._default_callback = client_conf.pop("on_delivery", None) or client_conf.pop(
                "delivery.report.callback", None
            )
        self._producer = confluent_kafka.Producer(client_conf)
        self._clock = clock
        self._policy = CutPolicy(
            max_records=settings.batch_records,
            max_bytes=settings.batch_bytes,
            linger_s=settings.linger_ms / 1000.0,
        )
        self._topics: dict[str, _Topic] = {}
        self._buffers: dict[BufferKey, PartitionBuffer] = {}
        self._pending: deque[_Pending] = deque()
        self._full = False  # len(_pending) >= _MAX_PENDING_SEGMENTS: produce() raises BufferError
        self._in_flight = 0  # records inside segments handed to librdkafka, not yet reported
        self._reports: deque[tuple[int, Callable[[], None]]] = deque()  # (records, report) for poll()
        self._reported = 0  # records whose outcome was reported to the application
        # Guards buffers, pending segments and counters; never taken twice by one thread.
        # produce() appends to a topic's staged items without it (see _drain).
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None
        self._closed = threading.Event()
        self._random = random.Random()
        # A transactional producer takes records only inside a transaction, as librdkafka does.
        self._transactional = bool(client_conf.get("transactional.id"))
        self._outside_txn = self._transactional
        self._refuse = self._outside_txn  # _outside_txn or _full: the one flag produce() reads
        # produce() finds a topic's state here; empty with encoding none, so every call passes through
        self._columnar_topics: dict[str, _Topic] = self._topics if settings.columnar else {}
        self._stats = {"segments": 0, "records": 0, "segment_bytes": 0, "splits": 0, "bad_records": 0}

    # -- configuration -------------------------------------------------------------------

    @property
    def settings(self) -> ProducerSettings:
        return self._settings

    def set_schema(self, topic: str, schema: str | dict[str, Any] | pa.Schema) -> None:
        """Declare the schema of ``topic``'s records: an Avro record schema or a ``pyarrow.Schema``.

        Records buffered under a previous schema are cut into segments first, so every
        segment has exactly one schema. Raises :class:`~parka.errors.SchemaError` naming the
        field when the schema cannot be used.
        """
        arrow = to_arrow_schema(schema)
        missing = [c for c in self._settings.partition_by if c not in arrow.names]
        if missing:
            raise SchemaError(
                f"columnar.partition.by names a column the schema of topic '{topic}' lacks", field=missing[0]
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
        ``None``), no schema, a value that is not a mapping, a refused state. Raises as ``produce``."""
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
        if not isinstance(value, Mapping):
            raise RecordError(f"value must be a dict of fields, not {type(value).__name__}", topic=topic)
        if self._outside_txn:
            raise _kafka_exception(KafkaError._STATE, "Unable to produce message: Local: Erroneous state")
        if self._full:
            raise BufferError("parka: too many segments wait for the Kafka client; call poll() or flush()")
        return state

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
            key = _normalize_key(key, topic)
        if partition is None:
            partition = -1
        elif partition >= 0 and 0 < state.num_partitions <= partition:
            raise _kafka_exception(KafkaError._UNKNOWN_PARTITION, "Local: Unknown partition")
        hdrs = None if headers is None else _normalize_headers(headers, topic)
        return (value, key, partition, cb, int(timestamp) if timestamp else None, hdrs)

    def produce_batch(
        self,
        topic: str,
        data: Any,
        *,
        key_column: str | None = None,
        partition: int = -1,
        on_delivery: BatchCallback | None = None,
    ) -> int:
        """Produce columnar ``data`` (pyarrow Table/RecordBatch, pandas DataFrame) as segments.

        No per-record Python work: the data is cast to the topic's schema, split by partition
        and encoded in slices. ``key_column`` gives each row's key, turned into key bytes
        exactly as ``produce(key=...)`` sends the same value (:func:`key_bytes`), so a row lands
        where ``produce`` puts the same key. ``on_delivery(err, msg, records)`` fires once per
        segment. Returns the number of segments queued.

        Raises :class:`~parka.errors.RecordError` naming the column when the data does not
        fit the schema or the key column has no key encoding, and ``KafkaException``
        (``_STATE``) for a transactional producer outside a transaction.
        """
        if not self._columnar:
            raise RecordError("produce_batch needs columnar.encoding=parquet", topic=topic)
        state = self._topics.get(topic)
        if state is None:
            raise RecordError("no schema set for this topic: call set_schema(topic, schema) first", topic=topic)
        if self._outside_txn:
            raise _kafka_exception(KafkaError._STATE, "Unable to produce message: Local: Erroneous state")
        table = self._conform(topic, state, data)
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
                for group in self._split_by_values(state, batch):
                    queued += self._emit(topic, part, state, group.batch, on_delivery)[0]
                self._advance_sticky(topic, part)
        return queued

    # -- client lifecycle ----------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> int:
        """Serve delivery callbacks, like ``confluent_kafka.Producer.poll``; returns the number of
        records reported. Also drains and cuts buffers whose ``linger.ms`` expired."""
        if not self._columnar:
            return int(self._producer.poll(-1 if timeout is None else timeout))
        with self._lock:
            self._cut_due()
            self._retry_pending()
        before = self._reported
        self._serve_reports()
        wait = 0 if self._reported != before else (-1 if timeout is None else timeout)
        self._producer.poll(wait)
        return self._reported - before

    def flush(self, timeout: float | None = None) -> int:
        """Send every buffered record and wait until all are reported (serving callbacks), or
        until ``timeout`` seconds pass; returns the number of records not yet reported."""
        if not self._columnar:
            return int(self._producer.flush() if timeout is None else self._producer.flush(timeout))
        deadline = None if timeout is None else self._clock() + timeout
        with self._lock:
            self._cut_all()
        while True:
            self._serve_reports()
            with self._lock:
                self._retry_pending()
                pending = bool(self._pending)
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
        self._serve_reports()
        return len(self)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Purge like ``confluent_kafka.Producer.purge``; with ``in_queue`` parka's own buffers too.

        Each purged record is reported ``_PURGE_QUEUE`` (or ``_PURGE_INFLIGHT``) through its
        callback at the next ``poll()``/``flush()``, as confluent-kafka reports purged messages.
        """
        if self._columnar and in_queue:
            with self._lock:
                self._drop_buffered()
        self._producer.purge(in_queue=in_queue, in_flight=in_flight, blocking=blocking)

    def close(self, timeout: float | None = None) -> int:
        """Flush and stop the linger thread; returns records still undelivered."""
        left = self.flush(timeout)
        self._closed.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
        return left

    def __len__(self) -> int:
        if not self._columnar:
            return len(self._producer)
        with self._lock:
            staged = sum(len(t.items) for t in self._topics.values())
            buffered = sum(len(b) for b in self._buffers.values())
            pending = sum(p.records for p in self._pending)
            reports = sum(n for n, _ in self._reports)
            return staged + buffered + pending + self._in_flight + reports

    def __enter__(self) -> ParquetProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, int]:
        """Counters: segments and records sent, segment bytes, segments split for size, bad records."""
        with self._lock:
            return dict(self._stats)

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        return self._producer.list_topics(*args, **kwargs)

    # -- transactions ----------------------------------------------------------------------

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
        if not self._columnar:
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
                    if not self._pending:
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
        if not self._columnar:
            self._producer.abort_transaction(*args)
            return
        with self._lock:
            self._set_outside_txn(True)
            self._drop_buffered()
        self._serve_reports()
        try:
            self._producer.abort_transaction(*args)
        finally:
            self._serve_reports()

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
            self._report(topic, STICKY, len(stg), stg.callbacks, stg.values, stg.keys, stg.timestamps, stg.headers, err)

    def _place(self, topic: str, state: _Topic, stg: Staging, first_at: float) -> None:
        conv = state.converter.convert(stg.values)
        kept = conv.kept
        for index, err in conv.bad:
            self._stats["bad_records"] += 1

            def one(col: list[Any] | None, index: int = index) -> list[Any] | None:
                return None if col is None else [col[index]]

            self._report(
                topic,
                STICKY,
                1,
                one(stg.callbacks),
                one(stg.values),
                one(stg.keys),
                one(stg.timestamps),
                one(stg.headers),
                err.with_topic(topic),
            )

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
            for group in self._split_by_values(state, piece):
                bkey: BufferKey = (topic, part, group.pvals)
                buf = self._buffers.get(bkey)
                if buf is None:
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
            self._report_rows(topic, batch.take(rows_bad), int(parts[rows_bad[0]]), err)
        out = []
        for p in np.unique(parts[~bad]):
            out.append((int(p), np.nonzero(parts == p)[0]))
        return out

    @staticmethod
    def _split_by_values(state: _Topic, batch: RowBatch) -> list[_Group]:
        """With ``columnar.partition.by``, one batch per distinct value combination, rows in order."""
        table = batch.table
        if not state.partition_by or table.num_rows == 0:
            return [_Group(batch, ())]
        groups = table.select(list(state.partition_by)).group_by(list(state.partition_by)).aggregate([])
        if groups.num_rows == 1:
            only = groups.to_pylist()[0]
            return [_Group(batch, tuple(only[c] for c in state.partition_by))]
        out = []
        for values in groups.to_pylist():
            mask = pa.array(np.ones(table.num_rows, dtype=bool))
            for name, value in values.items():
                col = table[name]
                cond = pc.is_null(col) if value is None else pc.equal(col, pa.scalar(value, col.type))
                mask = pc.and_(mask, cond)
            rows = np.nonzero(np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool))[0]
            out.append(_Group(batch.take(rows), tuple(values[c] for c in state.partition_by)))
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
                table = build_segment_table(part.table, part.keys, part.timestamps, part.headers)
                seg = encode_segment(
                    table,
                    codec=self._settings.compression,
                    fingerprint=state.fingerprint,
                    compression_level=self._settings.compression_level,
                )
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
                self._report_rows(topic, part, partition, err)
                continue
            if on_batch is not None:
                self._send(topic, partition, seg, self._batch_delivery(topic, size, on_batch))
            else:
                self._send(topic, partition, seg, self._record_delivery(topic, partition, part))
            queued += 1
        return queued, None

    def _batch_delivery(self, topic: str, n: int, on_batch: BatchCallback | None) -> Callable[[Any, Any], None]:
        def delivered(err: Any, msg: Any) -> None:
            with self._lock:
                self._in_flight -= n
            self._reported += n
            if err is not None:
                log.error("segment of %d records to %s failed: %s", n, topic, err)
            if on_batch is not None:
                on_batch(err, msg, n)

        return delivered

    def _record_delivery(self, topic: str, partition: int, part: RowBatch) -> Callable[[Any, Any], None]:
        n = len(part)
        callbacks = part.callbacks
        values, keys, timestamps, headers = part.values, part.keys, part.timestamps, part.headers

        def delivered(err: Any, msg: Any) -> None:
            with self._lock:
                self._in_flight -= n
            self._reported += n
            if err is not None:
                log.error("segment of %d records to %s failed: %s", n, topic, err)
            if callbacks is None:
                return
            records = SegmentRecords(
                topic=topic,
                partition=msg.partition() if msg is not None else partition,
                offset=msg.offset() if msg is not None and err is None else -1,
                values=values if values is not None else [None] * n,
                keys=None if keys is None else keys.to_pylist(),
                timestamps=None if timestamps is None else timestamps.to_pylist(),
                headers=headers,
                segment_timestamp=msg.timestamp() if msg is not None else (0, 0),
                error=err,
            )
            for i, cb in enumerate(callbacks):
                if cb is not None:
                    cb(err, RecordMessage(records, i))

        return delivered

    # -- failure reports (served in poll/flush, on the caller's thread) --------------------------

    def _report_rows(self, topic: str, part: RowBatch, partition: int, err: Any) -> None:
        """Queue a report of ``err`` for every row of ``part`` (none of them will be sent)."""
        keys = None if part.keys is None else part.keys.to_pylist()
        stamps = None if part.timestamps is None else part.timestamps.to_pylist()
        self._report(topic, partition, len(part), part.callbacks, part.values, keys, stamps, part.headers, err)

    def _report(
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
            self._reported += n
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
            for i, cb in enumerate(callbacks):
                if cb is not None:
                    cb(err, RecordMessage(records, i))

        self._reports.append((n, report))

    def _serve_reports(self) -> None:
        while True:
            with self._lock:
                if not self._reports:
                    return
                _, report = self._reports.popleft()
            report()

    def _drop_buffered(self) -> None:
        """Drop every staged, buffered and waiting record, each reported ``_PURGE_QUEUE``. Lock held."""
        err = KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue")
        for topic, state in self._topics.items():
            if state.items:
                taken = state.items[:]
                del state.items[: len(taken)]
                stg = Staging.unpack(taken, self._default_callback)
                self._report(
                    topic, STICKY, len(stg), stg.callbacks, stg.values, stg.keys, stg.timestamps, stg.headers, err
                )
        for bkey in list(self._buffers):
            buf = self._buffers.pop(bkey)
            self._report_rows(buf.topic, RowBatch.concat(buf.pieces), buf.partition, err)
        while self._pending:
            p = self._pending.popleft()
            p.on_refused(err)
        self._set_full(False)

    # -- the Kafka client --------------------------------------------------------------------

    def _send(self, topic: str, partition: int, seg: Segment, on_delivery: Callable[[Any, Any], None]) -> None:
        def refused(err: Any) -> None:
            # the segment never reached librdkafka: report its records as its callback would
            self._in_flight += seg.num_records
            self._reports.append((0, lambda: on_delivery(err, None)))

        pending = _Pending(topic, partition, seg, on_delivery, seg.num_records, refused)
        if self._pending:  # keep order behind segments that already wait
            self._pending.append(pending)
            self._retry_pending()
            return
        if not self._try_send(pending):
            self._pending.append(pending)
            self._set_full(len(self._pending) >= _MAX_PENDING_SEGMENTS)

    def _try_send(self, p: _Pending) -> bool:
        headers: Any = p.segment.headers  # the client's stub wants a wider, invariant list type
        try:
            self._producer.produce(
                p.topic,
                value=p.segment.value,
                partition=p.partition,
                headers=headers,
                on_delivery=p.on_delivery,
            )
        except BufferError:
            return False
        except KafkaException as exc:
            # refused outright (no transaction, unknown partition, ...): never lost in silence
            p.on_refused(exc.args[0] if exc.args else exc)
            return True
        self._in_flight += p.records
        self._stats["segments"] += 1
        self._stats["records"] += p.records
        self._stats["segment_bytes"] += len(p.segment.value)
        return True

    def _retry_pending(self) -> None:
        while self._pending and self._try_send(self._pending[0]):
            self._pending.popleft()
        self._set_full(len(self._pending) >= _MAX_PENDING_SEGMENTS)

    def _set_full(self, full: bool) -> None:
        self._full = full
        self._refuse = full or self._outside_txn

    def _set_outside_txn(self, outside: bool) -> None:
        self._outside_txn = outside
        self._refuse = outside or self._full

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

    # -- produce_batch helpers --------------------------------------------------------------

    def _conform(self, topic: str, state: _Topic, data: Any) -> pa.Table:
        if isinstance(data, pa.RecordBatch):
            table = pa.Table.from_batches([data])
        elif isinstance(data, pa.Table):
            table = data
        elif type(data).__name__ == "DataFrame" and hasattr(data, "columns"):
            table = pa.Table.from_pandas(data, preserve_index=False)
        else:
            raise RecordError(
                f"data must be a pyarrow Table/RecordBatch or pandas DataFrame, not {type(data).__name__}",
                topic=topic,
            )
        extra = [c for c in table.column_names if c not in state.schema.names]
        if extra:
            raise RecordError("column is not in the topic's schema", topic=topic, field=extra[0])
        columns = []
        for f in state.schema:
            if f.name not in table.column_names:
                if not f.nullable:
                    raise RecordError("required column is missing", topic=topic, field=f.name)
                columns.append(pa.nulls(len(table), f.type))
                continue
            col = table[f.name]
            if not col.type.equals(f.type):
                try:
                    col = col.cast(f.type)
                except (pa.ArrowException, ValueError) as exc:
                    raise RecordError(f"cannot cast {col.type} to {f.type}: {exc}", topic=topic, field=f.name) from exc
            if not f.nullable and col.null_count:
                raise RecordError(f"{col.null_count} nulls in a non-nullable column", topic=topic, field=f.name)
            columns.append(col)
        return pa.Table.from_arrays(columns, schema=state.schema)
