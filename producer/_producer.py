"""``ParquetProducer``: a drop-in for ``confluent_kafka.Producer`` that sends Parquet segments.

With ``columnar.encoding=parquet`` records are buffered per topic-partition and each buffer
is cut into one Parquet segment (one Kafka message) at ``columnar.batch.records``,
``columnar.batch.bytes`` or ``linger.ms``, whichever comes first. With ``none`` every call
goes straight to the wrapped producer, unchanged.

Threads: ``produce``/``poll``/``flush`` run in the caller's thread. A daemon thread cuts
buffers whose ``linger.ms`` expired, so a record is sent on time even if the caller is idle
(as librdkafka's own thread does). Delivery callbacks only ever run inside ``poll``/``flush``,
in the caller's thread, as with confluent-kafka.
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
import pyarrow as pa

from parka.config import ProducerSettings, parse_producer_config
from parka.errors import KafkaClientError, RecordError, RecordTooLargeError, SchemaError
from parka.message import RecordMessage, SegmentRecords
from parka.partitioner import partition_for_key, partitions_for_keys
from parka.records import compile_validator, records_to_table
from parka.schema import schema_fingerprint, to_arrow_schema
from parka.segment import KEY_COLUMN, Segment, build_segment_table, encode_segment

from ._buffer import CutPolicy, DeliveryCallback, PartitionBuffer, SizeModel, approx_size

__all__ = ["ParquetProducer"]

log = logging.getLogger("parka.producer")

_METADATA_TIMEOUT_S = 10.0
_METADATA_REFRESH_S = 300.0
# Encoded segments that could not be queued (librdkafka queue full) wait here; past this many
# produce() raises BufferError, as confluent-kafka does, so memory stays bounded.
_MAX_PENDING_SEGMENTS = 1000

BufferKey = tuple[str, int, tuple[Any, ...]]


@dataclass
class _Topic:
    schema: pa.Schema
    fingerprint: str
    validator: Callable[[Mapping[str, Any]], dict[str, Any]]
    overhead_bytes: int
    partition_by: tuple[str, ...]
    records_size: SizeModel = field(default_factory=SizeModel)
    arrow_size: SizeModel = field(default_factory=SizeModel)
    num_partitions: int = 0
    metadata_at: float = float("-inf")
    sticky: int = -1


@dataclass
class _Pending:
    topic: str
    partition: int
    segment: Segment
    on_delivery: Callable[[Any, Any], None]
    records: int


def _normalize_headers(
    headers: Mapping[str, Any] | Sequence[tuple[str, Any]] | None, topic: str
) -> list[tuple[str, bytes | None]] | None:
    if headers is None:
        return None
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
    return out


def _normalize_key(key: Any, topic: str) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytearray):
        return bytes(key)
    raise RecordError(f"key must be bytes, str or None, not {type(key).__name__}", topic=topic, field="key")


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
        self._in_flight = 0  # records inside segments handed to librdkafka, not yet reported
        self._lock = threading.RLock()
        self._ticker: threading.Thread | None = None
        self._closed = threading.Event()
        self._random = random.Random()
        self._stats = {"segments": 0, "records": 0, "segment_bytes": 0, "splits": 0}

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
        empty = encode_segment(arrow.empty_table(), codec=self._settings.compression, fingerprint="0" * 16)
        with self._lock:
            old = self._topics.get(topic)
            if old is not None:
                for bkey in [k for k in self._buffers if k[0] == topic]:
                    self._cut(bkey)
            state = _Topic(
                schema=arrow,
                fingerprint=schema_fingerprint(arrow),
                validator=compile_validator(arrow),
                overhead_bytes=len(empty.value),
                partition_by=self._settings.partition_by,
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
        """Add one record to its partition's buffer (or produce it as is with encoding ``none``).

        ``value`` is a dict matching the topic's schema. ``key`` decides the partition as
        Kafka's default partitioner would; records without key or partition stick to one
        partition per segment. ``on_delivery(err, msg)`` fires once for this record when its
        segment is acknowledged (``msg`` is a :class:`~parka.message.RecordMessage`).

        Raises :class:`~parka.errors.RecordError` (topic and field named) when no schema is set
        or the record does not match it, :class:`~parka.errors.RecordTooLargeError` when the
        record alone exceeds ``columnar.batch.bytes``, and ``BufferError`` when too many
        segments wait for the Kafka client (call ``poll``). A rejected record leaves the
        buffer untouched.
        """
        cb = on_delivery or callback
        if not self._settings.columnar:
            kwargs: dict[str, Any] = {"value": value, "key": key, "headers": headers, "timestamp": timestamp}
            if partition is not None and partition >= 0:
                kwargs["partition"] = partition
            if cb is not None:
                kwargs["on_delivery"] = cb
            self._producer.produce(topic, **kwargs)
            return
        state = self._topics.get(topic)
        if state is None:
            raise RecordError("no schema set for this topic: call set_schema(topic, schema) first", topic=topic)
        if not isinstance(value, Mapping):
            raise RecordError(f"value must be a dict of fields, not {type(value).__name__}", topic=topic)
        try:
            record = state.validator(value)
        except RecordError as exc:
            raise exc.with_topic(topic) from exc
        kbytes = _normalize_key(key, topic)
        hdrs = _normalize_headers(headers, topic)
        size = approx_size(record)
        if size + state.overhead_bytes > self._settings.batch_bytes // 2:
            self._check_single(topic, state, record, kbytes, hdrs)
        if len(self._pending) >= _MAX_PENDING_SEGMENTS:
            raise BufferError("parka: too many segments wait for the Kafka client; call poll() or flush()")
        ts = int(timestamp) if timestamp else None
        pvals = tuple(record.get(c) for c in state.partition_by)
        with self._lock:
            if partition is None or partition < 0:
                partition = self._choose_partition(topic, state, kbytes)
            bkey: BufferKey = (topic, partition, pvals)
            buf = self._buffers.get(bkey)
            if buf is None:
                buf = self._buffers[bkey] = PartitionBuffer(topic, partition, self._clock())
            buf.append(record, kbytes, ts, hdrs, cb or self._default_callback, size)
            if self._policy.full(len(buf), state.records_size.predict(buf.raw_bytes)):
                self._cut(bkey)
        self._ensure_ticker()

    def produce_batch(
        self,
        topic: str,
        data: Any,
        *,
        key_column: str | None = None,
        partition: int = -1,
        on_delivery: Callable[[Any, int, int], None] | None = None,
    ) -> int:
        """Produce columnar ``data`` (pyarrow Table/RecordBatch, pandas DataFrame) as segments.

        No per-record Python work: the data is cast to the topic's schema, split by partition
        (``key_column`` gives keys for Kafka's partitioner; without it one sticky partition is
        used per segment) and encoded in slices. ``on_delivery(err, msg, records)`` fires once
        per segment. Returns the number of segments queued.

        Raises :class:`~parka.errors.RecordError` naming the column when the data does not
        fit the schema.
        """
        if not self._settings.columnar:
            raise RecordError("produce_batch needs columnar.encoding=parquet", topic=topic)
        state = self._topics.get(topic)
        if state is None:
            raise RecordError("no schema set for this topic: call set_schema(topic, schema) first", topic=topic)
        table = self._conform(topic, state, data)
        keys: pa.Array | None = None
        if key_column is not None:
            if key_column not in table.column_names:
                raise RecordError("key_column is not a column of the data", topic=topic, field=key_column)
            col = table[key_column].combine_chunks()
            keys = (col if pa.types.is_string(col.type) else col.cast(pa.string())).cast(pa.binary())
        with self._lock:
            if partition is not None and partition >= 0:
                parts = [(partition, table, keys)]
            else:
                parts = self._split_by_partition(topic, state, table, keys)
            queued = 0
            for part, sub, subkeys in parts:
                for bkey in [k for k in self._buffers if k[0] == topic and k[1] == part]:
                    self._cut(bkey)  # keep per-partition order: buffered records go first
                for group, group_keys in self._split_by_values(state, sub, subkeys):
                    queued += self._produce_table(topic, part, state, group, group_keys, on_delivery)
        return queued

    # -- client lifecycle ----------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> int:
        """Serve delivery callbacks, like ``confluent_kafka.Producer.poll``; also cuts due buffers."""
        if self._settings.columnar:
            with self._lock:
                self._cut_due()
                self._retry_pending()
        return int(self._producer.poll(-1 if timeout is None else timeout))

    def flush(self, timeout: float | None = None) -> int:
        """Cut every buffer, wait for delivery, and return the number of records not yet delivered."""
        if not self._settings.columnar:
            return int(self._producer.flush() if timeout is None else self._producer.flush(timeout))
        deadline = None if timeout is None else self._clock() + timeout
        with self._lock:
            for bkey in list(self._buffers):
                self._cut(bkey)
        while True:
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
        return len(self)

    def close(self, timeout: float | None = None) -> int:
        """Flush and stop the linger thread; returns records still undelivered."""
        left = self.flush(timeout)
        self._closed.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
        return left

    def __len__(self) -> int:
        if not self._settings.columnar:
            return len(self._producer)
        with self._lock:
            buffered = sum(len(b) for b in self._buffers.values())
            pending = sum(p.records for p in self._pending)
            return buffered + pending + self._in_flight

    def __enter__(self) -> ParquetProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, int]:
        """Counters: segments and records sent, segment bytes, segments split for size."""
        with self._lock:
            return dict(self._stats)

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        return self._producer.list_topics(*args, **kwargs)

    def commit_transaction(self, *args: Any) -> None:
        """Cut all buffers into the transaction, then commit it."""
        with self._lock:
            for bkey in list(self._buffers):
                self._cut(bkey)
        self.flush()
        self._producer.commit_transaction(*args)

    def __getattr__(self, name: str) -> Any:
        # Everything else (init_transactions, purge, ...) is the wrapped client's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._producer, name)

    # -- internals -----------------------------------------------------------------------

    def _check_single(
        self,
        topic: str,
        state: _Topic,
        record: dict[str, Any],
        key: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        table = build_segment_table(
            records_to_table([record], state.schema), [key], [None], [headers] if headers else None
        )
        seg = encode_segment(table, codec=self._settings.compression, fingerprint=state.fingerprint)
        if len(seg.value) > self._settings.batch_bytes:
            raise RecordTooLargeError(
                f"one record encodes to {len(seg.value)} bytes, more than columnar.batch.bytes="
                f"{self._settings.batch_bytes}",
                topic=topic,
            )

    def _num_partitions(self, topic: str, state: _Topic) -> int:
        now = self._clock()
        if state.num_partitions and now - state.metadata_at < _METADATA_REFRESH_S:
            return state.num_partitions
        deadline = now + _METADATA_TIMEOUT_S
        last_error: Any = None
        while True:
            try:
                md = self._producer.list_topics(topic, timeout=max(0.1, deadline - self._clock()))
                tmd = md.topics.get(topic)
                if tmd is not None and tmd.error is None and tmd.partitions:
                    state.num_partitions = len(tmd.partitions)
                    state.metadata_at = self._clock()
                    return state.num_partitions
                last_error = tmd.error if tmd is not None else "topic missing from metadata"
            except confluent_kafka.KafkaException as exc:
                last_error = exc
            if self._clock() >= deadline:
                if state.num_partitions:  # keep using the last known count
                    return state.num_partitions
                raise KafkaClientError(
                    f"no partition metadata for topic '{topic}' within {_METADATA_TIMEOUT_S:.0f} s: {last_error}",
                    kafka_error=last_error,
                )
            time.sleep(0.2)

    def _choose_partition(self, topic: str, state: _Topic, key: bytes | None) -> int:
        n = self._num_partitions(topic, state)
        if key is not None:
            return partition_for_key(self._settings.partitioner, key, n)
        if state.sticky < 0 or state.sticky >= n:
            state.sticky = self._random.randrange(n)
        return state.sticky

    def _advance_sticky(self, topic: str, partition: int) -> None:
        state = self._topics.get(topic)
        if state is not None and state.sticky == partition and state.num_partitions > 1:
            state.sticky = (partition + 1) % state.num_partitions

    def _cut_due(self) -> None:
        now = self._clock()
        for bkey, buf in list(self._buffers.items()):
            if self._policy.due(buf.created_at, now):
                self._cut(bkey)

    def _cut(self, bkey: BufferKey) -> None:
        """Encode one buffer into segments and hand them to the Kafka client. Lock held."""
        buf = self._buffers.pop(bkey, None)
        if buf is None or not buf.records:
            return
        state = self._topics[buf.topic]
        self._advance_sticky(buf.topic, buf.partition)
        self._encode_and_send(state, buf, 0, len(buf))

    def _encode_and_send(self, state: _Topic, buf: PartitionBuffer, lo: int, hi: int) -> None:
        records = buf.records[lo:hi]
        try:
            data = records_to_table(records, state.schema)
        except (pa.ArrowException, ValueError, TypeError) as exc:
            # The validator should have caught this; isolate the culprit instead of failing all.
            if hi - lo == 1:
                self._fail(buf, lo, hi, RecordError(f"cannot convert record: {exc}", topic=buf.topic))
                return
            mid = (lo + hi) // 2
            self._encode_and_send(state, buf, lo, mid)
            self._encode_and_send(state, buf, mid, hi)
            return
        table = build_segment_table(
            data,
            buf.keys[lo:hi] if any(k is not None for k in buf.keys[lo:hi]) else None,
            buf.timestamps[lo:hi] if any(t is not None for t in buf.timestamps[lo:hi]) else None,
            buf.headers[lo:hi] if any(h is not None for h in buf.headers[lo:hi]) else None,
        )
        seg = encode_segment(
            table,
            codec=self._settings.compression,
            fingerprint=state.fingerprint,
            compression_level=self._settings.compression_level,
        )
        if len(seg.value) > self._settings.batch_bytes:
            if hi - lo == 1:
                self._fail(
                    buf,
                    lo,
                    hi,
                    RecordTooLargeError(
                        f"one record encodes to {len(seg.value)} bytes, more than columnar.batch.bytes",
                        topic=buf.topic,
                    ),
                )
                return
            self._stats["splits"] += 1
            mid = (lo + hi) // 2
            self._encode_and_send(state, buf, lo, mid)
            self._encode_and_send(state, buf, mid, hi)
            return
        raw = sum(approx_size(r) for r in records) if hi - lo != len(buf) else buf.raw_bytes
        state.records_size.observe(raw, len(seg.value))
        callbacks = buf.callbacks[lo:hi]
        self._send(buf.topic, buf.partition, seg, self._fan_out(buf, lo, hi, callbacks))

    def _fan_out(
        self, buf: PartitionBuffer, lo: int, hi: int, callbacks: list[DeliveryCallback | None]
    ) -> Callable[[Any, Any], None]:
        n = hi - lo
        wanted = any(cb is not None for cb in callbacks)
        records = buf.records[lo:hi] if wanted else []
        keys = buf.keys[lo:hi] if wanted else []
        timestamps = buf.timestamps[lo:hi] if wanted else []
        headers = buf.headers[lo:hi] if wanted else []
        topic = buf.topic

        def on_delivery(err: Any, msg: Any) -> None:
            with self._lock:
                self._in_flight -= n
            if err is not None:
                log.error("segment of %d records to %s failed: %s", n, topic, err)
            if not wanted:
                return
            delivered = SegmentRecords(
                topic=topic,
                partition=msg.partition() if msg is not None else buf.partition,
                offset=msg.offset() if msg is not None and err is None else -1,
                values=records,
                keys=keys,
                timestamps=timestamps,
                headers=headers,
                segment_timestamp=msg.timestamp() if msg is not None else (0, 0),
                error=err,
            )
            for i, cb in enumerate(callbacks):
                if cb is not None:
                    cb(err, RecordMessage(delivered, i))

        return on_delivery

    def _fail(self, buf: PartitionBuffer, lo: int, hi: int, err: Exception) -> None:
        """Report records that cannot be sent to their callbacks (never a silent drop)."""
        log.error("%s", err)
        failed = SegmentRecords(
            topic=buf.topic,
            partition=buf.partition,
            offset=-1,
            values=buf.records[lo:hi],
            keys=buf.keys[lo:hi],
            error=err,
        )
        for i in range(lo, hi):
            cb = buf.callbacks[i]
            if cb is not None:
                cb(err, RecordMessage(failed, i - lo))

    def _send(self, topic: str, partition: int, seg: Segment, on_delivery: Callable[[Any, Any], None]) -> None:
        pending = _Pending(topic, partition, seg, on_delivery, seg.num_records)
        if self._pending:  # keep order behind segments that already wait
            self._pending.append(pending)
            self._retry_pending()
            return
        if not self._try_send(pending):
            self._pending.append(pending)

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
        self._in_flight += p.records
        self._stats["segments"] += 1
        self._stats["records"] += p.records
        self._stats["segment_bytes"] += len(p.segment.value)
        return True

    def _retry_pending(self) -> None:
        while self._pending and self._try_send(self._pending[0]):
            self._pending.popleft()

    def _ensure_ticker(self) -> None:
        if self._ticker is not None or self._policy.linger_s <= 0:
            return
        self._ticker = threading.Thread(target=self._tick, name="parka-linger", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        interval = min(max(self._policy.linger_s / 4, 0.005), 0.1)
        while not self._closed.wait(interval):
            try:
                with self._lock:
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

    def _split_by_partition(
        self, topic: str, state: _Topic, table: pa.Table, keys: pa.Array | None
    ) -> list[tuple[int, pa.Table, pa.Array | None]]:
        n = self._num_partitions(topic, state)
        if keys is None or n == 1:
            return [(self._choose_partition(topic, state, None), table, keys)]
        import numpy as np
        import pyarrow.compute as pc

        parts = np.full(len(table), -1, dtype=np.int64)
        valid = np.asarray(pc.is_valid(keys).to_numpy(zero_copy_only=False))
        if valid.any():
            idx = np.nonzero(valid)[0]
            parts[idx] = partitions_for_keys(self._settings.partitioner, keys.take(pa.array(idx)), n)
        if not valid.all():
            parts[~valid] = self._choose_partition(topic, state, None)
        out = []
        for p in np.unique(parts):
            rows = pa.array(np.nonzero(parts == p)[0])
            out.append((int(p), table.take(rows), keys.take(rows)))
        return out

    @staticmethod
    def _split_by_values(
        state: _Topic, table: pa.Table, keys: pa.Array | None
    ) -> list[tuple[pa.Table, pa.Array | None]]:
        """With ``columnar.partition.by``, one table per distinct value combination, rows in order."""
        if not state.partition_by or table.num_rows == 0:
            return [(table, keys)]
        import pyarrow.compute as pc

        groups = table.select(list(state.partition_by)).group_by(list(state.partition_by)).aggregate([])
        if groups.num_rows == 1:
            return [(table, keys)]
        out = []
        for values in groups.to_pylist():
            mask = None
            for name, value in values.items():
                col = table[name]
                cond = pc.is_null(col) if value is None else pc.equal(col, pa.scalar(value, col.type))
                mask = cond if mask is None else pc.and_(mask, cond)
            out.append((table.filter(mask), None if keys is None else keys.filter(mask)))
        return out

    def _produce_table(
        self,
        topic: str,
        partition: int,
        state: _Topic,
        table: pa.Table,
        keys: pa.Array | None,
        on_delivery: Callable[[Any, int, int], None] | None,
    ) -> int:
        queued = 0
        start = 0
        total = len(table)
        bytes_per_row = max(1.0, table.nbytes / max(total, 1))
        while start < total:
            by_bytes = int(self._settings.batch_bytes * 0.9 / max(state.arrow_size.predict(int(bytes_per_row)), 1e-9))
            size = max(1, min(self._settings.batch_records, by_bytes, total - start))
            while True:
                sub = table.slice(start, size)
                if keys is not None:
                    sub = sub.append_column(KEY_COLUMN, keys.slice(start, size))
                seg = encode_segment(
                    sub,
                    codec=self._settings.compression,
                    fingerprint=state.fingerprint,
                    compression_level=self._settings.compression_level,
                )
                if len(seg.value) <= self._settings.batch_bytes:
                    break
                if size == 1:
                    raise RecordTooLargeError(
                        f"row {start} encodes to {len(seg.value)} bytes, more than columnar.batch.bytes",
                        topic=topic,
                    )
                self._stats["splits"] += 1
                size = max(1, size // 2)
            state.arrow_size.observe(sub.nbytes, len(seg.value))
            n = size

            def delivered(err: Any, msg: Any, n: int = n) -> None:
                with self._lock:
                    self._in_flight -= n
                if err is not None:
                    log.error("segment of %d records to %s failed: %s", n, topic, err)
                if on_delivery is not None:
                    on_delivery(err, msg, n)

            self._send(topic, partition, seg, delivered)
            queued += 1
            start += size
        self._advance_sticky(topic, partition)
        return queued
