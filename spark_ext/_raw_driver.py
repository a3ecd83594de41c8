"""Spark raw mode's driver: the streaming query whose micro-batches land raw segments through
one :class:`parka.lake.LandingSession` (the protocol of ``parka ingest``, with the executors
writing the files: :mod:`._raw`); a new query starts after the table's ``txn`` versions
(:func:`._query.resume_from_table`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from parka.lake import DEFAULT_STATS, ENABLE_DELETION_VECTORS, Committer, LandingSession, RsEngine

from parka.crash import crash_point
from parka.errors import ParkaError
from parka.schema import to_arrow_schema
from parka.segment import FORMAT_HEADER

from ._arrow import KAFKA_COLUMNS
from ._options import lake_storage_options
from ._query import LandingRun, kafka_stream, resume_from_table, source_options, with_trigger
from ._reader import spark_schema

if TYPE_CHECKING:
    from ._settings import SparkIngestSettings

__all__ = ["start_raw"]

log = logging.getLogger("parka.spark_ingest")

# --value-format, no table yet and no segment in the micro-batch: the table is made from the first
# of this many row records that decode (plain JSON's schema inferred from them)
ROW_SAMPLE = 1000


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
        # an upsert table deletes superseded rows by deletion vector (not its dead letters)
        vectors = {_local_path(s.table_uri): {ENABLE_DELETION_VECTORS: "true"}}
        return RsEngine(properties_at=vectors if s.upsert and s.upsert_mode == "merge-on-read" else {})
    from ._delta_spark import SparkEngine

    return SparkEngine(spark)


def start_raw(
    spark: Any, s: SparkIngestSettings, on_commit: Callable[[float], None] | None = None
) -> tuple[Any, str, LandingRun]:
    from parka.ops.row_values import RowFormat

    from ._raw import FILE_ROWS, SegmentFileWriter, committer_input, row_schema, segment_schema

    options = source_options(spark, s)
    uri = s.table_uri if s.catalog is not None else _local_path(s.table_uri)  # Iceberg: namespace.name
    # delta-rs keys go to deltalake as they are; fs.* ones are for Hadoop (the checkpoint)
    storage = lake_storage_options(s.storage_options)
    session = LandingSession(
        Committer(
            _engine(spark, s),
            table_uri=uri,
            topic=s.topic,
            app_id=s.app_id,  # None: the table's (LandingSession.settle_app_id)
            partition_by=s.partition_by,
            merge=s.schema_evolution == "merge",
            dlq_table_uri=s.dlq_table_uri,
            storage_options=storage,
            checkpoint_interval=s.checkpoint_interval,
            on_commit=on_commit,
            relist_orphans=True,  # a retried task attempt's files: only a listing finds them
            upsert=s.upsert,
            key_columns=s.key_columns,
            sequence_by=s.sequence_by,
            cdc=s.change_events,
            copy_on_write=s.upsert_mode == "copy-on-write",
        )
    )
    committer = session.committer
    row_format = RowFormat.of(s, s.schema_registry_options)  # None: segments only
    run = LandingRun(session)
    source = session.start(None if s.schema is None else to_arrow_schema(s.schema))
    if source == "table":
        resume_from_table(spark, s, options, session)

    from pyspark.sql import functions as F

    is_seg = F.exists("headers", lambda h: h["key"] == F.lit(FORMAT_HEADER))
    rows_schema = spark_schema(FILE_ROWS)

    def run_batch(df: Any, batch_id: int) -> None:
        # On the driver (Spark calls it back through py4j), once per micro-batch.
        try:
            # a tombstone's key; a row record's, which lands as a column
            kafka = df.select(*KAFKA_COLUMNS, *(["key"] if s.upsert or row_format is not None else []))
            if committer.table is None:
                first = kafka.where(is_seg).select("value", "headers", "topic", "partition", "offset").limit(1)
                found = first.toArrow().to_pylist()
                if found:
                    row = found[0]
                    headers = [(h["key"], h["value"]) for h in row["headers"] or ()]
                    where = {"topic": row["topic"], "partition": row["partition"], "offset": row["offset"]}
                    committer.ensure_table(segment_schema(row["value"], headers, **where, cdc=s.change_events))
                elif row_format is not None:
                    records = ~F.coalesce(is_seg, F.lit(False)) & F.col("value").isNotNull()
                    sample = kafka.where(records).limit(ROW_SAMPLE).toArrow()
                    if sample.num_rows:
                        committer.ensure_table(row_schema(sample, row_format, cdc=s.change_events))
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
                check_columns=committer.engine.check_columns,
                upsert=s.upsert,
                key_columns=s.key_columns,
                cdc=s.change_events,
                row_format=row_format,
            )
            crash_point("batch-before-write")
            rows = kafka.mapInArrow(writer, rows_schema).toArrow()
            crash_point("batch-after-write")
            given = committer_input(rows)
            # the executors flushed their files before their tasks ended: durable already
            info = {"parka.spark_batch": batch_id}
            committer.commit(given.landed, given.refused, durable=True, commit_info=info, tombstones=given.tombstones)
        except ParkaError as exc:
            run.failure = exc
            raise

    writer = kafka_stream(spark, options).writeStream.queryName(s.app).option("checkpointLocation", s.checkpoint)
    query = with_trigger(writer.foreachBatch(run_batch), s).start()
    return query, source, run
