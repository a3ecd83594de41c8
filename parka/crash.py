"""A test-only hook: kill -9 this process at a named point of a commit protocol.

Configuration, not a patch: ``PARKA_TEST_CRASH_AT=<point>`` makes :func:`crash_point` send
SIGKILL to its own process the ``PARKA_TEST_CRASH_AFTER``-th time (default 1) the named point
is reached, after logging ``crash point <point>: SIGKILL`` (a line a test can wait for).
Unset, it costs one dictionary look-up. The points:

* ``before-write``: a segment read and checked, no data file written yet (where segments
  are written: ``parka ingest``'s process, a Spark executor);
* ``mid-write``: half of a data file's bytes written to its temporary file (local tables);
* ``after-write``: a segment's data files written, not committed;
* ``batch-before-write``, ``batch-after-write``: Spark raw mode's driver, before the
  micro-batch's executors write its files, and after, before the commit;
* ``after-dead-letters``: the commit's dead letters are in the dead-letter table, the main
  commit not made yet;
* ``after-delta-commit``: the Delta commit landed; ``parka ingest`` has not committed Kafka
  offsets yet, Spark has not marked the micro-batch done in its checkpoint;
* ``on-revoke``: ``parka ingest`` was told its partitions are revoked (a rebalance), before
  it commits what it buffered for them.

Two more are not points but spans (:func:`crash_during`): the kill comes from another thread
``PARKA_TEST_CRASH_DELAY_MS`` (default: a random 0-20) after the span began, while it still runs,
so it lands inside a native call (delta-rs) that no point inside could reach:

* ``during-vacuum``: the daemon's VACUUM of the table (the listing, the deletes);
* ``during-checkpoint``: the writing of a checkpoint, and the log cleanup after it.

A span that ends before its kill fires is not counted: the next one tries again.

``PARKA_TEST_HANG_AT=<point>`` makes the thread that reaches the point block there for good
instead, after logging ``hang point <point>: blocking`` (a call that never returns, as a native
call that hangs: what a stop must still end, within its bound).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "CRASH_AFTER_ENV",
    "CRASH_AT_ENV",
    "CRASH_DELAY_ENV",
    "HANG_AT_ENV",
    "crash_during",
    "crash_point",
    "crash_point_armed",
]

CRASH_AT_ENV = "PARKA_TEST_CRASH_AT"
CRASH_AFTER_ENV = "PARKA_TEST_CRASH_AFTER"
CRASH_DELAY_ENV = "PARKA_TEST_CRASH_DELAY_MS"
HANG_AT_ENV = "PARKA_TEST_HANG_AT"

log = logging.getLogger("parka")
_reached: dict[str, int] = {}


def crash_point_armed(name: str) -> bool:
    """Whether ``PARKA_TEST_CRASH_AT`` names this point (to prepare it, e.g. flush a half-written file)."""
    return os.environ.get(CRASH_AT_ENV) == name


def crash_point(name: str) -> None:
    """SIGKILL this process here, or block here for good, when the environment asks for it (see
    the module docstring)."""
    if os.environ.get(HANG_AT_ENV) == name:
        log.error("hang point %s: blocking", name)
        threading.Event().wait()
    if os.environ.get(CRASH_AT_ENV) != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] >= int(os.environ.get(CRASH_AFTER_ENV, "1")):
        _kill(name)


def _kill(name: str) -> None:
    log.error("crash point %s: SIGKILL", name)
    for handler in logging.getLogger("parka").handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def crash_during(name: str) -> Iterator[None]:
    """SIGKILL this process while the ``with`` block runs, when the environment asks for it (see
    the module docstring)."""
    if os.environ.get(CRASH_AT_ENV) != name:
        yield
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] < int(os.environ.get(CRASH_AFTER_ENV, "1")):
        yield
        return
    delay_ms = os.environ.get(CRASH_DELAY_ENV)
    delay_s = (float(delay_ms) if delay_ms else random.uniform(0, 20)) / 1000
    ended = threading.Event()

    def kill_inside() -> None:
        if not ended.wait(delay_s):
            _kill(name)
        else:  # the span ended first: the next one tries again
            _reached[name] -= 1

    threading.Thread(target=kill_inside, name=f"crash-{name}", daemon=True).start()
    try:
        yield
    finally:
        ended.set()
