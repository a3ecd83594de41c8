"""The shim's fetch path: one Kafka message in, a decoded segment's cursor (or the message) out.

:class:`Fetcher` hands out one message per call (from the wrapped client, or held from a batch
it returned), decodes a segment (decrypting with the ``columnar.encryption.kms.*`` settings,
checking its ``parka.schema.id`` against the registry, resolving it to the topic's reader
schema), finds where a segment resumes after a restart (the committed
``parka:1:<offset>:<index>`` metadata) and builds a segment's Python records once.
Whatever happens to a message, its partition's cursor moves past it, so that positions and
commits never fall behind what was fetched. The cursors and the set of partitions whose
committed position was consulted are the shim's, shared with it; the decision which cursor
hands out records stays in ``_shim.py``.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Collection
from typing import Any

import confluent_kafka
import pyarrow as pa
from confluent_kafka import TopicPartition

from parka.errors import SegmentDecodeError, SegmentError
from parka.message import SegmentRecords
from parka.registry import Registry, parse_schema_id
from parka.schema import RESERVED_PREFIX, schema_fingerprint
from parka.segment import SCHEMA_ID_HEADER, decode_segment, is_segment, read_segment_info

from ._compat import KafkaClientException
from ._resolve import resolve_table
from ._rows import segment_records
from ._segments import Cursor, Key, RawSegment, decode_position

__all__ = ["NOTHING", "Fetcher"]

log = logging.getLogger("parka.consumer")

NOTHING = object()  # fetch(): a segment with no records left (all skipped on resume, or empty)
# consume() on plain messages takes up to this many of those the client has fetched in one call
# (confluent's consume is one call for a whole batch; one call per message cost some 4x its CPU
# per message). After a segment it asks for one: a segment holds thousands of records, and each
# message held unprocessed keeps its bytes.
_BATCH_LIMIT = 64


class Fetcher:
    """Fetches and decodes for one shim. ``cursors``, ``resume_checked``, ``readers`` (the
    reader schemas of ``set_reader_schema``) and ``messages`` (its message classes' way from a
    table to messages) are the shim's own, updated in place."""

    def __init__(
        self,
        client: Any,
        *,
        kms: Any,
        registry: Registry | None,
        cursors: dict[Key, Cursor],
        resume_checked: set[Key],
        readers: dict[str, pa.Schema],
        messages: dict[str, Callable[[pa.Table], list[Any]]] | None = None,
    ) -> None:
        self._client = client
        self._kms = kms
        self._registry = registry
        self._cursors = cursors
        self._resume_checked = resume_checked
        self._readers = readers
        self._messages = {} if messages is None else messages  # set_reader_schema's message classes
        # messages the client returned that were not handed out yet (consume's batches, fetch_raw_many)
        self._held: deque[Any] = deque()
        self._after_segment = True  # the last message taken was a segment (or none was taken yet)
        self._forgotten: set[Key] = set()  # partitions forget() named during the client's call

    def fetch(self, timeout: float, *, batch: bool, want: int = 1) -> Any:
        """The next message (one held from an earlier batch first, else the client's: ``poll``,
        or ``consume`` when ``batch``: after a plain message up to ``want`` of those it has
        fetched already, the rest held, else the first to arrive): a plain or error message,
        ``None``, the cursor of a segment with records to hand out, or :data:`NOTHING`.

        Raises :class:`~parka.errors.SegmentDecodeError` (raw bytes kept) for a segment that
        cannot be decoded or does not match its writer or reader schema, and
        :class:`KafkaClientException` when the committed position cannot be read."""
        msg: Any
        if self._held:
            msg = self._held.popleft()
        elif batch:
            # After a plain message: those the client has fetched already, without waiting
            # (its consume(n) waits for n or the timeout), else the first to arrive
            self._forgotten.clear()
            got = [] if self._after_segment else self._client.consume(max(1, min(want, _BATCH_LIMIT)), 0)
            if not got:
                got = self._client.consume(1, timeout)
            msg = got[0] if got else None
            # a revocation the client served inside the call: the rest of its partitions' messages
            # are not held (the first is handed out, as the client gave it)
            self._held.extend(m for m in got[1:] if not self._forgotten or _key(m) not in self._forgotten)
        else:
            msg = self._client.poll(timeout)
        if msg is None or msg.error() is not None:
            return msg
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        key = (topic, partition)
        epoch = msg.leader_epoch()
        headers = msg.headers()
        self._after_segment = is_segment(headers)
        if not self._after_segment:
            self._cursors[key] = Cursor(topic, partition, offset, epoch=epoch)
            return msg
        start = self._resume_index(msg)
        try:
            table = self._decode(msg, headers, topic, partition, offset)
        except Exception:
            self._cursors[key] = Cursor(topic, partition, offset, epoch=epoch)  # consuming goes on after it
            raise
        cursor = Cursor(
            topic, partition, offset, message=msg, table=table, start=start, epoch=epoch,
            values_of=self._messages.get(topic),
        )  # fmt: skip
        self._cursors[key] = cursor
        return NOTHING if cursor.next >= cursor.stop else cursor

    def fetch_raw_many(self, timeout: float | None, max_messages: int) -> list[RawSegment]:
        """Up to ``max_messages`` messages undecoded (``poll_buffers``; :meth:`fetch_messages`
        says which), each a :class:`RawSegment` (:func:`raw_of`)."""
        return [raw_of(msg) for msg in self.fetch_messages(timeout, max_messages)]

    def fetch_messages(self, timeout: float | None, max_messages: int) -> list[Any]:
        """Up to ``max_messages`` of the client's messages, as it gives them: those it has
        fetched already, or when it has none, the first to arrive within ``timeout``. A rebalance
        the client serves inside these calls (a seek to the table's offsets) may leave messages
        fetched before it among those returned: the daemon drops them by their offsets
        (:meth:`parka.consumer._positions.Positions.wants`). A client error after some messages is
        raised at the next call, and the messages after it come back then: none is dropped.
        Empty on timeout or partition ends only. ``parka ingest`` takes these as they are (a
        topic of row records has a message per row; a :class:`RawSegment` each cost more than
        decoding them), the others through :meth:`fetch_raw_many`."""
        if not self._held:
            self._held.extend(self._client.consume(max_messages, 0))
            if not self._held:
                first = self._client.poll(-1 if timeout is None else timeout)
                if first is None:
                    return []
                self._held.append(first)
        msgs = [self._held.popleft() for _ in range(min(max(max_messages, 1), len(self._held)))]
        out: list[Any] = msgs
        failed = [i for i, msg in enumerate(msgs) if msg.error() is not None]  # none, as a rule
        if failed:
            out = []
            for i, msg in enumerate(msgs):
                err = msg.error()
                if err is not None:
                    if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        continue
                    self._held.extendleft(reversed(msgs[i + 1 :] if not out else msgs[i:]))
                    if not out:
                        raise KafkaClientException(f"consume failed: {err}", kafka_error=err)
                    break
                out.append(msg)
        self._move_past(out)
        return out

    def take_plain(self, limit: int) -> list[Any]:
        """Up to ``limit`` held messages that are neither segments nor errors, in order, up to
        the first that is one (left held); each partition's cursor moves past its last."""
        held = self._held
        out: list[Any] = []
        while held and len(out) < limit:
            msg = held[0]
            if msg.error() is not None or is_segment(msg.headers()):
                break
            out.append(held.popleft())
        self._move_past(out)
        return out

    def _move_past(self, msgs: list[Any]) -> None:
        """Each partition's cursor past the last of ``msgs`` (handed out as they are)."""
        last = {(msg.topic(), msg.partition()): msg for msg in msgs}
        for (topic, partition), msg in last.items():
            self._cursors[(topic, partition)] = Cursor(topic, partition, msg.offset(), epoch=msg.leader_epoch())

    def forget(self, keys: Collection[Key]) -> None:
        """Drop the held messages of these partitions (sought, or released: their positions are
        what was handed out, so they are fetched again from there)."""
        self._forgotten.update(keys)
        if self._held:
            self._held = deque(m for m in self._held if _key(m) not in keys)

    def fetch_raw(self, timeout: float | None) -> RawSegment | None:
        """The next message undecoded (``poll_buffer``); ``None`` on timeout or a partition end.
        Raises as ``poll_buffer``."""
        if self._held:  # fetched by fetch_raw_many: handed out first, in order
            held = self.fetch_raw_many(timeout, 1)
            return held[0] if held else None
        msg: Any = self._client.poll(-1 if timeout is None else timeout)
        if msg is None:
            return None
        err = msg.error()
        if err is not None:
            if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                return None
            raise KafkaClientException(f"consume failed: {err}", kafka_error=err)
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        self._cursors[(topic, partition)] = Cursor(topic, partition, offset, epoch=msg.leader_epoch())
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
            key=msg.key(),
        )

    def _decode(self, msg: Any, headers: Any, topic: str, partition: int, offset: int) -> pa.Table:
        value = msg.value()
        try:
            table = decode_segment(value, headers, topic=topic, partition=partition, offset=offset, kms=self._kms)
        except SegmentError:
            raise
        except Exception as exc:  # anything pyarrow raises on odd data: keep the raw bytes
            raise SegmentDecodeError(
                f"cannot decode segment: {exc}",
                value=value,
                headers=headers,
                topic=topic,
                partition=partition,
                offset=offset,
            ) from exc
        if self._registry is not None:
            self._check_writer_schema(headers, table.schema, topic=topic, partition=partition, offset=offset)
        if topic in self._readers:
            try:
                table = resolve_table(table, self._readers[topic])
            except ValueError as exc:
                raise SegmentDecodeError(
                    f"reader schema: {exc}",
                    value=value,
                    headers=headers,
                    topic=topic,
                    partition=partition,
                    offset=offset,
                ) from exc
        return table

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

    def _resume_index(self, msg: Any) -> int:
        """Records of this segment already consumed before a restart, per committed metadata.

        Raises KafkaClientException when the committed position cannot be read; the client is
        sought back to the segment, so the next poll fetches it again.
        """
        key = (msg.topic(), msg.partition())
        if key in self._resume_checked:
            return 0
        try:
            [tp] = self._client.committed([TopicPartition(*key)], timeout=10)
        except confluent_kafka.KafkaException as exc:
            try:
                self._client.seek(TopicPartition(key[0], key[1], msg.offset()))
            except confluent_kafka.KafkaException as seek_exc:
                log.warning("cannot seek %s[%d] back to %d: %s", key[0], key[1], msg.offset(), seek_exc)
            raise KafkaClientException.wrap(exc, f"cannot read committed offset of {key[0]}[{key[1]}]") from exc
        self._resume_checked.add(key)
        pos = decode_position(getattr(tp, "metadata", None))
        if pos is None or tp.offset != msg.offset() or pos[0] != msg.offset():
            return 0
        return pos[1]


def build_records(cursor: Cursor) -> SegmentRecords:
    """The Python records of the cursor's segment, from its next record on (once per segment).

    Raises :class:`SegmentDecodeError` (raw bytes kept; the cursor moved past the segment, so
    consuming goes on after it) for a value Python cannot hold or a malformed reserved column."""
    msg = cursor.message
    try:
        records = segment_records(
            cursor.table,
            cursor.next,
            topic=cursor.topic,
            partition=cursor.partition,
            offset=cursor.offset,
            segment_timestamp=msg.timestamp(),
            leader_epoch=cursor.epoch,
            values_of=cursor.values_of,
        )
    except Exception as exc:
        cursor.next = cursor.stop
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


def raw_of(msg: Any) -> RawSegment:
    """A client's message as a :class:`RawSegment`: a segment's headers read (``info``);
    garbled segment headers do not raise here: ``info`` is ``None``, and reading the message as
    a segment raises the error, with the message."""
    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
    value, headers = msg.value(), msg.headers()
    info = None
    if headers and is_segment(headers):
        with contextlib.suppress(SegmentError):
            info = read_segment_info(headers, value=value, topic=topic, partition=partition, offset=offset)
    return RawSegment(value, headers, topic, partition, offset, msg.timestamp(), info, msg.key())


def _key(msg: Any) -> Key | None:
    """A message's partition; ``None`` for an error message (it stays held)."""
    return None if msg.error() is not None else (msg.topic(), msg.partition())
