"""Structured Streaming from a parka topic into a Delta (or Iceberg) table, exactly once, in one of two modes.

``raw`` (the default): each micro-batch's segments land in the table as they are, written by
the executors and committed by the driver with one ``txn`` per Kafka partition, the scheme of
``parka ingest`` (:mod:`._raw`; the protocol is the one committer both share,
:meth:`parka.lake.Committer.commit`), through
delta-spark's transaction API (``commit_engine="delta-spark"``, :mod:`._delta_spark`) or
delta-rs. No record is decoded (for an unpartitioned table), and the two ingestions can take
turns on one table.

``decode``: segments are decoded into records (``mapInArrow``) and written by delta-spark's
streaming sink, for tables that need Spark's own writer. (Into an Iceberg table, ``--catalog``:
by Iceberg's Spark writer, with parka's ``txn`` state in each snapshot's summary, as raw mode and
``parka ingest`` keep it: :mod:`._decode_iceberg` has that argument; what follows is Delta's.)
Into Delta, its exactly-once argument is Spark's and Delta's, and parka adds nothing to it:

1. The Kafka source plans each micro-batch as offset ranges and writes them to the offset log
   in the checkpoint (``<checkpoint>/offsets/<batch>``) before running it.
2. The Delta sink commits the batch's files in one Delta commit carrying a ``txn`` action
   ``(appId = query id, version = batch id)``; a replayed batch whose id the table already has is
   skipped. A failed batch commits nothing (the decoder failing on one segment fails the whole
   batch), so nothing partial is ever visible.
3. Only then is the batch marked done in the checkpoint (``commits/<batch>``). A restart
   replays the last planned batch with the same offsets, and step 2 makes that idempotent.

So in decode mode the checkpoint and the table belong together: a new checkpoint location is a
new query id, which starts again from ``starting_offsets`` (duplicates if the table already
holds that data). In raw mode the table's ``txn`` versions decide: a new checkpoint starts each
partition after the table's ``txn`` version, and a replayed or overlapping batch commits only
offsets above it. The default checkpoint location is ``<table>/_parka_checkpoints/<app id>``,
inside the table directory: Delta (Spark and delta-rs) treats names starting with ``_`` as
hidden, so neither reads nor VACUUM touch it, and the table and its progress move together.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parka.ops.cli_util import redacted

from parka.errors import ParkaError

from ._lag import progress_lag
from ._session import translate
from ._settings import CHECKPOINTS_DIR, SparkIngestSettings

if TYPE_CHECKING:
    from parka.ops.progress import LogProgress, ProgressBar

    from parka.metrics import IngestMetrics

    from ._query import LandingRun

__all__ = ["CHECKPOINTS_DIR", "SparkIngestError", "SparkIngestSettings", "SparkIngestStats", "ingest", "start_ingest"]

log = logging.getLogger("parka.spark_ingest")


class SparkIngestError(ParkaError):
    """The streaming query failed for a reason other than bad input (which raises the segment's
    own :class:`~parka.errors.SegmentError` or :class:`~parka.errors.SchemaMismatchError`)."""


@dataclass
class SparkIngestStats:
    """What a finished (or stopped) ingestion did: completed micro-batches (each one Delta commit
    when it had data), Kafka messages (segments) read and records written, from the query's
    progress reports (decode mode into Delta) or its own commits (raw mode, and decode mode into
    Iceberg, where ``batches`` counts the commits)."""

    batches: int = 0
    segments: int = 0
    records: int = 0
    query_id: str = ""
    schema_source: str = ""
    mode: str = "decode"
    files: int = 0  # raw mode: data files committed
    dead_letters: int = 0  # raw mode
    covered_files: int = 0  # raw mode: files of offsets the table already had, deleted uncommitted
    orphans_removed: int = 0  # raw mode


def start_ingest(spark: Any, settings: SparkIngestSettings) -> Any:
    """Start the streaming query; returns the ``StreamingQuery`` (see :func:`ingest` to wait).

    Raises:
        ConfigError, SchemaError, SchemaMismatchError: before anything runs.
    """
    return _start(spark, settings)[0]


def _start(
    spark: Any, settings: SparkIngestSettings, on_commit: Callable[[float], None] | None = None
) -> tuple[Any, str, LandingRun | None]:
    """The started query, where its schema came from, and (raw mode, decode mode into Iceberg)
    its run on the driver, which counts its commits and tells ``on_commit`` each one's seconds."""
    if settings.mode == "raw":
        from ._raw_driver import start_raw

        return start_raw(spark, settings, on_commit)
    from ._decode import start_decode

    return start_decode(spark, settings, on_commit)


def ingest(
    spark: Any,
    settings: SparkIngestSettings,
    *,
    stop: threading.Event | None = None,
    metrics: IngestMetrics | None = None,
    progress: ProgressBar | LogProgress | None = None,
) -> SparkIngestStats:
    """Run the ingestion: until the topic's data at start is in (``available-now``), or until
    ``stop`` is set (``processing-time``; the batch in flight is abandoned and replayed next time).
    ``metrics`` (:class:`parka.metrics.IngestMetrics`) gets the counters (raw mode and decode
    mode into Iceberg: the run's; into Delta: from the progress reports), the commit latency
    (the run's) and the lag after each batch; ``progress`` draws the messages done out of done
    plus lag.

    Raises:
        SegmentError, SegmentDecodeError, SchemaMismatchError: a segment the table cannot take;
            the batch holding it committed nothing.
        SparkIngestError: the query failed for another reason.
        ConfigError, SchemaError: before anything runs.
    """
    query, source, run = _start(spark, settings, None if metrics is None else metrics.observe_commit)
    if run is None:
        return _counted_by_reports(query, source, settings, stop=stop, metrics=metrics, progress=progress)
    return _counted_by_run(query, source, settings, run, stop=stop, metrics=metrics, progress=progress)


def _counted_by_reports(
    query: Any,
    source: str,
    settings: SparkIngestSettings,
    *,
    stop: threading.Event | None,
    metrics: IngestMetrics | None,
    progress: ProgressBar | LogProgress | None,
) -> SparkIngestStats:
    """Decode mode into Delta: Spark's sink commits, so the counts are the progress reports'."""
    reports = _Reports(query, settings.topic, log_batches=True)
    if metrics is not None:
        metrics.watch(lambda: reports.counts)
    _await(query, settings, reports, None, stop=stop, metrics=metrics, progress=progress)
    return SparkIngestStats(
        batches=len(reports.seen),
        segments=reports.done,
        records=sum(r for _, r in reports.seen.values()),
        query_id=str(query.id),
        schema_source=source,
    )


def _counted_by_run(
    query: Any,
    source: str,
    settings: SparkIngestSettings,
    run: LandingRun,
    *,
    stop: threading.Event | None,
    metrics: IngestMetrics | None,
    progress: ProgressBar | LogProgress | None,
) -> SparkIngestStats:
    """Raw mode, decode mode into Iceberg: the driver commits, so the counts are its committer's
    (the progress reports are read for the lag and the progress bar only)."""
    committer = run.session.committer
    if metrics is not None:
        metrics.watch(lambda: vars(committer.stats))
        committer.on_checkpoint = metrics.observe_checkpoint
    reports = None if metrics is None and progress is None else _Reports(query, settings.topic, log_batches=False)
    try:
        _await(query, settings, reports, run, stop=stop, metrics=metrics, progress=progress)
    finally:
        committer.close()  # a checkpoint being written beside the commits (delta-rs)
    run.session.remove_orphans()
    r = committer.stats
    return SparkIngestStats(
        batches=r.commits,
        segments=r.segments,
        records=r.records,
        query_id=str(query.id),
        schema_source=source,
        mode=settings.mode,
        files=r.files,
        dead_letters=r.dead_letters,
        covered_files=r.covered_files,
        orphans_removed=r.orphans_removed,
    )


def _await(
    query: Any,
    settings: SparkIngestSettings,
    reports: _Reports | None,
    run: LandingRun | None,
    *,
    stop: threading.Event | None,
    metrics: IngestMetrics | None,
    progress: ProgressBar | LogProgress | None,
) -> None:
    """The one loop of both: wait for the query (stopping it when ``stop`` is set), and after
    each wait hand the lag and the messages done (``reports``, when given) to ``metrics`` and
    ``progress``. A failure is raised as the run's (``run.failure``: what failed it on the
    driver), else as the parka error the JVM's names, else as a :class:`SparkIngestError`."""
    from pyspark.errors import StreamingQueryException

    def collect() -> None:
        lag = None if reports is None else reports.read()
        if reports is None or lag is None:
            return
        if metrics is not None:
            metrics.set_lag(lag)
        if progress is not None:
            progress.update(reports.done, total=reports.done + sum(lag.values()))

    try:
        while query.isActive:
            if stop is not None and stop.is_set():
                query.stop()
                break
            query.awaitTermination(0.5)
            collect()
            if metrics is not None:
                metrics.beat()
        query.awaitTermination()
    except StreamingQueryException as exc:
        failure = run.failure if run is not None else None
        parka_error = failure if failure is not None else translate(exc)
        if parka_error is not None:
            raise parka_error from None
        raise SparkIngestError(f"streaming query {settings.app} failed: {exc}") from exc
    finally:
        if query.isActive:
            query.stop()
    collect()


class _Reports:
    """The query's progress reports, read as the query goes (the query keeps only the last 100):
    per batch that completed, i.e. whose commit landed, its segments and records; the lag after
    the newest report that names the source's offsets; and the counters as of that report
    (:attr:`counts`, replaced whole, so a metrics scrape never sees one half made).

    Only the reports not read yet are converted to pyspark's objects (``convert``, by default
    pyspark's own ``StreamingQueryProgress.fromJObject``): pyspark's ``recentProgress`` converts
    every report it keeps on each call, dozens of py4j calls per report and a Java exception at
    the end of each of its maps (a CPU-second and more for 40-59 reports in a run:
    benchmarks/results/2026-12-01-spark-progress-reads/), and the daemon reads after every
    half-second wait."""

    def __init__(self, query: Any, topic: str, *, log_batches: bool, convert: Any = None) -> None:
        self._query = query
        self._topic = topic
        self._log_batches = log_batches
        if convert is None:
            from pyspark.sql.streaming.listener import StreamingQueryProgress

            convert = StreamingQueryProgress.fromJObject
        self._convert = convert
        self._newest: tuple[int, str] | None = None  # (batch id, time) of the newest report read
        self._lag: dict[int, int] | None = None
        self.seen: dict[int, tuple[int, int]] = {}  # batch id -> (segments, records)
        self.counts: dict[str, int] = {}

    @property
    def done(self) -> int:
        """Messages (segments) of the completed batches."""
        return sum(n for n, _ in self.seen.values())

    def _unread(self) -> list[Any]:
        """The reports after the newest one read, oldest first, converted (the JVM's are in the
        order they were made: walked back from the newest to the newest read)."""
        jquery = self._query._jsq
        newest = jquery.lastProgress()
        if newest is None or _report_key(newest) == self._newest:
            return []
        kept = jquery.recentProgress()
        unread: list[tuple[tuple[int, str], Any]] = []  # newest first
        for i in range(len(kept) - 1, -1, -1):
            key = _report_key(kept[i])
            if key == self._newest:
                break
            unread.append((key, self._convert(kept[i])))
        if unread:
            self._newest = unread[0][0]
        return [report for _, report in reversed(unread)]

    def read(self) -> dict[int, int] | None:
        """Take the new reports; the lag after the newest that names the source's offsets
        (``None``: none does, an idle one may not)."""
        from ._decode import OBSERVED

        reports = self._unread()
        for report in reports:
            if report.batchId not in self.seen:
                observed = (report.observedMetrics or {}).get(OBSERVED)
                records = int(observed["records"]) if observed is not None else 0
                self.seen[report.batchId] = (int(report.numInputRows), records)
                if self._log_batches:  # a line per commit at debug level, as parka ingest's
                    log.debug(
                        "batch %d: %d segments, %d records in %.1f s",
                        report.batchId,
                        report.numInputRows,
                        records,
                        report.batchDuration / 1000,
                    )
        lag = next((found for r in reversed(reports) if (found := progress_lag(r, self._topic))), None)
        if lag is not None:
            self._lag = lag
        if self._lag is not None:
            seen = self.seen.values()
            self.counts = {
                "commits": sum(1 for n, _ in seen if n),
                "segments": self.done,
                "records": sum(r for _, r in seen),
            }
        return self._lag


def _report_key(report: Any) -> tuple[int, str]:
    """A JVM progress report told apart from the others: its batch id and its time."""
    return int(report.batchId()), str(report.timestamp())


def settings_summary(s: SparkIngestSettings) -> str:
    """One log line describing ``s``, secrets masked (:func:`parka.ops.cli_util.redacted`)."""
    return (
        f"ingesting {s.topic} into {s.table_uri} as {s.app} ({s.mode} mode"
        f"{', ' + s.commit_engine + ' commits' if s.mode == 'raw' else ''}, trigger {s.trigger}, "
        f"checkpoint {s.checkpoint}, "
        f"kafka settings {redacted(s.kafka_conf)}, storage options {redacted(s.storage_options)})"
    )
