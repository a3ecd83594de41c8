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
"""

from __future__ import annotations

import logging
import os
import signal

__all__ = ["CRASH_AFTER_ENV", "CRASH_AT_ENV", "crash_point", "crash_point_armed"]

CRASH_AT_ENV = "PARKA_TEST_CRASH_AT"
CRASH_AFTER_ENV = "PARKA_TEST_CRASH_AFTER"

log = logging.getLogger("parka")
_reached: dict[str, int] = {}


def crash_point_armed(name: str) -> bool:
    """Whether ``PARKA_TEST_CRASH_AT`` names this point (to prepare it, e.g. flush a half-written file)."""
    return os.environ.get(CRASH_AT_ENV) == name


def crash_point(name: str) -> None:
    """SIGKILL this process here when the environment asks for it (see the module docstring)."""
    if os.environ.get(CRASH_AT_ENV) != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] >= int(os.environ.get(CRASH_AFTER_ENV, "1")):
        log.error("crash point %s: SIGKILL", name)
        for handler in logging.getLogger("parka").handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
