"""Faults on Spark raw mode (delta-spark commits): kill -9 of the driver running ``parka spark-ingest``
before writing a micro-batch's files, between writing and committing them, and after committing
(before Spark marks the batch done in its checkpoint), then a restart; and ``parka ingest``
running at the same time on the same table with the same app id. Every record lands once, and no
orphan file is left.

The kills come from the test hook ``PARKA_TEST_CRASH_AT`` (``parka/crash.py``): the driver sends
itself SIGKILL at the named point, after logging a line the test checks. Its JVM and Python
workers go with it (the JVM exits when its parent's pipe closes); the test waits for the process
group to be empty before restarting."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from parka.spark_ext._ingest import CHECKPOINTS_DIR

from .. import _forked
from .._ingest_util import (
    FAST_GROUP,
    assert_no_orphans,
    data_files_on_disk,
    last_json,
    produce_events,
    referenced_files,
    run_ingest,
    table_ids,
)
from .._servers import SHORT_JVM
from ._util import SPARK

pytestmark = [*SPARK, pytest.mark.long(300)]

# A small local driver: the kill tests start two JVMs each.
LOCAL = ("--master", "local[2]", "-c", "spark.ui.enabled=false", "-c", "spark.sql.shuffle.partitions=2")
LOCAL += ("-c", f"spark.driver.extraJavaOptions={SHORT_JVM}")


def spark_ingest(topic: str, table: Path, bootstrap: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "parka.cli", "spark-ingest", topic, str(table), "-k", bootstrap, *LOCAL, *extra]


def committed_batches(table: Path) -> dict[int, int]:
    """Spark micro-batch id -> data files its Delta commit added, from the log (parka records the
    batch id in each commit's ``userMetadata``)."""
    out: dict[int, int] = {}
    for commit in sorted((table / "_delta_log").glob("[0-9]*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        meta = json.loads(info.get("userMetadata") or "{}")
        if meta.get("parka.spark_batch") is not None:
            batch = meta["parka.spark_batch"]
            assert batch not in out, f"batch {batch} committed twice"
            out[batch] = sum("add" in a for a in actions)
    return out


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


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)


def run_in_own_group(command: list[str], *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a process group of its own and return once every process of the group
    (the driver, its JVM, their Python workers) is gone."""
    proc = _forked.popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
        wait_until(lambda: not group_alive(proc.pid), 120, f"process group {proc.pid} to exit")
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


def test_kill_9_of_the_spark_driver_at_each_crash_point_then_restart_is_exactly_once_without_orphans(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """One table, four runs of the driver: killed before writing micro-batch 1's files, after
    writing batch 2's (not committed), after committing batch 3 (not marked done by Spark), then
    a run to the end. Each restart replays the batch its predecessor died in. (One run through
    the three points, not a test per point: every driver start is a JVM on the CI's 2 cores.)"""
    topic = new_topic(partitions=2)
    segments = produce_events(bootstrap, topic, 0, 1200, batch=60)  # keyed: split over the 2 partitions
    assert segments >= 18  # at least 5 micro-batches of up to 4
    table = tmp_path / "t"
    command = spark_ingest(topic, table, bootstrap, "--end-at-latest", "--max-offsets-per-trigger", "4", "-q")
    checkpoint = table / CHECKPOINTS_DIR / f"parka-{topic}"

    crash_run(command, "batch-before-write", table, checkpoint, 1)
    assert list(committed_batches(table)) == [0]
    assert data_files_on_disk(table) == referenced_files(table)  # nothing written for batch 1

    crash_run(command, "batch-after-write", table, checkpoint, 2)
    assert list(committed_batches(table)) == [0, 1]  # the replay of batch 1 committed
    stray = data_files_on_disk(table) - referenced_files(table)
    assert stray, "batch 2's files, written and not committed, should be on disk"

    crash_run(command, "after-delta-commit", table, checkpoint, 3)
    batches = committed_batches(table)
    assert list(batches) == [0, 1, 2, 3]  # batch 3 is in the table; Spark will replay it
    # batch 2's first files became orphans when its replay committed (the txn covers them now):
    # removed by the next start or stop, and this run was killed before its stop
    assert stray <= data_files_on_disk(table) - referenced_files(table)
    in_table = len(table_ids(table))

    restarted = run_in_own_group(command)
    assert restarted.returncode == 0, restarted.stderr[-4000:]
    result = last_json(restarted)
    # the replay of batch 3 finds its commit: a no-op whose new copies it deletes
    assert result["records"] == 1200 - in_table
    assert result["covered_files"] == batches[3]
    assert result["orphans_removed"] == len(stray)
    assert sorted(table_ids(table)) == list(range(1200))  # every record once
    assert sorted(committed_batches(table)) == list(range(max(committed_batches(table)) + 1))  # each batch once
    assert_no_orphans(table)


# Spark's first commit includes the driver's start (a JVM, Ivy's resolution of the jars), which took
# over 120 s on a loaded 2-core machine; the wait stops at once if the driver exits instead
@pytest.mark.timeout(600)
def test_parka_ingest_and_spark_ingest_at_the_same_time_on_one_table(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 150, batch=50)
    run_ingest(topic, table, bootstrap, "--end-at-latest")  # the table exists before both start
    produce_events(bootstrap, topic, 150, 2850, batch=50)  # 57 more segments, 19 per partition
    spark_log, ingest_log = tmp_path / "spark.log", tmp_path / "ingest.log"
    # same app id for both (the default, parka-<topic>); small commits so that they interleave
    # -v: the commit lines this test waits on are at debug level
    spark_cmd = spark_ingest(topic, table, bootstrap, "-v", "--end-at-latest", "--max-offsets-per-trigger", "3")
    ingest_cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, str(table), "-k", bootstrap, *FAST_GROUP]
    ingest_cmd += ["--end-at-latest", "--max-segments-per-commit", "2"]
    with open(spark_log, "wb") as out:
        spark = _forked.popen(spark_cmd, stdout=subprocess.PIPE, stderr=out, start_new_session=True)
    try:
        # parka ingest joins once Spark has committed its first micro-batch
        wait_until(
            lambda: "committed " in spark_log.read_text() or spark.poll() is not None, 300, "Spark's first commit"
        )
        assert "committed " in spark_log.read_text(), (
            f"spark-ingest exited {spark.returncode} before its first commit: {spark_log.read_text()[-4000:]}"
        )
        with open(ingest_log, "wb") as out:
            ingest = _forked.popen(ingest_cmd, stdout=subprocess.PIPE, stderr=out)
            ingest_out, _ = ingest.communicate(timeout=300)
        spark_out, _ = spark.communicate(timeout=300)
    finally:
        if spark.poll() is None:
            os.killpg(spark.pid, signal.SIGKILL)
            spark.communicate(timeout=60)  # reaps it and closes its pipe
    assert ingest.returncode == 0, ingest_log.read_text()[-4000:]
    assert spark.returncode == 0, spark_log.read_text()[-4000:]
    by_spark = last_json(subprocess.CompletedProcess([], 0, spark_out.decode(), ""))
    by_ingest = last_json(subprocess.CompletedProcess([], 0, ingest_out.decode(), ""))
    # both landed records, and Spark deleted uncommitted the files of offsets parka ingest took first
    assert by_spark["records"] > 0 and by_ingest["records"] > 0
    assert by_spark["covered_files"] > 0
    assert sorted(table_ids(table)) == list(range(3000))
    assert_no_orphans(table)
