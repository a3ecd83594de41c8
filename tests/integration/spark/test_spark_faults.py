"""Faults on Spark raw mode (delta-spark commits): the driver running ``parka spark-ingest`` stopped
at once (SIGTERM, then its stop bound) while hung between writing a micro-batch's files and
committing them, killed (-9) after committing (before Spark marks the batch done in its
checkpoint), then a restart. Every record lands once, and no orphan file is left. (The replay
of a committed batch on an upsert table is in test_spark_upsert.py, from the state such a kill
leaves, and ``parka ingest`` and Spark raw mode at the same time on one table in
test_spark_raw.py: they need no driver of their own, each a JVM start.)

The kills come from the test hook ``PARKA_TEST_CRASH_AT`` (``parka/crash.py``): the driver sends
itself SIGKILL at the named point, after logging a line the test checks. Its JVM and Python
workers go with it (the JVM exits when its parent's pipe closes); the test waits for the process
group to be empty before restarting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from parka.spark_ext._ingest import CHECKPOINTS_DIR

from reliability import forkserver
from reliability.procs import wait_for

from .._ingest_util import (
    assert_no_orphans,
    data_files_on_disk,
    last_json,
    produce_events,
    referenced_files,
    table_ids,
)
from ._jars import SPARK_JVM
from ._util import SPARK, committed_batches

pytestmark = [*SPARK, pytest.mark.long(300)]

# A small local driver: the kill tests start two JVMs each.
LOCAL = ("--master", "local[2]", "-c", "spark.ui.enabled=false", "-c", "spark.sql.shuffle.partitions=2")
LOCAL += ("-c", f"spark.driver.extraJavaOptions={SPARK_JVM}")


def spark_ingest(topic: str, table: Path, bootstrap: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "parka.cli", "spark-ingest", topic, str(table), "-k", bootstrap, *LOCAL, *extra]


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` is alive (Linux /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def run_in_own_group(command: list[str], *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a process group of its own and return once every process of the group
    (the driver, its JVM, their Python workers) is gone."""
    proc = forkserver.popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
        wait_for(lambda: not group_alive(proc.pid), f"process group {proc.pid} to exit", 120)
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def crash_run(command: list[str], point: str, table: Path, checkpoint: Path, batch: int) -> None:
    """Run the driver until it kills itself at ``point`` in its second micro-batch (id ``batch``:
    its first replays the batch the run before died in); that batch's offsets are in the
    checkpoint, its completion is not."""
    crashed = run_in_own_group(command, env={"PARKA_TEST_CRASH_AT": point, "PARKA_TEST_CRASH_AFTER": "2"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-4000:]
    assert f"crash point {point}: SIGKILL" in crashed.stderr
    assert (checkpoint / "offsets" / str(batch)).exists() and not (checkpoint / "commits" / str(batch)).exists()


STOP_TIMEOUT_S = 3


def stopped_while_hung(command: list[str], log: Path) -> None:
    """SIGTERM to a driver whose first micro-batch blocks for good (``PARKA_TEST_HANG_AT``, as a
    native call that never returns) once its files are written, before its commit: the graceful
    stop cannot end, so the driver exits at once with 143 after ``--stop-timeout``, saying where
    it was, and leaves what a kill there leaves (files written, not committed)."""
    with log.open("w") as err:
        proc = forkserver.popen(
            [*command, "--stop-timeout", str(STOP_TIMEOUT_S)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PARKA_TEST_HANG_AT": "batch-after-write"},
            start_new_session=True,
        )
    try:
        wait_for(lambda: "hang point batch-after-write: blocking" in log.read_text(), "the hang", 240)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
        took = time.monotonic() - sent
        wait_for(lambda: not group_alive(proc.pid), f"process group {proc.pid} to exit", 120)
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert code == 143, text[-4000:]
    assert STOP_TIMEOUT_S <= took < STOP_TIMEOUT_S + 10, took
    assert f"parka spark-ingest: stopped at once (the stop took over {STOP_TIMEOUT_S} s)" in text, text[-4000:]


def test_kill_9_of_the_spark_driver_at_each_crash_point_then_restart_is_exactly_once_without_orphans(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """One table, three runs of the driver: stopped by SIGTERM while its first micro-batch hangs
    after writing its files (forced at --stop-timeout: they stay, not committed, as after a kill
    there), killed after committing batch 1 (not marked done by Spark), then a run to the end.
    Each restart replays the batch its predecessor died in. (One run through the points, not a
    test per point: every driver start is a JVM, some 25 CPU-s on the CI's 2 cores. A kill before
    a batch's files are written, which leaves nothing to clean, is the fault suite's full mode's.)"""
    topic = new_topic(partitions=2)
    segments = produce_events(bootstrap, topic, 0, 1200, batch=60)  # keyed: split over the 2 partitions
    assert segments >= 18  # at least 4 micro-batches of up to 4
    table = tmp_path / "t"
    command = spark_ingest(topic, table, bootstrap, "--end-at-latest", "--max-offsets-per-trigger", "4", "-q")
    checkpoint = table / CHECKPOINTS_DIR / f"parka-{topic}"

    stopped_while_hung(command, tmp_path / "hung.log")
    assert not any((table / "_delta_log").glob("*.json"))  # delta-spark makes the table at the first commit
    assert (checkpoint / "offsets" / "0").exists() and not (checkpoint / "commits" / "0").exists()
    stray = data_files_on_disk(table)
    assert stray, "batch 0's files, written and not committed, should be on disk"

    crash_run(command, "after-delta-commit", table, checkpoint, 1)
    batches = committed_batches(table)
    assert list(batches) == [0, 1]  # the replay of batch 0, and batch 1, which Spark will replay
    # batch 0's first files became orphans when its replay committed (the txn covers them now):
    # removed by the next start or stop, and this run was killed before its stop
    assert stray <= data_files_on_disk(table) - referenced_files(table)
    in_table = len(table_ids(table))

    restarted = run_in_own_group(command)
    assert restarted.returncode == 0, restarted.stderr[-4000:]
    # the jar files the first run's resolution gave were remembered: no Ivy at this start
    assert ":: resolving dependencies ::" not in restarted.stderr
    result = last_json(restarted)
    # the replay of batch 1 finds its commit: a no-op whose new copies it deletes
    assert result["records"] == 1200 - in_table
    assert result["covered_files"] == batches[1]
    assert result["orphans_removed"] == len(stray)
    assert sorted(table_ids(table)) == list(range(1200))  # every record once
    assert sorted(committed_batches(table)) == list(range(max(committed_batches(table)) + 1))  # each batch once
    assert_no_orphans(table)
