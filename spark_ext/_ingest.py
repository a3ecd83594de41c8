"""Structured Streaming from a parka topic into a Delta table through delta-spark, exactly once.

The exactly-once argument is Spark's and Delta's, and parka adds nothing to it:

1. The Kafka source plans each micro-batch as offset ranges and writes them to the offset log
   in the checkpoint (``<checkpoint>/offsets/<batch>``) before running it.
2. The Delta sink commits the batch's files in one Delta commit carrying a ``txn`` action
   ``(appId = query id, version = batch id)``; a replayed batch whose id the table already has is
   skipped. A failed batch commits nothing (the decoder failing on one segment fails the whole
   batch), so nothing partial is ever visible.
3. Only then is the batch marked done in the checkpoint (``commits/<batch>``). A restart
   replays the last planned batch with the same offsets, and step 2 makes that idempotent.

So the checkpoint and the table belong together: a new checkpoint location is a new query id,
which starts again from ``starting_offsets`` (duplicates if the table already holds that
data). The default location is ``<table>/_parka_checkpoints/<app id>``, inside the table
directory: Delta (Spark and delta-rs) treats names starting with ``_`` as hidden, so neither
reads nor VACUUM touch it, and the table and its progress move together.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from parka.errors import ConfigError, ParkaError, SchemaMismatchError
from parka.schema import RESERVED_PREFIX, to_arrow_schema
from parka.segment import RESERVED_FIELDS

from ._arrow import METADATA_COLUMNS, RESERVED_MODES, SegmentDecoder, type_shape
from ._reader import SchemaInput, first_segment_schema, kafka_options, spark_schema
from ._session import translate

__all__ = ["CHECKPOINTS_DIR", "SparkIngestError", "SparkIngestSettings", "SparkIngestStats", "ingest", "start_ingest"]

log = logging.getLogger("parka.spark_ingest")

CHECKPOINTS_DIR = "_parka_checkpoints"
SCHEMA_EVOLUTION = ("none", "merge")

# Kafka consumer settings the Spark Kafka source manages itself and refuses, with what to use instead.
_SPARK_OWNED = {
    "auto.offset.reset": "--auto-offset-reset / --starting-offsets",
    "enable.auto.commit": "nothing (the checkpoint holds the offsets)",
    "key.deserializer": "nothing (values are segments)",
    "value.deserializer": "nothing (values are segments)",
    "interceptor.classes": "nothing (not supported by Spark's Kafka source)",
}
# delta-rs storage option -> Hadoop setting, for the options both engines know.
_STORAGE_KEYS = {
    "aws_access_key_id": "fs.s3a.access.key",
    "aws_secret_access_key": "fs.s3a.secret.key",
    "aws_session_token": "fs.s3a.session.token",
    "aws_endpoint_url": "fs.s3a.endpoint",
    "aws_endpoint": "fs.s3a.endpoint",
    "aws_region": "fs.s3a.endpoint.region",
}
_TRIGGER = re.compile(r"processing-time=(\d+(?:\.\d+)?)\s*([a-z]*)")
_UNIT_MS = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("", "s", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
}


class SparkIngestError(ParkaError):
    """The streaming query failed for a reason other than bad input (which raises the segment's
    own :class:`~parka.errors.SegmentError` or :class:`~parka.errors.SchemaMismatchError`)."""


@dataclass(frozen=True)
class SparkIngestSettings:
    """Everything ``parka spark-ingest`` can be told; see its ``--help`` for each flag.

    ``kafka_conf`` holds Kafka client settings without the ``kafka.`` prefix (as ``-K`` takes
    them); ``source_options`` other Kafka source options (``failOnDataLoss``...).
    ``storage_options`` are ``fs.*`` Hadoop settings or the delta-rs keys in ``_STORAGE_KEYS``.

    Raises (on construction):
        ConfigError: a value that is out of range, unknown or contradicts another.
    """

    topic: str
    table_uri: str
    bootstrap_servers: str
    kafka_conf: Mapping[str, str] = field(default_factory=dict)
    source_options: Mapping[str, str] = field(default_factory=dict)
    app_id: str | None = None
    checkpoint_location: str | None = None
    trigger: str = "available-now"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    partition_by: tuple[str, ...] = ()
    schema: SchemaInput | None = None
    schema_evolution: str = "none"
    reserved: str = "keep"
    metadata: tuple[str, ...] = ()
    storage_options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.topic or not self.table_uri:
            raise ConfigError("topic/table_uri", (self.topic, self.table_uri), "a topic and a table URI")
        trigger_ms(self.trigger)
        if self.schema_evolution not in SCHEMA_EVOLUTION:
            raise ConfigError("schema_evolution", self.schema_evolution, ", ".join(SCHEMA_EVOLUTION))
        if self.reserved not in RESERVED_MODES:
            raise ConfigError("reserved", self.reserved, ", ".join(RESERVED_MODES))
        for name in self.metadata:
            if name not in METADATA_COLUMNS:
                raise ConfigError("metadata", name, ", ".join(METADATA_COLUMNS))
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger < 1:
            raise ConfigError("max_offsets_per_trigger", self.max_offsets_per_trigger, "a positive integer")
        for key in self.kafka_conf:
            if key in _SPARK_OWNED:
                raise ConfigError(key, self.kafka_conf[key], f"not set here; use {_SPARK_OWNED[key]}")
        if self.checkpoint_location is None:
            clash = [c for c in self.partition_by if CHECKPOINTS_DIR.startswith(c)]
            if clash:  # delta-rs VACUUM treats '<partition column>...' directories as data
                raise ConfigError(
                    "partition_by", clash[0], "a name that does not prefix '_parka_checkpoints'",
                    reason="or give a checkpoint location outside the table",
                )  # fmt: skip
        hadoop_storage_options(self.storage_options)

    @property
    def app(self) -> str:
        """The application id: the query name and the default checkpoint's folder."""
        return self.app_id or f"parka-{self.topic}"

    @property
    def checkpoint(self) -> str:
        return self.checkpoint_location or f"{self.table_uri.rstrip('/')}/{CHECKPOINTS_DIR}/{self.app}"


@dataclass
class SparkIngestStats:
    """What a finished (or stopped) ingestion did: completed micro-batches (each one Delta commit
    when it had data), Kafka messages (segments) read and records written, from the query's
    progress reports."""

    batches: int = 0
    segments: int = 0
    records: int = 0
    query_id: str = ""
    schema_source: str = ""


def trigger_ms(trigger: str) -> int | None:
    """``None`` for ``available-now``, else the processing-time interval in milliseconds.

    Raises:
        ConfigError: any other form.
    """
    if trigger == "available-now":
        return None
    m = _TRIGGER.fullmatch(trigger.strip())
    if m is None or m.group(2) not in _UNIT_MS:
        raise ConfigError("trigger", trigger, "available-now, processing-time=<n>[ms|s|m|h] (e.g. processing-time=30s)")
    return max(1, int(float(m.group(1)) * _UNIT_MS[m.group(2)]))


def hadoop_storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """Storage options as Hadoop settings.

    Raises:
        ConfigError: a key that is neither ``fs.*`` nor a known delta-rs key.
    """
    out: dict[str, str] = {}
    for key, value in options.items():
        if key.startswith("fs."):
            out[key] = value
        elif key.lower() in _STORAGE_KEYS:
            out[_STORAGE_KEYS[key.lower()]] = value
        else:
            allowed = "fs.* Hadoop settings, " + ", ".join(k.upper() for k in _STORAGE_KEYS)
            raise ConfigError("storage option", key, allowed)
    return out


def _kafka_client_options(conf: Mapping[str, str]) -> dict[str, str]:
    """``-K`` settings as Kafka source options; librdkafka's ``sasl.username``/``sasl.password``
    become the Java client's ``sasl.jaas.config``, so one set of flags serves both CLIs."""
    conf = dict(conf)
    user, password = conf.pop("sasl.username", None), conf.pop("sasl.password", None)
    if (user is None) != (password is None):
        raise ConfigError("sasl.username/sasl.password", "one of them", "both or neither")
    if user is not None and "sasl.jaas.config" not in conf:
        mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "PLAIN")).upper()
        module = "scram.ScramLoginModule" if mechanism.startswith("SCRAM") else "plain.PlainLoginModule"
        quoted = [v.replace("\\", "\\\\").replace('"', '\\"') for v in (user, password or "")]
        conf["sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.{module} required username="{quoted[0]}" password="{quoted[1]}";'
        )
    if "sasl.mechanisms" in conf:  # librdkafka's spelling
        conf.setdefault("sasl.mechanism", conf.pop("sasl.mechanisms"))
    return {f"kafka.{k}": v for k, v in conf.items()}


def _arrow_of_table(spark_struct: Any) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema as spark_to_arrow

    return spark_to_arrow(spark_struct)


def _resolve_schema(
    spark: Any, s: SparkIngestSettings, options: Mapping[str, str], table: pa.Schema | None
) -> tuple[pa.Schema, str]:
    """The stream's user schema and where it came from: the given schema, else the table's, else
    the topic's first segment. Checked against the table before anything runs.

    Raises:
        SchemaMismatchError: the schema has columns the table lacks (without merge) or types
            the table cannot take.
    """
    if s.schema is not None:
        schema, source = to_arrow_schema(s.schema), "given"
    elif table is not None:
        user = [f for f in table if not f.name.startswith(RESERVED_PREFIX) and f.name not in _METADATA_NAMES]
        schema, source = pa.schema(user), "table"
    else:
        schema, source = first_segment_schema(spark, s.topic, options), "first segment"
    if table is not None:
        probe = SegmentDecoder(schema)
        for f in probe.schema:
            if f.name not in table.names:
                if s.schema_evolution != "merge":
                    raise SchemaMismatchError(
                        "the table has no such column; rerun with --schema-evolution merge to add it", field=f.name
                    )
                continue
            have = probe.schema.field(f.name).type
            want = SegmentDecoder(pa.schema([table.field(f.name)])).schema.field(0).type
            if type_shape(have) != type_shape(want):
                raise SchemaMismatchError(f"the schema says {have}, the table has {want}", field=f.name)
    return schema, source


_OBSERVED = "parka_ingest"
_METADATA_NAMES = frozenset(f.name for f in METADATA_COLUMNS.values())


def start_ingest(spark: Any, settings: SparkIngestSettings) -> Any:
    """Start the streaming query; returns the ``StreamingQuery`` (see :func:`ingest` to wait).

    Raises:
        ConfigError, SchemaError, SchemaMismatchError: before anything runs.
    """
    return _start(spark, settings)[0]


def _start(spark: Any, settings: SparkIngestSettings) -> tuple[Any, str]:
    from delta.tables import DeltaTable

    s = settings
    hadoop = hadoop_storage_options(s.storage_options)
    options = kafka_options(s.topic, s.bootstrap_servers, {**_kafka_client_options(s.kafka_conf), **s.source_options})
    options["startingOffsets"] = s.starting_offsets
    if s.max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(s.max_offsets_per_trigger)
    for key, value in hadoop.items():  # the session's Hadoop conf: the table check and the sink both see it
        spark.sparkContext._jsc.hadoopConfiguration().set(key, value)

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
    schema, source = _resolve_schema(spark, s, options, table_schema)
    decoder = SegmentDecoder(schema, reserved=s.reserved, metadata=s.metadata)
    for name in s.partition_by:
        if name not in decoder.output_schema.names:
            raise ConfigError("partition_by", name, ", ".join(decoder.output_schema.names))
    log.info("stream schema from the %s: %s", source, ", ".join(f"{f.name} {f.type}" for f in decoder.schema))

    raw = spark.readStream.format("kafka").options(**options).load()
    from pyspark.sql import functions as F

    from ._reader import decode

    records = decode(raw, schema, reserved=s.reserved, metadata=s.metadata)
    records = records.observe(_OBSERVED, F.count(F.lit(1)).alias("records"))  # per-batch count, in progress
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
    interval = trigger_ms(s.trigger)
    writer = (
        writer.trigger(availableNow=True)
        if interval is None
        else writer.trigger(processingTime=f"{interval} milliseconds")
    )
    return writer.start(s.table_uri), source


def ingest(spark: Any, settings: SparkIngestSettings, *, stop: threading.Event | None = None) -> SparkIngestStats:
    """Run the ingestion: until the topic's data at start is in (``available-now``), or until
    ``stop`` is set (``processing-time``; the batch in flight is abandoned and replayed next time).

    Raises:
        SegmentError, SegmentDecodeError, SchemaMismatchError: a segment the table cannot take;
            the batch holding it committed nothing.
        SparkIngestError: the query failed for another reason.
        ConfigError, SchemaError: before anything runs.
    """
    from pyspark.errors import StreamingQueryException

    query, source = _start(spark, settings)
    # batch id -> (segments, records) of each batch that completed, i.e. whose Delta commit
    # landed (recentProgress keeps only the last 100, so it is read as the query goes)
    seen: dict[int, tuple[int, int]] = {}

    def collect() -> None:
        for progress in query.recentProgress:
            if progress.batchId not in seen:
                observed = (progress.observedMetrics or {}).get(_OBSERVED)
                records = int(observed["records"]) if observed is not None else 0
                seen[progress.batchId] = (int(progress.numInputRows), records)
                log.info(
                    "batch %d: %d segments, %d records in %.1f s",
                    progress.batchId,
                    progress.numInputRows,
                    records,
                    progress.batchDuration / 1000,
                )

    try:
        while query.isActive:
            if stop is not None and stop.is_set():
                query.stop()
                break
            query.awaitTermination(0.5)
            collect()
        query.awaitTermination()
    except StreamingQueryException as exc:
        parka_error = translate(exc)
        if parka_error is not None:
            raise parka_error from None
        raise SparkIngestError(f"streaming query {settings.app} failed: {exc}") from exc
    finally:
        if query.isActive:
            query.stop()
    collect()
    return _stats(query, source, seen)


def _stats(query: Any, source: str, seen: dict[int, tuple[int, int]]) -> SparkIngestStats:
    return SparkIngestStats(
        batches=len(seen),
        segments=sum(s for s, _ in seen.values()),
        records=sum(r for _, r in seen.values()),
        query_id=str(query.id),
        schema_source=source,
    )


def settings_summary(s: SparkIngestSettings, hidden: Sequence[str] = ("password", "secret", "token", "jaas")) -> str:
    """One log line describing ``s`` with secrets masked."""
    kafka = {k: ("***" if any(h in k.lower() for h in hidden) else v) for k, v in s.kafka_conf.items()}
    return (
        f"ingesting {s.topic} into {s.table_uri} as {s.app} (trigger {s.trigger}, checkpoint {s.checkpoint}, "
        f"kafka settings {kafka})"
    )
