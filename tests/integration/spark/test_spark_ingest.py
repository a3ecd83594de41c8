"""Decode mode: Structured Streaming into Delta with delta-spark, exactly once across reruns and
restarts, and a segment the table cannot take fails its whole batch. (Raw mode: test_spark_raw.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from parka.producer import ParquetProducer
from parka.spark_ext import SparkIngestSettings, ingest, start_ingest
from parka.spark_ext._cli import main

from parka.errors import SchemaMismatchError

from .._ingest_util import produce_events, table_ids, wait_for_rows
from ._util import SPARK, USER, rows_via_deltalake, wait_until_idle

pytestmark = SPARK


def test_available_now_twice_then_the_cli_is_exactly_once(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = new_topic(partitions=3)
    segments = produce_events(bootstrap, topic, 0, 600, batch=50)
    table = tmp_path / "events"
    settings = SparkIngestSettings(
        topic=topic, table_uri=str(table), bootstrap_servers=bootstrap, max_offsets_per_trigger=6, mode="decode"
    )
    first = ingest(spark, settings)
    assert (first.segments, first.records, first.schema_source) == (segments, 600, "topic's segments")
    assert first.batches >= 2  # maxOffsetsPerTrigger split the backlog
    again = ingest(spark, settings)
    assert (again.segments, again.records, again.schema_source) == (0, 0, "table")
    produce_events(bootstrap, topic, 600, 300, batch=50)
    assert main([topic, str(table), "-k", bootstrap, "--end-at-latest", "-q", "--mode", "decode"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["status"], result["records"], result["query_id"]) == ("ok", 300, first.query_id)
    assert sorted(table_ids(table)) == list(range(900))
    assert (table / "_parka_checkpoints" / f"parka-{topic}" / "offsets").is_dir()


def test_stopped_and_restarted_stream_is_exactly_once(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 400, batch=20)
    table = tmp_path / "events"
    settings = SparkIngestSettings(
        topic=topic,
        table_uri=str(table),
        bootstrap_servers=bootstrap,
        trigger="processing-time=200ms",
        max_offsets_per_trigger=4,
        mode="decode",
    )
    query = start_ingest(spark, settings)
    try:
        assert wait_for_rows(table, 1, timeout_s=60) >= 1
    finally:
        query.stop()  # mid-backlog, possibly mid-batch
    stopped_at = len(table_ids(table))
    assert stopped_at < 400
    produce_events(bootstrap, topic, 400, 200, batch=20)
    query = start_ingest(spark, settings)
    try:
        assert wait_for_rows(table, 600, timeout_s=90) == 600
        wait_until_idle(query)  # a duplicate batch would have landed by then
    finally:
        query.stop()
    assert sorted(table_ids(table)) == list(range(600))


BAD = pa.schema([("id", pa.string(), False), ("device", pa.string(), False)])


def test_a_segment_the_table_cannot_take_fails_its_batch_and_writes_nothing(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    produce_events(bootstrap, topic, 0, 100, batch=50)
    table = tmp_path / "events"
    settings = SparkIngestSettings(topic=topic, table_uri=str(table), bootstrap_servers=bootstrap, mode="decode")
    assert ingest(spark, settings).records == 100
    version = DeltaTable(str(table)).version()
    produce_events(bootstrap, topic, 100, 50, batch=50)  # offset 2: fine on its own
    with ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet"}) as producer:
        producer.set_schema(topic, BAD)
        producer.produce_batch(topic, pa.table({"id": ["x"], "device": ["d"]}, schema=BAD))
        assert producer.flush(30) == 0
    with pytest.raises(SchemaMismatchError) as info:
        ingest(spark, settings)
    err = info.value
    assert (err.topic, err.partition, err.offset, err.field) == (topic, 0, 3, "id")
    assert "column 'id' is string in the segment, int64 in the schema" in str(err)
    assert DeltaTable(str(table)).version() == version  # the good segment of that batch is not in either
    assert sorted(table_ids(table)) == list(range(100))
    # and the CLI says so and exits 1, every time
    assert main([topic, str(table), "-k", bootstrap, "--end-at-latest", "-q", "--mode", "decode"]) == 1
    assert [r["id"] for r in rows_via_deltalake(table, USER)] == list(range(100))
