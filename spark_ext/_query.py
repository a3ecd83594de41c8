"""What every streaming query of ``parka spark-ingest`` starts from, in either mode: the Kafka
source's options (and the storage settings put into the session's Hadoop conf), the stream of
Kafka rows, the trigger, and, for a query whose driver lands through a
:class:`parka.lake.LandingSession` (raw mode; decode mode into Iceberg), its state on the driver
(:class:`LandingRun`) and a new query's start after the table's ``txn`` versions
(:func:`resume_from_table`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from parka.lake import LandingSession

from parka.errors import ParkaError

from ._jvm import jvm_class
from ._options import HADOOP_CHECKPOINT, hadoop_storage_options, kafka_client_options, trigger_ms
from ._reader import kafka_options
from ._settings import CHECKPOINT_LOCATION, SparkIngestSettings

__all__ = ["LandingRun", "kafka_stream", "resume_from_table", "source_options", "with_trigger"]

log = logging.getLogger("parka.spark_ingest")


@dataclass
class LandingRun:
    """The driver's state of a query that lands through a landing session (raw mode, decode mode
    into Iceberg): the session (its committer's stats are the run's counters), and what failed the
    query (to raise as is)."""

    session: LandingSession
    failure: ParkaError | None = None


def source_options(spark: Any, s: SparkIngestSettings) -> dict[str, str]:
    """The Kafka source's options; also puts the storage settings into the session's Hadoop
    conf (the checkpoint, and in decode mode the table, are written through it)."""
    options = kafka_options(s.topic, s.bootstrap_servers, {**kafka_client_options(s.kafka_conf), **s.source_options})
    options["startingOffsets"] = s.starting_offsets
    if s.max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(s.max_offsets_per_trigger)
    for key, value in hadoop_storage_options(s.storage_options).items():
        spark.sparkContext._jsc.hadoopConfiguration().set(key, value)
    _check_checkpoint(spark, s)
    return options


# what the JVM says when Hadoop has no FileSystem for a URI's scheme, or its class is not on the classpath
_NO_FILESYSTEM = ("org.apache.hadoop.fs.UnsupportedFileSystemException", "java.lang.ClassNotFoundException")


def _check_checkpoint(spark: Any, s: SparkIngestSettings) -> None:
    """Before the query starts: Hadoop has a FileSystem for the checkpoint's location in this
    session (s3a needs hadoop-aws, which pyspark does not ship), so that a missing one is a
    :class:`~parka.errors.ConfigError` naming the flag and the jars, not a JVM trace. Other
    failures (credentials, a network) are left to the query, which reports them as they are.

    Raises:
        ConfigError: no FileSystem for the checkpoint's scheme.
    """
    from ._session import jvm_cause, s3a_jars

    jvm = spark.sparkContext._jvm
    try:
        jvm_class(jvm, "org.apache.hadoop.fs.Path")(s.checkpoint).getFileSystem(
            spark.sparkContext._jsc.hadoopConfiguration()
        )
    except Exception as exc:  # py4j's error, holding the JVM's
        cause = jvm_cause(exc, _NO_FILESYSTEM)
        if cause is None:
            return
        reason = f"this Spark session cannot write it ({cause})"
        if s.checkpoint.startswith("s3a://"):
            coords, conf = s3a_jars()
            excludes = "".join(f" and {k}={v}" for k, v in conf.items())
            reason += (
                f"; s3a needs the packages {','.join(coords)}{excludes} in the session "
                "(parka.spark_ext.s3a_jars() gives them for session(extra_packages=..., extra_conf=...); "
                "parka spark-ingest adds them itself)"
            )
        raise CHECKPOINT_LOCATION.error(s.checkpoint, HADOOP_CHECKPOINT, reason=reason) from None


def kafka_stream(spark: Any, options: Mapping[str, str]) -> Any:
    """The Kafka source's streaming DataFrame of raw Kafka rows (one row a segment)."""
    return spark.readStream.format("kafka").options(**options).load()


def with_trigger(writer: Any, s: SparkIngestSettings) -> Any:
    interval = trigger_ms(s.trigger)
    if interval is None:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=f"{interval} milliseconds")


def resume_from_table(spark: Any, s: SparkIngestSettings, options: dict[str, str], session: LandingSession) -> None:
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
    session.settle_app_id(partitions)  # an existing table keeps its txn app ids
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
    props = jvm_class(jvm, "java.util.Properties")()
    for key, value in options.items():
        if key.startswith("kafka."):
            props.setProperty(key[len("kafka.") :], value)
    admin = jvm_class(jvm, "org.apache.kafka.clients.admin.AdminClient").create(props)
    try:
        names = jvm_class(jvm, "java.util.Collections").singletonList(topic)
        seconds = jvm_class(jvm, "java.util.concurrent.TimeUnit").SECONDS
        described = admin.describeTopics(names).allTopicNames().get(30, seconds)
        return sorted(int(info.partition()) for info in described.get(topic).partitions())
    finally:
        admin.close()
