"""``parka spark-ingest``'s metrics (raw mode), served the way ``--metrics-port`` serves them and
scraped over HTTP while the query runs: the committer's counters, its commit latency, and the
lag from the query's progress falling to 0."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parka.ops.cli_util import serve_metrics
from parka.spark_ext import SparkIngestSettings, ingest

from .._ingest_util import produce_events, wait_for
from ..metrics._scrape import BOUND, Samples, lag, scrape, value
from ._util import SPARK

pytestmark = SPARK


def test_a_running_spark_ingest_serves_counters_and_lag(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic(partitions=2)
    segments = produce_events(bootstrap, topic, 0, 300, batch=50)
    settings = SparkIngestSettings(
        topic=topic,
        table_uri=str(tmp_path / "events"),
        bootstrap_servers=bootstrap,
        trigger="processing-time=500ms",
        checkpoint_interval=1,  # a Delta checkpoint after each commit: the checkpoint histogram counts them
    )
    stop = threading.Event()
    failures: list[BaseException] = []
    caplog.set_level(logging.INFO, logger="parka.metrics")
    with serve_metrics(0, topic=topic, prog="test") as metrics:
        found = BOUND.search(caplog.text)
        assert found is not None, caplog.text
        port = int(found.group(1))

        def run() -> None:
            try:
                ingest(spark, settings, stop=stop, metrics=metrics)
            except BaseException as exc:  # handed to the test's thread
                failures.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        last: dict[str, Samples] = {}

        def caught_up() -> bool:
            if failures:
                raise failures[0]
            _, last["s"] = scrape(port)
            by_partition = lag(last["s"], topic)
            return (
                value(last["s"], "parka_records_total", topic=topic) == 300
                and set(by_partition) == {0, 1}
                and not any(by_partition.values())
                # the last commit's checkpoint and the commit itself, counted before them, timed too
                and value(last["s"], "parka_checkpoint_seconds_count", topic=topic)
                == value(last["s"], "parka_commit_latency_seconds_count", topic=topic)
                == value(last["s"], "parka_commits_total", topic=topic)
            )

        try:
            try:
                wait_for(caught_up, "300 records counted and lag 0 on both partitions", 120)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; last scrape: {last.get('s')}") from None
        finally:
            stop.set()
            worker.join(timeout=120)
    assert not failures
    s = last["s"]
    assert value(s, "parka_segments_total", topic=topic) == segments
    commits = value(s, "parka_commits_total", topic=topic)
    assert commits is not None and commits > 0
    assert value(s, "parka_commit_latency_seconds_count", topic=topic) == commits
    assert value(s, "parka_checkpoint_seconds_count", topic=topic) == commits
    files = value(s, "parka_files_total", topic=topic)
    assert files is not None and 0 < files <= segments
    bytes_total = value(s, "parka_bytes_total", topic=topic)
    assert bytes_total is not None and bytes_total > 0
