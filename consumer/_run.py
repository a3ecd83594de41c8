"""One run of ``parka ingest``: what :meth:`._ingest.IngestionConsumer.run` builds once the
table and the topic answer, made once and handed to each step of its loop. The Kafka client, the
landing session (whose committer holds the engine, the table and the app id), the commit thread,
the batch being filled and the table's schema and partitioning as the loop checks segments
against them. Nothing in it outlives the run."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from parka.lake import (
    DEFAULT_STATS,
    ENABLE_DELETION_VECTORS,
    CommitResult,
    Committer,
    LandingSession,
    LogEngine,
    RsEngine,
    Tombstone,
    default_app_id,
    retention_properties,
    write_segments,
)
from parka.ops.health import kafka_logger

from parka.partitioning import PartitionSpec

from ._pipeline import Batch, CommitPipeline
from ._settings import IngestSettings
from ._shim import ParquetConsumer

__all__ = ["IngestRun", "client_conf", "landing_session", "table_engine"]


def table_engine(settings: IngestSettings) -> tuple[LogEngine, Callable[[], Any] | None]:
    """The table format's engine of one run: delta-rs, or Iceberg's when a catalog is given; and
    what probes that catalog before consuming (:func:`parka.ops.preflight.wait_until_ready`'s
    ``table_probe``; none for delta-rs, whose table location is probed)."""
    s = settings
    if s.catalog is None:  # the tables it creates get the retentions that fit its commits
        properties = retention_properties(s.table_retention_s)
        # superseded rows are deleted by deletion vector (in the table, not its dead letters)
        merge_on_read = s.upsert and s.upsert_mode == "merge-on-read"
        upsert = {s.table_uri: {ENABLE_DELETION_VECTORS: "true"}} if merge_on_read else {}
        return RsEngine(created_properties=properties, properties_at=upsert), None
    from parka.lake import IcebergEngine  # the iceberg extra: only when asked for

    engine = IcebergEngine(s.catalog, s.catalog_options, s.storage_options)
    return engine, engine.blocker


def client_conf(settings: IngestSettings, identity: str, error_cb: Callable[[Any], None]) -> dict[str, Any]:
    """The Kafka client's settings: the caller's, with one consumer group per table (the app id
    given, else the table's default app id), offsets committed by the daemon only, ``error_cb``
    and librdkafka's log through parka's (rate-limited)."""
    s = settings
    conf = dict(s.kafka_conf)
    conf.setdefault("group.id", s.app_id or default_app_id(s.topic, identity))
    conf.update(
        {"enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": s.auto_offset_reset}
    )
    conf["error_cb"] = error_cb
    conf.setdefault("logger", kafka_logger())
    return conf


def landing_session(settings: IngestSettings, engine: LogEngine, **committer: Any) -> LandingSession:
    """The landing session of ``settings``' table through ``engine`` (which opens the table);
    ``committer``: the committer's counters and hooks (``stats``, ``on_commit``, ...)."""
    s = settings
    return LandingSession(
        Committer(
            engine,
            table_uri=s.table_uri,
            topic=s.topic,
            app_id=s.app_id,
            partition_by=s.partition_by,
            merge=s.schema_evolution == "merge",
            dlq_table_uri=s.dlq_table_uri,
            storage_options=s.storage_options,
            checkpoint_interval=s.checkpoint_interval,
            upsert=s.upsert,
            key_columns=s.key_columns,
            sequence_by=s.sequence_by,
            cdc=s.change_events,
            copy_on_write=s.upsert_mode == "copy-on-write",
            **committer,
        )
    )


@dataclass(eq=False)
class IngestRun:
    """The client, the landing session and the commit thread of one run, and what the loop
    buffered: ``batch``, checked and refused since the last commit was cut; ``table_view``, the
    table's schema and partitioning after the last commit that ended (``None``: no table yet),
    which segments are checked against while the commit thread owns the committer."""

    settings: IngestSettings
    consumer: ParquetConsumer
    session: LandingSession
    pipeline: CommitPipeline = field(init=False)
    batch: Batch = field(default_factory=Batch)
    table_view: tuple[pa.Schema, tuple[PartitionSpec, ...]] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.pipeline = CommitPipeline(self.land, write_threads=self.settings.write_threads)
        self.view_table()

    @property
    def committer(self) -> Committer:
        return self.session.committer

    def view_table(self) -> None:
        """Note the table's schema and partitioning for checking segments. Only while no commit
        is in flight (the commit thread's committer may be changing them)."""
        if self.pipeline.busy:
            raise RuntimeError("the table is read while a commit is in flight")
        c = self.committer
        self.table_view = None if c.table is None else (c.table_schema(), c.partitioning)

    def land(self, batch: Batch, writers: Executor) -> CommitResult:
        """On the commit thread: write the batch's data files, several at once, and commit them
        through the committer (the protocol: :meth:`parka.lake.Committer.commit`, which makes
        them durable first)."""
        committer = self.committer
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
            breaks=_offsets_by_partition(batch.tombstones),
        )
        return committer.commit(landed, batch.refused, tombstones=batch.tombstones)


def _offsets_by_partition(tombstones: list[Tombstone]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for t in tombstones:
        out.setdefault(t.partition, []).append(t.offset)
    return out
