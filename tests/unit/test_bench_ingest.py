"""The server-free parts of the ingest benchmark (benchmarks/ingest_throughput.py and its
helpers): the paired ratios to each floor, the printed summary, the report's object-store
table, the floors' sinks (a file per value; a PUT per value, on obstore's in-memory store) and
the recorded command's masked storage options."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from obstore.store import MemoryStore

from benchmarks.clients import FileSink, value_name
from benchmarks.ingest_summary import FETCH_AND_PUT, GOAL, summarize_runs, summary_lines
from benchmarks.objectstore import WRITE_THREADS, ObjectStoreRoot, PutSink, masked_command, remove_all, stored
from benchmarks.report import render_ingest

TOPIC = {"copies": 2, "rows": 1_000, "segments": 10, "bytes": 5_000}


def _sample(steady: float) -> dict[str, float]:
    whole = steady / 2
    return {"steady_mb_per_s": steady, "mb_per_s": whole, "rows_per_s": whole * 1e3, "cpu_s_per_million_rows": 5.0}


def _samples(with_s3: bool) -> dict[tuple[int, str], list[dict[str, float]]]:
    out = {
        (1_000, "parka ingest"): [_sample(40.0), _sample(60.0), _sample(30.0)],
        (1_000, "raw fetch"): [_sample(400.0), _sample(400.0), _sample(300.0)],
        (1_000, "fetch + write"): [_sample(50.0), _sample(100.0), _sample(math.nan)],
    }
    if with_s3:
        out[(1_000, "parka ingest (s3)")] = [_sample(9.0), _sample(8.0), _sample(10.0)]
        out[(1_000, "fetch + PUT (s3)")] = [_sample(10.0), _sample(10.0), _sample(20.0)]
    return out


def test_disk_arms_alone_give_no_object_store_figures() -> None:
    section = summarize_runs("flights", {1_000: TOPIC}, _samples(with_s3=False))
    size = section["segment_sizes"][0]
    assert section["goal_ratio"] == GOAL
    assert "fetch_and_put" not in section
    assert not any(key.endswith("_s3") or "fetch_and_put" in key for key in size)
    assert size["parka_ingest"]["steady_mb_per_s"]["median"] == 40.0
    assert size["ratio_steady_mb_per_s"]["values"] == [0.1, 0.15, 0.1]
    # the third repeat had no steady window for fetch + write: left out, not counted as 0
    assert size["ratio_to_fetch_and_write_steady_mb_per_s"]["values"] == [0.8, 0.6]
    assert size["ratio_to_fetch_and_write_steady_mb_per_s"]["median"] == pytest.approx(0.7)


def test_object_store_arms_are_paired_repeat_by_repeat() -> None:
    section = summarize_runs("flights", {1_000: TOPIC}, _samples(with_s3=True))
    size = section["segment_sizes"][0]
    assert section["fetch_and_put"] == FETCH_AND_PUT
    assert f"{WRITE_THREADS} PUTs in flight" in FETCH_AND_PUT
    assert size["fetch_and_put_s3"]["steady_mb_per_s"]["values"] == [10.0, 10.0, 20.0]
    ratio = size["ratio_to_fetch_and_put_steady_mb_per_s"]
    # paired: 9/10, 8/10, 10/20; the ratio of the medians would be 9/10
    assert ratio["values"] == pytest.approx([0.9, 0.8, 0.5])
    assert ratio["median"] == pytest.approx(0.8)
    assert (ratio["min"], ratio["max"]) == pytest.approx((0.5, 0.9))


def test_paired_variants_that_ran_unequally_are_refused() -> None:
    samples = _samples(with_s3=True)
    samples[(1_000, "fetch + PUT (s3)")].pop()
    with pytest.raises(ValueError, match=r"shorter|longer"):
        summarize_runs("flights", {1_000: TOPIC}, samples)


def test_summary_lines_show_each_floor_and_the_goal() -> None:
    disk = summary_lines(summarize_runs("flights", {1_000: TOPIC}, _samples(with_s3=False)))
    assert len(disk) == 1
    assert "disk: ingest     40.0 MB/s, fetch + write     75.0 MB/s, ratio 0.70 (0.60-0.80)" in disk[0]
    assert "raw fetch    400.0 MB/s, ratio 0.10 (0.10-0.15); goal 0.8" in disk[0]
    both = summary_lines(summarize_runs("flights", {1_000: TOPIC}, _samples(with_s3=True)))
    assert both[0] == disk[0]
    assert both[1] == (
        "   1000 rows/segment, s3:   ingest      9.0 MB/s, fetch + PUT     10.0 MB/s, ratio 0.80 (0.50-0.90); goal 0.8"
    )


def test_summary_lines_say_not_measured_without_a_steady_window() -> None:
    samples = _samples(with_s3=False)
    samples[(1_000, "fetch + write")] = [_sample(math.nan)] * 3
    (line,) = summary_lines(summarize_runs("flights", {1_000: TOPIC}, samples))
    assert "fetch + write - MB/s, ratio - (---); raw fetch" in line


def _doc(section: dict[str, Any]) -> dict[str, Any]:
    machine = {
        "cpu_model": "cpu",
        "logical_cores": 2,
        "kafka": {"version": "4.0"},
        "versions": {"deltalake": "1", "pyarrow": "2"},
    }
    command = "python -m benchmarks.ingest_throughput"
    return {"command": command, "wall_s": 1.0, "machine": machine, "checks": [], "ingest_throughput": section}


def test_the_report_shows_the_object_store_arms_when_they_ran(tmp_path: Path) -> None:
    section = summarize_runs("flights", {1_000: TOPIC}, _samples(with_s3=True))
    section["object_store"] = ObjectStoreRoot("s3://bench/x", {"aws_endpoint_url": "http://127.0.0.1:1"}).described()
    report = render_ingest(_doc(section), str(tmp_path))
    assert "| ingest / fetch + write |" in report and "**0.7 (0.6-0.8)**" in report
    assert "On the object store (s3://bench/x at http://127.0.0.1:1)" in report
    assert "| 1,000 | 9 (8-10) | 10 (10-20) | **0.8 (0.5-0.9)** |" in report
    disk_only = render_ingest(_doc(summarize_runs("flights", {1_000: TOPIC}, _samples(False))), str(tmp_path))
    assert "object store" not in disk_only and "fetch + PUT" not in disk_only


def test_file_sink_writes_each_value_to_its_own_file(tmp_path: Path) -> None:
    sink = FileSink(str(tmp_path))
    sink.take(value_name(0, 7), b"seven")
    sink.take(value_name(1, 7), b"other")
    sink.finish()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0-7.parquet", "1-7.parquet"]
    assert (tmp_path / "0-7.parquet").read_bytes() == b"seven"


def test_put_sink_stores_every_value_and_the_listing_counts_them() -> None:
    store = MemoryStore()
    sink = PutSink(store, threads=3)
    values = [bytes([n]) * (100 + n) for n in range(20)]
    for offset, value in enumerate(values):
        sink.take(value_name(0, offset), value)
    sink.finish()
    sink.close()
    assert stored(store) == (20, sum(len(v) for v in values))
    remove_all(store)
    assert stored(store) == (0, 0)
    remove_all(store)  # nothing left: nothing to do


def test_put_sink_raises_a_failed_put_at_finish() -> None:
    sink = PutSink(MemoryStore(), threads=2)
    sink.take("fine.parquet", b"x")
    sink.take("a/../escape.parquet", b"x")  # obstore refuses the path
    with pytest.raises(ValueError, match=r"\.\."):
        sink.finish()
    sink.close()


def test_object_store_root_takes_s3_uris_and_records_no_credentials() -> None:
    root = ObjectStoreRoot("s3://bench/runs", {"AWS_ENDPOINT_URL": "http://h:1", "aws_secret_access_key": "sss"})
    assert root.described() == {"uri": "s3://bench/runs", "endpoint": "http://h:1", "write_threads": WRITE_THREADS}
    assert "sss" not in repr(root)
    first, second = root.fresh("ingest"), root.fresh("ingest")
    assert first.startswith("s3://bench/runs/ingest-") and first != second
    for bad in ("/tmp/x", "az://c/x", "s3:///x"):
        with pytest.raises(ValueError, match="s3://bucket"):
            ObjectStoreRoot(bad)


def test_the_recorded_command_masks_storage_options() -> None:
    argv = ["--s3", "s3://b/x", "--storage-option", "aws_secret_access_key=sss", "--storage-option=aws_region=r"]
    assert masked_command(argv) == [
        "--s3",
        "s3://b/x",
        "--storage-option",
        "aws_secret_access_key=***",
        "--storage-option=aws_region=***",
    ]
