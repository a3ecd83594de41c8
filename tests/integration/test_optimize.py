"""`parka optimize` in a loop while two `parka ingest` workers write the same table and a
producer produces: every record exactly once, and the compacted files stay for readers of older
versions. And `parka ingest --optimize-every`, compacting between its own commits."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from reliability import forkserver

from ._ingest_util import last_json, produce_events, run_ingest, start_ingest, table_ids, wait_for, wait_for_rows

TOTAL = 6000


def optimize_loop(table: Path, stop: threading.Event, results: list[dict[str, Any]], errors: list[str]) -> None:
    """Run `parka optimize` as a process, again and again, until ``stop``; collect its JSON lines."""
    while not stop.is_set():
        cmd = [sys.executable, "-m", "parka.cli", "optimize", str(table), "-q", "--target-file-size", "64MiB"]
        proc = forkserver.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode == 0:
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        elif "no Delta table" not in proc.stderr:  # before the workers' first commit
            errors.append(proc.stderr[-3000:])


def test_optimize_in_a_loop_next_to_two_ingest_workers_keeps_every_record_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=4)
    table = tmp_path / "t"
    flags = ("--allowed-latency", "0.5", "--max-segments-per-commit", "8", "--checkpoint-interval", "3")
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [
        start_ingest(topic, table, bootstrap, *flags, log=logs[0]),
        start_ingest(topic, table, bootstrap, *flags, log=logs[1]),
    ]
    stop = threading.Event()
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    loop = threading.Thread(target=optimize_loop, args=(table, stop, results, errors))
    loop.start()
    try:
        for start in range(0, TOTAL, 500):  # segments of 25 records, over a few seconds
            produce_events(bootstrap, topic, start, 500, batch=25)
        assert wait_for_rows(table, TOTAL, timeout_s=60) >= TOTAL
        wait_for(lambda: sum(r["files_removed"] for r in results) > 0, "an optimize run that compacted", 30)
    finally:
        stop.set()
        loop.join(timeout=120)
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=60) for proc in workers]
    assert codes == [0, 0], "".join(log.read_text()[-3000:] for log in logs)
    assert not errors, errors[0]

    ids = table_ids(table)  # the workers removed their orphans on the way out
    assert len(ids) == TOTAL, f"{len(ids) - len(set(ids))} duplicates, {TOTAL - len(set(ids))} missing"
    assert sorted(ids) == list(range(TOTAL))
    compacted = sum(r["files_removed"] for r in results)
    assert compacted > 0
    # Every version from before the first compaction on still reads: no compacted file was
    # deleted by the orphan cleanup.
    first = min(r["version_before"] for r in results if r["files_removed"])
    for version in range(first, DeltaTable(str(table)).version() + 1):
        rows = DeltaTable(str(table), version=version).to_pyarrow_table(columns=["id"])
        assert len(set(rows["id"].to_pylist())) == rows.num_rows  # never a row twice, in any version
    worker_stats = [json.loads(ln) for log in logs for ln in log.read_text().splitlines() if ln.startswith("{")]
    print(f"optimize runs: {len(results)}, files compacted by them: {compacted}; workers: {worker_stats}")


def test_optimize_every_compacts_between_a_workers_commits(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 1200, batch=25)
    table = tmp_path / "t"
    flags = ("--end-at-latest", "--max-segments-per-commit", "4", "--optimize-every", "3")
    result = last_json(run_ingest(topic, table, bootstrap, *flags))
    assert result["records"] == 1200 and result["commits"] >= 6
    assert result["optimizations"] >= 2 and result["files_compacted"] > 0
    assert sorted(table_ids(table)) == list(range(1200))
