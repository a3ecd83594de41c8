"""Raw mode: segments land in the table byte for byte, committed with parka ingest's per-partition
txn, so the two ingestions take turns on one table exactly once; a bad segment fails its batch,
which leaves nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable
from parka.lake import FileName
from parka.producer import ParquetProducer
from parka.spark_ext import SparkIngestSettings, ingest, start_ingest
from parka.spark_ext._cli import main

from parka.errors import ConfigError, SchemaMismatchError
from reliability import forkserver

from .._ingest_util import (
    FAST_GROUP,
    app_id_of,
    assert_no_orphans,
    assert_segments_stored_byte_for_byte,
    events,
    last_json,
    produce_events,
    referenced_files,
    run_ingest,
    table_ids,
    wait_for_rows,
)
from ._util import SPARK, USER, committed_batches, rows_via_deltalake, rows_via_spark, wait_until_idle

pytestmark = SPARK


def test_available_now_twice_lands_segments_byte_for_byte(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = new_topic(partitions=2)
    segments = produce_events(bootstrap, topic, 0, 600, batch=50)
    table = tmp_path / "events"
    settings = SparkIngestSettings(
        topic=topic, table_uri=str(table), bootstrap_servers=bootstrap, max_offsets_per_trigger=4
    )
    first = ingest(spark, settings)
    assert (first.mode, first.segments, first.records) == ("raw", segments, 600)
    assert first.files <= segments
    assert first.schema_source == "first segment" and first.batches >= 3  # maxOffsetsPerTrigger split it
    again = ingest(spark, settings)
    assert (again.segments, again.records, again.schema_source) == (0, 0, "table")
    # every segment's row groups in the table once, unchanged (stitched per task)
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, table)
    # the same table in delta-rs and delta-spark, holding what was produced
    produced = sorted(events(0, 600).to_pylist(), key=lambda r: r["id"])
    by_rs, by_spark = rows_via_deltalake(table), rows_via_spark(spark, table)
    assert by_rs == by_spark
    assert [{c: r[c] for c in USER} for r in by_rs] == produced
    assert [r["__parka_key"] for r in by_rs] == [r["device"].encode() for r in produced]
    # the CLI defaults to raw mode and continues the same txn scheme
    produce_events(bootstrap, topic, 600, 300, batch=50)
    assert main([topic, str(table), "-k", bootstrap, "--end-at-latest", "-q"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["status"], result["mode"], result["records"]) == ("ok", "raw", 300)
    assert sorted(table_ids(table)) == list(range(900))
    assert_no_orphans(table)
    last = {}
    for path in referenced_files(table):
        name = FileName.parse(path)
        assert name is not None
        last[name.partition] = max(name.last_offset, last.get(name.partition, -1))
    app = app_id_of(topic, table)
    assert {p: DeltaTable(str(table)).transaction_version(f"{app}-{p}") for p in last} == last


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
    )
    query = start_ingest(spark, settings)
    try:
        assert wait_for_rows(table, 1, timeout_s=60) >= 1
    finally:
        query.stop()  # mid-backlog, possibly mid-batch
    assert len(table_ids(table)) < 400
    produce_events(bootstrap, topic, 400, 200, batch=20)
    query = start_ingest(spark, settings)
    try:
        assert wait_for_rows(table, 600, timeout_s=90) == 600
        wait_until_idle(query)  # a duplicate batch would have landed by then
    finally:
        query.stop()
    assert sorted(table_ids(table)) == list(range(600))
    ingest(spark, settings.__class__(**{**settings.__dict__, "trigger": "available-now"}))  # its cleanup at start
    assert_no_orphans(table)


def test_parka_ingest_and_spark_raw_take_turns_exactly_once(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "events"
    settings = SparkIngestSettings(topic=topic, table_uri=str(table), bootstrap_servers=bootstrap)
    produce_events(bootstrap, topic, 0, 200, batch=25)
    run_ingest(topic, table, bootstrap, "--end-at-latest")  # the table's default app id, as Spark's
    produce_events(bootstrap, topic, 200, 200, batch=25)
    # a new query (no checkpoint) starts after the table's txn versions
    assert ingest(spark, settings).records == 200
    produce_events(bootstrap, topic, 400, 200, batch=25)
    run_ingest(topic, table, bootstrap, "--end-at-latest")  # seeks from the txn Spark wrote
    produce_events(bootstrap, topic, 600, 100, batch=25)
    # the query's checkpoint is behind the table now: what parka ingest took is skipped. Each
    # task stitched its partition's segments, taken and new, into one file: trimmed to the new.
    again = ingest(spark, settings)
    assert (again.records, again.covered_files) == (100, 2)
    assert sorted(table_ids(table)) == list(range(700))
    assert_no_orphans(table)


def test_a_table_landed_under_the_older_default_app_id_is_continued_under_it(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """An upgrade: a table whose progress is under ``parka-<topic>`` (the earlier releases'
    default) is continued by a new query under that app id, right after its ``txn``."""
    topic = new_topic(partitions=2)
    table = tmp_path / "events"
    legacy = f"parka-{topic}"
    produce_events(bootstrap, topic, 0, 200, batch=25)
    run_ingest(topic, table, bootstrap, "--end-at-latest", "--app-id", legacy)  # as an earlier release did
    produce_events(bootstrap, topic, 200, 200, batch=25)
    settings = SparkIngestSettings(topic=topic, table_uri=str(table), bootstrap_servers=bootstrap)
    assert ingest(spark, settings).records == 200
    assert sorted(table_ids(table)) == list(range(400))  # nothing read again, nothing skipped
    dt = DeltaTable(str(table))
    assert all(dt.transaction_version(f"{legacy}-{p}") is not None for p in range(2))
    assert all(dt.transaction_version(f"{app_id_of(topic, table)}-{p}") is None for p in range(2))


BAD = pa.schema([("id", pa.string(), False), ("device", pa.string(), False)])


def test_a_bad_segment_fails_its_batch_or_goes_to_the_dead_letter_table(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    produce_events(bootstrap, topic, 0, 100, batch=50)
    table = tmp_path / "events"
    settings = SparkIngestSettings(topic=topic, table_uri=str(table), bootstrap_servers=bootstrap)
    assert ingest(spark, settings).records == 100
    version = DeltaTable(str(table)).version()
    produce_events(bootstrap, topic, 100, 50, batch=50)  # offset 2: fine on its own
    with ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet"}) as producer:
        producer.set_schema(topic, BAD)
        producer.produce_batch(topic, pa.table({"id": ["x"], "device": ["d"]}, schema=BAD))
        assert producer.flush(30) == 0
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b'{"id": 1}', partition=0)  # offset 4: not a segment
    assert plain.flush(30) == 0
    produce_events(bootstrap, topic, 150, 50, batch=50)  # offset 5
    with pytest.raises(SchemaMismatchError) as info:
        ingest(spark, settings)
    err = info.value
    # the first refused field, by its path
    assert (err.topic, err.partition, err.offset, err.field) == (topic, 0, 3, "id")
    assert "column 'id' is string in the segment but int64 in the table" in str(err)
    # what came before it is in (offset 2), what came after is not: its file was deleted
    assert DeltaTable(str(table)).version() == version + 1
    assert DeltaTable(str(table)).transaction_version(f"{app_id_of(topic, table)}-0") == 2
    assert sorted(table_ids(table)) == list(range(150))
    assert_no_orphans(table)
    assert main([topic, str(table), "-k", bootstrap, "--end-at-latest", "-q"]) == 1  # every time
    # with a dead-letter table, the bad messages go there and the good ones into the table
    dlq = tmp_path / "dlq"
    stats = ingest(spark, settings.__class__(**{**settings.__dict__, "dlq_table_uri": str(dlq)}))
    assert (stats.records, stats.dead_letters) == (50, 2)
    assert sorted(table_ids(table)) == list(range(100)) + list(range(100, 200))
    letters = DeltaTable(str(dlq)).to_pyarrow_table().sort_by("offset").to_pylist()
    assert [(r["offset"], r["error"].split(":")[0]) for r in letters] == [
        (3, "SchemaMismatchError"),
        (4, "SegmentError"),
    ]
    assert letters[1]["value"] == b'{"id": 1}'
    assert_no_orphans(table)


def test_a_mistyped_partition_column_is_refused_before_anything_is_written(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 100, batch=50)
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    for mode in ("raw", "decode"):  # raw: at its first micro-batch; decode: at start
        settings = SparkIngestSettings(
            topic=topic,
            table_uri=str(table),
            bootstrap_servers=bootstrap,
            partition_by=("dya",),
            mode=mode,
            checkpoint_location=str(tmp_path / f"checkpoint-{mode}"),
            **({"dlq_table_uri": str(dlq)} if mode == "raw" else {}),
        )
        with pytest.raises(ConfigError, match=r"(first segment|topic's segments\)) has no column 'dya'") as info:
            ingest(spark, settings)
        assert "--partition-by" in str(info.value) and "day: string, device: string" in str(info.value), mode
        assert not table.exists() and not dlq.exists(), mode


def test_parka_ingest_and_spark_ingest_at_the_same_time_on_one_table(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Spark raw mode (the session's, in a thread) and a ``parka ingest`` worker on one table at
    once, with the same app id (the default for the table): small commits, so that they interleave.
    Each record lands once, Spark deletes uncommitted the files of offsets parka ingest committed
    first, and no orphan is left."""
    topic = new_topic(partitions=3)
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 150, batch=50)
    run_ingest(topic, table, bootstrap, "--end-at-latest")  # the table exists before both start
    produce_events(bootstrap, topic, 150, 2850, batch=50)  # 57 more segments, 19 per partition
    settings = SparkIngestSettings(
        topic=topic, table_uri=str(table), bootstrap_servers=bootstrap, max_offsets_per_trigger=3
    )
    by_spark: list[Any] = []
    spark_run = threading.Thread(target=lambda: by_spark.append(ingest(spark, settings)), daemon=True)
    spark_run.start()
    deadline = time.monotonic() + 120
    while not committed_batches(table) and spark_run.is_alive():  # parka ingest joins after Spark's first commit
        assert time.monotonic() < deadline, "no Spark commit within 120 s"
        time.sleep(0.1)
    ingest_cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, str(table), "-k", bootstrap, *FAST_GROUP]
    ingest_cmd += ["--end-at-latest", "--max-segments-per-commit", "2"]
    worker = forkserver.popen(ingest_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = worker.communicate(timeout=300)
    spark_run.join(300)
    assert not spark_run.is_alive(), "Spark's available-now run did not end within 300 s"
    assert worker.returncode == 0, err[-4000:]
    assert by_spark, "Spark's run raised (see the thread's exception above)"
    by_ingest = last_json(subprocess.CompletedProcess([], 0, out, ""))
    # both landed records, and Spark deleted uncommitted the files of offsets parka ingest took first
    assert by_spark[0].records > 0 and by_ingest["records"] > 0
    assert by_spark[0].covered_files > 0
    assert sorted(table_ids(table)) == list(range(3000))
    assert_no_orphans(table)
