"""``parka ingest``'s commits off the loop's thread: while one batch of segments is written,
made durable and committed, the loop fetches and checks the next.

A :class:`Batch` is what the loop buffers for one commit. :class:`CommitPipeline` takes a full
batch and runs ``land`` on it (the data files written by a pool of ``write_threads``, several at
once, then the committer: one sync, the protocol) on a thread of its own, one batch at a time:
the loop hands over the next batch only after taking the result of the one before
(:meth:`CommitPipeline.wait`), so commits land in the order they were cut and the protocol's
order of effects is the serial loop's. Nothing here touches Kafka or the table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from parka.lake import CheckedSegment, CommitResult, Refused, Tombstone

from parka.logtopic import set_topic, topic

__all__ = ["Batch", "CommitPipeline"]

log = logging.getLogger("parka.ingest")


@dataclass
class Batch:
    """Segments checked, messages refused and (upserts) tombstones since the last commit was cut:
    the next commit.
    ``bytes``: the segments' Kafka values; ``oldest_at``: when the first arrived (the loop's clock)."""

    checked: list[CheckedSegment] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    tombstones: list[Tombstone] = field(default_factory=list)  # --upsert's
    # --value-format: row records not decoded yet, per Kafka partition (the loop decodes a
    # partition's run when something else of it arrives, and all of them before the cut)
    rows: dict[int, list[Any]] = field(default_factory=dict)
    bytes: int = 0
    oldest_at: float | None = None

    def __len__(self) -> int:
        return len(self.checked) + len(self.refused) + len(self.tombstones) + len(self.rows)


Land = Callable[[Batch, Executor], CommitResult]


class CommitPipeline:
    """At most one commit in flight: ``land(batch, writers)`` on the commit thread, where
    ``writers`` is the pool the batch's data files are written with."""

    def __init__(self, land: Land, *, write_threads: int) -> None:
        self._land = land
        lane = (topic(),)  # the caller's topic, if any: its threads' lines name it
        self._writers = ThreadPoolExecutor(write_threads, "parka-write", initializer=set_topic, initargs=lane)
        self._committer = ThreadPoolExecutor(1, "parka-commit", initializer=set_topic, initargs=lane)
        self._in_flight: tuple[Batch, Future[CommitResult]] | None = None

    @property
    def busy(self) -> bool:
        """A commit is in flight (done or not, its result not yet taken)."""
        return self._in_flight is not None

    @property
    def in_flight_bytes(self) -> int:
        return 0 if self._in_flight is None else self._in_flight[0].bytes

    def done(self) -> bool:
        """The commit in flight has ended (:meth:`wait` returns without waiting)."""
        return self._in_flight is not None and self._in_flight[1].done()

    def submit(self, batch: Batch) -> None:
        """Start committing ``batch``; take the last commit's result (:meth:`wait`) first."""
        if self._in_flight is not None:
            raise RuntimeError("a commit is in flight: wait for it before submitting the next")
        self._in_flight = (batch, self._committer.submit(self._land, batch, self._writers))

    def wait(self) -> CommitResult | None:
        """The result of the commit in flight once it ended (``None``: none in flight).

        Raises:
            Whatever ``land`` raised (the committer's errors, a refused message's).
        """
        if self._in_flight is None:
            return None
        _, future = self._in_flight
        try:
            return future.result()
        finally:
            self._in_flight = None

    def close(self) -> None:
        """Let a commit in flight end (its error is logged: the caller is already failing or
        stopping), then stop the threads. A commit is never abandoned half way by choice: a
        process that dies meanwhile is a crash the protocol recovers from."""
        try:
            self.wait()
        except Exception as exc:
            log.error("the commit in flight failed while stopping: %s", exc)
        finally:
            self._committer.shutdown()
            self._writers.shutdown()
