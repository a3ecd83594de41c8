"""Deletion vectors parka writes (``lake/delta/_dv_commit.py``) read by delta-spark, and the other
way round: rows parka deletes, inline in the log and in a vector file, are gone for delta-spark's
reader; a DELETE in delta-spark then writes its own vector into a file parka deleted rows of, and
parka's next commit adds to that vector. delta-spark and delta-rs' query engine read the same
rows at every step, and after ``parka optimize`` purged the deleted rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from parka.lake.delta._logscan import live_adds
from parka.lake.delta._optimize import optimize_table
from parka.lake.delta._rs import commit_row_deletions

from ._util import SPARK

pytestmark = SPARK

ROWS = 30_000


def keys_via_spark(spark: Any, uri: str) -> list[int]:
    return sorted(r["k"] for r in spark.read.format("delta").load(uri).select("k").toArrow().to_pylist())


def keys_via_delta_rs(uri: str) -> list[int]:
    reader = QueryBuilder().register("t", DeltaTable(uri)).execute("select k from t")
    return sorted(pa.table(reader.read_all()).column("k").to_pylist())


def first_key(uri: str, path: str) -> int:
    return int(pq.read_table(f"{uri}/{path}", columns=["k"]).column(0)[0].as_py())


def test_delta_spark_reads_the_rows_parka_deletes_and_parka_adds_to_a_vector_delta_spark_wrote(
    spark: Any, tmp_path: Path
) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(
        uri, pa.table({"k": pa.array(range(ROWS), pa.int64())}), configuration={"delta.enableDeletionVectors": "true"}
    )
    write_deltalake(uri, pa.table({"k": pa.array(range(ROWS, ROWS + 10), pa.int64())}), mode="append")
    second = pa.table({"k": pa.array(range(ROWS + 10, 2 * ROWS + 10), pa.int64())})
    write_deltalake(uri, second, mode="append")
    table = DeltaTable(uri)
    big, big2 = sorted(
        (p for p, a in live_adds(uri).items() if '"numRecords":30000' in a["stats"]), key=lambda p: first_key(uri, p)
    )
    (small,) = set(live_adds(uri)) - {big, big2}
    every_third = range(0, ROWS, 3)
    commit_row_deletions(table, {big: every_third, small: [0, 9], big2: range(0, ROWS, 2)})
    adds = live_adds(uri)
    # some 20 KB each: one file for both, the second vector at an offset past the first
    assert adds[big]["deletionVector"]["storageType"] == adds[big2]["deletionVector"]["storageType"] == "u"
    assert adds[big2]["deletionVector"]["offset"] > 1
    assert adds[small]["deletionVector"]["storageType"] == "i"  # a few bytes: inline
    gone = set(every_third) | {ROWS, ROWS + 9} | set(range(ROWS + 10, 2 * ROWS + 10, 2))
    model = sorted(set(range(2 * ROWS + 10)) - gone)
    assert keys_via_spark(spark, uri) == model == keys_via_delta_rs(uri)

    spark.sql(f"DELETE FROM delta.`{uri}` WHERE k % 3 = 1 AND k < 3000")  # delta-spark's own vector
    model = [k for k in model if not (k % 3 == 1 and k < 3000)]
    assert keys_via_delta_rs(uri) == model

    table = DeltaTable(uri)
    commit_row_deletions(table, {big: [2, 29_999]})  # its remove names delta-spark's vector
    model = [k for k in model if k not in (2, 29_999)]
    assert keys_via_spark(spark, uri) == model == keys_via_delta_rs(uri)
    assert spark.read.format("delta").load(uri).count() == len(model)

    optimize_table(uri, checkpoint=False)  # purges: the deleted rows left out, no vector left
    assert not any("deletionVector" in add for add in live_adds(uri).values())
    assert keys_via_spark(spark, uri) == model == keys_via_delta_rs(uri)
