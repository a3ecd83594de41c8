"""Spark raw mode with a derived partition column (``--partition-by day=date(ts)``): the same
segment writer on the executors, committed by delta-spark, read back by Spark and delta-rs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from parka.spark_ext import SparkIngestSettings, ingest

from ..test_derived_partitions import SPEC, check_table, day_of, produce, web_requests
from ._util import SPARK

pytestmark = SPARK


def test_spark_raw_mode_partitions_by_a_derived_date(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "web_requests"
    data = web_requests(0, 2000)
    segments = produce(bootstrap, topic, data)  # not aligned: segments crossing midnight are split
    settings = SparkIngestSettings(topic=topic, table_uri=str(table), bootstrap_servers=bootstrap, partition_by=(SPEC,))
    result = ingest(spark, settings)
    assert (result.mode, result.segments, result.records) == ("raw", segments, 2000)
    check_table(table, data)
    # delta-spark reads the same partition column, and prunes on it
    df = spark.read.format("delta").load(str(table))
    by_spark = {r["id"]: r["day"] for r in df.select("id", "day").toArrow().to_pylist()}
    assert by_spark == {r["id"]: day_of(r["ts"]) for r in data.to_pylist()}
    one_day = df.where("day = DATE'2026-11-22'")
    assert one_day.count() == sum(1 for r in data.to_pylist() if str(day_of(r["ts"])) == "2026-11-22")
