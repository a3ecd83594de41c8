"""``parka spark-ingest`` and ``read_stream`` on a Spark standalone cluster (one master, a worker
with one two-core executor, started by ``scripts/spark-standalone.sh``), with parka shipped to the
executor as users ship it: a zip of the wheel in ``spark.submit.pyFiles`` / ``--py-files``. The
executor's Python has parka's dependencies but not parka, so every task that decodes or writes a
segment runs the shipped code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pyspark
import pytest
from parka.spark_ext import packages

from .._ingest_util import assert_no_orphans, assert_segments_stored_byte_for_byte, produce_events, table_ids
from .._wheel import built_wheel
from ._jars import SPARK_JVM
from ._util import SPARK
from .conftest import Cluster

pytestmark = [*SPARK, pytest.mark.long(180)]

# One small executor of two cores: a process apart from the driver, as any number of them are (a
# second one was a JVM more: benchmarks/results/2026-12-01-spark-cluster-one-executor/). Delta's
# log replays and shuffles in few partitions (its defaults, 50 and 200 tasks, cost a minute on two
# cores).
CLUSTER_CONF = {
    "spark.executor.memory": "512m",
    "spark.executor.cores": "2",
    "spark.cores.max": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": SPARK_JVM,
    "spark.executor.extraJavaOptions": SPARK_JVM,
}


def parka_zip(into: Path) -> Path:
    """parka as users ship it to executors: its wheel (pure Python; the run's, built once) renamed
    to .zip for --py-files."""
    into.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(built_wheel(), into / "parka.zip"))


def python_without_parka(into: Path) -> Path:
    """A Python that has parka's dependencies (this environment's site-packages folders, as plain
    path entries, so the editable install's hook is not run) but not parka itself. Every
    site-packages on this interpreter's path: a venv may reach its packages through another's
    (a worktree's venv, by a .pth file that a plain path entry does not run)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(into)], check=True, timeout=120)
    python = into / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    folders = [sysconfig.get_paths()["purelib"], *(p for p in sys.path if p.endswith("site-packages"))]
    Path(purelib, "parka-deps.pth").write_text("".join(f"{p}\n" for p in dict.fromkeys(folders)))
    # (run outside the repo: its root holds the folder parka/, which a script's directory would put first)
    probe = subprocess.run(
        [str(python), "-c", "import pyarrow, deltalake, pyspark, parka"], capture_output=True, cwd=into
    )
    assert b"No module named 'parka'" in probe.stderr, probe.stderr
    return python


def test_spark_ingest_and_read_stream_run_on_a_standalone_cluster(
    spark_cluster: Cluster, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=4)
    segments = produce_events(bootstrap, topic, 0, 2000, batch=100)
    shipped = parka_zip(tmp_path / "dist")
    executor_python = python_without_parka(tmp_path / "executor-venv")
    env = {**os.environ, "PYSPARK_PYTHON": str(executor_python), "SPARK_LOCAL_IP": "127.0.0.1"}

    # one application by spark-submit, parka in --py-files (driver and executors): parka
    # spark-ingest through its CLI, then read_stream of the same topic
    table = tmp_path / "events"
    submit = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--master", spark_cluster.url]
    submit += ["--packages", ",".join(packages()), "--py-files", str(shipped)]
    submit += [arg for key, value in CLUSTER_CONF.items() for arg in ("--conf", f"{key}={value}")]
    job = Path(__file__).parent / "_cluster_job.py"
    run = subprocess.run(
        [*submit, str(job), topic, bootstrap, str(table), str(tmp_path / "records")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-5000:]
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    result = next(line for line in lines if "status" in line)  # parka spark-ingest's closing line
    assert (result["status"], result["mode"], result["segments"], result["records"]) == ("ok", "raw", segments, 2000)
    assert sorted(table_ids(table)) == list(range(2000))
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, table)  # stitched per task
    assert_no_orphans(table)
    # an executor ran it, a process of the worker's apart from the driver (a work folder per
    # executor id, with the executor's own log)
    [app] = (spark_cluster.home / "work" / "worker-1").glob("app-*")
    executors = sorted(p.name for p in app.iterdir() if p.is_dir())
    assert len(executors) >= 1, executors
    assert (app / executors[0] / "stderr").stat().st_size > 0
    out = lines[-1]
    assert out["master"] == spark_cluster.url
    assert out["ids"] == list(range(2000))
