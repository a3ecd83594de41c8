"""What the committer (:mod:`._committer`) reports: the counters of all its commits
(:class:`CommitStats`, which the daemons' progress line and metrics read) and what one commit
made (:class:`CommitResult`). Only the committer changes these counters (a daemon's subclass
adds counters of its own)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CommitResult", "CommitStats"]


@dataclass
class CommitStats:
    """What the commits did: committed segments, records, their Kafka values' bytes and data
    files, segments split across
    table partitions, dead letters, conflicts retried, files of data the table already covered
    (deleted, not committed), orphan files removed, schema evolutions, segments committed in
    stitched files, segments written alone because stitching was not safe, and stitched files
    rewritten without segments the table already had."""

    commits: int = 0
    segments: int = 0
    records: int = 0
    bytes: int = 0
    files: int = 0
    split_segments: int = 0
    dead_letters: int = 0
    conflicts: int = 0
    covered_files: int = 0
    orphans_removed: int = 0
    schema_evolutions: int = 0
    stitched_segments: int = 0
    stitch_fallbacks: int = 0
    trimmed_files: int = 0


@dataclass(frozen=True)
class CommitResult:
    """One :meth:`Committer.commit`: the table ``version`` it made (``None``: nothing to commit),
    ``last``: partition -> offset its ``txn`` now records, and ``table_txn``: partition -> the
    ``txn`` version the table had just before (what another writer may have moved)."""

    version: int | None = None
    last: Mapping[int, int] = field(default_factory=dict)
    table_txn: Mapping[int, int | None] = field(default_factory=dict)
