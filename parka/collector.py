"""Python's cyclic garbage collector held off while many objects that form no cycle are made.

:func:`gc_paused` is the one place parka pauses it. Two callers build thousands of such objects
at once, and every 700 new container objects set off a collection that walks the young ones
again (every tenth the older generation too, now and then every object):

* the lake's writers parse a file's segment footers (a few hundred dicts each) and stitch them
  (``lake/_files.py``): parsing and stitching a 128 MiB file's footers took about 3x as long with
  the collector running (0.34 against 0.13 ms per footer on the flights, commit 9b9e5ab);
* the consumer builds a segment's records (a dict per row, a message per record:
  ``consumer/_rows.py``, :meth:`parka.message.SegmentRecords.records`): with the collector
  paused it took 0.54-0.77 of the CPU it took with it running
  (``benchmarks/results/2026-12-01-consume-gc/``).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the collector off for the block. Pauses of several threads nest: the collector runs
    again once the last one ends (at the next allocation, as it would have), unless the program
    had it off before the first began."""
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
