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
from typing import Any

import confluent_kafka
import pyarrow as pa
from confluent_kafka import TopicPartition

from parka._swap import client_class
from parka.encryption import ENCRYPTION_PREFIX, parse_kms_config
from parka.errors import KafkaClientError, SegmentDecodeError, SegmentError
from parka.message import RecordMessage, SegmentRecords
from parka.registry import Registry, parse_schema_id, split_registry_config
from parka.schema import RESERVED_PREFIX, schema_fingerprint, to_arrow_schema
from parka.segment import SCHEMA_ID_HEADER, decode_segment, is_segment, read_segment_info

from ._autocommit import auto_commit_loop, flag, interval_s, weak_on_commit
from ._compat import UNBUILT, KafkaClientException, closed_error, merge_conf, translated
from ._offsets import commit_request, positions, store_request
from ._resolve import resolve_table
from ._rows import segment_records
from ._segments import Cursor, Key, Position, RawSegment, SegmentTable, decode_position

__all__ = ["ParquetConsumer", "RawSegment", "SegmentTable"]

# Bound at import, so that an application (or a test) that swaps ``confluent_kafka.Consumer`` for
# parka's class still gets the real client here (see _client_class).
_KafkaConsumer = confluent_kafka.Consumer

log = logging.getLogger("parka.consumer")

_MAX_CONSUME = 1_000_000  # confluent-kafka's bound on consume(num_messages)

# _fetch results besides a message and None
_SEGMENT = object()  # a segment with records to hand out is now the current cursor
_NOTHING = object()  # a segment with none left (all skipped on resume, or empty)


def _tp(key: Key, position: Position) -> TopicPartition:
    return TopicPartition(key[0], key[1], position[0], position[1])


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None or timeout < 0 else time.monotonic() + timeout


def _remaining(deadline: float | None) -> float:
    return -1.0 if deadline is None else max(0.0, deadline - time.monotonic())


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _client_class() -> Any:
    return client_class(confluent_kafka.Consumer, _KafkaConsumer, ParquetConsumer)


class ParquetConsumer:
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

    def set_reader_schema(self, topic: str, schema: str | Mapping[str, Any] | pa.Schema | None) -> None:
        """Read ``topic``'s records in ``schema`` (an Avro record schema or a ``pyarrow.Schema``)
        whatever schema each segment was written with, Avro-style (:mod:`._resolve`): fields by
        name at any depth, ``None`` for what a writer lacked, what the reader lacks dropped.
        ``None`` goes back to the default: each record has its writer's fields, as a plain
        consumer of the topic would see them. Applies to segments decoded from now on.

        Raises:
            SchemaError: a schema parka cannot use (names the field).
        """
        self._check_open()
        if schema is None:
            self._readers.pop(topic, None)
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

        self._consumer.subscribe(list(topics), on_assign=assigned, on_revoke=revoked, on_lost=lost)
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
        ``None``: no limit) have passed. Records come in slices of their segment; further
        Kafka messages are fetched only as needed. Plain and error messages are returned in
        place. Raises what :meth:`poll` raises; an error met after some records were
        collected is raised by the next call instead, so those records are not lost. Like
        confluent's, it fetches with the client's ``consume()``, which serves every queued
        callback (``error_cb``, ...) before raising what the first one raised.
        """
        if self._shut:
            raise closed_error()
        if not 0 <= num_messages <= _MAX_CONSUME:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        out: list[Any] = []
        deadline = _deadline(timeout)
        while len(out) < num_messages:
            try:
                got = self._pending(_remaining(deadline), batch=True)
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
        msg: Any = self._consumer.poll(-1 if timeout is None else timeout)
        if msg is None:
            return None
        err = msg.error()
        if err is not None:
            if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                return None
            raise KafkaClientException(f"consume failed: {err}", kafka_error=err)
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        self._cursors[(topic, partition)] = Cursor(topic, partition, offset)
        headers = msg.headers()
        info = None
        if is_segment(headers):
            info = read_segment_info(headers, value=msg.value(), topic=topic, partition=partition, offset=offset)
        return RawSegment(
            value=msg.value(),
            headers=headers,
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp=msg.timestamp(),
            info=info,
        )

    # -- offsets (the decisions: _offsets.py) ------------------------------------------------

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """After the last record handed out: inside a segment, its offset with the metadata
        ``parka:1:<offset>:<index>``, so that ``send_offsets_to_transaction(consumer.position(..))``
        resumes at the next record; a partition nothing was fetched from: the client's answer.
        Raises :class:`KafkaClientException` (a ``KafkaException``) as confluent's."""
        self._check_open()
        with translated("position failed"):
            return positions(self._consumer.position(partitions), self._cursors)

    def commit(
        self,
        message: Any = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit record-precise positions: with no argument the stored ones (every record handed
        out, or with ``enable.auto.offset.store=false`` what :meth:`store_offsets` was given);
        with ``message`` (a record, a :class:`SegmentTable`, a plain message) the position after
        it; ``offsets`` as given, the ``msg.offset() + 1`` idiom read as the record position
        (:func:`._offsets.commit_request`). Returns the committed partitions when synchronous.

        Raises ``ValueError`` (both ``message`` and ``offsets``), :class:`KafkaClientException`
        (a ``KafkaException``; ``_NO_OFFSET`` when synchronous with nothing stored, as
        confluent's, which tells ``on_commit`` when asynchronous), ``RuntimeError`` when closed.
        """
        self._check_open()
        kwargs = commit_request(message, offsets, self._cursors, self._positions())
        with translated("commit failed"):
            if asynchronous:
                self._consumer.commit(asynchronous=True, **kwargs)
                return None
            return list(self._consumer.commit(asynchronous=False, **kwargs))

    def store_offsets(self, message: Any = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store the position after ``message`` (record-precise) or ``offsets`` (read as
        :meth:`commit` reads them) for the next auto-commit or argument-less :meth:`commit`.
        Raises what :func:`._offsets.store_request` raises, ``RuntimeError`` when closed."""
        self._check_open()
        self._stored.update(store_request(message, offsets, self._cursors, self._assigned, auto_store=self._auto_store))

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The committed positions, metadata included (inside a segment: the segment's offset
        and ``parka:1:<offset>:<index>``). Raises :class:`KafkaClientException` as confluent's."""
        self._check_open()
        with translated("committed failed"):
            return list(self._consumer.committed(partitions, *(() if timeout is None else (timeout,))))

    def seek(self, partition: TopicPartition) -> None:
        """Seek like the client; that partition's records in hand are dropped and the offset is
        taken literally, as :meth:`assign` takes one. Raises :class:`KafkaClientException`."""
        self._check_open()
        with translated("seek failed"):
            self._consumer.seek(partition)
        key = (partition.topic, partition.partition)
        self._cursors.pop(key, None)
        self._resume_checked.add(key)
        current = self._current
        if current is not None and (current.topic, current.partition) == key:
            self._current = None

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

    def _check_open(self) -> None:
        if self._shut:
            raise closed_error()

    def __getattr__(self, name: str) -> Any:
        # assignment, position, seek, pause, resume, list_topics, ...: the wrapped client's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._consumer, name)

    # -- internals: fetching -------------------------------------------------------------------

    def _pending(self, timeout: float | None, *, batch: bool) -> Any:
        """The cursor with records left to hand out, fetching Kafka messages until one has
        some; else what came instead: a plain or error message, or ``None`` on timeout.
        ``batch``: fetch with the client's ``consume()`` (for :meth:`consume`), else ``poll()``."""
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
            got = self._fetch(_remaining(deadline), batch=batch)
            if got is _SEGMENT:
                return self._current
            if got is not _NOTHING:
                return got
            if _expired(deadline):
                return None

    def _check_writer_schema(self, headers: Any, schema: pa.Schema, *, topic: str, partition: int, offset: int) -> None:
        """Raise :class:`SegmentDecodeError` when the segment's ``parka.schema.id`` names a writer
        schema whose user columns differ from the segment's (``RegistryError`` when the registry
        cannot answer). A segment without the header passes."""
        if self._registry is None:
            return
        raw = next((v for k, v in headers or () if k == SCHEMA_ID_HEADER), None)
        schema_id = parse_schema_id(raw)
        if schema_id is None:
            return
        _, fingerprint = self._registry.writer_schema(schema_id)
        found = schema_fingerprint(pa.schema([f for f in schema if not f.name.startswith(RESERVED_PREFIX)]))
        if found != fingerprint:
            raise SegmentDecodeError(
                f"segment's columns (fingerprint {found}) are not the writer schema {schema_id} of the registry "
                f"at {self._registry.url} (fingerprint {fingerprint})",
                headers=list(headers or ()),
                topic=topic,
                partition=partition,
                offset=offset,
            )

    def _fetch(self, timeout: float, *, batch: bool) -> Any:
        """Poll the client once: a plain or error message, ``None``, ``_SEGMENT`` or ``_NOTHING``."""
        msg: Any
        if batch:
            got = self._consumer.consume(1, timeout)
            msg = got[0] if got else None
        else:
            msg = self._consumer.poll(timeout)
        if msg is None or msg.error() is not None:
            return msg
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        key = (topic, partition)
        headers = msg.headers()
        if not is_segment(headers):
            self._cursors[key] = Cursor(topic, partition, offset)
            return msg
        start = self._resume_index(msg)
        try:
            table = decode_segment(msg.value(), headers, topic=topic, partition=partition, offset=offset, kms=self._kms)
        except SegmentError:
            self._cursors[key] = Cursor(topic, partition, offset)
            raise
        except Exception as exc:  # anything pyarrow raises on odd data: keep the raw bytes
            self._cursors[key] = Cursor(topic, partition, offset)
            raise SegmentDecodeError(
                f"cannot decode segment: {exc}",
                value=msg.value(),
                headers=headers,
                topic=topic,
                partition=partition,
                offset=offset,
            ) from exc
        if self._registry is not None:
            try:
                self._check_writer_schema(headers, table.schema, topic=topic, partition=partition, offset=offset)
            except Exception:
                self._cursors[key] = Cursor(topic, partition, offset)
                raise
        if topic in self._readers:
            try:
                table = resolve_table(table, self._readers[topic])
            except ValueError as exc:
                self._cursors[key] = Cursor(topic, partition, offset)
                where = {"topic": topic, "partition": partition, "offset": offset}
                raise SegmentDecodeError(f"reader schema: {exc}", value=msg.value(), headers=headers, **where) from exc
        cursor = Cursor(topic, partition, offset, message=msg, table=table, start=start)
        self._cursors[key] = cursor
        if cursor.next >= cursor.stop:
            return _NOTHING
        self._current = cursor
        return _SEGMENT

    def _build_records(self, cursor: Cursor) -> SegmentRecords:
        """The Python records of the cursor's segment, from its next record on (once per segment)."""
        msg = cursor.message
        try:
            records = segment_records(
                cursor.table,
                cursor.next,
                topic=cursor.topic,
                partition=cursor.partition,
                offset=cursor.offset,
                segment_timestamp=msg.timestamp(),
            )
        except Exception as exc:  # a value Python cannot hold, a malformed reserved column
            cursor.next = cursor.stop  # consuming continues after this segment
            self._current = None
            raise SegmentDecodeError(
                f"cannot decode segment records: {exc}",
                value=msg.value(),
                headers=msg.headers(),
                topic=cursor.topic,
                partition=cursor.partition,
                offset=cursor.offset,
            ) from exc
        cursor.records = records
        return records

    def _resume_index(self, msg: Any) -> int:
        """Records of this segment already consumed before a restart, per committed metadata.

        Raises KafkaClientException when the committed position cannot be read; the client is
        sought back to the segment, so the next poll fetches it again.
        """
        key = (msg.topic(), msg.partition())
        if key in self._resume_checked:
            return 0
        try:
            [tp] = self._consumer.committed([TopicPartition(*key)], timeout=10)
        except confluent_kafka.KafkaException as exc:
            try:
                self._consumer.seek(TopicPartition(key[0], key[1], msg.offset()))
            except confluent_kafka.KafkaException as seek_exc:
                log.warning("cannot seek %s[%d] back to %d: %s", key[0], key[1], msg.offset(), seek_exc)
            raise KafkaClientException.wrap(exc, f"cannot read committed offset of {key[0]}[{key[1]}]") from exc
        self._resume_checked.add(key)
        pos = decode_position(getattr(tp, "metadata", None))
        if pos is None or tp.offset != msg.offset() or pos[0] != msg.offset():
            return 0
        return pos[1]

    # -- internals: positions and auto-commit ------------------------------------------------

    def _positions(self) -> dict[Key, Position]:
        """The stored position of every partition that has one (a snapshot; any thread)."""
        if self._auto_store:
            return {key: cursor.position() for key, cursor in self._cursors.copy().items()}
        return self._stored.copy()

    def _start_committer(self) -> None:
        if not self._auto_commit or self._interval_s <= 0 or self._committer is not None or self._closed:
            return
        self._committer = threading.Thread(
            target=auto_commit_loop,
            args=(weakref.ref(self), self._stop_committer, self._interval_s),
            name="parka-auto-commit",
            daemon=True,
        )
        self._committer.start()

    def _auto_commit_tick(self) -> None:
        """One auto-commit (the committer thread): send the positions that changed."""
        with self._lock:
            if self._closed:
                return
            while self._failed:
                self._sent.pop(self._failed.pop(), None)
            due = {
                key: pos
                for key, pos in self._positions().items()
                if key in self._assigned and self._sent.get(key) != pos
            }
            if due:
                self._send(due, asynchronous=True)

    def _send(self, positions: dict[Key, Position], *, asynchronous: bool) -> None:
        """Commit ``positions`` (holding ``_lock``); failures are logged, not raised."""
        offsets = [_tp(key, pos) for key, pos in positions.items()]
        try:
            if asynchronous:
                self._consumer.commit(offsets=offsets, asynchronous=True)
                result = []
            else:
                result = self._consumer.commit(offsets=offsets, asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            # E.g. a rebalance in progress: the next tick (or the new owner) carries on.
            log.info("auto-commit of %d partition(s) failed: %s", len(positions), exc)
            return
        failed = set()
        for tp in result:
            if tp.error is not None:
                failed.add((tp.topic, tp.partition))
                log.info("auto-commit of %s[%d] failed: %s", tp.topic, tp.partition, tp.error)
        self._sent.update((key, pos) for key, pos in positions.items() if key not in failed)

    def _on_commit(self, err: Any, partitions: list[TopicPartition] | None) -> None:
        """The client's commit callback: remember failed auto-commits, then the application's."""
        failed = [(tp.topic, tp.partition) for tp in partitions or () if err is not None or tp.error is not None]
        self._failed.extend(failed)  # the committer thread resends them at its next tick
        if self._user_on_commit is not None:
            self._user_on_commit(err, partitions)
