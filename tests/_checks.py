"""``make lint docs-build`` (ruff, mypy, the import contracts, the strict docs build) as one test,
:func:`tests.test_checks.test_lint_and_the_docs_site_pass`.

``make test`` sets ``PARKA_CHECKS_BESIDE=1``: the process that configures the run then starts the
checks at the session's start, niced, so that they run on the CPU the tests leave idle (most of
the integration tests wait on a broker or a subprocess) instead of before the tests, and the test,
handed out after every other one, waits for their exit. Without it the test runs them itself.
Their output goes to a log in the run's folder, printed by the test only when they fail.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from reliability.procs import Timeout, wait_for
from tests.integration import _servers

BESIDE_VAR = "PARKA_CHECKS_BESIDE"
TARGETS = ("lint", "docs-build")
# the lowest priority: the tests' processes (their brokers and JVMs included) come first
NICENESS = 19


@dataclass(frozen=True)
class Result:
    returncode: int
    output: str


def _command() -> list[str]:
    return [
        os.environ.get("MAKE", "make"),
        "--no-print-directory",
        "--keep-going",
        "-j2",
        "--output-sync=target",
        *TARGETS,
    ]


def _env() -> dict[str, str]:
    # the make that runs pytest passes its flags down; this make is not one of its jobs
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


def _paths() -> tuple[Path, Path]:
    run = _servers.run_dir()
    return run / "checks.log", run / "checks.rc"


_beside: subprocess.Popen[bytes] | None = None


def start_beside() -> None:
    """Start the checks in the background, niced; their exit code goes to ``checks.rc`` when
    they end (the shell writes it, so it exists only once they are done)."""
    global _beside
    log, rc = _paths()
    script = f'{" ".join(_command())} >"{log}" 2>&1; echo $? >"{rc}.part" && mv "{rc}.part" "{rc}"'
    _beside = subprocess.Popen(
        ["nice", "-n", str(NICENESS), "sh", "-c", script],
        cwd=_servers.REPO,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # A session of its own is a scheduling group of its own where the kernel groups sessions
    # (autogroup, on by default on Linux desktops and on this project's machines): a process's
    # nice then weighs only against its own group's, so the group itself is niced.
    with contextlib.suppress(OSError):
        Path(f"/proc/{_beside.pid}/autogroup").write_text(str(NICENESS))


def stop_beside() -> None:
    """At the run's end: checks still running (a run interrupted, or their test deselected) are
    stopped with their processes."""
    if _beside is not None and _beside.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(_beside.pid, signal.SIGKILL)
        _beside.wait()


def started_beside() -> bool:
    return os.environ.get(BESIDE_VAR) == "1"


def result(timeout_s: float) -> Result:
    """The checks' exit code and output: waited for if they run beside the tests, run here
    otherwise."""
    log, rc = _paths()
    if not started_beside():
        done = subprocess.run(
            _command(), cwd=_servers.REPO, env=_env(), capture_output=True, text=True, timeout=timeout_s
        )
        return Result(done.returncode, done.stdout + done.stderr)
    try:
        wait_for(rc.exists, f"make {' '.join(TARGETS)} to end", timeout_s, poll_s=0.5)
    except Timeout as exc:
        raise AssertionError(f"{exc}; its log so far:\n{log.read_text()}") from None
    return Result(int(rc.read_text()), log.read_text())
