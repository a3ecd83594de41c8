"""``parka ingest``'s VACUUM of a Delta table (on by default, ``--vacuum-every``) and its
retentions, against a real broker: the tables it creates get ``--table-retention``; VACUUM
deletes the files compaction removed longer ago than that, never one a version inside it names
(a reader pinned to such a version still reads it); a table it did not create, with Delta's
default week, is warned about and left as it is unless ``--set-table-retention``."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from ._ingest_util import last_json, produce_events, run_ingest, start_ingest, wait_for

RETENTION_S = 10  # seconds: the test reads the pinned version well within it
ROUND = 100


def _vacuum_runs(log: Path) -> int:
    return log.read_text(errors="replace").count("VACUUM deleted")


def test_vacuum_keeps_what_a_pinned_reader_reads_and_deletes_files_past_the_retention(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    uri = str(tmp_path / "t")
    log = tmp_path / "ingest.log"
    flags = ("-l", "0.2", "--compact-min-files", "3", "--vacuum-every", "0.3", "--table-retention", str(RETENTION_S))
    flags += ("--checkpoint-interval", "2")  # a checkpoint early: log cleanup keeps what precedes the oldest one
    proc = start_ingest(topic, uri, bootstrap, *flags, log=log)
    try:
        produce_events(bootstrap, topic, 0, ROUND, batch=25)
        wait_for(lambda: Path(uri, "_delta_log").exists() and DeltaTable(uri).version() >= 1, "the first commit")
        config = DeltaTable(uri).metadata().configuration
        assert config["delta.deletedFileRetentionDuration"] == f"interval {RETENTION_S} seconds", config
        assert config["delta.logRetentionDuration"] == f"interval {RETENTION_S} seconds", config
        pinned = DeltaTable(uri)  # a reader holding a version while ingestion and compaction go on
        pinned_files = set(pinned.file_uris())
        pinned_rows = pinned.to_pyarrow_table().num_rows
        sent = ROUND

        def compacted_away() -> bool:
            return bool(pinned_files - set(DeltaTable(uri).file_uris()))

        while not compacted_away():  # more commits until compaction removes a file the reader's version names
            produce_events(bootstrap, topic, sent, ROUND, batch=25)
            sent += ROUND
            wait_for(lambda n=sent: len(DeltaTable(uri).file_uris()) > 0 and _rows(uri) >= n, f"{sent} rows", 60)
        removed_at = time.monotonic()
        runs = _vacuum_runs(log)
        wait_for(lambda: _vacuum_runs(log) >= runs + 2, "two VACUUM runs after the compaction", RETENTION_S)
        assert time.monotonic() - removed_at < RETENTION_S, (
            "too slow to read inside the retention: the test says nothing"
        )
        assert all(Path(f.removeprefix("file://")).exists() for f in pinned_files)
        assert pinned.to_pyarrow_table().num_rows == pinned_rows  # the pinned version still reads whole
        # past the retention, VACUUM deletes the files compaction removed
        gone = {f.removeprefix("file://") for f in pinned_files - set(DeltaTable(uri).file_uris())}
        wait_for(lambda: not any(Path(f).exists() for f in gone), "the removed files deleted", 3 * RETENTION_S)
        # and the log's commits older than the retention that a checkpoint covers
        first = Path(uri, "_delta_log", f"{0:020d}.json")
        wait_for(lambda: not first.exists(), "the first commit's log entry deleted", 3 * RETENTION_S)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    stats = json.loads([ln for ln in text.splitlines() if ln.startswith("{")][-1])
    assert stats["vacuums"] >= 3 and stats["files_vacuumed"] >= len(gone) and stats["vacuum_failures"] == 0, stats
    ids = DeltaTable(uri).to_pyarrow_table(columns=["id"])["id"].to_pylist()
    assert sorted(ids) == list(range(sent))  # every row once: VACUUM deleted no live file


def _rows(uri: str) -> int:
    return DeltaTable(uri).to_pyarrow_table(columns=["id"]).num_rows


def test_a_table_parka_did_not_create_is_warned_about_and_left_as_it_is(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    uri = str(tmp_path / "theirs")
    for _ in range(2):  # Delta's defaults: a week, 30 days; two commits, a rate
        write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}), mode="append")
    proc = run_ingest(topic, uri, bootstrap, "--end-at-latest")
    assert "keeps removed files for 604800 s" in proc.stderr and "log entries for 2592000 s" in proc.stderr, proc.stderr
    assert "commits a day the log keeps" in proc.stderr, proc.stderr
    assert proc.stderr.count("--set-table-retention sets both") == 1  # once
    table = DeltaTable(uri)
    assert table.version() == 1 and "delta.deletedFileRetentionDuration" not in table.metadata().configuration
    assert last_json(proc)["records"] == 0
    # told to, it sets them
    proc = run_ingest(topic, uri, bootstrap, "--end-at-latest", "--set-table-retention", "--table-retention", "7200")
    config = DeltaTable(uri).metadata().configuration
    assert config["delta.deletedFileRetentionDuration"] == "interval 7200 seconds", config
    assert config["delta.logRetentionDuration"] == "interval 7200 seconds", config
    assert "keeps removed files" not in proc.stderr
