"""The fault suite's quick mode (``reliability/``; ``make reliability-quick``), run by ``make test``:
``parka ingest`` workers killed at crash points (between the dead-letter and the main commit,
during a rebalance; mid-write, after writing and after the commit while the schema evolves),
joining and leaving while a producer produces, another
writer on the table, into Delta tables and into Iceberg tables, every bad input, the
producer's schema evolving at any depth while workers are killed, upserts (keyed updates and
tombstones) while workers are killed, and daemons of many topics killed while one topic's table
is unwritable for a while. Nothing may be lost or
duplicated, and every bad input must get its answer. One test per scenario (``--only``), so that
pytest-xdist's workers run them side by side. The full mode (``make reliability``) adds Spark raw mode's driver
and broker restarts; it is a program, not part of the tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO


def run_quick(bootstrap: str, out: Path, scenario: str) -> tuple[dict[str, Any], str]:
    """``python -m reliability --mode quick --only SCENARIO``: its summary and report; the run
    must have ended with exit code 0 (nothing lost or duplicated, every requirement met)."""
    command = [sys.executable, "-m", "reliability", "--mode", "quick", "--bootstrap", bootstrap, "--seed", "1"]
    command += ["--only", scenario, "--out", str(out)]
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=570)
    summary_file = out / "summary.json"
    assert summary_file.exists(), proc.stderr[-5000:]
    summary = json.loads(summary_file.read_text())
    report = (out / "summary.txt").read_text()
    assert proc.returncode == 0, report
    assert (summary["lost"], summary["duplicated"]) == (0, 0), report
    assert summary["problems"] == [], report
    assert all(r["met"] for r in summary["requirements"]), report
    return summary, report


@pytest.mark.long(185)
@pytest.mark.timeout(600)
def test_every_bad_input_gets_its_answer(bootstrap: str, tmp_path: Path) -> None:
    summary, report = run_quick(bootstrap, tmp_path, "bad-inputs")
    assert len(summary["bad_inputs"]) >= 10, report
    assert all(b["answered"] for b in summary["bad_inputs"]), report


@pytest.mark.long(75)
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("scenario", "title", "points"),
    [
        # the quick mode's points (the others: each killed at alone by test_ingest.py and by
        # iceberg/test_iceberg_ingest.py, for each catalog)
        ("ingest", "parka ingest chaos", ("after-dead-letters", "on-revoke")),
        ("ingest-iceberg", "parka ingest chaos (Iceberg)", ("after-dead-letters", "on-revoke")),
    ],
    ids=["delta", "iceberg"],
)
def test_parka_ingest_chaos_loses_and_duplicates_nothing(
    bootstrap: str, tmp_path: Path, scenario: str, title: str, points: tuple[str, ...]
) -> None:
    """Into a Delta table, and the same chaos into an Iceberg table (pyiceberg's SQL catalog),
    another writer and a racer included."""
    summary, report = run_quick(bootstrap, tmp_path, scenario)
    result = summary["scenarios"][title]
    assert result["records_produced"] > 0 and result["records_in_table"] == result["records_produced"], report
    assert result["orphans"] == 0, report
    assert summary["crashes"] >= len(points) + 1, report
    for point in points:
        assert summary["faults"].get(f"{title}: crash point {point}", 0) >= 1, report


@pytest.mark.long(150)
@pytest.mark.timeout(600)
def test_schema_evolution_chaos_loses_and_duplicates_nothing(bootstrap: str, tmp_path: Path) -> None:
    """The producer's schema evolves (nested fields, new columns) while workers crash."""
    summary, report = run_quick(bootstrap, tmp_path, "evolution")
    result = summary["scenarios"]["schema evolution chaos"]
    assert result["records_produced"] > 0 and result["records_in_table"] == result["records_produced"], report
    for point in ("mid-write", "after-write", "after-delta-commit"):
        assert summary["faults"].get(f"schema evolution chaos: crash point {point}", 0) >= 1, report


@pytest.mark.long(60)
@pytest.mark.timeout(600)
def test_upsert_chaos_keeps_the_table_the_latest_row_per_key(bootstrap: str, tmp_path: Path) -> None:
    """``parka ingest --cdc debezium`` workers (upserts of Debezium change events) killed at each
    crash point around an upsert commit (and at a rebalance) while updates, deletes with and
    without their tombstones, and replays of older events keep coming, with eager background
    compaction: the table ends as the producer's model, no key lost, resurrected or twice. (The
    plain ``--upsert`` scenario runs in ``make reliability``; its commits are these without the
    delete rows and the sequence.)"""
    summary, report = run_quick(bootstrap, tmp_path, "upsert-cdc")
    result = summary["scenarios"]["parka ingest --cdc debezium chaos"]
    assert result["records_produced"] > 0 and (result["lost"], result["duplicated"], result["unexpected"]) == (0, 0, 0)
    assert result["orphans"] == 0 and result["stale_events"] > 0 and result["tombstones"] > 0, report
    for point in ("mid-write", "after-write", "after-delta-commit", "on-revoke"):
        assert summary["faults"].get(f"parka ingest --cdc debezium chaos: crash point {point}", 0) >= 1, report


@pytest.mark.long(60)
@pytest.mark.timeout(600)
def test_many_topics_with_daemons_killed_and_a_table_unwritable_lose_and_stall_nothing(
    bootstrap: str, tmp_path: Path
) -> None:
    """``parka ingest --topics-regex`` daemons (a lane per topic) SIGKILLed and replaced, a topic
    created while they run, one topic's table unwritable for a while: each table ends with
    every record once, and no other topic went longer than the stall bound without a commit."""
    summary, report = run_quick(bootstrap, tmp_path, "fleet")
    result = summary["results"]["fleet"]
    assert result["records_produced"] > 0 and result["records_in_table"] == result["records_produced"], report
    assert result["orphans"] == 0, report
    title = "parka ingest of many topics, several daemons"
    for fault in ("SIGKILL of a daemon", "topic created while the daemons run", "a table unwritable for a while"):
        assert summary["faults"].get(f"{title}: {fault}", 0) >= 1, report
    gaps = result["longest_commit_gap_s_while_blocked"]
    assert gaps and max(gaps.values()) <= result["stall_bound_s"], report
