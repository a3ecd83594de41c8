"""One SparkSession for every Spark test of a run (a JVM start costs ~10 s, the first jar
download ~10 s more). Small and local: 2 cores, 2 shuffle partitions, no UI. Spark and Java
must be there: a missing one fails the run, it never skips."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from parka.spark_ext import session

    started = time.monotonic()
    spark = session(
        "local[2]",
        "parka-tests",
        extra_conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.sql.streaming.stopTimeout": "30s",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(f"\nSpark session ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
    yield spark
    spark.stop()
