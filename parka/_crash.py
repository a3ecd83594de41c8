"""A test-only hook: kill -9 this process at a named point of a commit protocol.

Configuration, not a patch: ``PARKA_TEST_CRASH_AT=<point>`` makes :func:`crash_point` send
SIGKILL to its own process the ``PARKA_TEST_CRASH_AFTER``-th time (default 1) the named point
is reached, after logging ``crash point <point>: SIGKILL`` (a line a test can wait for).
Unset, it costs one dictionary look-up. The points:

* ``before-write``: segments read, no data file written yet (``parka ingest``: per segment;
  Spark raw mode: per micro-batch, on the driver);
* ``after-write``: data files written, not committed;
* ``after-delta-commit``: the Delta commit landed; ``parka ingest`` has not committed Kafka
  offsets yet, Spark has not marked the micro-batch done in its checkpoint.
"""

from __future__ import annotations

import logging
import os
import signal

__all__ = ["CRASH_AFTER_ENV", "CRASH_AT_ENV", "crash_point"]

CRASH_AT_ENV = "PARKA_TEST_CRASH_AT"
CRASH_AFTER_ENV = "PARKA_TEST_CRASH_AFTER"

log = logging.getLogger("parka")
_reached: dict[str, int] = {}


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
