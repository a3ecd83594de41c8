"""Cross-engine reads: a table `parka ingest` (delta-rs) wrote reads the same in delta-spark, and a
table the Spark path wrote (raw or decode mode) reads the same in deltalake; all hold what was
produced."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parka.spark_ext import SparkIngestSettings, ingest

from .._ingest_util import events, last_json, produce_events, run_ingest
from ._util import SPARK, USER, ids, rows_via_deltalake, rows_via_spark

pytestmark = SPARK

COLUMNS = [*USER, "__parka_key"]


@pytest.mark.parametrize("partition_by", [(), ("day",)], ids=["flat", "partitioned"])
def test_both_ingestion_paths_read_the_same_in_both_engines(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, partition_by: tuple[str, ...]
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 450, batch=40)
    produced = sorted(events(0, 450).to_pylist(), key=lambda r: r["id"])

    by_parka = tmp_path / "by_parka_ingest"
    flags = ["--partition-by", ",".join(partition_by)] if partition_by else []
    result = last_json(run_ingest(topic, by_parka, bootstrap, "--end-at-latest", *flags))
    # flat: several segments per file, so delta-spark reads stitched files below (partitioned:
    # these segments span days, so they are split, not stitched)
    if not partition_by:
        assert result["stitched_segments"] > 0 and result["files"] < result["segments"]
    readings = {
        "parka ingest, read by delta-spark": rows_via_spark(spark, by_parka, COLUMNS),
        "parka ingest, read by deltalake": rows_via_deltalake(by_parka, COLUMNS),
    }
    for mode in ("raw", "decode"):
        by_spark = tmp_path / f"by_spark_{mode}"
        settings = SparkIngestSettings(
            topic=topic, table_uri=str(by_spark), bootstrap_servers=bootstrap, partition_by=partition_by, mode=mode
        )
        stats = ingest(spark, settings)
        assert stats.records == 450
        if mode == "raw" and not partition_by:  # each task's segments stitched (partitioned: split)
            assert stats.files < stats.segments
        readings[f"spark-ingest {mode}, read by deltalake"] = rows_via_deltalake(by_spark, COLUMNS)
        readings[f"spark-ingest {mode}, read by delta-spark"] = rows_via_spark(spark, by_spark, COLUMNS)
        assert rows_via_spark(spark, by_spark) == rows_via_deltalake(by_spark), mode
    for name, rows in readings.items():
        assert ids(rows) == list(range(450)), name
        assert [{c: r[c] for c in USER} for r in rows] == produced, name
        assert [r["__parka_key"] for r in rows] == [r["device"].encode() for r in produced], name
    # the whole tables, every column either engine sees, agree across engines
    assert rows_via_spark(spark, by_parka) == rows_via_deltalake(by_parka)
