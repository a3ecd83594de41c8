"""The warning a slow checkpoint earns (step 7 of :meth:`parka.lake.Committer.commit`): it runs
on the commit path and delays the commits, and on a table whose small files compaction keeps
removing it grows with the tombstones the Delta log keeps for
``delta.deletedFileRetentionDuration`` (and so does every reader's opening of the table). It has
no clock of its own: the times it is told are readings of the committer's.
"""

from __future__ import annotations

import logging

from ._log import TableLog

__all__ = ["SLOW_CHECKPOINT_S", "SLOW_CHECKPOINT_WARNING_EVERY_S", "SlowCheckpoints"]

log = logging.getLogger("parka.commit")

SLOW_CHECKPOINT_S = 1.0
"""A checkpoint that took this long is logged as a warning (at most every
:data:`SLOW_CHECKPOINT_WARNING_EVERY_S`): it runs on the commit path, and it grows with the
tombstones the table keeps (``python -m benchmarks.tombstones``)."""
SLOW_CHECKPOINT_WARNING_EVERY_S = 600.0
DELTA_DEFAULT_TOMBSTONE_RETENTION = "interval 1 week"  # delta.deletedFileRetentionDuration's default


class SlowCheckpoints:
    """Warns about a slow checkpoint, at most every ten minutes (quicker ones are logged at
    debug level in between)."""

    def __init__(self) -> None:
        self._warned_at: float | None = None

    def seen(self, table: TableLog, engine: str, version: int, seconds: float, now: float, every: int) -> None:
        """The checkpoint of ``table`` (by the engine named ``engine``) at ``version``, written
        every ``every`` commits, took ``seconds`` and ended at ``now``."""
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
        log.warning("the checkpoint of version %d took %.1f s (every %d commits)%s", version, seconds, every, why)
