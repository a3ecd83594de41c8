"""A `parka optimize` rewrite landing between a delta-spark raw commit's reads and its commit:
delta-spark rebases the append over it (no conflict), and the orphan cleanup through the
delta-spark log leaves the compacted files to VACUUM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from parka.lake import Committer, LandedSegment, RsEngine, check_segment, optimize_table, read_segment, write_segments
from parka.spark_ext._delta_spark import SparkEngine

from parka.schema import schema_fingerprint
from parka.segment import encode_segment

from ._util import SPARK

pytestmark = SPARK

SCHEMA = pa.schema([("id", pa.int64(), False)])


def landed(c: Committer, offset: int) -> LandedSegment:
    seg = encode_segment(
        pa.table({"id": [offset]}, schema=SCHEMA), codec="zstd", fingerprint=schema_fingerprint(SCHEMA)
    )
    read = read_segment(topic="t", partition=0, offset=offset, value=seg.value, headers=seg.headers)
    c.ensure_table(read.schema)
    checked = check_segment(
        read, table_schema=c.table_schema(), partition_by=(), merge=False, check_columns=c.engine.check_columns
    )
    [one] = write_segments([checked], table_uri=c.table_uri, table_schema=c.table_schema())
    return one


def test_a_delta_spark_commit_rebases_over_an_optimize_and_its_cleanup_keeps_the_old_files(
    spark: Any, tmp_path: Path
) -> None:
    uri = str(tmp_path / "t")
    rs = Committer(RsEngine(), table_uri=uri, topic="t", app_id="app", checkpoint_interval=0)
    for offset in range(4):
        rs.commit([landed(rs, offset)])
    before = DeltaTable(uri).version()

    handle = SparkEngine(spark).open(uri)
    assert handle is not None
    handle.refresh()
    assert handle.txn_version("app-0") == 3  # what the committer reads before it commits
    new = landed(rs, 4)
    assert optimize_table(uri).files_removed == 4  # lands in between
    version = handle.commit_add_files(list(new.files), txns={"app-0": 4})

    assert version == before + 2  # rebased over the rewrite
    assert sorted(DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]
    spark_side = Committer(SparkEngine(spark), table_uri=uri, topic="t", app_id="app", checkpoint_interval=0)
    assert spark_side.remove_orphans() == 0
    assert DeltaTable(uri, version=before).to_pyarrow_table().num_rows == 4  # time travel still reads
