"""The processes the suite drives: ``parka ingest`` workers and ``parka spark-ingest`` drivers, each
in a process group of its own with its log in a file, and waiting on conditions.

Every wait is on a condition (a log line, an exit, a table version), read every
:data:`POLL_S` seconds, with a deadline that fails the run naming what it waited for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import forkserver

__all__ = [
    "CRASH_LINE",
    "FAST_GROUP",
    "POLL_S",
    "Proc",
    "Timeout",
    "group_alive",
    "ingest_command",
    "spark_ingest_command",
    "wait_for",
]

POLL_S = 0.1
# A killed worker's partitions move on after 3 s, not librdkafka's 45 s: every kill and restart
# waits that long for the dead member to leave the group. scripts/kafka-local.sh's brokers allow
# sessions down to 1 s (Kafka's own minimum is 6 s).
FAST_GROUP = ("-K", "session.timeout.ms=3000", "-K", "heartbeat.interval.ms=500")
CRASH_LINE = "crash point {point}: SIGKILL"
# A small local Spark driver: JVM start-up dominates, so keep it lean.
SPARK_LOCAL = ("--master", "local[2]", "-c", "spark.ui.enabled=false", "-c", "spark.sql.shuffle.partitions=2")


class Timeout(AssertionError):
    """A condition the suite waited for did not come true in time."""


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float, *, poll_s: float = POLL_S) -> None:
    """Return once ``condition()`` holds; raise :class:`Timeout` naming ``what`` after ``timeout_s``.
    The pause between two reads of the condition is ``poll_s``, or twice what the last read took
    if longer: a costly condition (a table read through pyiceberg, a scan with deletes applied)
    then takes at most a third of a core from the processes it waits for, which share the
    machine's cores with it."""
    deadline = time.monotonic() + timeout_s
    while True:
        began = time.monotonic()
        if condition():
            return
        now = time.monotonic()
        if now > deadline:
            raise Timeout(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(max(poll_s, 2 * (now - began)))


# The scenarios wait on log lines: each commit's (debug level, -v) and the progress line (one a
# second here, not a daemon's one a minute).
WATCHED = ("-v", "--progress-interval", "1")


def _watched(extra: tuple[str, ...]) -> tuple[str, ...]:
    return WATCHED[1:] if "-q" in extra else WATCHED  # -q: a run whose log nobody waits on


def ingest_command(topic: str, table: str | Path, bootstrap: str, *extra: str) -> list[str]:
    """``parka ingest`` of ``topic`` into ``table`` (a Delta table's path, or what ``extra`` names in a
    catalog: :attr:`.tables.Target.name` and :attr:`~.tables.Target.flags`)."""
    cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, str(table), "-k", bootstrap, *FAST_GROUP]
    return [*cmd, *_watched(extra), *extra]


def spark_ingest_command(topic: str, table: Path, bootstrap: str, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "parka.cli", "spark-ingest", topic, str(table), "-k", bootstrap, *_watched(extra)]
    return [*cmd, *SPARK_LOCAL, *extra]


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` is alive and not a zombie (Linux /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@dataclass
class Proc:
    """One started process (and its process group), its log file and what the suite asked of it."""

    name: str
    popen: forkserver.Process
    log: Path
    crash_at: str | None = None
    crash_after: int = 1
    role: str = "worker"
    notes: list[str] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        name: str,
        command: list[str],
        log: Path,
        *,
        crash_at: str | None = None,
        crash_after: int = 1,
        role: str = "worker",
        env: dict[str, str] | None = None,
    ) -> Proc:
        """Start ``command`` in a new session (its own process group), stdout and stderr to ``log``."""
        # faulthandler: a SIGABRT (:meth:`abort_with_stacks`) writes every thread's stack to the log
        environ = {**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})}
        environ.pop("PARKA_TEST_CRASH_AT", None)
        environ.pop("PARKA_TEST_CRASH_AFTER", None)
        if crash_at is not None:
            environ["PARKA_TEST_CRASH_AT"] = crash_at
            environ["PARKA_TEST_CRASH_AFTER"] = str(crash_after)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as handle:  # the child keeps its own descriptor
            armed = f"  # PARKA_TEST_CRASH_AT={crash_at} PARKA_TEST_CRASH_AFTER={crash_after}" if crash_at else ""
            handle.write(f"$ {' '.join(command)}{armed}\n".encode())
            handle.flush()
            # parka's commands fork from the fork server (parka imported once); others are new processes
            popen = forkserver.popen(
                command, stdout=handle, stderr=subprocess.STDOUT, env=environ, start_new_session=True
            )
        return cls(name, popen, log, crash_at, crash_after, role)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def has(self, text: str) -> bool:
        return text in self.text()

    def count(self, text: str) -> int:
        return self.text().count(text)

    def crashed_at_its_point(self) -> bool:
        """Killed by its own crash point: SIGKILL, after the crash line."""
        return (
            self.crash_at is not None
            and self.popen.poll() == -signal.SIGKILL
            and self.has(CRASH_LINE.format(point=self.crash_at))
        )

    def tail(self, chars: int = 3000) -> str:
        return self.text()[-chars:]

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            self.popen.send_signal(sig)

    def abort_with_stacks(self, timeout_s: float = 30) -> None:
        """A process that does not exit when asked: SIGABRT, on which Python's faulthandler
        (``PYTHONFAULTHANDLER``, set by :meth:`start`) writes the stack of every thread to the
        log, even with the main thread stuck in native code; then SIGKILL of the group."""
        self.signal(signal.SIGABRT)
        with contextlib.suppress(Timeout):
            wait_for(lambda: not self.alive(), f"{self.name} to abort", timeout_s)
        self.kill_group()

    def kill_group(self) -> None:
        """SIGKILL the whole process group (a Spark driver's JVM and Python workers too)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # no such group (any more): the process itself, if it lives
            with contextlib.suppress(ProcessLookupError):
                if self.alive():
                    os.kill(self.pid, signal.SIGKILL)

    def wait_exit(self, timeout_s: float) -> int:
        """Wait for the process to exit; returns its exit code (``-9`` for SIGKILL)."""
        wait_for(lambda: not self.alive(), f"{self.name} to exit", timeout_s)
        code = self.popen.returncode
        assert code is not None
        return code

    def wait_group_gone(self, timeout_s: float = 120) -> None:
        """Wait until no process of the group is left; SIGKILL the group if some are."""
        try:
            wait_for(lambda: not group_alive(self.pid), f"process group of {self.name} to exit", timeout_s)
        finally:
            if group_alive(self.pid):
                self.kill_group()


def state_of(pid: int) -> str:
    """A process's state as ``/proc`` tells it (``Z`` a zombie no one reaped, ``D`` in an
    uninterruptible call, with the kernel function it waits in), or that it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return "gone (its exit not reported)"
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    state, ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
    # a pid reused meanwhile (a thread's id counts) shows another name, parent or group
    return f"{name}, state {state}, waiting in {wchan or '-'}, parent {ppid}, process group {pgrp}"


def stop_all(procs: Iterable[Proc]) -> None:
    """Kill every process group still running (the end of a run, or an error)."""
    for proc in procs:
        if proc.alive() or group_alive(proc.pid):
            proc.kill_group()
        if proc.popen.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=30)
