"""``running_pid`` in ``scripts/_daemon.sh``, which every server script asks before it starts its
server ("already running") and while it waits for it: a pid file left by a server killed with
SIGKILL may name a process started since with the same pid, which is not that server. Then the
script waited for a server that was not there and gave up minutes later. The file holds the
server's start as well (``write_pid``); a file of the pid alone, from older scripts, is checked by
its time."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DAEMON = Path(__file__).resolve().parents[2] / "scripts" / "_daemon.sh"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="start times come from /proc")


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def running_pid(pidfile: Path) -> str:
    """What ``running_pid`` prints for ``pidfile`` (empty when it says no server runs)."""
    script = f"set -euo pipefail; source {DAEMON}; PIDFILE={pidfile}; running_pid || true"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.strip()


def test_a_pid_file_of_the_pid_alone_written_after_its_process_started_names_it(
    tmp_path: Path, other_process: subprocess.Popen[bytes]
) -> None:
    pidfile = tmp_path / "server.pid"
    pidfile.write_text(f"{other_process.pid}\n")  # as older scripts wrote it: right after the start
    assert running_pid(pidfile) == str(other_process.pid)


def test_a_pid_file_of_the_pid_alone_older_than_the_process_with_its_pid_names_no_server(
    tmp_path: Path, other_process: subprocess.Popen[bytes]
) -> None:
    """The pid reused: the file was written ten minutes before this process started."""
    pidfile = tmp_path / "server.pid"
    pidfile.write_text(f"{other_process.pid}\n")
    past = time.time() - 600
    os.utime(pidfile, (past, past))
    assert running_pid(pidfile) == ""


def test_a_pid_file_of_an_exited_process_names_no_server(tmp_path: Path) -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    pidfile = tmp_path / "server.pid"
    pidfile.write_text(f"{proc.pid}\n")
    assert running_pid(pidfile) == ""


def write_pid(pidfile: Path, pid: int) -> None:
    """The pid file as the scripts write it now (``write_pid``): the pid and its start."""
    script = f"set -euo pipefail; source {DAEMON}; PIDFILE={pidfile}; write_pid {pid}"
    subprocess.run(["bash", "-c", script], check=True)


def test_a_pid_file_with_its_start_names_it_however_the_wall_clock_moved(
    tmp_path: Path, other_process: subprocess.Popen[bytes]
) -> None:
    """A paused machine's clock correction moves the wall clock ahead of the time since boot; to
    a check by the file's time, the file then looks older than its process (as here, ten minutes
    back), and every server of a test run seemed not the script's."""
    pidfile = tmp_path / "server.pid"
    write_pid(pidfile, other_process.pid)
    past = time.time() - 600
    os.utime(pidfile, (past, past))
    assert running_pid(pidfile) == str(other_process.pid)


def test_a_pid_file_whose_start_is_not_its_processes_names_no_server(
    tmp_path: Path, other_process: subprocess.Popen[bytes]
) -> None:
    """The pid reused by a process that started at another tick than the one written."""
    pidfile = tmp_path / "server.pid"
    write_pid(pidfile, other_process.pid)
    pid, started = pidfile.read_text().split()
    pidfile.write_text(f"{pid} {int(started) - 1}\n")
    assert running_pid(pidfile) == ""
