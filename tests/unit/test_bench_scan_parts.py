"""``python -m benchmarks.scan_parts`` (the freshness scans taken apart) on a small Delta table
of flights-like rows: commits, a checkpoint, commits after it."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from benchmarks.scan_parts import by_kind, main


def _rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "carrier": [("AA", "UA", "DL")[i % 3] for i in range(start, start + n)],
            "dep_delay": [float(i % 17) for i in range(start, start + n)],
            "distance": pa.array([i % 1000 for i in range(start, start + n)], pa.int32()),
        }
    )


def test_it_times_the_log_from_the_last_checkpoint_and_the_files_by_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(table), _rows(i * 100, 100), mode="append")  # versions 0-2
    DeltaTable(str(table)).create_checkpoint()  # at version 2
    write_deltalake(str(table), _rows(300, 100), mode="append")  # version 3

    assert main([str(table), "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "at version 3: 4 files (0 compacted, 4 not" in out
    assert "the last checkpoint at or before 3: 2" in out
    assert re.search(r"version 2 \(the checkpoint alone\): \d+\.\d\d", out)
    assert re.search(r"version 3 \(\+ 1 JSON commit\(s\)\): \d+\.\d\d", out)
    assert "version 1 " not in out  # nothing before the checkpoint is timed
    assert re.search(r"the row baseline's table \(1 commit\(s\), 1 file\(s\)\): \d+\.\d\d", out)
    assert re.search(r"the 4 not compacted: \d+\.\d\d; their rows as one file: \d+\.\d\d", out)
    assert "the 0 compacted" not in out  # no such group: not printed

    assert main([str(table), "--version", "1", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "at version 1: 2 files" in out
    assert "the last checkpoint at or before 1: None" in out  # the log replayed from version 0
    assert re.search(r"version 0 \(\+ 1 JSON commit\(s\)\)", out)  # no checkpoint: its own commit
    assert re.search(r"version 1 \(\+ 2 JSON commit\(s\)\)", out) and "version 2 " not in out


def test_files_are_told_apart_by_the_name_compaction_gives_them() -> None:
    compacted = "/t/day=1/compacted-g1-0123456789abcdef-" + "0" * 32 + ".parquet"
    ingested = "/t/day=1/topic-p0-o0000000000000000012-abc.parquet"
    other = "/t/part-00000-compacted-x.parquet"  # "compacted" elsewhere in the name: another writer's
    assert by_kind([ingested, compacted, other]) == ([compacted], [ingested, other])
