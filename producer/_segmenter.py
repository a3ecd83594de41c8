"""Segmenting: placed rows wait in per-partition buffers until a cut encodes them as segments.

:class:`Segmenter` keeps one :class:`~._buffer.PartitionBuffer` per (topic, Kafka partition,
table partition values) and cuts it by the :class:`~._buffer.CutPolicy` (records, predicted
bytes, linger). A cut encodes the rows (sorted by ``columnar.sort.by``, laid out by
``columnar.encoding.tuning``) as segments of at most ``columnar.batch.records`` rows and
``columnar.batch.bytes`` bytes, halving a segment that encodes too large, and hands each one to
the :class:`~._outbox.Outbox`. A Kafka partition has one buffer at a time, so its segments keep
the records' order. Everything here runs with the producer's lock held.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from parka.config import ProducerSettings
from parka.encoding import sort_order
from parka.errors import RecordTooLargeError
from parka.segment import Segment, build_segment_table, encode_segment

from ._buffer import CutPolicy, PartitionBuffer, RowBatch
from ._inputs import split_by_values
from ._outbox import BatchCallback, Outbox
from ._topics import TopicState

if TYPE_CHECKING:
    from parka.metrics import ProducerMetrics

__all__ = ["BufferKey", "Segmenter"]

BufferKey = tuple[str, int, tuple[Any, ...]]


class Segmenter:
    """Per-partition buffers, the cut rules, and the encoding of rows into segments.

    ``topics`` is the producer's topic states (read for each cut); ``on_cut(topic, partition)``
    hears of every segment cut from a buffer (the sticky partition moves on); ``counters`` gets
    ``splits`` and ``bad_records`` (records too large for any segment).
    """

    def __init__(
        self,
        settings: ProducerSettings,
        policy: CutPolicy,
        topics: Mapping[str, TopicState],
        outbox: Outbox,
        clock: Callable[[], float],
        on_cut: Callable[[str, int], None],
        counters: dict[str, int],
    ) -> None:
        self._settings = settings
        self._policy = policy
        self._topics = topics
        self._out = outbox
        self._clock = clock
        self._on_cut = on_cut
        self._counters = counters
        self._buffers: dict[BufferKey, PartitionBuffer] = {}
        self.metrics: ProducerMetrics | None = None

    def buffered(self) -> int:
        """Rows waiting in buffers."""
        return sum(len(b) for b in self._buffers.values())

    # -- rows in ------------------------------------------------------------------------------

    def add(self, topic: str, partition: int, state: TopicState, batch: RowBatch, staged_at: float) -> None:
        """Buffer rows of one Kafka partition (staged at ``staged_at``), cut by table partition
        values; a buffer the rows fill is cut at once, keeping a short tail buffered."""
        for group in split_by_values(state.partition_by, batch):
            bkey: BufferKey = (topic, partition, group.pvals)
            buf = self._buffers.get(bkey)
            if buf is None:
                # One buffer per Kafka partition at a time: the partition's records buffered
                # under other values go out first, so segments keep the records' order.
                self.cut_partition(topic, partition)
                buf = self._buffers[bkey] = PartitionBuffer(topic, partition, staged_at)
            buf.append(group.batch, staged_at)
            if self._policy.full(buf.rows, state.arrow_size.predict(buf.arrow_bytes)):
                self._cut(bkey, keep_tail=True)

    def send_now(
        self, topic: str, partition: int, state: TopicState, batch: RowBatch, on_batch: BatchCallback | None
    ) -> int:
        """``produce_batch``'s table rows of one partition: the partition's buffered rows are
        cut first, then ``batch`` is sent as segments (one ``on_batch`` call each). Returns the
        number of segments queued. Raises :class:`~parka.errors.RecordTooLargeError` for a row
        larger than ``columnar.batch.bytes``."""
        self.cut_partition(topic, partition)  # keep per-partition order: buffered records go first
        queued = 0
        for group in split_by_values(state.partition_by, batch):
            queued += self._emit(topic, partition, state, group.batch, on_batch)[0]
        self._on_cut(topic, partition)
        return queued

    # -- cuts ---------------------------------------------------------------------------------

    def cut_partition(self, topic: str, partition: int) -> None:
        """Cut every buffer of one Kafka partition (before a tombstone or table rows of it)."""
        for bkey in [k for k in self._buffers if k[0] == topic and k[1] == partition]:
            self._cut(bkey)

    def holds_key(self, topic: str, partition: int, key: bytes) -> bool:
        """Whether a buffer of the Kafka partition holds a record with Kafka key ``key``."""
        wanted = pa.scalar(key, pa.binary())
        for (t, p, *_), buf in self._buffers.items():
            if t == topic and p == partition:
                for piece in buf.pieces:
                    if piece.keys is not None and pc.any(pc.equal(piece.keys, wanted)).as_py():
                        return True
        return False

    def cut_topic(self, topic: str) -> None:
        for bkey in [k for k in self._buffers if k[0] == topic]:
            self._cut(bkey)

    def cut_due(self, now: float) -> None:
        """Cut the buffers whose ``linger.ms`` expired."""
        for bkey, buf in list(self._buffers.items()):
            if self._policy.due(buf.created_at, now):
                self._cut(bkey)

    def cut_all(self) -> None:
        for bkey in list(self._buffers):
            self._cut(bkey)

    def drop(self) -> list[PartitionBuffer]:
        """Empty every buffer unsent; returns them (their records are to be reported)."""
        dropped = list(self._buffers.values())
        self._buffers.clear()
        return dropped

    def _cut(self, bkey: BufferKey, *, keep_tail: bool = False) -> None:
        """Encode one buffer into segment(s) and hand them to the outbox.

        ``keep_tail``: the buffer filled up during a drain. A drain adds records in steps, so
        the buffer may hold a full segment and some; the rest, short of a full segment, stays
        buffered (else a segment of a few leftover records would follow every full one).
        """
        buf = self._buffers.pop(bkey, None)
        if buf is None or not buf.rows:
            return
        state = self._topics[buf.topic]
        self._on_cut(buf.topic, buf.partition)
        _, tail = self._emit(buf.topic, buf.partition, state, RowBatch.concat(buf.pieces), None, keep_tail=keep_tail)
        if tail is not None:
            # The tail's linger runs from when its own rows were staged, not from the cut
            # buffer's first row: that one's had run out, and the tail went out at the next
            # tick as a segment of a few rows.
            rest = PartitionBuffer(buf.topic, buf.partition, self._clock())
            rest.append(tail, buf.staged_at_of_last(len(tail)))
            self._buffers[bkey] = rest

    # -- rows out, as segments ----------------------------------------------------------------

    def _emit(
        self,
        topic: str,
        partition: int,
        state: TopicState,
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
        that tail."""
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
                part, seg = self._encode(topic, state, part)
                if len(seg.value) <= limit or size == 1:
                    break
                self._counters["splits"] += 1
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
                self._counters["bad_records"] += 1
                self._out.fail_rows(topic, partition, part, err)
                continue
            if on_batch is not None:
                self._out.send(topic, partition, seg, self._out.batch_report(topic, size, on_batch))
            else:
                self._out.send(topic, partition, seg, self._out.record_report(topic, partition, part))
            if self.metrics is not None:
                self.metrics.segment(topic, rows=size, nbytes=len(seg.value))
            queued += 1
        return queued, None

    def _encode(self, topic: str, state: TopicState, part: RowBatch) -> tuple[RowBatch, Segment]:
        """One segment of ``part``'s rows; returns the rows in the segment's order with it."""
        settings = self._settings
        if settings.sort_by:
            # the rows, keys, callbacks and values move together: a record's delivery report
            # gives its index in the sorted segment
            order = sort_order(part.table, settings.sort_by, part.keys)
            if order is not None:
                part = part.take(order.to_numpy())
        table = build_segment_table(part.table, part.keys, part.timestamps, part.headers)
        encode_started = time.perf_counter()
        seg = encode_segment(
            table,
            codec=settings.compression,
            fingerprint=state.fingerprint,
            compression_level=settings.compression_level,
            tuning=settings.tuning,
            layout=state.layouts.layout(table) if settings.tuning == "auto" else None,
            encryption=settings.encryption,
            schema_id=state.schema_id,
        )
        if self.metrics is not None:
            self.metrics.encoded(topic, time.perf_counter() - encode_started)
        return part, seg
