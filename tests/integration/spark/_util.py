"""Helpers for the Spark tests: read a Delta table with either engine as comparable rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

# Every Spark test: the marker, and pyspark's own unclosed local sockets (it leaves the ones it
# reads collect()/toArrow() results from to the garbage collector) are not our warnings.
SPARK = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"),
]

USER = ["id", "device", "day", "value", "at"]


def rows_via_deltalake(path: Path | str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    table = DeltaTable(str(path)).to_pyarrow_table(columns=columns)
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def rows_via_spark(spark: Any, path: Path | str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    df = spark.read.format("delta").load(str(path))
    if columns is not None:
        df = df.select(*columns)
    return sorted(df.toArrow().to_pylist(), key=lambda r: r["id"])


def ids(rows: list[dict[str, Any]]) -> list[int]:
    return [r["id"] for r in rows]


def wait_until_idle(query: Any, timeout_s: float = 60.0) -> None:
    """Return once ``query`` has nothing left to process: no trigger running and no data
    available (a duplicate micro-batch would have run by then). Fails after ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        status = query.status
        if not status["isTriggerActive"] and not status["isDataAvailable"]:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"query still busy after {timeout_s:.0f} s: {status}")
        time.sleep(0.1)  # between reads of the condition


def committed_batches(table: Path) -> dict[int, int]:
    """Spark micro-batch id -> data files its Delta commit added, from the log (parka records the
    batch id in each commit's ``userMetadata`` when delta-spark commits, in its ``commitInfo``
    when delta-rs does)."""
    out: dict[int, int] = {}
    for commit in sorted((table / "_delta_log").glob("[0-9]*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        batch = json.loads(info.get("userMetadata") or "{}").get("parka.spark_batch", info.get("parka.spark_batch"))
        if batch is not None:
            assert batch not in out, f"batch {batch} committed twice"
            out[batch] = sum("add" in a for a in actions)
    return out
