"""parka's wheel as ``python -m build --wheel`` makes it, built once per test run into the run's
folder (:func:`tests.integration._servers.run_dir`) and shared by the tests that install it
(``test_light_install.py``) or ship it to Spark's executors (``spark/test_spark_cluster.py``):
each build runs setuptools in an isolated environment of its own, some seconds of CPU."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

from ._servers import run_dir

REPO = Path(__file__).resolve().parents[2]


def built_wheel() -> Path:
    """The run's wheel of parka; the first caller builds it, the others (any worker) wait for it
    on a lock in the run's folder.

    Raises:
        AssertionError: the build failed (its output).
    """
    folder = run_dir() / "wheel"
    with open(run_dir() / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(folder.glob("parka-*-py3-none-any.whl"))
        if not found:
            # neither PYTHONPATH nor the clone may reach the build's own environment
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
            command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(folder), str(REPO)]
            run = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=run_dir())
            assert run.returncode == 0, f"the wheel's build exited {run.returncode}: {run.stderr[-3000:]}"
            found = sorted(folder.glob("parka-*-py3-none-any.whl"))
        (wheel,) = found
        return wheel
