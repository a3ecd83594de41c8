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
(:mod:`._pipeline`: one commit in flight, memory bounded by ``max_buffered_bytes``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
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
    DEFAULT_STATS,
    DLQ_SCHEMA,
    BrokerWatch,
    CommitPolicy,
    CommitResult,
    CommitStats,
    Committer,
    LandingSession,
    LogEngine,
    Refused,
    RsEngine,
    check_segment,
    default_app_id,
    read_segment,
    table_identity,
    wait_until_ready,
    write_segments,
)

from parka._crash import crash_point
from parka._health import HealthLog, kafka_logger
from parka.errors import ConfigError, KafkaClientError, SchemaMismatchError, SegmentError
from parka.partitioning import PartitionSpec

from ._compactor import Maintenance
from ._ingest_client import KafkaSide, table_metadata
from ._pipeline import Batch, CommitPipeline
from ._settings import IngestSettings
from ._shim import ParquetConsumer, RawSegment

if TYPE_CHECKING:
    from parka.lake import IcebergEngine

    from parka.metrics import IngestMetrics

__all__ = ["DLQ_SCHEMA", "IngestSettings", "IngestStats", "IngestionConsumer"]

log = logging.getLogger("parka.ingest")


@dataclass
class IngestStats(CommitStats):
    """The committer's counters (committed segments, records, bytes, files, ...), the
    ``--optimize-every`` runs, the background compactions that committed and those that failed,
    and the files both compacted; printed by the progress line, served as metrics and returned
    by :meth:`IngestionConsumer.run`."""

    optimizations: int = 0
    compactions: int = 0
    compaction_failures: int = 0
    files_compacted: int = 0


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
        self._session: LandingSession | None = None
        self._committer: Committer | None = None
        self._batch = Batch()  # checked and refused since the last commit was cut
        self._pipeline: CommitPipeline | None = None  # the commit in flight, if any
        # What segments are checked against: the table's schema and partitioning after the last
        # commit that ended (the commit thread owns the committer while one is in flight).
        self._table_view: tuple[pa.Schema, tuple[PartitionSpec, ...]] | None = None
        self._stop = threading.Event()
        self._health = HealthLog(remind_s=settings.retry_log_interval_s, clock=clock)
        super().__init__(settings, BrokerWatch(self._health, log, clock=clock))
        if metrics is not None:
            metrics.watch_blockers(self._health.active)
        self._maintenance = Maintenance(settings, self.stats)  # compaction, background and --optimize-every
        self._log_engine: LogEngine | None = None
        self._iceberg: IcebergEngine | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to commit what is buffered and return (signal-handler safe)."""
        self._stop.set()

    def install_signal_handlers(self) -> None:
        """SIGINT and SIGTERM flush, commit and exit instead of killing the process."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop())

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
                (:func:`parka.lake.wait_until_ready`); a daemon waits for them instead.
        """
        s = self.settings
        conf = dict(s.kafka_conf)
        # one group per table: the app id given, else the table's default app id
        self._group = conf.setdefault("group.id", s.app_id or default_app_id(s.topic, self._identity))
        conf.update(
            {
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": s.auto_offset_reset,
            }
        )
        conf["error_cb"] = self._error_callback(conf.get("error_cb"))
        conf.setdefault("logger", kafka_logger())  # librdkafka's log through parka's, rate-limited
        self._consumer = ParquetConsumer(conf)
        self._pipeline = CommitPipeline(self._land, write_threads=s.write_threads)
        try:
            if not self._wait_until_ready():
                return self.stats  # stopped while waiting
            partitions = sorted(self._consumer.list_topics(s.topic, timeout=10).topics[s.topic].partitions)
            self._check_group(self._identity, partitions)
            self._session = LandingSession(
                Committer(
                    self._engine(),
                    table_uri=s.table_uri,
                    topic=s.topic,
                    app_id=s.app_id,
                    partition_by=s.partition_by,
                    merge=s.schema_evolution == "merge",
                    dlq_table_uri=s.dlq_table_uri,
                    storage_options=s.storage_options,
                    checkpoint_interval=s.checkpoint_interval,
                    stats=self.stats,
                    on_commit=None if self._metrics is None else self._metrics.observe_commit,
                    on_checkpoint=None if self._metrics is None else self._metrics.observe_checkpoint,
                )
            )
            self._committer = self._session.committer
            self._session.settle_app_id(partitions)
            log.info("app id %s, consumer group %s, table %s", self._committer.app_id, self._group, self._identity)
            self._session.start()
            self._view_table()
            self._maintenance.start()
            self._consumer.subscribe([s.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self._stop.is_set():
                if self._pipeline.done():
                    self._finish()
                if self._pipeline.in_flight_bytes + self._batch.bytes >= s.buffer_limit:
                    self._finish()  # memory bound: the commit in flight must end first
                raw = self._poll()
                if raw is not None:
                    self._handle(raw)
                    self._watch.recovered()
                self._watch.tick(self._consumer, s.topic)
                if self._policy.due(
                    segments=len(self._batch),
                    buffered_bytes=self._batch.bytes,
                    oldest_at=self._batch.oldest_at,
                    now=self._clock(),
                ):
                    self._cut()
                    if self._maintenance.optimize_due():
                        self._finish()  # the commit in flight ends first
                        self._maintenance.optimize()
                if self._progress is not None:
                    self._progress(self)
                self._report_lag()
                if self._metrics is not None:
                    self._metrics.beat()
                if s.end_at_latest and self._caught_up():
                    break
            self.commit()
            # Before the last orphan cleanup (a compaction deletes the files it did not commit). A
            # run-once that caught up compacts what is due first: its short runs compact too.
            self._maintenance.close(drain=s.end_at_latest and not self._stop.is_set())
            self._session.remove_orphans()
            self._report_lag(force=True)
        finally:
            try:
                self._maintenance.close()
                self._consumer.close()  # its on_revoke commits what is buffered, as a rebalance does
            finally:
                self._pipeline.close()  # when run fails: a commit in flight ends, its error logged
        return self.stats

    @property
    def _identity(self) -> str:
        """The table's identity: what its default app id and the Kafka commits' metadata name."""
        return table_identity(self.settings.table_uri, self.settings.catalog)

    # -- causes the daemon waits on ------------------------------------------------------------

    def _wait_until_ready(self) -> bool:
        """The table location and the topic answer (:func:`parka.lake.wait_until_ready`)."""
        s = self.settings

        def client_error() -> Any:
            assert self._consumer is not None
            with contextlib.suppress(KafkaClientError):
                self._consumer.poll_buffer(timeout=0)  # serves error_cb; nothing is subscribed yet
            return self._credential_error or self._client_error

        ready = wait_until_ready(
            self._consumer,
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
            table_probe=None if s.catalog is None else self._iceberg_engine().blocker,
        )
        self._credential_error = None  # cleared, or the daemon waited until it was
        return ready

    def _engine(self) -> LogEngine:
        """The table format's engine: delta-rs, or Iceberg's when a catalog is given (one per run)."""
        if self._log_engine is None:
            self._log_engine = RsEngine() if self.settings.catalog is None else self._iceberg_engine()
        return self._log_engine

    def _iceberg_engine(self) -> IcebergEngine:
        if self._iceberg is None:
            from parka.lake import IcebergEngine  # the iceberg extra: only when asked for

            assert self.settings.catalog is not None
            self._iceberg = IcebergEngine(
                self.settings.catalog, self.settings.catalog_options, self.settings.storage_options
            )
        return self._iceberg

    # -- rebalance -----------------------------------------------------------------------------

    def _on_assign(self, consumer: ParquetConsumer, partitions: list[TopicPartition]) -> None:
        """Seek every assigned partition from the Delta log (the source of truth), and remove
        the orphans a crashed worker may have left for them."""
        s = self.settings
        assert self._session is not None
        self._finish()  # the table is read here: not while the commit thread has it
        versions = self._session.resume(tp.partition for tp in partitions)
        for tp in partitions:
            version = versions[tp.partition]
            if version is not None:
                tp.offset = version + 1
            elif tp.partition in s.seek_offsets:
                tp.offset = s.seek_offsets[tp.partition]
            else:
                tp.offset = OFFSET_BEGINNING if s.auto_offset_reset == "earliest" else OFFSET_END
            low, high = consumer.get_watermark_offsets(TopicPartition(s.topic, tp.partition), timeout=10)
            start = low if tp.offset == OFFSET_BEGINNING else high if tp.offset == OFFSET_END else tp.offset
            self._positions.assign(tp.partition, start=start, high=high, in_table=version)
            log.info("partition %d assigned; starting at offset %s (txn version %s)", tp.partition, tp.offset, version)
        consumer.assign(partitions)
        self._session.remove_orphans()
        self._view_table()  # read again from the table with the txn versions
        self._maintenance.assign(self._positions.assigned, table_exists=self._table_view is not None)

    def _on_revoke(self, consumer: ParquetConsumer, partitions: list[TopicPartition]) -> None:
        """Commit what is buffered (the commit in flight and the batch after it) before another
        worker takes the partitions."""
        crash_point("on-revoke")
        self.commit()
        for tp in partitions:
            self._positions.revoke(tp.partition)
            log.info("partition %d revoked", tp.partition)
        self._maintenance.assign(self._positions.assigned, table_exists=False)
        consumer.unassign()

    def _caught_up(self) -> bool:
        consumer = self._consumer
        if consumer is None:
            return False
        topic = self.settings.topic
        return self._positions.caught_up(lambda p: int(consumer.position([TopicPartition(topic, p)])[0].offset))

    # -- one message ---------------------------------------------------------------------------

    def _handle(self, raw: RawSegment) -> None:
        try:
            seg = read_segment(
                topic=raw.topic,
                partition=raw.partition,
                offset=raw.offset,
                value=raw.value,
                headers=raw.headers,
                info=raw.info,  # poll_buffer read the headers and checked the CRC: once per segment
            )
            if self._table_view is None:  # no table yet: made from this segment's schema
                self._finish()
                assert self._committer is not None
                try:
                    self._committer.ensure_table(seg.schema)
                except ConfigError:
                    # --partition-by the first segment cannot satisfy: nothing is written, not even
                    # the dead letters read before it (a close would commit them); the next run
                    # reads them again.
                    self._batch = Batch()
                    raise
                self._view_table()
            assert self._table_view is not None
            table_schema, partitioning = self._table_view
            checked = check_segment(
                seg,
                table_schema=table_schema,
                partition_by=partitioning,
                merge=self.settings.schema_evolution == "merge",
                check_columns=self._engine().check_columns,
            )
        except (SegmentError, SchemaMismatchError) as exc:  # bad input, not a failure of ours
            self._refuse(raw, exc)
            return
        self._batch.checked.append(checked)
        self._batch.bytes += len(seg.value)
        self._positions.consumed[raw.partition] = raw.offset
        if self._batch.oldest_at is None:
            self._batch.oldest_at = self._clock()

    def _refuse(self, raw: RawSegment, exc: SegmentError | SchemaMismatchError) -> None:
        log.error("%s: %s", type(exc).__name__, exc)
        stamp = raw.timestamp[1] if raw.timestamp and raw.timestamp[0] else None
        self._batch.refused.append(Refused(raw.partition, raw.offset, exc, stamp))
        self._positions.consumed[raw.partition] = raw.offset
        if self._batch.oldest_at is None:
            self._batch.oldest_at = self._clock()
        if self.settings.dlq_table_uri is None:
            self.commit()  # commits what came before, then raises the error (the protocol's step 2)

    def _view_table(self) -> None:
        """Note the table's schema and partitioning for checking segments (none: no table yet).
        Only while no commit is in flight."""
        c = self._committer
        assert c is not None and (self._pipeline is None or not self._pipeline.busy)
        self._table_view = None if c.table is None else (c.table_schema(), c.partitioning)

    # -- commits -------------------------------------------------------------------------------

    def commit(self) -> None:
        """Commit everything buffered and wait until it is in: the commit in flight, then the
        batch after it (see :meth:`_cut`)."""
        self._cut()
        self._finish()

    def _cut(self) -> None:
        """Hand the buffered batch to the commit thread (after the commit in flight, if any,
        ended: one at a time, in order) and start the next one."""
        if not len(self._batch):
            return
        assert self._pipeline is not None
        self._finish()
        batch, self._batch = self._batch, Batch()
        self._pipeline.submit(batch)

    def _land(self, batch: Batch, writers: Executor) -> CommitResult:
        """On the commit thread: write the batch's data files, several at once, and commit them
        through the committer (the protocol: :meth:`parka.lake.Committer.commit`, which makes
        them durable first)."""
        committer = self._committer
        assert committer is not None
        s = self.settings
        landed = write_segments(
            batch.checked,
            table_uri=committer.root,
            table_schema=committer.table_schema() if batch.checked else pa.schema([]),
            partition_by=committer.partitioning,
            storage_options=s.storage_options,
            target_file_size=s.target_file_size,
            stats_config=committer.stats_config() if batch.checked else DEFAULT_STATS,
            executor=writers,
        )
        return committer.commit(landed, batch.refused)

    def _finish(self) -> None:
        """Wait for the commit in flight, then the Kafka side on this thread: offsets for lag
        tools, and a seek for partitions another worker took further in the table.

        Raises:
            What the commit raised (see :meth:`run`).
        """
        if self._pipeline is None or not self._pipeline.busy:
            return
        try:
            result = self._pipeline.wait()
        except BaseException:
            # A failed commit stops the daemon. What the loop buffered since must not be
            # committed without it (a rebalance's revoke while closing would): its txn would jump
            # over the failed batch's offsets. The next run reads both again from the txn.
            self._batch = Batch()
            raise
        assert result is not None
        self._view_table()  # the commit may have evolved the schema
        self._positions.in_table(result.last)
        self._commit_kafka(result.last)
        skipped = {
            p: version + 1
            for p, version in result.table_txn.items()
            if version is not None and version >= self._positions.consumed.get(p, -1) and p not in result.last
        }
        for p, offset in skipped.items():
            self._skip_to(p, offset)
        if self._metrics is not None:  # the table moved: by this commit, or by another worker's
            self._metrics.advanced([*result.last, *skipped])
        if self._progress is not None:
            self._progress(self)
        self._maintenance.committed()

    def _skip_to(self, partition: int, offset: int) -> None:
        """Another worker with this app id committed this partition up to ``offset - 1``: all
        this worker had of it was dropped as covered; continue after it."""
        log.warning("partition %d: the table already holds it up to offset %d; continuing there", partition, offset - 1)
        self._positions.skip_to(partition, offset)
        if partition in self._positions.assigned and self._consumer is not None:
            try:
                self._consumer.seek(TopicPartition(self.settings.topic, partition, offset))
            except KafkaException as exc:  # being revoked: the next owner seeks from the log
                log.info("could not seek partition %d: %s", partition, exc)

    def _commit_kafka(self, last: dict[int, int] | Any) -> None:
        if self._consumer is None:
            return
        meta = table_metadata(self._identity)  # which table this group lands into (_check_group)
        offsets = [
            TopicPartition(self.settings.topic, p, off + 1, meta)
            for p, off in last.items()
            if p in self._positions.assigned
        ]
        if not offsets:
            return
        try:
            self._consumer.commit(offsets=offsets, asynchronous=True)
        except Exception as exc:  # advisory only: the Delta log already holds the truth
            log.warning("Kafka offset commit failed (progress is safe in the Delta log): %s", exc)

    # -- introspection for the progress line and the metrics --------------------------------------

    def lag(self, *, committed: bool = False) -> dict[int, int]:
        """Messages behind the high watermark (from the client's cache, refreshed by every
        fetch), per assigned partition: not yet consumed (the progress line), or with
        ``committed`` not yet in the table (the metric; what Kafka's lag tools see, as the
        Kafka offsets follow the table's). Call it on the loop's thread (it asks the client)."""
        consumer = self._consumer
        if consumer is None:
            return {}
        topic = self.settings.topic

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
