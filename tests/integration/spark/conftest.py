"""One SparkSession for every Spark test of a run (a JVM start costs ~10 s, the first jar
download ~10 s more): :func:`._jars.session_for_tests`. Spark and Java
must be there: a missing one fails the run, it never skips. The cluster tests get a standalone
cluster of their own (:func:`spark_cluster`)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ._jars import SPARK_JVM, fetch, local_fs_class_path, session_for_tests

REPO = Path(__file__).resolve().parents[3]

# Every Spark driver the tests start, theirs and the docs' commands' (spark-submit's launcher adds
# SPARK_SUBMIT_OPTS to the driver JVM's options), starts from the class archive too
os.environ.setdefault("SPARK_SUBMIT_OPTS", SPARK_JVM)


def _free_port_run(count: int = 6) -> str:
    """A base port with ``count`` free ports from it (the master, its UI, two workers and theirs),
    so that runs in other checkouts on this machine never meet this one's cluster. Below the
    kernel's ephemeral range (32768 and up): a port picked there can be handed, between this probe
    and the cluster's bind, to any socket bound to port 0 (a daemon's metrics server in another
    test), and a scrape of that server then reaches the Spark master instead."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32768 - count)
        socks = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return str(base)
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports for the Spark cluster")


CLUSTER_PORT = os.environ.get("PARKA_TEST_SPARK_PORT") or _free_port_run()


@pytest.fixture(scope="session", autouse=True)
def _spark_jars() -> None:
    """Every Spark test, its own drivers' included, after the jars' fetch (:func:`._jars.fetch`,
    which ``make test`` starts in the background): two resolutions at once into Ivy's cache
    would race. With Hadoop's local file system of ``_jars.LOCAL_FS`` on every Spark JVM's class
    path from then on (the session's, the drivers' and daemons' the tests start), unless
    ``PARKA_TEST_SPARK_LOCAL_FS=hadoop`` asks for Hadoop's own."""
    fetch()
    class_path = local_fs_class_path()
    if class_path and os.environ.get("PARKA_TEST_SPARK_LOCAL_FS") != "hadoop":
        os.environ["SPARK_DIST_CLASSPATH"] = class_path


# The Spark session's tests run one after the other on one worker, the run's longest chain, and
# each waits on its JVM's streams and Py4J calls as much as it computes: among four or five other
# workers taking their fair share of the two cores, the chain ended 41-99 s after every other
# worker. Ahead of them it ends with them, and the whole run is shorter
# (benchmarks/results/2026-12-01-suite-spark-ahead/).
BEHIND_BY = 8  # nice levels: a weight of about 1 to 6 on Linux


def _other_workers_behind() -> None:
    """Every thread of the other pytest workers (found in ``/proc`` by pytest-xdist's command
    line and this worker's parent) at a lower CPU priority, ``BEHIND_BY`` nice levels: any
    process may lower its user's processes, so it works without root. The session's JVM and the
    servers the tests share (started before, by whichever worker) keep theirs: raising the
    session's own instead (root only) starved the shared broker, and a producer test of another
    worker timed out waiting on it. What the other workers start from now on is behind too."""
    worker = "import sys;exec(eval(sys.stdin.readline()))"  # how pytest-xdist starts its workers
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid != os.getppid() or worker not in (entry / "cmdline").read_bytes().decode(errors="replace"):
                continue
            for task in (entry / "task").iterdir():
                tid = int(task.name)
                os.setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), BEHIND_BY))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to change


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    started = time.monotonic()
    spark = session_for_tests()
    spark.sparkContext.setLogLevel("ERROR")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # by now the servers the tests share are up
        _other_workers_behind()
    print(f"\nSpark session ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
    yield spark
    spark.stop()


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:<port>
    home: Path  # the script's logs, pids and the workers' work dirs (work/worker-<i>/<app id>/...)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A Spark standalone cluster, one master and one worker of two cores (room for the test's
    two-core executor), started by the repo's ``scripts/spark-standalone.sh`` (the installed
    pyspark's own daemon script) on ports of its own (``PARKA_TEST_SPARK_PORT``, default: free
    ones), its daemons on :data:`SPARK_JVM`, and stopped after the module that uses it (its JVMs
    are not left idling beside the other Spark tests). One worker, not the script's two: a
    worker is a JVM of its own (some 10 CPU-s on the suite's 2 cores), and the executors are
    processes apart from the driver and each other either way. It never skips."""
    home = tmp_path_factory.mktemp("spark-standalone")
    env = dict(
        os.environ,
        PARKA_SPARK_MASTER_PORT=CLUSTER_PORT,
        PARKA_SPARK_CLUSTER_HOME=str(home),
        PARKA_PYTHON=sys.executable,
        SPARK_DAEMON_JAVA_OPTS=SPARK_JVM,
        PARKA_SPARK_WORKERS="1",
        PARKA_SPARK_WORKER_CORES="2",
    )
    script = str(REPO / "scripts" / "spark-standalone.sh")
    subprocess.run([script, "up"], check=True, env=env, timeout=240)
    try:
        yield Cluster(f"spark://127.0.0.1:{CLUSTER_PORT}", home)
    finally:
        subprocess.run([script, "down"], check=False, env=env, timeout=120)
