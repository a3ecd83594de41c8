"""``ParquetConsumer``: a drop-in for ``confluent_kafka.Consumer`` that yields segment records.

Record-precise offsets
----------------------
Kafka offsets address segments, not records. parka keeps, per partition, the position of
the next record to hand out as ``(segment offset, index)`` and commits it as:

* ``index == 0``: Kafka offset ``segment offset`` with empty metadata (a plain position);
* ``index > 0``: Kafka offset ``segment offset`` (so the segment is fetched again) and the
  commit metadata ``parka:1:<segment offset>:<index>``. When that segment arrives again
  after a restart or rebalance, its first ``index`` records are skipped.

So a commit taken in the middle of a segment neither loses nor repeats records. ``position()``
answers in the same form, so offsets taken from it (confluent's exactly-once loop hands them to
``send_offsets_to_transaction``) resume at the next record too (``_offsets.py``).

Handing records out
-------------------
A fetched segment is decoded once (Parquet to Arrow) and becomes its partition's *cursor*:
the decoded table, the index of the next record to hand out, and the record count. ``poll``
returns the record at the cursor and moves the cursor one on; ``consume(n)`` takes a slice at
once; ``poll_table`` takes the rest of the segment as an Arrow table. Python values are built
from the table once per segment (``_rows.py``), on the first ``poll``/``consume`` that needs
them, and a record is two references (:class:`~parka.message.RecordMessage`). Per record,
only the cursor's index moves; positions are worked out from cursors when stored or committed.

Auto-commit
-----------
parka commits by itself, record-precise: see ``_autocommit.py``.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import confluent_kafka
import pyarrow as pa
from confluent_kafka import TopicPartition

from parka.encryption import ENCRYPTION_PREFIX, parse_kms_config
from parka.errors import KafkaClientError, SegmentDecodeError, SegmentError
from parka.message import RecordMessage, SegmentRecords
from parka.registry import Registry, split_registry_config
from parka.schema import is_message_class, to_arrow_schema
from parka.swap import client_class, forward_missing

from ._autocommit import flag, interval_s, weak_on_commit
from ._commits import OffsetsAPI
from ._compat import UNBUILT, closed_error, merge_conf
from ._fetch import NOTHING, Fetcher, build_records
from ._segments import Cursor, Key, Position, RawSegment, SegmentTable

__all__ = ["ParquetConsumer", "RawSegment", "SegmentTable"]

# Bound at import, so that an application (or a test) that swaps ``confluent_kafka.Consumer`` for
# parka's class still gets the real client here (see _client_class).
_KafkaConsumer = confluent_kafka.Consumer

log = logging.getLogger("parka.consumer")

_MAX_CONSUME = 1_000_000  # confluent-kafka's bound on consume(num_messages)


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None or timeout < 0 else time.monotonic() + timeout


def _remaining(deadline: float | None) -> float:
    return -1.0 if deadline is None else max(0.0, deadline - time.monotonic())


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _client_class() -> Any:
    return client_class(confluent_kafka.Consumer, _KafkaConsumer, ParquetConsumer)


class ParquetConsumer(OffsetsAPI):
    """Consume parka segments as individual records; plain messages pass through unchanged.

    ``conf`` is a confluent-kafka consumer config, taken in ``confluent_kafka.Consumer``'s forms
    (``ParquetConsumer(conf)``, ``ParquetConsumer(conf, logger=...)``, ``ParquetConsumer(**conf)``);
    it is copied, never modified. The ``columnar.encryption.kms.*`` keys
    (:mod:`parka.encryption`) decrypt encrypted segments.

    Raises:
        TypeError: ``conf`` is not a dict (confluent's message).
        ConfigError: ``enable.auto.commit``, ``enable.auto.offset.store`` or
            ``auto.commit.interval.ms`` has a value librdkafka would not take; a bad
            ``columnar.encryption.*`` key.
    """

    # What a consumer whose __init__ never ran (or that is closed) answers with: confluent's
    # RuntimeError("Consumer closed") from every method (see _compat).
    _consumer: Any = UNBUILT
    _closed = True  # close() began: no more commits of parka's own
    _shut = True  # the client is closed: methods raise RuntimeError (not yet inside close(), where
    # rebalance callbacks the client serves may still call unassign(), commit(), ...)
    _current: Cursor | None = None
    _committer: threading.Thread | None = None
    _registry: Registry | None = None

    def __init__(self, *args: Mapping[str, Any], **kwargs: Any) -> None:
        conf = merge_conf(args, kwargs)
        registry_conf, client = split_registry_config(conf)
        self._kms = parse_kms_config(client)
        client = {k: v for k, v in client.items() if not k.startswith(ENCRYPTION_PREFIX)}
        # With a registry, a segment's parka.schema.id is resolved: the writer's Avro schema must
        # be the one the segment's fingerprint names. schema.registry.* never reach librdkafka.
        self._registry = None if registry_conf is None else Registry(registry_conf)
        self._auto_store = flag(client, "enable.auto.offset.store")
        self._auto_commit = flag(client, "enable.auto.commit")
        self._interval_s = interval_s(client)
        self._user_on_commit: Callable[..., None] | None = client.pop("on_commit", None)
        client["enable.auto.offset.store"] = False
        client["enable.auto.commit"] = False
        if self._auto_commit:
            client["on_commit"] = weak_on_commit(weakref.ref(self))
        elif self._user_on_commit is not None:
            client["on_commit"] = self._user_on_commit
        self._consumer = _client_class()(client)
        self._cursors: dict[Key, Cursor] = {}
        # The cursor whose records are being handed out (at most one: a segment is handed out
        # whole before the next Kafka message is fetched).
        self._current = None
        # Positions given to store_offsets (enable.auto.offset.store=false).
        self._stored: dict[Key, Position] = {}
        self._assigned: set[Key] = set()
        # Partitions whose committed metadata was already consulted since assignment.
        self._resume_checked: set[Key] = set()
        self._explicit: set[Key] = set()
        # An error met by consume() after it had records in hand: raised by the next call.
        self._deferred: Exception | None = None
        # Auto-commit state (see the module docstring); guarded by _lock.
        self._lock = threading.RLock()
        self._sent: dict[Key, Position] = {}
        self._failed: list[Key] = []  # appended by the commit callback, drained by the thread
        self._committer = None
        self._stop_committer = threading.Event()
        self._closed = False
        self._shut = False
        self._readers: dict[str, pa.Schema] = {}  # set_reader_schema
        self._messages: dict[str, Any] = {}  # set_reader_schema with a Protobuf message class
        self._fetcher = Fetcher(
            self._consumer,
            kms=self._kms,
            registry=self._registry,
            cursors=self._cursors,
            resume_checked=self._resume_checked,
            readers=self._readers,
            messages=self._messages,
        )

    def set_reader_schema(self, topic: str, schema: str | Mapping[str, Any] | pa.Schema | type | None) -> None:
        """Read ``topic``'s records in ``schema`` (an Avro record schema or a ``pyarrow.Schema``)
        whatever schema each segment was written with, Avro-style (:mod:`._resolve`): fields by
        name at any depth, ``None`` for what a writer lacked, what the reader lacks dropped.
        A generated Protobuf message class (the ``protobuf`` extra) reads them in its fields, and
        each record's value is a message of the class, as confluent-kafka's
        ``ProtobufDeserializer`` gives it. ``None`` goes back to the default: each record has its
        writer's fields, as a plain consumer of the topic would see them. Applies to segments
        decoded from now on.

        Raises:
            SchemaError: a schema parka cannot use (names the field).
        """
        self._check_open()
        self._messages.pop(topic, None)
        if schema is None:
            self._readers.pop(topic, None)
        elif is_message_class(schema):
            from parka.protodecode import ProtobufRecords  # the protobuf extra: only when a class is given

            records = ProtobufRecords(schema)
            self._readers[topic] = records.schema
            self._messages[topic] = records.messages
        else:
            self._readers[topic] = to_arrow_schema(schema)

    # -- subscription --------------------------------------------------------------------

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: Callable[..., None] | None = None,
        on_revoke: Callable[..., None] | None = None,
        on_lost: Callable[..., None] | None = None,
    ) -> None:
        """Subscribe like ``confluent_kafka.Consumer.subscribe``; callbacks receive this shim."""
        self._check_open()

        def assigned(_: Any, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                self._resume_checked.discard((tp.topic, tp.partition))
                self._assigned.add((tp.topic, tp.partition))
            if on_assign is not None:
                on_assign(self, partitions)

        def revoked(_: Any, partitions: list[TopicPartition]) -> None:
            self._release(partitions, commit=True)
            if on_revoke is not None:
                on_revoke(self, partitions)

        def lost(_: Any, partitions: list[TopicPartition]) -> None:
            self._release(partitions, commit=False)
            if on_lost is not None:
                on_lost(self, partitions)
            elif on_revoke is not None:
                on_revoke(self, partitions)

        self._consumer.subscribe(
            list(topics), on_assign=_raising(assigned), on_revoke=_raising(revoked), on_lost=_raising(lost)
        )
        self._start_committer()

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment; an explicit offset is taken literally (no mid-segment resume).

        Partitions of the previous assignment are released first (and committed, with
        auto-commit), as librdkafka does.
        """
        self._check_open()
        self._release(self._client_assignment() + [TopicPartition(*key) for key in self._assigned], commit=True)
        self._add(partitions)
        self._consumer.assign(partitions)
        self._start_committer()

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add partitions to the assignment (cooperative rebalancing), as :meth:`assign` takes them."""
        self._check_open()
        self._add(partitions)
        self._consumer.incremental_assign(partitions)
        self._start_committer()

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Remove partitions from the assignment, committing their positions with auto-commit."""
        self._check_open()
        self._release(partitions, commit=True)
        self._consumer.incremental_unassign(partitions)

    def unassign(self) -> None:
        """Remove the whole assignment, committing its positions with auto-commit."""
        self._check_open()
        self._release(self._client_assignment() + [TopicPartition(*key) for key in self._assigned], commit=True)
        self._consumer.unassign()

    def _client_assignment(self) -> list[TopicPartition]:
        """The client's assignment; none asked of it once ``close()`` has begun: a revocation
        callback that calls ``unassign()`` while the client is torn down (``parka ingest``'s does)
        would get librdkafka's ``_DESTROY`` from ``assignment()`` and fail the close. parka's own
        ``_assigned`` still names what is held."""
        if self._closed:
            return []
        return list(self._consumer.assignment())

    def _add(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._assigned.add(key)
            self._resume_checked.discard(key)
            if tp.offset >= 0:
                self._explicit.add(key)
                self._resume_checked.add(key)
            else:
                self._explicit.discard(key)

    def _release(self, partitions: Iterable[TopicPartition], *, commit: bool) -> None:
        """Forget released partitions; with auto-commit and ``commit``, commit them first."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        if not gone:
            return
        with self._lock:
            if commit and self._auto_commit and not self._closed:
                due = {key: pos for key, pos in self._positions().items() if key in gone}
                if due:
                    self._send(due, asynchronous=False)
            self._fetcher.forget(gone)
            for key in gone:
                self._cursors.pop(key, None)
                self._stored.pop(key, None)
                self._sent.pop(key, None)
                self._resume_checked.discard(key)
            self._assigned -= gone
            current = self._current
            if current is not None and (current.topic, current.partition) in gone:
                self._current = None

    # -- consuming -------------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Any:
        """Return the next record (a :class:`RecordMessage`), a plain message, an error message, or None.

        Raises :class:`~parka.errors.SegmentDecodeError` for a segment that cannot be decoded;
        the error keeps the raw bytes, topic, partition and offset, and consuming continues
        after it on the next call. Raises :class:`KafkaClientException` (a ``KafkaException``) when the
        committed position of a newly assigned partition cannot be read (the segment is
        fetched again on the next call).
        """
        # The path taken for all but the first record of a segment: nothing but the cursor.
        cur = self._current
        if cur is not None:
            index = cur.next
            if index < cur.stop:
                records = cur.records
                if records is not None:
                    cur.next = index + 1
                    return RecordMessage(records, index)
        got = self._pending(timeout, batch=False)
        if not isinstance(got, Cursor):
            return got
        records = got.records if got.records is not None else self._build_records(got)
        index = got.next
        got.next = index + 1
        return RecordMessage(records, index)

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Any]:
        """Up to ``num_messages`` records or messages, as ``confluent_kafka.Consumer.consume``.

        Returns once ``num_messages`` are collected or ``timeout`` seconds (negative or
        ``None``: no limit) have passed. Records come in slices of their segment; after a
        segment the next Kafka message is fetched only when needed, after a plain message as
        many as are still wanted of those the client has fetched already (up to 64 per call),
        and messages of such a batch left over after a segment are handed out next (a seek or a
        new assignment of their partition drops them). Plain and error messages are returned
        in place. Raises what :meth:`poll` raises; an error met after some records were
        collected is raised by the next call instead, so those records are not lost. Like
        confluent's, it fetches with the client's ``consume()``, which serves every callback
        queued while it runs (``error_cb``, ...) and raises what the last one it served raised.
        """
        if self._shut:
            raise closed_error()
        if not 0 <= num_messages <= _MAX_CONSUME:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        out: list[Any] = []
        deadline = _deadline(timeout)
        while len(out) < num_messages:
            try:
                got = self._pending(_remaining(deadline), batch=True, want=num_messages - len(out))
                if isinstance(got, Cursor) and got.records is None:
                    self._build_records(got)
            except (SegmentError, KafkaClientError) as exc:
                if not out:
                    raise
                self._deferred = exc
                break
            if isinstance(got, Cursor):
                start = got.next
                stop = min(got.stop, start + num_messages - len(out))
                got.next = stop
                out += got.records.records(start, stop)  # type: ignore[union-attr]
            elif got is not None:
                out.append(got)
                if got.error() is None and len(out) < num_messages:  # the plain messages held after it, at once
                    out += self._fetcher.take_plain(num_messages - len(out))
            elif _expired(deadline):
                break
        return out

    def poll_table(self, timeout: float | None = None) -> Any:
        """The next segment's records not yet handed out, as one :class:`SegmentTable`.

        When ``poll``/``consume`` already handed out part of a segment, the rest of it. No
        Python object is built per record. A plain message or an error message is returned
        as the confluent-kafka ``Message`` itself; ``None`` when ``timeout`` seconds passed.
        Raises what :meth:`poll` raises.
        """
        got = self._pending(timeout, batch=False)
        if not isinstance(got, Cursor):
            return got
        start, table = got.next, got.table
        assert table is not None  # a cursor with records has its table
        out = SegmentTable(
            table.slice(start) if start else table,
            topic=got.topic,
            partition=got.partition,
            offset=got.offset,
            index=start,
            segment_records=got.stop,
            timestamp=got.message.timestamp(),
            leader_epoch=got.epoch,
        )
        got.next = got.stop
        got.table = got.records = got.message = None  # handed out: keep only what positions need
        self._current = None
        return out

    def poll_buffer(self, timeout: float | None = None) -> RawSegment | None:
        """The KIP's ingestion API: the next message's raw bytes, undecoded.

        Returns ``None`` when nothing arrived in time (or at a partition end event). Raises
        :class:`~parka.errors.SegmentDecodeError` when segment headers are garbled (the error
        keeps the raw message) and :class:`KafkaClientException` for client errors.
        """
        current = self._current
        if current is not None and current.next < current.stop:
            raise SegmentError("records of a decoded segment are still pending: call poll() until it returns them")
        return self._fetcher.fetch_raw(timeout)

    def poll_buffers(self, timeout: float | None = None, max_messages: int = 500) -> list[RawSegment]:
        """The batch form of :meth:`poll_buffer` (as ``consume`` is ``poll``'s): up to
        ``max_messages`` raw messages the client has fetched already, or when it has none, the
        first to arrive within ``timeout``: a batch never waits to fill. Empty when nothing
        arrived in time.
        Garbled segment headers are not raised: such a message comes back with ``info`` ``None``
        (:func:`parka.lake.read_segment` raises its error). Raises
        :class:`KafkaClientException` for client errors, after the messages before one.
        """
        current = self._current
        if current is not None and current.next < current.stop:
            raise SegmentError("records of a decoded segment are still pending: call poll() until it returns them")
        return self._fetcher.fetch_raw_many(timeout, max_messages)

    def _poll_messages(self, timeout: float | None, max_messages: int) -> list[Any]:
        """:meth:`poll_buffers` for ``parka ingest``: the client's messages as it gives them."""
        return self._fetcher.fetch_messages(timeout, max_messages)

    def close(self) -> None:
        """Stop auto-committing, commit the final positions (with auto-commit) and close the client.

        Returns ``None``; closing again does nothing. Afterwards every method raises
        ``RuntimeError("Consumer closed")``, as confluent's.
        """
        if self._closed:
            self._consumer.close()  # nothing to do; a consumer never built included
            return
        self._stop_committer.set()
        if self._committer is not None:
            self._committer.join()
        if self._registry is not None:
            self._registry.close()
        with self._lock:
            if self._auto_commit:
                final = {key: pos for key, pos in self._positions().items() if key in self._assigned}
                if final:
                    self._send(final, asynchronous=False)
            self._closed = True
            self._current = None
        try:
            self._consumer.close()
        finally:
            self._shut = True

    def __enter__(self) -> ParquetConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    if TYPE_CHECKING:  # assignment, pause, resume, list_topics, ...: forward_missing, after the class

        def __getattr__(self, name: str) -> Any: ...

    # -- internals: fetching -------------------------------------------------------------------

    def _pending(self, timeout: float | None, *, batch: bool, want: int = 1) -> Any:
        """The cursor with records left to hand out, fetching Kafka messages until one has
        some; else what came instead: a plain or error message, or ``None`` on timeout.
        ``batch``: fetch with the client's ``consume()`` (for :meth:`consume`, which still
        wants ``want`` records or messages), else ``poll()``."""
        if self._shut:
            raise closed_error()
        current = self._current
        if current is not None:
            if current.next < current.stop:
                return current
            # Handed out: the cursor keeps only what positions need.
            current.table = current.records = current.message = None
            self._current = None
        if self._deferred is not None:
            exc, self._deferred = self._deferred, None
            raise exc
        deadline = _deadline(timeout)
        while True:
            got = self._fetcher.fetch(_remaining(deadline), batch=batch, want=want)
            if isinstance(got, Cursor):
                self._current = got
                return got
            if got is not NOTHING:
                return got
            if _expired(deadline):
                return None

    def _build_records(self, cursor: Cursor) -> SegmentRecords:
        """The cursor's Python records (:func:`._fetch.build_records`); on a failure the segment is
        no longer the one handing out records."""
        try:
            return build_records(cursor)
        except SegmentDecodeError:
            self._current = None
            raise


forward_missing(ParquetConsumer, _KafkaConsumer, "_consumer")


def _raising(callback: Callable[[Any, list[TopicPartition]], None]) -> Callable[[Any, list[TopicPartition]], None]:
    """``callback`` as librdkafka's rebalance callback: a ``KafkaException`` a client call inside
    it raised (``get_watermark_offsets`` while the brokers are away) is caught and raised again,
    so that ``poll()`` raises it as one. Left as the client's C code set it, confluent-kafka
    (2.16.1) hands it to ``poll()``'s caller as a bare ``KafkaError``, which is no exception
    class: no ``except`` clause catches it, and the process ends with a traceback."""

    def call(consumer: Any, partitions: list[TopicPartition]) -> None:
        try:
            callback(consumer, partitions)
        except confluent_kafka.KafkaException:
            raise  # caught: a KafkaException object now

    return call
