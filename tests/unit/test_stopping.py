"""StopGuard's install and uninstall, in this interpreter (its stops and forced exits run in
daemons: tests/integration/test_ingest.py, tests/integration/spark/test_spark_faults.py)."""

from __future__ import annotations

import signal
import threading
import time

from parka.ops.stopping import StopGuard


def watchers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "parka-stop"]


def test_uninstall_gives_back_the_handlers_and_ends_the_watcher() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stops: list[int] = []
    guard = StopGuard(lambda: stops.append(1), bound_s=60, name="test")
    guard.install()
    assert {sig: signal.getsignal(sig) for sig in before} != before
    [watcher] = watchers()
    guard.uninstall()
    watcher.join(10)
    assert not watcher.is_alive()
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert signal.set_wakeup_fd(-1) == -1  # none left behind
    assert stops == []


def test_a_signal_while_installed_calls_stop_once_and_uninstall_disarms_its_bound() -> None:
    stops: list[float] = []
    arrived = threading.Event()
    guard = StopGuard(lambda: (stops.append(time.monotonic()), arrived.set()), bound_s=0.5, name="test")
    guard.install()
    try:
        signal.raise_signal(signal.SIGTERM)
        assert arrived.wait(10)
    finally:
        guard.uninstall()
    assert len(stops) == 1
    # the bound would have ended this interpreter with os._exit(143) half a second after the
    # signal: disarmed, the timer thread ends without firing
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for timer in timers:
        timer.join(10)
        assert not timer.is_alive()
