"""Real segments written into real delta-rs tables in temporary folders, as a commit writes
them: shared by the committer's and the optimizer's tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from parka.lake import Committer, LandedSegment, RsEngine, check_segment, read_segment, write_segments

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
    checked = []
    for partition, offset, ids in segments:
        table = pa.table({"id": ids, "day": [day] * len(ids)}, schema=SCHEMA)
        seg = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(SCHEMA))
        read = read_segment(topic="t", partition=partition, offset=offset, value=seg.value, headers=seg.headers)
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
