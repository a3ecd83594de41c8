"""What the committer (:mod:`._committer`) reports: the counters of all its commits
(:class:`CommitStats`, which the daemons' progress line and metrics read) and what one commit
made (:class:`CommitResult`). Only the committer changes these counters (a daemon's subclass
adds counters of its own)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._plan import LandedSegment

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

    def add_commit(self, fresh: Sequence[LandedSegment], files: int) -> None:
        """Count one commit of the ``fresh`` segments in ``files`` data files."""
        self.commits += 1
        self.segments += len(fresh)
        self.records += sum(s.records for s in fresh)
        self.bytes += sum(s.value_bytes for s in fresh)
        self.files += files
        self.split_segments += sum(1 for s in fresh if s.split)
        self.stitched_segments += sum(1 for s in fresh if s.row_groups is not None)
        self.stitch_fallbacks += sum(1 for s in fresh if s.stitch_fallback)


@dataclass(frozen=True)
class CommitResult:
    """One :meth:`Committer.commit`: the table ``version`` it made (``None``: nothing to commit),
    ``last``: partition -> offset its ``txn`` now records, and ``table_txn``: partition -> the
    ``txn`` version the table had just before (what another writer may have moved)."""

    version: int | None = None
    last: Mapping[int, int] = field(default_factory=dict)
    table_txn: Mapping[int, int | None] = field(default_factory=dict)
