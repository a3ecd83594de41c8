"""Real segments written into real delta-rs tables in temporary folders, as a commit writes
them: shared by the committer's and the optimizer's tests. With a table that loses races to
another writer (:class:`Conflicting`) and a clock that moves on at every reading
(:class:`SteppingClock`), for the committer's retry and timings."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from parka.lake import (
    Committer,
    DataFile,
    LandedSegment,
    RsEngine,
    SegmentRead,
    TableLog,
    check_segment,
    read_segment,
    segment_of_rows,
    write_segments,
)

from parka.errors import CommitConflict
from parka.schema import schema_fingerprint
from parka.segment import encode_segment

SCHEMA = pa.schema([("id", pa.int64(), False), ("day", pa.string(), False)])


def committer(path: Path, **kwargs: object) -> Committer:
    return Committer(RsEngine(), table_uri=str(path), topic="t", app_id="app", **kwargs)  # type: ignore[arg-type]


def landed(c: Committer, partition: int, offset: int, ids: list[int], day: str = "d1") -> LandedSegment:
    [one] = stitched(c, [(partition, offset, ids)], day=day)
    return one


def stitched(c: Committer, segments: list[tuple[int, int, list[int]]], day: str = "d1") -> list[LandedSegment]:
    """``(partition, offset, ids)`` segments written as :func:`write_segments` writes a commit's:
    one Kafka partition's segments stitched into one file."""
    reads = []
    for partition, offset, ids in segments:
        table = pa.table({"id": ids, "day": [day] * len(ids)}, schema=SCHEMA)
        seg = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(SCHEMA))
        reads.append(read_segment(topic="t", partition=partition, offset=offset, value=seg.value, headers=seg.headers))
    return _written(c, reads)


def rows_run(
    c: Committer, runs: list[tuple[int, list[int], list[int]]], days: list[str] | None = None
) -> list[LandedSegment]:
    """``(partition, offsets, ids)`` runs of row records (one id per record, at its offset) made
    segments (:func:`segment_of_rows`) and written as a commit's are; ``days``: each row's day
    (a run of one Kafka partition may span several table partitions), else ``d1``."""
    reads = []
    for partition, offsets, ids in runs:
        table = pa.table({"id": ids, "day": days or ["d1"] * len(ids)}, schema=SCHEMA)
        n = len(ids)
        reads.append(
            segment_of_rows(
                topic="t", partition=partition, offsets=offsets, table=table, keys=[None] * n,
                timestamps=[None] * n, headers=[None] * n,
            )
        )  # fmt: skip
    return _written(c, reads)


def _written(c: Committer, reads: list[SegmentRead]) -> list[LandedSegment]:
    """``reads`` checked against ``c``'s table (made from the first) and written as a commit's are."""
    checked = []
    for read in reads:
        c.ensure_table(read.schema)
        checked.append(
            check_segment(
                read,
                table_schema=c.table_schema(),
                partition_by=c.partitioning,
                merge=False,
                check_columns=c.engine.check_columns,
            )
        )
    return write_segments(
        checked,
        table_uri=c.root,
        storage_options=c.storage_options,
        table_schema=c.table_schema(),
        partition_by=c.partitioning,
        stats_config=c.stats_config(),
    )


class Conflicting:
    """A table (a :class:`parka.lake.TableLog`) whose next commits lose a race to another writer:
    one per entry of ``meanwhile``, which runs first (what the writer that won did), then the
    commit raises ``CommitConflict``. Everything else is ``table``'s; ``attempts`` counts the
    commits tried."""

    def __init__(self, table: TableLog, meanwhile: Sequence[Callable[[], object]]) -> None:
        self.table, self.meanwhile, self.attempts = table, list(meanwhile), 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)

    def commit_add_files(
        self, files: Sequence[DataFile], *, txns: Mapping[str, int], commit_info: Mapping[str, Any] | None = None
    ) -> int:
        self.attempts += 1
        if self.meanwhile:
            self.meanwhile.pop(0)()
            raise CommitConflict(f"attempt {self.attempts}: another writer's commit won")
        return self.table.commit_add_files(files, txns=txns, commit_info=commit_info)


def conflicting(c: Committer, *meanwhile: Callable[[], object]) -> Conflicting:
    """Make ``c``'s table lose its next ``len(meanwhile)`` commits (:class:`Conflicting`)."""
    assert c.table is not None
    table = Conflicting(c.table, meanwhile)
    c.table = table  # type: ignore[assignment]
    return table


class SteppingClock:
    """A clock each reading finds ``step`` seconds later."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now
