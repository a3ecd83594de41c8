"""The fault suite's quick mode (``reliability/``; ``make reliability-quick``), run by ``make test``:
``parka ingest`` workers killed at every crash point (mid-write, between the dead-letter and the
main commit, during a rebalance...), joining and leaving while a producer produces, another
writer on the table, into Delta tables and into Iceberg tables, every bad input, and the
producer's schema evolving at any depth while workers are killed. Nothing may be lost or
duplicated, and every bad input must get its answer. The full mode (``make reliability``) adds Spark raw mode's driver
and broker restarts; it is a program, not part of the tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO


@pytest.mark.timeout(900)
def test_the_quick_fault_suite_loses_and_duplicates_nothing(bootstrap: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "reliability", "--mode", "quick", "--bootstrap", bootstrap, "--seed", "1"]
    proc = subprocess.run([*command, "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=870)
    summary_file = tmp_path / "summary.json"
    assert summary_file.exists(), proc.stderr[-5000:]
    summary = json.loads(summary_file.read_text())
    report = (tmp_path / "summary.txt").read_text()
    assert proc.returncode == 0, report
    assert (summary["lost"], summary["duplicated"]) == (0, 0), report
    assert summary["records_produced"] > 0 and summary["records_in_table"] == summary["records_produced"]
    assert summary["crashes"] >= 5, report
    for point in ("mid-write", "after-dead-letters", "on-revoke"):
        assert summary["faults"].get(f"parka ingest chaos: crash point {point}", 0) >= 1, report
    # the same chaos into Iceberg tables (pyiceberg's SQL catalog), other writer and racer included
    iceberg = summary["scenarios"]["parka ingest chaos (Iceberg)"]
    assert iceberg["records_produced"] > 0 and iceberg["records_in_table"] == iceberg["records_produced"], report
    assert iceberg["orphans"] == 0, report
    for point in ("mid-write", "after-dead-letters", "after-delta-commit", "on-revoke"):
        assert summary["faults"].get(f"parka ingest chaos (Iceberg): crash point {point}", 0) >= 1, report
    # the producer's schema evolves (nested fields, new columns) while workers crash: issue 19
    for point in ("mid-write", "after-write", "after-delta-commit"):
        assert summary["faults"].get(f"schema evolution chaos: crash point {point}", 0) >= 1, report
    assert all(b["answered"] for b in summary["bad_inputs"]), report
    assert summary["problems"] == [], report
