"""The add actions' statistics of raw ingestion, against the ones delta-spark's own writer
computes for the same rows, and Spark's data skipping on them: segments with floats (with and
without NaN, infinities, zeros), float32, long strings, on tables whose data-skipping
properties are set. Written by ``parka ingest`` (delta-rs commits) and by Spark raw mode
(delta-spark commits, stats computed on the executors)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from parka.producer import ParquetProducer
from parka.spark_ext import SparkIngestSettings, ingest

from .._ingest_util import run_ingest
from ._util import SPARK

pytestmark = SPARK

NAN, INF = float("nan"), float("inf")
SCHEMA = pa.schema(
    [("id", pa.int64()), ("f", pa.float64()), ("g", pa.float32()), ("s", pa.string()), ("t", pa.string())]
)
COLUMNS = "id BIGINT, f DOUBLE, g FLOAT, s STRING, t STRING"
# The column list overrides the count (which alone would index only id), as in delta-spark.
PROPERTIES = {"delta.dataSkippingNumIndexedCols": "1", "delta.dataSkippingStatsColumns": "ID, f, `g`, s"}


def segments() -> list[pa.Table]:
    """One Kafka message (one data file) each; ids tell the files apart."""
    rows = [
        ([1.5, NAN, 3.0, None, 2.0], [0.1, 0.2, None, 0.3, 0.4], ["a" * 40, "b" * 31 + "ÿ" * 5, "c", None, "c"]),
        ([10.0, 11.0, 12.5, 13.0, 14.0], [1.1, 2.2, 1.5, 3.4e38, 1e-45], ["😀" * 40, "x" * 32 + "~z", "y", "y", "z"]),
        ([-5.0, -INF, 0.0, -0.0, -1.0], [-0.0, 0.0, 5.0, 6.0, 7.0], ["a" * 32 + "\U0010ffff" * 3 + "b"] + ["a"] * 4),
        ([NAN] * 5, [8.0] * 5, ["z" * 40, "z" * 33, "z", "z", "z"]),
    ]
    return [
        pa.table(
            {"id": range(5 * n, 5 * n + 5), "f": f, "g": g, "s": s, "t": [f"t{n}"] * 5},
            schema=SCHEMA,
        )
        for n, (f, g, s) in enumerate(rows)
    ]


def create_table(spark: Any, path: Path) -> None:
    props = ", ".join(f"'{k}' = '{v}'" for k, v in PROPERTIES.items())
    spark.sql(f"CREATE TABLE delta.`{path}` ({COLUMNS}) USING delta TBLPROPERTIES ({props})")


def stats_by_first_id(path: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for log in sorted((path / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            add = json.loads(line).get("add")
            if add is not None:
                stats = json.loads(add["stats"])
                out[stats["minValues"]["id"]] = stats
    return out


def same_number(ours: Any, spark: Any, float32: bool) -> bool:
    if isinstance(ours, str) or isinstance(spark, str):
        return bool(ours == spark)
    if float32:  # Spark writes Java's Float.toString, parka the same float32 in Python's digits
        return bool(pa.scalar(ours, pa.float32()).as_py() == pa.scalar(spark, pa.float32()).as_py())
    return bool(ours == spark)


def compare(ours: dict[str, Any], spark: dict[str, Any]) -> None:
    """Field by field; the only difference allowed: no float bounds where parka cannot know them."""
    assert ours["numRecords"] == spark["numRecords"]
    assert ours["nullCount"] == spark["nullCount"] == {k: v for k, v in spark["nullCount"].items() if k != "t"}
    assert set(spark["minValues"]) == set(spark["maxValues"]) == {"id", "f", "g", "s"}  # t: not listed
    for key in ("minValues", "maxValues"):
        for name, theirs in spark[key].items():
            if name in ("f", "g") and (key == "maxValues" or theirs == "NaN"):
                # pyarrow leaves NaN out of its max (and writes no bounds for all-NaN): left out
                assert name not in ours[key], (key, name)
            else:
                assert same_number(ours[key][name], theirs, float32=name == "g"), (key, name, ours[key][name], theirs)
        assert set(ours[key]) <= set(spark[key])


@pytest.mark.parametrize("writer", ["parka ingest", "spark raw"])
def test_raw_ingestion_writes_delta_sparks_stats_and_spark_skips_files_by_them(
    writer: str, spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=4)
    parts = segments()
    with ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet"}) as producer:
        producer.set_schema(topic, SCHEMA)
        for n, part in enumerate(parts):  # a Kafka partition each: one data file each, never stitched
            producer.produce_batch(topic, part, partition=n)
        assert producer.flush(30) == 0
    ours, reference = tmp_path / "parka", tmp_path / "spark"
    create_table(spark, ours)
    create_table(spark, reference)
    for part in parts:  # delta-spark's own writer, one file per part
        spark.createDataFrame(part).coalesce(1).write.format("delta").mode("append").save(str(reference))
    if writer == "parka ingest":
        run_ingest(topic, ours, bootstrap, "--end-at-latest")
    else:
        ingest(spark, SparkIngestSettings(topic=topic, table_uri=str(ours), bootstrap_servers=bootstrap))

    mine, theirs = stats_by_first_id(ours), stats_by_first_id(reference)
    assert sorted(mine) == sorted(theirs) == [0, 5, 10, 15]
    for first in theirs:
        compare(mine[first], theirs[first])
    assert theirs[0]["maxValues"]["f"] == "NaN" and theirs[10]["minValues"]["f"] == "-Infinity"  # what they hold
    assert mine[5]["maxValues"]["s"] == "😀" * 16 + "\U0010ffff"  # a tie-broken max, where there was none

    # Spark's data skipping on the float min and the string bounds, with the rows of its own table.
    # Parquet filter pushdown is off: with it, Spark's Parquet reader drops a pyarrow row group
    # holding NaN by its footer max (NaN-free) by itself, whatever the Delta log says.
    def read(path: Path, where: str) -> tuple[int, list[Any]]:
        df = spark.read.format("delta").load(str(path)).where(where)
        rows = sorted((r["id"], r["f"]) for r in df.collect())
        return len(df.inputFiles()), [(i, "NaN" if f is not None and math.isnan(f) else f) for i, f in rows]

    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        for where, files in [("f < 0", 2), ("g < 0.05", 2), ("s < 'b'", 2), ("s > 'zz'", 2), ("f > 12", 4)]:
            assert read(ours, where) == (files, read(reference, where)[1]), where
        # Spark takes NaN > 12 as true: the file of 1.5, NaN and 3.0 is read (a max of 3.0 would skip it)
        assert (1, "NaN") in read(ours, "f > 12")[1]
    finally:
        spark.conf.unset("spark.sql.parquet.filterPushdown")
