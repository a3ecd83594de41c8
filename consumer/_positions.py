"""Where ``parka ingest`` is in each assigned Kafka partition, and what follows from it: the
lag (the progress line and the metric), the ``--end-at-latest`` progress and its end. Pure
bookkeeping: the daemon asks the Kafka client and hands the answers in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["Positions"]


@dataclass
class Positions:
    """Per assigned partition: the offset consumption started at (``start``), the high
    watermark then (``high``), the highest offset consumed (landed, refused or committed) and
    the highest offset in the table (its ``txn`` version, or what this worker committed)."""

    assigned: set[int] = field(default_factory=set)
    start: dict[int, int] = field(default_factory=dict)
    high: dict[int, int] = field(default_factory=dict)
    consumed: dict[int, int] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)

    def assign(self, partition: int, *, start: int, high: int, in_table: int | None) -> None:
        self.assigned.add(partition)
        self.consumed.pop(partition, None)  # consumption starts again, at start
        self.start[partition] = start
        self.high[partition] = high
        if in_table is not None:
            self.committed[partition] = in_table

    def revoke(self, partition: int) -> None:
        self.assigned.discard(partition)
        self.consumed.pop(partition, None)
        self.committed.pop(partition, None)

    def skip_to(self, partition: int, offset: int) -> None:
        """The table holds ``partition`` up to ``offset - 1`` (another worker's commit)."""
        self.consumed[partition] = offset - 1
        self.committed[partition] = offset - 1
        self.start[partition] = offset

    def wants(self, partition: int, offset: int) -> bool:
        """Whether the message at ``offset`` is the next of ``partition`` to take: the partition
        is assigned, and the offset is past the last consumed (at or past ``start`` when none
        was). A message the client fetched before a seek or an assignment that moved the
        partition (the table further, a rebalance) is not: it is in the table, or the client
        delivers it again from the new position. One that is still ahead of the position is
        taken, and its second delivery is not. Offsets may skip (transaction markers), never go
        back."""
        if partition not in self.assigned:
            return False
        done = self.consumed.get(partition)
        return offset >= self.start.get(partition, 0) if done is None else offset > done

    def in_table(self, last: Mapping[int, int]) -> None:
        """A commit put ``last`` (partition -> offset) in the table."""
        self.committed.update(last)

    def lag(self, high_watermark: Callable[[int], int | None], *, committed: bool = False) -> dict[int, int]:
        """Messages behind the high watermark per assigned partition (``high_watermark``:
        ``None`` when the client has none): not yet consumed, or with ``committed`` not yet in
        the table."""
        out: dict[int, int] = {}
        for p in sorted(self.assigned):
            high = high_watermark(p)
            if high is None or high < 0:
                continue
            done = self.committed.get(p, -1) if committed else self.consumed.get(p, -1)
            out[p] = max(0, high - max(self.start.get(p, 0), done + 1))
        return out

    def progress(self) -> tuple[int, int]:
        """Messages consumed since start and the messages there were at start (their high
        watermarks then), over the assigned partitions."""
        done = total = 0
        for p in self.assigned:
            start, high = self.start.get(p, 0), self.high.get(p, 0)
            total += max(0, high - start)
            done += max(0, min(high, self.consumed.get(p, start - 1) + 1) - start)
        return done, total

    def at_end(self, partition: int, offset: int) -> bool:
        """Whether the message at ``offset`` is its partition's last at start (or past it): only
        then, or when a poll returns nothing, can :meth:`caught_up` have become true."""
        return offset + 1 >= self.high.get(partition, 0)

    def caught_up(self, position: Callable[[int], int]) -> bool:
        """Every assigned partition has reached its high watermark at start (``position``: the
        client's position, negative when it has none)."""
        if not self.assigned:
            return False
        for p in self.assigned:
            reached = max(self.start.get(p, 0), self.consumed.get(p, -1) + 1, position(p))
            if reached < self.high.get(p, 0):
                return False
        return True
