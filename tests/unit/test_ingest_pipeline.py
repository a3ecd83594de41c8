"""``parka ingest``'s commit pipeline without a broker: one commit in flight on a thread of its
own, its result (or error) taken by the loop in order; and a commit's data files written by a
pool, the same files a serial write makes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from parka.consumer._pipeline import Batch, CommitPipeline
from parka.lake import CommitResult, check_segment, read_segment, write_segments

from parka.errors import CommitError
from parka.schema import schema_fingerprint
from parka.segment import encode_segment

from ._tables import SCHEMA, committer


def test_one_commit_in_flight_on_its_own_thread_and_its_result_taken_in_order() -> None:
    release = threading.Event()
    seen: list[tuple[str, Batch, Executor]] = []

    def land(batch: Batch, writers: Executor) -> CommitResult:
        seen.append((threading.current_thread().name, batch, writers))
        release.wait(30)
        return CommitResult(version=len(seen), last={0: batch.bytes})

    pipeline = CommitPipeline(land, write_threads=2)
    try:
        assert not pipeline.busy and pipeline.wait() is None
        first = Batch(bytes=7)
        pipeline.submit(first)
        assert pipeline.busy and pipeline.in_flight_bytes == 7 and not pipeline.done()
        with pytest.raises(RuntimeError, match="a commit is in flight"):
            pipeline.submit(Batch(bytes=1))  # the next waits for the one before
        release.set()
        assert pipeline.wait() == CommitResult(version=1, last={0: 7})
        assert not pipeline.busy and pipeline.in_flight_bytes == 0
        pipeline.submit(Batch(bytes=3))
        assert pipeline.wait() == CommitResult(version=2, last={0: 3})
    finally:
        pipeline.close()
    (name, batch, writers), (name2, _, writers2) = seen
    assert name.startswith("parka-commit") and name == name2 and batch is first
    assert isinstance(writers, ThreadPoolExecutor) and writers is writers2


def test_a_failed_commit_is_raised_by_wait_or_logged_by_close(caplog: pytest.LogCaptureFixture) -> None:
    def land(batch: Batch, writers: Executor) -> CommitResult:
        raise CommitError(f"refused batch of {batch.bytes} bytes")

    pipeline = CommitPipeline(land, write_threads=1)
    pipeline.submit(Batch(bytes=5))
    with pytest.raises(CommitError, match="refused batch of 5 bytes"):
        pipeline.wait()
    assert not pipeline.busy  # taken: the loop does not see it twice
    pipeline.submit(Batch(bytes=6))
    with caplog.at_level(logging.ERROR, "parka.ingest"):
        pipeline.close()  # the caller is already failing: logged, not raised over its error
    assert "the commit in flight failed while stopping: refused batch of 6 bytes" in caplog.text


class _CountingPool(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(3)
        self.jobs = 0
        self.threads: set[str] = set()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.jobs += 1

        def named() -> Any:
            self.threads.add(threading.current_thread().name)
            return fn(*args, **kwargs)

        return super().submit(named)


def test_a_pool_writes_the_files_a_serial_write_does(tmp_path: Path) -> None:
    """Three Kafka partitions of two segments each, cut into runs of one segment's size: six
    data files, each written as a job of the pool."""
    results = {}
    for mode in ("serial", "pool"):
        c = committer(tmp_path / mode)
        checked = []
        for partition in range(3):
            for offset in (10, 11):
                ids = list(range(partition * 1000 + offset * 10, partition * 1000 + offset * 10 + 5))
                table = pa.table({"id": ids, "day": ["d1"] * 5}, schema=SCHEMA)
                seg = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(SCHEMA))
                read = read_segment(topic="t", partition=partition, offset=offset, value=seg.value, headers=seg.headers)
                c.ensure_table(read.schema)
                checked.append(
                    check_segment(
                        read,
                        table_schema=c.table_schema(),
                        partition_by=(),
                        merge=False,
                        check_columns=c.engine.check_columns,
                    )
                )
        pool = _CountingPool() if mode == "pool" else None
        try:
            landed = write_segments(
                checked, table_uri=c.root, table_schema=c.table_schema(), target_file_size=1, executor=pool
            )
        finally:
            if pool is not None:
                pool.shutdown()
        if pool is not None:
            assert pool.jobs == 6 and pool.threads  # one job per data file
        rows = [pq.read_table(tmp_path / mode / f.path)["id"].to_pylist() for s in landed for f in s.files]
        results[mode] = ([(s.partition, s.offset, s.records, s.files[0].size) for s in landed], rows)
    assert results["pool"] == results["serial"]
    assert [p for p, *_ in results["pool"][0]] == [0, 0, 1, 1, 2, 2]  # in Kafka order, as a serial write
