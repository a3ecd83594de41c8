"""Placement: the Kafka partition of each row, and the partition counts that decides it.

:class:`Placement` places rows as librdkafka does: a row with an explicit partition keeps it, a
keyed row goes where the configured ``partitioner`` puts its key (:mod:`parka.partitioner`), the
rest stick to one partition per segment (the sticky partition moves on when a segment of it is
cut, :meth:`Placement.advance`).

Partition counts come from the broker's metadata. A lookup runs on a thread of its own and never
under the producer's lock, so ``poll()``, ``flush()``, ``len()`` and a metrics scrape never wait
behind one: a caller that needs a count it does not have asks for it (:meth:`Placement.request`)
and either goes on without it (records stay staged) or waits for it with no lock held
(:meth:`Placement.wait`). A lookup retries for up to 10 s; when it fails, the failure is kept
for the next placement of that topic to report (:meth:`Placement.count` raises it once). A count
older than five minutes is refreshed the same way, in the background, the old one used meanwhile.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaException

from parka.errors import KafkaClientError
from parka.partitioner import STICKY, partitions_for_keys

__all__ = ["Placement", "needs_metadata"]

log = logging.getLogger("parka.producer")

_METADATA_TIMEOUT_S = 10.0
_METADATA_REFRESH_S = 300.0
_RETRY_S = 0.2
# one metadata call's bound: a lookup sees stop() (the producer closes) within it, and the
# client's close, which waits for calls in progress, with it
_CALL_S = 1.0

Rows = list[tuple[int, np.ndarray]]
"""Row indices per partition, ``(partition, rows)`` in partition order."""


@dataclass
class _Count:
    """What is known of one topic's partition count. Guarded by :attr:`Placement._cond`."""

    n: int = 0
    at: float = float("-inf")  # time.monotonic() of the lookup that found n
    looking: bool = False
    failure: KafkaClientError | None = None  # the last lookup failed and no count is known


def needs_metadata(items: list[Any]) -> bool:
    """Whether staged ``items`` (values, or ``Side`` tuples whose third entry is the partition)
    hold a record without an explicit partition, whose placement needs the partition count."""
    return any(type(x) is not tuple or x[2] < 0 for x in items)


class Placement:
    """Partition counts per topic (looked up off the producer's lock) and the rows' partitions.

    ``lookup`` is the client's ``list_topics``. The sticky partitions are guarded by the
    producer's lock, as everything that calls :meth:`assign` and :meth:`advance` holds it.
    """

    def __init__(
        self,
        lookup: Callable[..., Any],
        partitioner: str,
        *,
        timeout_s: float = _METADATA_TIMEOUT_S,
        refresh_s: float = _METADATA_REFRESH_S,
    ) -> None:
        self._lookup = lookup
        self._partitioner = partitioner
        self._timeout_s = timeout_s
        self._refresh_s = refresh_s
        self._cond = threading.Condition()  # guards _counts; never held while a lookup runs
        self._counts: dict[str, _Count] = {}
        self._stopped = threading.Event()
        self._sticky: dict[str, int] = {}
        self._random = random.Random()

    # -- partition counts ---------------------------------------------------------------------

    def known(self, topic: str) -> int:
        """The topic's partition count, 0 when none is known yet. Never waits."""
        entry = self._counts.get(topic)
        return 0 if entry is None else entry.n

    def learn(self, topic: str, n: int) -> None:
        """A count the application's own ``list_topics`` call returned."""
        with self._cond:
            entry = self._counts.setdefault(topic, _Count())
            entry.n, entry.at, entry.failure = n, time.monotonic(), None
            self._cond.notify_all()

    def resolved(self, topic: str) -> bool:
        """Whether :meth:`count` would answer at once: a count is known, or a failure waits."""
        entry = self._counts.get(topic)
        return entry is not None and (entry.n > 0 or entry.failure is not None)

    def request(self, topic: str) -> None:
        """Start a lookup of ``topic``'s count unless one runs. Returns at once."""
        with self._cond:
            self._start(topic)

    def wait(self, topic: str, timeout: float | None = None) -> bool:
        """Wait (no lock of the producer held) until ``topic``'s count is known or its lookup
        failed, starting the lookup if none runs; ``False`` when ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self.resolved(topic):
                if self._stopped.is_set():
                    return False
                self._start(topic)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def count(self, topic: str) -> int:
        """The topic's partition count; a stale one is refreshed in the background meanwhile.

        Raises:
            KafkaClientError: the last lookup failed (reported once: the next call looks again),
                or no count is known yet.
        """
        with self._cond:
            entry = self._counts.setdefault(topic, _Count())
            if entry.n:
                if time.monotonic() - entry.at >= self._refresh_s:
                    self._start(topic)
                return entry.n
            failure, entry.failure = entry.failure, None
            if failure is None:
                self._start(topic)
                failure = KafkaClientError(f"no partition metadata for topic '{topic}' yet")
        raise failure

    def stop(self) -> None:
        """End running lookups at their next retry and wake every waiter (the producer closes)."""
        self._stopped.set()
        with self._cond:
            self._cond.notify_all()

    def _start(self, topic: str) -> None:
        entry = self._counts.setdefault(topic, _Count())
        if entry.looking or self._stopped.is_set():
            return
        entry.looking = True
        threading.Thread(target=self._look_up, args=(topic,), name="parka-metadata", daemon=True).start()

    def _look_up(self, topic: str) -> None:
        """Ask the broker for ``topic``'s partitions until it answers or 10 s pass (own thread)."""
        deadline = time.monotonic() + self._timeout_s
        last_error: Any = None
        found = 0
        while True:
            try:
                md = self._lookup(topic, timeout=max(0.1, min(_CALL_S, deadline - time.monotonic())))
                tmd = md.topics.get(topic)
                if tmd is not None and tmd.error is None and tmd.partitions:
                    found = len(tmd.partitions)
                    break
                last_error = tmd.error if tmd is not None else "topic missing from metadata"
            except KafkaException as exc:
                last_error = exc
            except Exception as exc:  # a closed client, ...: a failure to report, not a dead thread
                last_error = exc
            if time.monotonic() >= deadline or self._stopped.wait(_RETRY_S):
                break
        with self._cond:
            entry = self._counts[topic]
            entry.looking = False
            if found:
                entry.n, entry.at, entry.failure = found, time.monotonic(), None
            elif entry.n:  # a refresh failed: keep using the last known count
                log.warning("partition metadata for topic '%s' not refreshed: %s", topic, last_error)
            else:
                entry.failure = KafkaClientError(
                    f"no partition metadata for topic '{topic}' within {self._timeout_s:.0f} s: {last_error}",
                    kafka_error=last_error,
                )
            self._cond.notify_all()

    # -- rows to partitions (the producer's lock held) ----------------------------------------------

    def assign(
        self, topic: str, rows: int, keys: pa.Array | None, explicit: list[int] | None
    ) -> tuple[Rows, tuple[int, np.ndarray] | None, int]:
        """Each row's partition: ``(rows per partition, unknown, count)``. ``unknown`` is
        ``(partition, rows)`` for rows naming a partition the topic lacks (the first such
        partition, and every such row), else ``None``.

        Raises:
            KafkaClientError: rows need the partition count and it cannot be had (:meth:`count`).
        """
        if explicit is not None and min(explicit) >= 0:
            # every row names its partition: no metadata needed (checked when known, as librdkafka does)
            parts = np.asarray(explicit, dtype=np.int64)
            n = self.known(topic) or int(parts.max()) + 1
        else:
            n = self.count(topic)
            if keys is None:
                parts = np.full(rows, STICKY, dtype=np.int64)
            else:
                parts = partitions_for_keys(self._partitioner, keys, n)
            if explicit is not None:
                given = np.asarray(explicit, dtype=np.int64)
                parts = np.where(given >= 0, given, parts)
            sticky = parts == STICKY
            if sticky.any():
                parts[sticky] = self._sticky_partition(topic, n)
        bad = parts >= n
        unknown = None
        if bad.any():
            rows_bad = np.nonzero(bad)[0]
            unknown = (int(parts[rows_bad[0]]), rows_bad)
        out = [(int(p), np.nonzero(parts == p)[0]) for p in np.unique(parts[~bad])]
        return out, unknown, n

    def _sticky_partition(self, topic: str, n: int) -> int:
        sticky = self._sticky.get(topic, -1)
        if sticky < 0 or sticky >= n:
            sticky = self._sticky[topic] = self._random.randrange(n)
        return sticky

    def advance(self, topic: str, partition: int) -> None:
        """A segment of ``partition`` was cut: records without a key move to the next partition."""
        n = self.known(topic)
        if self._sticky.get(topic) == partition and n > 1:
            self._sticky[topic] = (partition + 1) % n
