"""A table's checkpoints (step 7 of :meth:`parka.lake.Committer.commit`), and the warning a slow
one earns.

Where the engine's checkpoint is a file beside the log and not a commit (delta-rs:
``LogEngine.checkpoint_beside_commits``), it is written on a thread of its own, from a handle of
its own, so that its time never adds to a commit's, and so to the produce-to-visible latency: a
commit asks for one (:meth:`Checkpoints.due`) and goes on. Requests coalesce: a checkpoint
still being written when the next falls due is followed by one of the then-latest version. A
checkpoint that fails is logged and counted, and the next request tries again; readers only
ever read complete ones (``_last_checkpoint`` names one once it is written). Elsewhere
(Iceberg's snapshot expiry, which commits; delta-spark's, in the JVM) the checkpoint runs on the
commit path as before.

A checkpoint on the commit path delays the commits, and on a table whose small files compaction
keeps removing it grows with the tombstones the Delta log keeps for
``delta.deletedFileRetentionDuration`` (and so does every reader's opening of the table). The
warning has no clock of its own: the times it is told are readings of the committer's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from parka.logtopic import carried

from ._log import TableLog

__all__ = [
    "CHECKPOINT_CLOSE_S",
    "SLOW_CHECKPOINT_S",
    "SLOW_CHECKPOINT_WARNING_EVERY_S",
    "Checkpoints",
    "SlowCheckpoints",
]

log = logging.getLogger("parka.commit")

SLOW_CHECKPOINT_S = 1.0
"""A checkpoint that took this long is logged as a warning (at most every
:data:`SLOW_CHECKPOINT_WARNING_EVERY_S`): it runs on the commit path, and it grows with the
tombstones the table keeps (``python -m benchmarks.tombstones``)."""
SLOW_CHECKPOINT_WARNING_EVERY_S = 600.0
CHECKPOINT_CLOSE_S = 30.0
"""How long a stopping daemon waits for a checkpoint being written beside the commits (then it
ends without it: a checkpoint is an optimisation, readers use the log without it)."""
DELTA_DEFAULT_TOMBSTONE_RETENTION = "interval 1 week"  # delta.deletedFileRetentionDuration's default


class SlowCheckpoints:
    """Warns about a slow checkpoint, at most every ten minutes (quicker ones are logged at
    debug level in between)."""

    def __init__(self) -> None:
        self._warned_at: float | None = None

    def seen(
        self, table: TableLog, engine: str, version: int, seconds: float, now: float, every: int, *, beside: bool
    ) -> None:
        """The checkpoint of ``table`` (by the engine named ``engine``) at ``version``, written
        every ``every`` commits (``beside`` them, or on the commit path), took ``seconds`` and
        ended at ``now``."""
        if seconds < SLOW_CHECKPOINT_S:
            return
        last = self._warned_at
        if last is not None and now - last < SLOW_CHECKPOINT_WARNING_EVERY_S:
            log.debug("the checkpoint of version %d took %.1f s", version, seconds)
            return
        self._warned_at = now
        why = ""
        if engine.startswith("delta"):
            retention = table.configuration().get(
                "delta.deletedFileRetentionDuration", f"{DELTA_DEFAULT_TOMBSTONE_RETENTION}, the default"
            )
            why = (
                "; a checkpoint keeps a tombstone for every file removed (by compaction too) until "
                f"delta.deletedFileRetentionDuration is over ({retention} here), and every reader reads "
                "them: a shorter retention keeps both small (parka ingest --set-table-retention; docs/ingest.md, "
                "retention and VACUUM)"
            )
        where = "beside the commits" if beside else "on the commit path"
        log.warning(
            "the checkpoint of version %d took %.1f s (every %d commits, %s)%s", version, seconds, every, where, why
        )


class Checkpoints:
    """The checkpoints of one committer's table, every ``every`` commits (:meth:`due`): on the
    commit path, or beside it on a thread of its own when ``open_table`` is given (a new handle
    of the table: the thread never touches the committer's). ``on_checkpoint`` is told each one's
    seconds."""

    def __init__(
        self,
        engine: str,
        every: int,
        *,
        clock: Callable[[], float],
        on_checkpoint: Callable[[float], None] | None = None,
        open_table: Callable[[], TableLog | None] | None = None,
    ) -> None:
        self.engine = engine
        self.every = every
        self.clock = clock
        self.on_checkpoint = on_checkpoint
        self._open_table = open_table
        self._slow = SlowCheckpoints()
        self._state = threading.Condition()
        self._pending = False  # a checkpoint asked for and not started
        self._busy = False  # one being written
        self._closing = False
        self._thread: threading.Thread | None = None

    @property
    def beside_commits(self) -> bool:
        return self._open_table is not None

    def due(self, table: TableLog, version: int) -> None:
        """A checkpoint of ``table`` (the committer's handle, at ``version``) is due: written now,
        or asked of the thread (which checkpoints the latest version it then reads)."""
        if self._open_table is None:
            self._write(table, version)
            return
        with self._state:
            if self._thread is None:
                self._thread = threading.Thread(target=carried(self._run), name="parka-checkpoint", daemon=True)
                self._thread.start()
            self._pending = True
            self._state.notify_all()

    def close(self, timeout_s: float = CHECKPOINT_CLOSE_S) -> bool:
        """Finish the checkpoint asked for (if any) and stop the thread; returns False when it
        was still writing after ``timeout_s`` (a daemon thread: the process may end anyway)."""
        if self._thread is None:
            return True
        with self._state:
            finished = self._state.wait_for(lambda: not (self._pending or self._busy), timeout_s)
            self._closing = True
            self._state.notify_all()
        if finished:
            self._thread.join(timeout_s)
            with self._state:  # a later request starts a thread again
                self._thread, self._closing = None, False
        return finished

    def _write(self, table: TableLog, version: int) -> None:
        start = self.clock()
        table.checkpoint()
        end = self.clock()
        if self.on_checkpoint is not None:
            self.on_checkpoint(end - start)
        self._slow.seen(table, self.engine, version, end - start, end, self.every, beside=self.beside_commits)

    def _run(self) -> None:
        assert self._open_table is not None
        table: TableLog | None = None
        while True:
            with self._state:
                self._state.wait_for(lambda: self._pending or self._closing)
                if not self._pending:
                    return
                self._pending, self._busy = False, True
            try:
                if table is None:
                    table = self._open_table()
                else:
                    table.refresh()
                if table is not None:
                    self._write(table, table.version())
            except Exception as exc:  # the next one tries again; ingestion goes on
                table = None
                log.warning("the table's checkpoint failed, the next one tries again: %s", exc)
            finally:
                with self._state:
                    self._busy = False
                    self._state.notify_all()
