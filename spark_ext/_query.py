"""What every streaming query of ``parka spark-ingest`` starts from, in either mode: the Kafka
source's options (and the storage settings put into the session's Hadoop conf) and the trigger."""

from __future__ import annotations

from typing import Any

from ._options import hadoop_storage_options, kafka_client_options, trigger_ms
from ._reader import kafka_options
from ._settings import SparkIngestSettings

__all__ = ["source_options", "with_trigger"]


def source_options(spark: Any, s: SparkIngestSettings) -> dict[str, str]:
    """The Kafka source's options; also puts the storage settings into the session's Hadoop
    conf (the checkpoint, and in decode mode the table, are written through it)."""
    options = kafka_options(s.topic, s.bootstrap_servers, {**kafka_client_options(s.kafka_conf), **s.source_options})
    options["startingOffsets"] = s.starting_offsets
    if s.max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(s.max_offsets_per_trigger)
    for key, value in hadoop_storage_options(s.storage_options).items():
        spark.sparkContext._jsc.hadoopConfiguration().set(key, value)
    return options


def with_trigger(writer: Any, s: SparkIngestSettings) -> Any:
    interval = trigger_ms(s.trigger)
    if interval is None:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=f"{interval} milliseconds")
