"""Spark raw mode's driver: the streaming query whose micro-batches land raw segments through
one :class:`parka.lake.LandingSession` (the protocol of ``parka ingest``, with the executors
writing the files: :mod:`._raw`), and a new query's start after the table's ``txn`` versions."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from parka.lake import DEFAULT_STATS, Committer, LandingSession, RsEngine

from parka._crash import crash_point
from parka.errors import ParkaError
from parka.schema import to_arrow_schema
from parka.segment import FORMAT_HEADER

from ._arrow import KAFKA_COLUMNS
from ._query import source_options, with_trigger
from ._reader import spark_schema

if TYPE_CHECKING:
    from ._settings import SparkIngestSettings

__all__ = ["RawRun", "raw_stream", "start_raw"]

log = logging.getLogger("parka.spark_ingest")


def _local_path(uri: str) -> str:
    """A local table path made absolute: executors need not share the driver's working directory."""
    return os.path.abspath(uri) if "://" not in uri and not uri.startswith("file:") else uri


def _engine(spark: Any, s: SparkIngestSettings) -> Any:
    """The :class:`parka.lake.LogEngine` the settings ask for: Iceberg's when a catalog is
    given, else the Delta engine ``commit_engine`` names."""
    if s.catalog is not None:
        from parka.lake import IcebergEngine  # the iceberg extra: only when asked for

        return IcebergEngine(s.catalog, s.catalog_options, s.storage_options)
    if s.commit_engine == "delta-rs":
        return RsEngine()
    from ._delta_spark import SparkEngine

    return SparkEngine(spark)


@dataclass
class RawRun:
    """Raw mode's state on the driver: the landing session, and what failed the query (to raise as is)."""

    session: LandingSession
    failure: ParkaError | None = None


def start_raw(
    spark: Any, s: SparkIngestSettings, on_commit: Callable[[float], None] | None = None
) -> tuple[Any, str, RawRun]:
    from ._raw import FILE_ROWS, SegmentFileWriter, committer_input, segment_schema

    options = source_options(spark, s)
    uri = s.table_uri if s.catalog is not None else _local_path(s.table_uri)  # Iceberg: namespace.name
    # delta-rs keys go to deltalake as they are; fs.* ones are for Hadoop (the checkpoint)
    storage = {k: v for k, v in s.storage_options.items() if not k.startswith("fs.")}
    session = LandingSession(
        Committer(
            _engine(spark, s),
            table_uri=uri,
            topic=s.topic,
            app_id=s.app,
            partition_by=s.partition_by,
            merge=s.schema_evolution == "merge",
            dlq_table_uri=s.dlq_table_uri,
            storage_options=storage,
            checkpoint_interval=s.checkpoint_interval,
            on_commit=on_commit,
        )
    )
    committer = session.committer
    run = RawRun(session)
    source = session.start(None if s.schema is None else to_arrow_schema(s.schema))
    if source == "table":
        _resume_from_table(spark, s, options, session)

    from pyspark.sql import functions as F

    is_seg = F.exists("headers", lambda h: h["key"] == F.lit(FORMAT_HEADER))
    rows_schema = spark_schema(FILE_ROWS)

    def run_batch(df: Any, batch_id: int) -> None:
        # On the driver (Spark calls it back through py4j), once per micro-batch.
        try:
            kafka = df.select(*KAFKA_COLUMNS)
            if committer.table is None:
                first = kafka.where(is_seg).select("value", "headers", "topic", "partition", "offset").limit(1)
                found = first.toArrow().to_pylist()
                if found:
                    row = found[0]
                    headers = [(h["key"], h["value"]) for h in row["headers"] or ()]
                    schema = segment_schema(
                        row["value"], headers, topic=row["topic"], partition=row["partition"], offset=row["offset"]
                    )
                    committer.ensure_table(schema)
            committer.refresh()
            writer = SegmentFileWriter(
                committer.root,  # the table's data folder (Iceberg: under its location)
                pa.schema([]) if committer.table is None else committer.table_schema(),
                committer.partitioning,
                storage,
                merge=committer.merge,
                keep_bad_values=s.dlq_table_uri is not None,
                target_file_size=s.target_file_size,
                stats_config=DEFAULT_STATS if committer.table is None else committer.stats_config(),
            )
            crash_point("batch-before-write")
            rows = kafka.mapInArrow(writer, rows_schema).toArrow()
            crash_point("batch-after-write")
            landed, refused = committer_input(rows)
            # the executors flushed their files before their tasks ended: durable already
            committer.commit(landed, refused, durable=True, commit_info={"parka.spark_batch": batch_id})
        except ParkaError as exc:
            run.failure = exc
            raise

    writer = raw_stream(spark, options).writeStream.queryName(s.app).option("checkpointLocation", s.checkpoint)
    query = with_trigger(writer.foreachBatch(run_batch), s).start()
    return query, source, run


def raw_stream(spark: Any, options: Mapping[str, str]) -> Any:
    return spark.readStream.format("kafka").options(**options).load()


def _resume_from_table(spark: Any, s: SparkIngestSettings, options: dict[str, str], session: LandingSession) -> None:
    """Start a new query (no checkpoint yet) after the table's ``txn`` versions, so that a table
    ``parka ingest`` or an earlier query filled continues where it is: Spark's
    ``startingOffsets`` (ignored when the checkpoint exists) becomes ``txn`` version + 1 per
    partition that has one, and the configured start for the others. Only an optimisation: the
    commit skips offsets at or below the ``txn`` anyway."""
    try:
        partitions = _topic_partitions(spark, s.topic, options)
    except Exception as exc:  # py4j or Kafka: fall back to the configured start
        log.warning("cannot list the partitions of %s (%s); starting from %s", s.topic, exc, s.starting_offsets)
        return
    versions = session.resume(partitions)
    if all(v is None for v in versions.values()):
        return
    configured = s.starting_offsets.strip()
    given = json.loads(configured).get(s.topic, {}) if configured.startswith("{") else {}
    fallback = -1 if configured == "latest" else -2  # Spark's codes for latest and earliest
    start = {str(p): v + 1 if v is not None else int(given.get(str(p), fallback)) for p, v in versions.items()}
    options["startingOffsets"] = json.dumps({s.topic: start})
    log.info("a new query starts after the table's txn versions: %s", options["startingOffsets"])


def _topic_partitions(spark: Any, topic: str, options: Mapping[str, str]) -> list[int]:
    """The topic's partitions, asked with the Kafka source's own client settings (the JVM's
    Kafka admin client, through py4j)."""
    jvm = spark.sparkContext._jvm
    props = jvm.java.util.Properties()
    for key, value in options.items():
        if key.startswith("kafka."):
            props.setProperty(key[len("kafka.") :], value)
    admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)
    try:
        names = jvm.java.util.Collections.singletonList(topic)
        seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
        described = admin.describeTopics(names).allTopicNames().get(30, seconds)
        return sorted(int(info.partition()) for info in described.get(topic).partitions())
    finally:
        admin.close()
