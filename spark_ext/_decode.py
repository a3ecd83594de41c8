"""Spark ingestion's decode mode: segments decoded into records inside Spark (``mapInArrow``)
and written by delta-spark's streaming sink (see :mod:`._ingest` for its exactly-once argument),
or, with a catalog, by Iceberg's Spark writer (:mod:`._decode_iceberg`). The stream's schema is
the given one, the table's, or the one that holds every segment in the topic at start, checked
against the table before the query starts (:func:`._stream_schema.stream_decoder`, for both)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from parka.errors import ConfigError
from parka.segment import RESERVED_FIELDS

from ._query import kafka_stream, source_options, with_trigger
from ._reader import spark_schema
from ._stream_schema import stream_decoder

if TYPE_CHECKING:
    from ._query import LandingRun
    from ._settings import SparkIngestSettings

__all__ = ["OBSERVED", "start_decode"]

log = logging.getLogger("parka.spark_ingest")


def _arrow_of_table(spark_struct: Any) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema as spark_to_arrow

    return spark_to_arrow(spark_struct)


OBSERVED = "parka_ingest"
"""The name of the per-batch record count a decode query observes (its progress reports)."""


def start_decode(
    spark: Any, settings: SparkIngestSettings, on_commit: Callable[[float], None] | None = None
) -> tuple[Any, str, LandingRun | None]:
    """Start a decode-mode query; returns it, where its schema came from, and (into Iceberg) its
    run on the driver, which tells ``on_commit`` each commit's seconds.

    Raises:
        ConfigError: ``partition_by`` contradicts the table's, or names no output column; a
            catalog decode mode cannot give Spark.
        SchemaMismatchError: the schema does not fit the table.
        SparkSetupError: the session lacks Iceberg's Spark runtime (into Iceberg).
    """
    s = settings
    options = source_options(spark, s)
    if s.catalog is not None:
        from ._decode_iceberg import start_decode_iceberg

        return start_decode_iceberg(spark, s, options, on_commit)
    from delta.tables import DeltaTable

    table_schema: pa.Schema | None = None
    if DeltaTable.isDeltaTable(spark, s.table_uri):
        detail = DeltaTable.forPath(spark, s.table_uri).detail().collect()[0]
        existing = list(detail["partitionColumns"] or [])
        if s.partition_by and list(s.partition_by) != existing:
            raise ConfigError("partition_by", ",".join(s.partition_by), f"the table's: {','.join(existing) or 'none'}")
        table_schema = _arrow_of_table(spark.read.format("delta").load(s.table_uri).schema)
        missing = [f for f in RESERVED_FIELDS if f.name not in table_schema.names]
        if s.reserved == "keep" and missing:
            # parka ingest adds reserved columns as they appear; a Spark query's schema is fixed
            # at start, so add them all now rather than drop keys, timestamps or headers.
            columns = ", ".join(
                f"`{f.name}` {spark_schema(pa.schema([f]))[0].dataType.simpleString()}" for f in missing
            )
            spark.sql(f"ALTER TABLE delta.`{s.table_uri}` ADD COLUMNS ({columns})")
            log.info("added reserved column(s) %s to %s", ", ".join(f.name for f in missing), s.table_uri)
    _, schema, source = stream_decoder(spark, s, options, table_schema)

    raw = kafka_stream(spark, options)
    from pyspark.sql import functions as F

    from ._reader import decode

    records = decode(raw, schema, reserved=s.reserved, metadata=s.metadata)
    records = records.observe(OBSERVED, F.count(F.lit(1)).alias("records"))  # per-batch count, in progress
    writer = (
        records.writeStream.format("delta")
        .outputMode("append")
        .queryName(s.app)
        .option("checkpointLocation", s.checkpoint)
    )
    if s.schema_evolution == "merge":
        writer = writer.option("mergeSchema", "true")
    if s.partition_by:
        writer = writer.partitionBy(*s.partition_by)
    return with_trigger(writer, s).start(s.table_uri), source, None
