"""``IngestionConsumer``: raw Parquet segments from Kafka into a Delta table, exactly once.

Each segment is checked when it arrives (headers, CRC, footer schema against the table) and kept
until the next commit; then a Kafka partition's segments that share a schema and a table
partition are stitched into data files of up to ``--target-file-size`` (row groups copied byte
for byte under one new footer: no decode, no re-encode); statistics come from the Parquet
footers. Many segments go into one Delta commit, made by
the one committer ``parka ingest`` and Spark raw mode share (:class:`~._committer.Committer`,
whose ``commit`` is the protocol). This module keeps the Kafka side: it seeks every assigned
partition from the Delta log (the source of truth: its ``txn`` version + 1), decides when to
commit (:class:`~._plan.CommitPolicy`), commits Kafka offsets afterwards for lag tools only, and
moves a partition forward when another worker got further in the table. A commit's files are
written and committed on a thread of its own while the loop fetches the next batch
(:mod:`._pipeline`: one commit in flight, memory bounded by ``max_buffered_bytes``). What one
:meth:`~IngestionConsumer.run` builds (the client, the landing session, the commit thread, the
batch being filled) is one :class:`._run.IngestRun`, handed to each step of the loop.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaException,
    TopicPartition,
)
from parka.lake import (
    DLQ_SCHEMA,
    CommitPolicy,
    CommitStats,
    LogEngine,
    Refused,
    SegmentRead,
    Tombstone,
    check_keyed,
    check_segment,
    is_tombstone,
    read_segment,
    table_identity,
    tombstone_refusal,
    unwrap_segment,
)
from parka.ops.health import HealthLog
from parka.ops.preflight import BrokerWatch, wait_until_ready
from parka.ops.row_values import ROW_RECORD_OVERHEAD, RowFormat, RowValues
from parka.ops.stopping import StopGuard

from parka.crash import crash_point
from parka.errors import BlockedError, Blocker, ConfigError, KafkaClientError, SchemaMismatchError, SegmentError
from parka.partitioning import PartitionSpec
from parka.segment import is_segment

from ._compactor import Maintenance
from ._fetch import raw_of
from ._ingest_client import KafkaSide, table_metadata
from ._pipeline import Batch
from ._run import IngestRun, client_conf, landing_session, table_engine
from ._settings import IngestSettings
from ._shim import ParquetConsumer, RawSegment

if TYPE_CHECKING:
    from parka.metrics import IngestMetrics

__all__ = ["DLQ_SCHEMA", "IngestSettings", "IngestStats", "IngestionConsumer"]

log = logging.getLogger("parka.ingest")


class _Covered:
    """What :meth:`IngestionConsumer._take` answers for a segment the table holds already."""


COVERED = _Covered()


@dataclass
class IngestStats(CommitStats):
    """The committer's counters (committed segments, records, bytes, files, ...), the
    ``--optimize-every`` runs, the background compactions that committed and those that failed,
    and the files both compacted, and the VACUUM runs, the files they deleted and the runs that
    failed; printed by the progress line, served as metrics and returned by
    :meth:`IngestionConsumer.run`."""

    optimizations: int = 0
    compactions: int = 0
    compaction_failures: int = 0
    files_compacted: int = 0
    vacuums: int = 0
    files_vacuumed: int = 0
    vacuum_failures: int = 0


class IngestionConsumer(KafkaSide):
    """Consume one topic's segments into one Delta table; :meth:`run` until stopped.

    ``progress`` is called on every turn of the loop and once each commit ended; ``metrics``
    (:class:`parka.metrics.IngestMetrics`) reads :attr:`stats` and the causes the daemon waits
    on, is told each commit's latency, the partitions each commit advanced, every turn of the
    loop and, at most once a second, the lag and the partitions held."""

    def __init__(
        self,
        settings: IngestSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        progress: Callable[[IngestionConsumer], None] | None = None,
        metrics: IngestMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.stats = IngestStats()
        self._clock = clock
        self._progress = progress
        self._metrics = metrics
        self._lag_at = float("-inf")
        if metrics is not None:
            metrics.watch(lambda: vars(self.stats))
        self._policy = CommitPolicy(
            settings.allowed_latency_s, settings.bytes_per_commit, settings.max_segments_per_commit
        )
        self._stop = threading.Event()
        self._health = HealthLog(remind_s=settings.retry_log_interval_s, clock=clock)
        super().__init__(settings, BrokerWatch(self._health, log, clock=clock))
        if metrics is not None:
            metrics.watch_blockers(self._health.active)
        self._maintenance = Maintenance(settings, self.stats)  # compaction, background and --optimize-every
        self._run: IngestRun | None = None  # the run in progress (lag() reads its client)
        row_format = RowFormat.of(settings, settings.schema_registry_options)
        self._row_values = None if row_format is None else RowValues(row_format)  # None: segments only

    # -- lifecycle ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to commit what is buffered and return (signal-handler safe)."""
        self._stop.set()

    def install_signal_handlers(self) -> None:
        """SIGINT and SIGTERM flush, commit and exit instead of killing the process, within
        ``--stop-timeout``; past it, or at a second signal, the process exits at once
        (:class:`parka.ops.stopping.StopGuard`). From the main thread."""
        StopGuard(self.stop, bound_s=self.settings.stop_timeout_s, name="parka ingest").install()

    def run(self) -> IngestStats:
        """Ingest until :meth:`stop` (or, with ``end_at_latest``, until everything present at
        start is in the table).

        Raises:
            SegmentError, SegmentDecodeError, SchemaMismatchError: a message the table cannot
                take and no dead-letter table, after committing all progress before it.
            ConfigError: ``--partition-by`` contradicts the existing table's partitioning, or
                (no table yet) names a column the first segment lacks or cannot be partitioned
                by; then nothing is written;
                or the consumer group lands into another table.
            CommitError: a commit failed (``CommitConflict``: conflicts did not resolve).
            KafkaClientError: a fatal Kafka client error.
            BlockedError: ``end_at_latest`` and the table location or the topic cannot be used
                (:func:`parka.ops.preflight.wait_until_ready`); a daemon waits for them instead.
        """
        conf = client_conf(
            self.settings, self._identity, self._error_callback(self.settings.kafka_conf.get("error_cb"))
        )
        self._group = conf["group.id"]
        consumer = ParquetConsumer(conf)
        run: IngestRun | None = None
        try:
            engine, table_probe = table_engine(self.settings)
            if self._wait_until_ready(consumer, table_probe):  # else stopped while waiting
                run = self._start(consumer, engine)
                self._loop(run)
                self._end(run)
        finally:
            try:
                self._maintenance.close()
                consumer.close()  # its on_revoke commits what is buffered, as a rebalance does
                if self._row_values is not None:
                    self._row_values.close()
            finally:
                self._run = None
                if run is not None:
                    run.pipeline.close()  # when run fails: a commit in flight ends, its error logged
                    run.committer.close()  # a checkpoint being written beside the commits
        return self.stats

    def _start(self, consumer: ParquetConsumer, engine: LogEngine) -> IngestRun:
        """The run's state, once the table and the topic answer: the landing session (the app id
        settled, orphans removed), then background compaction and the subscription."""
        s = self.settings
        partitions = sorted(consumer.list_topics(s.topic, timeout=10).topics[s.topic].partitions)
        self._check_group(consumer, self._identity, partitions)
        metrics = self._metrics
        session = landing_session(
            s,
            engine,
            stats=self.stats,
            clock=self._clock,  # commit and checkpoint times on the daemon's clock, as its health and lag
            on_commit=None if metrics is None else metrics.observe_commit,
            on_checkpoint=None if metrics is None else metrics.observe_checkpoint,
        )
        session.settle_app_id(partitions)
        log.info("app id %s, consumer group %s, table %s", session.app_id, self._group, self._identity)
        session.start()
        run = self._run = IngestRun(s, consumer, session)
        self._maintenance.start(session.committer.commit_turn, session.committer.rows_moved)
        consumer.subscribe(
            [s.topic],
            on_assign=lambda c, tps: self._on_assign(run, c, tps),
            on_revoke=lambda c, tps: self._on_revoke(run, c, tps),
        )
        return run

    def _loop(self, run: IngestRun) -> None:
        """Poll, check and buffer; hand each batch that is due to the commit thread. A poll takes
        the messages the client holds (a topic of row records has a message per row); each is
        handled as if polled alone: the memory bound and the commit's size are judged before
        every one, and whether a commit is due after every segment and whenever the bytes
        buffered reach a commit's (a row record adds no segment, and time is judged after the
        poll's messages)."""
        s = self.settings
        limit, per_commit = s.buffer_limit, s.bytes_per_commit
        holds_rows, upsert, positions = self._row_values is not None, s.upsert, self._positions
        pipeline, overflows = run.pipeline, self._policy.overflows
        while not self._stop.is_set():
            msgs = self._poll(run.consumer)
            at_end = not msgs
            in_flight = pipeline.in_flight_bytes  # changes only in the calls below that commit
            for msg in msgs:
                partition, offset = msg.partition(), msg.offset()
                # fetched before a seek or a rebalance (served inside the poll) moved its partition
                if not positions.wants(partition, offset):
                    continue
                value = msg.value()
                size = len(value) if value else 0
                batch = run.batch
                full = in_flight + batch.bytes >= limit
                if full or overflows(buffered_bytes=batch.bytes, next_bytes=size):
                    if full:
                        self._finish(run)  # memory bound: the commit in flight must end first
                    if overflows(buffered_bytes=run.batch.bytes, next_bytes=size):
                        self._commit_due(run)  # before it: the commit's files stay within the target size
                    in_flight, batch = pipeline.in_flight_bytes, run.batch
                    if not positions.wants(partition, offset):  # the commit found the table further
                        continue
                headers = msg.headers() if holds_rows else None
                if (
                    holds_rows
                    and not (headers and is_segment(headers))
                    and not (upsert and is_tombstone(msg.key(), value, headers))
                ):
                    # a row record, held as the client's message until its run is decoded
                    # (_decode_rows); inline: the loop's one step per row of a row topic
                    held = batch.rows.get(partition)
                    if held is None:
                        held = batch.rows[partition] = []
                    held.append(msg)
                    batch.bytes += size + ROW_RECORD_OVERHEAD
                    positions.consumed[partition] = offset
                    if batch.oldest_at is None:
                        batch.oldest_at = self._clock()
                    if batch.bytes >= per_commit:
                        self._cut_if_due(run)
                        in_flight = pipeline.in_flight_bytes
                    # the client's positions are asked only when they may show the end
                    at_end = at_end or positions.at_end(partition, offset)
                    continue
                self._handle(run, raw_of(msg))
                self._cut_if_due(run)
                in_flight = pipeline.in_flight_bytes
                at_end = at_end or positions.at_end(partition, offset)
            if msgs:
                self._watch.recovered()
            if run.pipeline.done() or run.pipeline.in_flight_bytes + run.batch.bytes >= limit:
                self._finish(run)
            self._cut_if_due(run)
            self._watch.tick(run.consumer, s.topic)
            if self._progress is not None:
                self._progress(self)
            self._report_lag()
            if self._metrics is not None:
                self._metrics.beat()
            if s.end_at_latest and at_end and self._caught_up(run):
                break

    def _cut_if_due(self, run: IngestRun) -> None:
        batch = run.batch
        if self._policy.due(
            segments=len(batch), buffered_bytes=batch.bytes, oldest_at=batch.oldest_at, now=self._clock()
        ):
            self._commit_due(run)

    def _commit_due(self, run: IngestRun) -> None:
        """A commit is due (:class:`parka.lake.CommitPolicy`): cut the batch, then run
        ``--optimize-every``'s compaction when it is due too."""
        self._cut(run)
        if self._maintenance.optimize_due():
            self._finish(run)  # the commit in flight ends first
            self._maintenance.optimize()

    def _end(self, run: IngestRun) -> None:
        """A run that ended without an error: everything buffered committed, compaction stopped,
        the last orphan cleanup."""
        self._commit(run)
        # Before the last orphan cleanup (a compaction deletes the files it did not commit). A
        # run-once that caught up compacts what is due first: its short runs compact too.
        self._maintenance.close(drain=self.settings.end_at_latest and not self._stop.is_set())
        run.session.remove_orphans()
        self._report_lag(force=True)

    @property
    def _identity(self) -> str:
        """The table's identity: what its default app id and the Kafka commits' metadata name."""
        return table_identity(self.settings.table_uri, self.settings.catalog)

    # -- causes the daemon waits on ------------------------------------------------------------

    def _wait_until_ready(self, consumer: ParquetConsumer, table_probe: Callable[[], Any] | None) -> bool:
        """The table location (or ``table_probe``: a catalog) and the topic answer
        (:func:`parka.ops.preflight.wait_until_ready`)."""
        s = self.settings

        def client_error() -> Any:
            with contextlib.suppress(KafkaClientError):
                consumer.poll_buffer(timeout=0)  # serves error_cb; nothing is subscribed yet
            return self._credential_error or self._client_error

        ready = wait_until_ready(
            consumer,
            topic=s.topic,
            bootstrap=self._bootstrap,
            table_uri=s.table_uri,
            storage_options=s.storage_options,
            run_once=s.end_at_latest,
            timeout_s=s.broker_timeout_s,
            health=self._health,
            stop=self._stop,
            client_error=client_error,
            log=log,
            clock=self._clock,
            table_probe=table_probe,
        )
        self._credential_error = None  # cleared, or the daemon waited until it was
        return ready

    # -- rebalance -----------------------------------------------------------------------------

    def _on_assign(self, run: IngestRun, consumer: ParquetConsumer, partitions: list[TopicPartition]) -> None:
        """Seek every assigned partition from the Delta log (the source of truth), and remove
        the orphans a crashed worker may have left for them."""
        s = self.settings
        self._finish(run)  # the table is read here: not while the commit thread has it
        versions = run.session.resume(tp.partition for tp in partitions)
        for tp in partitions:
            version = versions[tp.partition]
            if version is not None:
                tp.offset = version + 1
            elif tp.partition in s.seek_offsets:
                tp.offset = s.seek_offsets[tp.partition]
            else:
                tp.offset = OFFSET_BEGINNING if s.auto_offset_reset == "earliest" else OFFSET_END
            marks = self._watermarks(consumer, tp.partition)
            if marks is None:  # asked to stop while no broker answered: nothing will be consumed
                marks = (max(tp.offset, 0),) * 2
            low, high = marks
            start = low if tp.offset == OFFSET_BEGINNING else high if tp.offset == OFFSET_END else tp.offset
            self._positions.assign(tp.partition, start=start, high=high, in_table=version)
            log.info("partition %d assigned; starting at offset %s (txn version %s)", tp.partition, tp.offset, version)
        consumer.assign(partitions)
        run.session.remove_orphans()
        run.view_table()  # read again from the table with the txn versions
        self._maintenance.assign(self._positions.assigned, table_exists=run.table_view is not None)

    def _watermarks(self, consumer: ParquetConsumer, partition: int) -> tuple[int, int] | None:
        """``partition``'s low and high watermarks, asked again while no broker answers (the
        brokers lost during a rebalance): a daemon waits as long as it takes, as its polls do,
        and logs it as a lost broker; with ``--end-at-latest`` it gives up after
        ``--broker-timeout``. ``None``: the daemon was asked to stop meanwhile.

        Raises:
            BlockedError: ``--end-at-latest``, and no answer within ``--broker-timeout`` (exit 3).
        """
        s = self.settings
        deadline = self._clock() + s.broker_timeout_s
        delay = 0.5
        while True:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(s.topic, partition), timeout=10)
                if delay > 0.5:
                    self._watch.recovered()
                return int(low), int(high)
            except KafkaException as exc:
                blocker = Blocker(
                    "broker",
                    f"lost the Kafka brokers at {self._bootstrap}: partition {partition} assigned, but its "
                    f"offsets cannot be read ({exc.args[0].str() if exc.args else exc})",
                    False,
                )
            if self._stop.is_set():
                return None
            if s.end_at_latest and self._clock() >= deadline:
                raise BlockedError(blocker)
            self._watch.trouble(blocker)
            self._stop.wait(delay)
            delay = min(delay * 2, 5.0)

    def _on_revoke(self, run: IngestRun, consumer: ParquetConsumer, partitions: list[TopicPartition]) -> None:
        """Commit what is buffered (the commit in flight and the batch after it) before another
        worker takes the partitions."""
        crash_point("on-revoke")
        self._commit(run)
        for tp in partitions:
            self._positions.revoke(tp.partition)
            log.info("partition %d revoked", tp.partition)
        self._maintenance.assign(self._positions.assigned, table_exists=False)
        consumer.unassign()

    def _caught_up(self, run: IngestRun) -> bool:
        consumer, topic = run.consumer, self.settings.topic
        return self._positions.caught_up(lambda p: int(consumer.position([TopicPartition(topic, p)])[0].offset))

    # -- one message ---------------------------------------------------------------------------

    def _handle(self, run: IngestRun, raw: RawSegment) -> None:
        """A message that is not a row record held (by the loop): a segment, a tombstone,
        or a message to refuse. The row records before it on its partition are decoded first."""
        self._decode_rows(run, raw.partition)  # the records before it first, in offset order
        if self.settings.upsert and is_tombstone(raw.key, raw.value, raw.headers):
            self._tombstone(run, raw)
            return
        try:
            seg = read_segment(
                topic=raw.topic,
                partition=raw.partition,
                offset=raw.offset,
                value=raw.value,
                headers=raw.headers,
                info=raw.info,  # poll_buffer read the headers and checked the CRC: once per segment
            )
        except SegmentError as exc:  # bad input, not a failure of ours
            self._refuse(run, raw, exc)
            return
        refusal = self._take(run, seg)
        if isinstance(refusal, _Covered):  # in the table already
            return
        if refusal is not None:
            self._refuse(run, raw, _for_message(refusal, raw))
        else:
            run.batch.bytes += len(seg.value)
            self._positions.consumed[raw.partition] = raw.offset
            if run.batch.oldest_at is None:
                run.batch.oldest_at = self._clock()

    def _take(self, run: IngestRun, seg: SegmentRead) -> SegmentError | SchemaMismatchError | _Covered | None:
        """Check ``seg`` (a segment, or a run of row records made one) against the table and add
        it to the batch; the error when the table cannot take it, for the caller to refuse each
        of its messages with; :data:`COVERED` when the table holds it already."""
        try:
            cdc = self.settings.change_events
            if cdc is not None:
                seg = unwrap_segment(seg, cdc)
            view = run.table_view
            if view is None:  # no table yet: made from this segment's schema
                view = self._make_table(run, seg.schema)
                if self._positions.committed.get(seg.partition, -1) >= seg.offset:
                    return COVERED  # the commit it waited for found another worker's commits further
            table_schema, partitioning = view
            if self.settings.upsert:
                check_keyed(seg, self.settings.key_columns)
            checked = check_segment(
                seg,
                table_schema=table_schema,
                partition_by=partitioning,
                merge=self.settings.schema_evolution == "merge",
                check_columns=run.session.committer.engine.check_columns,
            )
        except (SegmentError, SchemaMismatchError) as exc:  # bad input, not a failure of ours
            return exc
        run.batch.checked.append(checked)
        return None

    def _decode_rows(self, run: IngestRun, partition: int | None = None) -> None:
        """Decode the row records buffered of ``partition`` (``None``: of every partition), in
        bulk: each run of good records of one schema becomes one segment
        (:meth:`parka.ops.row_values.RowValues.segments`), taken as a segment is (:meth:`_take`), and each
        bad record is refused, in offset order, so no run spans a refused record.

        Raises:
            RegistryError: the schema registry could not be reached (nothing refused for it).
        """
        rows = run.batch.rows
        for p in sorted(rows) if partition is None else [partition]:
            msgs = rows.pop(p, None)
            if not msgs:
                continue
            assert self._row_values is not None
            consumed = self._positions.consumed.get(p)
            view = run.table_view
            got = self._row_values.segments(
                topic=self.settings.topic,
                partition=p,
                table_schema=None if view is None else view[0],
                values=[m.value() for m in msgs],
                offsets=[m.offset() for m in msgs],
                keys=[m.key() for m in msgs],
                timestamps=[t[1] if t[0] else None for t in [m.timestamp() for m in msgs]],  # (type, ms)
                headers=[m.headers() for m in msgs],
            )
            for indexes, seg in got:
                refusal = seg if isinstance(seg, SegmentError) else self._take(run, seg)
                if refusal is not None and not isinstance(refusal, _Covered):
                    for raw in (raw_of(msgs[i]) for i in indexes):  # the dead letter is each message as it came
                        self._refuse(run, raw, _for_message(refusal, raw))
            if consumed is not None:  # refusals above set it to their own offsets
                self._positions.consumed[p] = consumed

    def _tombstone(self, run: IngestRun, raw: RawSegment) -> None:
        """``--upsert``: a message with a key and no value deletes its key (in the next commit);
        with ``--key-columns`` it cannot name a row, and is refused (dead-lettered, or the run
        stops at it), except in a change stream (``--cdc``), where the delete event before it
        deleted the row and the commit only moves past it."""
        assert raw.key is not None
        refusal = tombstone_refusal(self.settings.key_columns, self.settings.change_events)
        if refusal is not None:
            error = SegmentError(
                refusal, value=raw.value, headers=raw.headers, topic=raw.topic, partition=raw.partition,
                offset=raw.offset,
            )  # fmt: skip
            self._refuse(run, raw, error)
            return
        run.batch.tombstones.append(Tombstone(raw.partition, raw.offset, raw.key))
        self._positions.consumed[raw.partition] = raw.offset
        if run.batch.oldest_at is None:
            run.batch.oldest_at = self._clock()

    def _make_table(self, run: IngestRun, schema: pa.Schema) -> tuple[pa.Schema, tuple[PartitionSpec, ...]]:
        """No table yet: make it from the first segment's ``schema`` (the commit in flight ends
        first) and return its view."""
        self._finish(run)
        try:
            run.committer.ensure_table(schema)
        except ConfigError:
            # --partition-by the first segment cannot satisfy: nothing is written, not even the
            # dead letters read before it (a close would commit them); the next run reads them again.
            run.batch = Batch()
            raise
        run.view_table()
        return run.committer.table_schema(), run.committer.partitioning

    def _refuse(self, run: IngestRun, raw: RawSegment, exc: SegmentError | SchemaMismatchError) -> None:
        if self.settings.dlq_table_uri is None:
            self._decode_rows(run)  # the run stops at it: what came before is committed first
        log.error("%s: %s", type(exc).__name__, exc)
        stamp = raw.timestamp[1] if raw.timestamp and raw.timestamp[0] else None
        run.batch.refused.append(Refused(raw.partition, raw.offset, exc, stamp))
        self._positions.consumed[raw.partition] = raw.offset
        if run.batch.oldest_at is None:
            run.batch.oldest_at = self._clock()
        if self.settings.dlq_table_uri is None:
            self._commit(run)  # commits what came before, then raises the error (the protocol's step 2)

    # -- commits -------------------------------------------------------------------------------

    def _commit(self, run: IngestRun) -> None:
        """Commit everything buffered and wait until it is in: the commit in flight, then the
        batch after it (see :meth:`_cut`)."""
        self._cut(run)
        self._finish(run)

    def _cut(self, run: IngestRun) -> None:
        """Hand the buffered batch to the commit thread (after the commit in flight, if any,
        ended: one at a time, in order) and start the next one."""
        self._decode_rows(run)
        if not len(run.batch):
            return
        self._finish(run)
        batch, run.batch = run.batch, Batch()
        run.pipeline.submit(batch)

    def _finish(self, run: IngestRun) -> None:
        """Wait for the commit in flight, then the Kafka side on this thread: offsets for lag
        tools, and a seek for partitions another worker took further in the table.

        Raises:
            What the commit raised (see :meth:`run`).
        """
        try:
            result = run.pipeline.wait()
        except BaseException:
            # A failed commit stops the daemon. What the loop buffered since must not be
            # committed without it (a rebalance's revoke while closing would): its txn would jump
            # over the failed batch's offsets. The next run reads both again from the txn.
            run.batch = Batch()
            raise
        if result is None:  # none in flight
            return
        run.view_table()  # the commit may have evolved the schema
        self._positions.in_table(result.last)
        self._commit_kafka(run, result.last)
        skipped = {
            p: version + 1
            for p, version in result.table_txn.items()
            if version is not None and version >= self._positions.consumed.get(p, -1) and p not in result.last
        }
        for p, offset in skipped.items():
            self._skip_to(run, p, offset)
        if self._metrics is not None:  # the table moved: by this commit, or by another worker's
            self._metrics.advanced([*result.last, *skipped])
        if self._progress is not None:
            self._progress(self)
        self._maintenance.committed()

    def _skip_to(self, run: IngestRun, partition: int, offset: int) -> None:
        """Another worker with this app id committed this partition up to ``offset - 1``: all
        this worker had of it was dropped as covered; continue after it."""
        log.warning("partition %d: the table already holds it up to offset %d; continuing there", partition, offset - 1)
        self._positions.skip_to(partition, offset)
        if partition in self._positions.assigned:
            try:
                run.consumer.seek(TopicPartition(self.settings.topic, partition, offset))
            except KafkaException as exc:  # being revoked: the next owner seeks from the log
                log.info("could not seek partition %d: %s", partition, exc)

    def _commit_kafka(self, run: IngestRun, last: dict[int, int] | Any) -> None:
        meta = table_metadata(self._identity)  # which table this group lands into (_check_group)
        offsets = [
            TopicPartition(self.settings.topic, p, off + 1, meta)
            for p, off in last.items()
            if p in self._positions.assigned
        ]
        if not offsets:
            return
        try:
            run.consumer.commit(offsets=offsets, asynchronous=True)
        except Exception as exc:  # advisory only: the Delta log already holds the truth
            log.warning("Kafka offset commit failed (progress is safe in the Delta log): %s", exc)

    # -- introspection for the progress line and the metrics --------------------------------------

    def lag(self, *, committed: bool = False) -> dict[int, int]:
        """Messages behind the high watermark (from the client's cache, refreshed by every
        fetch), per assigned partition: not yet consumed (the progress line), or with
        ``committed`` not yet in the table (the metric; what Kafka's lag tools see, as the
        Kafka offsets follow the table's); none outside :meth:`run`. Call it on the loop's
        thread (it asks the client)."""
        if self._run is None:
            return {}
        consumer, topic = self._run.consumer, self.settings.topic

        def high_watermark(p: int) -> int | None:
            try:
                return int(consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1])
            except Exception as exc:  # the progress line and the metrics must never stop ingestion
                log.debug("no watermark for partition %d: %s", p, exc)
                return None

        return self._positions.lag(high_watermark, committed=committed)

    def progress(self) -> tuple[int, int]:
        """Messages consumed since start and the messages there were at start (their high
        watermarks then), over the assigned partitions: the ``--end-at-latest`` progress bar."""
        return self._positions.progress()

    def _report_lag(self, *, force: bool = False) -> None:
        """Hand the lag to the metrics, at most once a second (a scrape reads the last one)."""
        if self._metrics is None:
            return
        now = self._clock()
        if force or now - self._lag_at >= 1.0:
            self._lag_at = now
            self._metrics.set_lag(self.lag(committed=True))
            self._metrics.hold(self._positions.assigned)


def _for_message(exc: SegmentError | SchemaMismatchError, raw: RawSegment) -> SegmentError | SchemaMismatchError:
    """``exc`` told of the one message ``raw`` as it came, its value, headers and coordinates: the
    error of a run of row records (one per record), or of a segment ``--cdc`` unwrapped."""
    if exc.value is raw.value and exc.offset == raw.offset:
        return exc
    text = str(exc).removesuffix(f" at {exc.topic}[{exc.partition}]@{exc.offset}" if exc.topic is not None else "")
    where: dict[str, Any] = {"topic": raw.topic, "partition": raw.partition, "offset": raw.offset}
    if isinstance(exc, SchemaMismatchError):
        text = text.removeprefix(f"field '{exc.field}': ") if exc.field else text
        return SchemaMismatchError(text, field=exc.field, value=raw.value, headers=raw.headers, **where)
    return type(exc)(text, value=raw.value, headers=raw.headers, **where)
