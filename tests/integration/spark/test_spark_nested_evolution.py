"""Nested schema evolution through Spark raw mode (delta-spark commits): a nested schema evolves over three
versions (a struct field, a list-of-structs field, a new column, an integer widened on a table
with type widening) and segments of every version, an older one after the widening included,
land raw; delta-spark, deltalake (before the widening) and DuckDB read them back equal, nulls
where a segment's schema lacked the field. A changed nested type is refused by path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from parka.spark_ext import SparkIngestSettings, ingest

from parka.errors import SchemaMismatchError

from .. import _github as gh
from .._ingest_util import assert_segments_stored_byte_for_byte
from ..test_nested_evolution import produce_versions
from ._util import SPARK

pytestmark = SPARK


def _duckdb(files: list[str]) -> pa.Table:
    return duckdb.sql(f"SELECT * FROM read_parquet({files!r}, union_by_name = true)").to_arrow_table()


def test_a_nested_schema_evolves_with_type_widening_through_spark_raw_mode(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "events"
    settings = SparkIngestSettings(
        topic=topic, table_uri=str(table), bootstrap_servers=bootstrap, schema_evolution="merge"
    )
    v1, v2 = gh.records(1, 0, 100), gh.records(2, 100, 100)
    segments = produce_versions(bootstrap, topic, [(gh.schema(1), v1)])
    assert ingest(spark, settings).records == 100
    segments += produce_versions(bootstrap, topic, [(gh.schema(2), v2)])
    assert ingest(spark, settings).records == 100
    want = gh.expected(v1 + v2, gh.schema(2))
    df = spark.read.format("delta").load(str(table))
    assert gh.normalized(df.toArrow(), gh.schema(2)) == want
    assert gh.normalized(DeltaTable(str(table)).to_pyarrow_table(), gh.schema(2)) == want
    assert gh.normalized(_duckdb(DeltaTable(str(table)).file_uris()), gh.schema(2)) == want

    # the table owner turns type widening on; v3 widens id and adds a column, and an older
    # producer's v1 segment still arrives after it
    spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    v3, late = gh.records(3, 200, 100, wide=True), gh.records(1, 300, 20)
    segments += produce_versions(bootstrap, topic, [(gh.schema(3, wide=True), v3), (gh.schema(1), late)])
    result = ingest(spark, settings)
    assert result.records == 120
    final = gh.schema(3, wide=True)
    want = gh.expected(v1 + v2 + v3 + late, final)
    df = spark.read.format("delta").load(str(table))
    assert df.schema["id"].dataType.typeName() == "long"
    assert gh.normalized(df.toArrow(), final) == want
    assert gh.normalized(_duckdb(df.inputFiles()), final) == want
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, table)
    logged = [
        json.loads(line) for p in sorted((table / "_delta_log").glob("*.json")) for line in p.read_text().splitlines()
    ]
    last_schema = json.loads([a["metaData"] for a in logged if "metaData" in a][-1]["schemaString"])
    id_field = next(f for f in last_schema["fields"] if f["name"] == "id")
    assert id_field["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    # delta-rs 1.6 cannot read a table with the typeWidening reader feature at all
    with pytest.raises(Exception, match=r"[Tt]ypeWidening"):
        DeltaTable(str(table)).to_pyarrow_table()

    # a changed type is refused, naming its path and both types; nothing of it lands
    bad = gh.schema(2)
    actor = bad.field("actor").type
    bad_actor = pa.struct([actor.field("id"), pa.field("login", pa.int64()), actor.field("site_admin")])
    bad = bad.set(bad.get_field_index("actor"), pa.field("actor", bad_actor))
    recs = gh.records(2, 400, 5)
    for i, r in enumerate(recs):
        r["actor"]["login"] = i
    produce_versions(bootstrap, topic, [(bad, recs)])
    with pytest.raises(SchemaMismatchError, match=r"'actor\.login' is int64 in the segment but string in the table"):
        ingest(spark, settings)
    assert spark.read.format("delta").load(str(table)).count() == 320


def test_delta_spark_reads_the_table_parka_ingest_evolved(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """The other engine's table: three versions landed raw by `parka ingest` (delta-rs), read by
    delta-spark with nulls where a segment's schema lacked the field."""
    from .._ingest_util import run_ingest

    topic = new_topic(partitions=2)
    v1, v2, v3 = gh.records(1, 0, 60), gh.records(2, 60, 60), gh.records(3, 120, 60)
    produce_versions(bootstrap, topic, [(gh.schema(1), v1), (gh.schema(2), v2), (gh.schema(3), v3)])
    table = tmp_path / "events"
    run_ingest(topic, table, bootstrap, "--end-at-latest", "--schema-evolution", "merge")
    df = spark.read.format("delta").load(str(table))
    assert gh.normalized(df.toArrow(), gh.schema(3)) == gh.expected(v1 + v2 + v3, gh.schema(3))
