"""parka on Spark: decode segments inside Spark, read topics, and ingest them into Delta.

::

    spark = session()                                   # delta-spark + Kafka source, jars from Maven Central
    df = read_stream(spark, "gps", bootstrap_servers="localhost:9092", schema=avro_schema)
    df = read(spark, "gps", bootstrap_servers="localhost:9092")          # batch; schema from a segment
    records = decode(kafka_df, avro_schema, metadata=["partition", "offset"])
    ingest(spark, SparkIngestSettings(topic="gps", table_uri="/lake/gps", bootstrap_servers="..."))

Reading goes through Spark's own Kafka source (offsets, checkpoints, rate limits, security)
and a columnar decoder (``mapInArrow``): see :mod:`._reader` for why this is not a
``format("parka")`` data source. Errors::

    ParkaError
    ├── SparkSetupError   Java missing or too old, pyspark missing, jars unresolvable
    ├── SparkIngestError  the streaming query failed for a reason other than bad input
    ├── SegmentError / SegmentDecodeError / SchemaMismatchError  a bad segment, with its coordinates
    ├── CommitError       raw mode: a table raw files cannot join (the message names the table
    │                     property, e.g. delta.columnMapping.mode), or a Delta commit that failed
    └── ConfigError / SchemaError                                 rejected before anything runs

pyspark and delta-spark are parka's ``spark`` extra; nothing here
imports them until called.
"""

from ._arrow import METADATA_COLUMNS, SegmentDecoder
from ._ingest import SparkIngestError, SparkIngestSettings, SparkIngestStats, ingest, start_ingest
from ._reader import decode, read, read_stream
from ._session import SparkSetupError, encryption_conf, find_java, packages, s3a_jars, session, translate

__all__ = [
    "METADATA_COLUMNS",
    "SegmentDecoder",
    "SparkIngestError",
    "SparkIngestSettings",
    "SparkIngestStats",
    "SparkSetupError",
    "decode",
    "encryption_conf",
    "find_java",
    "ingest",
    "packages",
    "read",
    "read_stream",
    "s3a_jars",
    "session",
    "start_ingest",
    "translate",
]
