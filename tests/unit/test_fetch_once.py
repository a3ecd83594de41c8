"""``fetch_once`` in ``scripts/_daemon.sh``, the one lock every server script's first download or
build takes: ``make test`` fetches the schema registry and Azurite in the background while the
tests' own start of the same server may begin, and exactly one of them must fetch."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DAEMON = Path(__file__).resolve().parents[2] / "scripts" / "_daemon.sh"

# A stand-in for a script's fetch function: records its run, then waits for the test's gate
# before it makes the marker (or fails with 3 when told to)
SCRIPT = f"""
set -euo pipefail
HOME_DIR=$1; DONE=$HOME_DIR/app/.complete
source {DAEMON}
fetch() {{
  echo ran >> "$HOME_DIR/runs"
  touch "$HOME_DIR/started"
  while [[ ! -e "$HOME_DIR/gate" ]]; do sleep 0.02; done
  [[ -e "$HOME_DIR/fail" ]] && exit 3
  mkdir -p "$HOME_DIR/app"; touch "$DONE"
}}
fetch_once "$DONE" fetch
"""


STARTED: list[subprocess.Popen[str]] = []


def start(home: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(["bash", "-c", SCRIPT, "fetch-test", str(home)], text=True)
    STARTED.append(proc)
    return proc


@pytest.fixture(autouse=True)
def _no_fetch_left() -> Iterator[None]:
    """A failed test leaves no fetch waiting for its gate."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_for(condition: object, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def blocked_flocks() -> int:
    """Processes waiting for a flock(2) lock, machine-wide (``/proc/locks`` lists a waiter with
    ``->``)."""
    return sum(1 for line in Path("/proc/locks").read_text().splitlines() if "-> FLOCK" in line)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "server"


def test_a_second_fetch_waits_for_the_first_and_does_not_fetch_again(home: Path) -> None:
    first = start(home)
    wait_for(lambda: (home / "started").exists(), "the first fetch to begin")
    waiting_before = blocked_flocks()
    second = start(home)
    wait_for(lambda: blocked_flocks() > waiting_before, "the second fetch to wait on the lock")
    assert second.poll() is None
    (home / "gate").touch()
    assert first.wait(30) == 0
    assert second.wait(30) == 0
    assert (home / "runs").read_text().splitlines() == ["ran"]
    assert (home / "app" / ".complete").exists()


def test_a_failed_fetch_exits_with_its_status_and_the_next_one_fetches_again(home: Path) -> None:
    home.mkdir()
    (home / "gate").touch()
    (home / "fail").touch()
    assert start(home).wait(30) == 3
    assert not (home / "app" / ".complete").exists()
    (home / "fail").unlink()
    assert start(home).wait(30) == 0
    assert (home / "runs").read_text().splitlines() == ["ran", "ran"]


def test_nothing_runs_once_the_marker_exists(home: Path) -> None:
    (home / "app").mkdir(parents=True)
    (home / "app" / ".complete").touch()
    assert start(home).wait(30) == 0
    assert not (home / "runs").exists()
