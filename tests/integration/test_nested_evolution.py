"""A nested schema evolves over three versions through `parka ingest`
(``--schema-evolution merge``): a field in a struct, a field in a list of structs, a new
column; old segments stay raw and read back with nulls where their fields did not exist, in
deltalake and DuckDB; a changed type is refused naming its path and both types. Spark raw
mode (with type widening) and delta-spark reading both engines' tables:
``spark/test_spark_nested_evolution.py``. Also the shim's reader schema and the producer's
schema switch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from . import _github as gh
from ._ingest_util import assert_segments_stored_byte_for_byte, last_json, message_values, run_ingest


def produce_versions(bootstrap: str, topic: str, steps: list[tuple[pa.Schema, list[dict[str, Any]]]]) -> int:
    """Produce each step's records under its schema with one producer, switching by set_schema
    between them (records buffered under the previous schema are cut first); returns segments."""
    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.batch.records": 50,
        "linger.ms": 60_000,
    }
    with ParquetProducer(conf) as producer:
        for schema, recs in steps:
            producer.set_schema(topic, schema)
            for rec in recs:
                producer.produce(topic, rec)
        assert producer.flush(30) == 0
        segments: int = producer.stats()["segments"]
    return segments


def duckdb_rows(table: Path) -> pa.Table:
    """DuckDB over the snapshot's files, fields matched by name at any depth (``union_by_name``;
    its delta extension is not installed here)."""
    files = DeltaTable(str(table)).file_uris()
    return duckdb.sql(f"SELECT * FROM read_parquet({files!r}, union_by_name = true)").to_arrow_table()


def test_a_nested_schema_evolves_over_three_versions_through_parka_ingest(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    v1, v2, v3 = gh.records(1, 0, 120), gh.records(2, 120, 120), gh.records(3, 240, 120)
    steps = [(gh.schema(1), v1), (gh.schema(2), v2), (gh.schema(3), v3)]
    segments = produce_versions(bootstrap, topic, steps)
    table = tmp_path / "events"
    result = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest", "--schema-evolution", "merge"))
    assert result["records"] == 360 and result["schema_evolutions"] >= 1
    final = gh.schema(3)
    got = DeltaTable(str(table)).schema().to_arrow()
    assert pa.schema(got).names[: len(final)] == final.names
    # every segment is in the table as its own bytes, old and new schemas alike
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, table)
    want = gh.expected(v1 + v2 + v3, final)
    assert want[0]["actor"]["site_admin"] is None and want[0]["org"] is None  # v1: nulls for what it lacked
    assert gh.normalized(DeltaTable(str(table)).to_pyarrow_table(), final) == want
    assert gh.normalized(duckdb_rows(table), final) == want


def test_without_merge_a_nested_field_stops_naming_its_path(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce_versions(bootstrap, topic, [(gh.schema(1), gh.records(1, 0, 50)), (gh.schema(2), gh.records(2, 50, 50))])
    table = tmp_path / "events"
    proc = run_ingest(topic, table, bootstrap, "--end-at-latest", check=False)
    assert proc.returncode == 1
    assert "actor.site_admin (added)" in proc.stderr and "--schema-evolution merge" in proc.stderr
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == 50  # what came before it is in


def test_a_changed_type_or_a_widening_delta_rs_cannot_take_is_refused_by_path(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    changed = gh.schema(2)
    actor = changed.field("actor").type
    bad_actor = pa.struct([actor.field("id"), pa.field("login", pa.int64()), actor.field("site_admin")])
    changed = changed.set(changed.get_field_index("actor"), pa.field("actor", bad_actor))
    recs = gh.records(2, 50, 10)
    for i, r in enumerate(recs):
        r["actor"]["login"] = i
    produce_versions(bootstrap, topic, [(gh.schema(1), gh.records(1, 0, 50)), (changed, recs)])
    table = tmp_path / "events"
    proc = run_ingest(topic, table, bootstrap, "--end-at-latest", "--schema-evolution", "merge", check=False)
    assert proc.returncode == 1
    assert "column 'actor.login' is int64 in the segment but string in the table" in proc.stderr
    # a wider id needs type widening, which delta-rs cannot write: refused, naming it
    other = new_topic()
    wide = gh.records(3, 0, 10, wide=True)
    produce_versions(bootstrap, other, [(gh.schema(1), gh.records(1, 0, 10)), (gh.schema(3, wide=True), wide)])
    proc = run_ingest(other, tmp_path / "w", bootstrap, "--end-at-latest", "--schema-evolution", "merge", check=False)
    assert proc.returncode == 1
    assert "column 'id' is int64 in the segment but int32 in the table" in proc.stderr
    assert "delta.enableTypeWidening" in proc.stderr


def _consume(bootstrap: str, topic: str, expected: int, reader: pa.Schema | None) -> list[dict[str, Any]]:
    conf = {"bootstrap.servers": bootstrap, "group.id": f"g-{time.time_ns()}", "auto.offset.reset": "earliest"}
    out: list[dict[str, Any]] = []
    with ParquetConsumer(conf) as consumer:
        if reader is not None:
            consumer.set_reader_schema(topic, reader)
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                assert msg.error() is None, msg.error()
                out.append(msg.value())
    return sorted(out, key=lambda r: r["id"])


def test_a_shim_consumer_reads_two_writer_schemas_in_its_reader_schema(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    v1, v2 = gh.records(1, 0, 30), gh.records(2, 30, 30)
    produce_versions(bootstrap, topic, [(gh.schema(1), v1), (gh.schema(2), v2)])
    # without a reader schema: each record has its writer's fields
    plain = _consume(bootstrap, topic, 60, None)
    assert plain == v1 + v2
    assert "site_admin" not in plain[0]["actor"] and plain[30]["actor"]["site_admin"] is True
    # with one (v3's, and a trimmed one): by name at any depth, None where the writer lacked it
    reader = gh.schema(3)
    got = _consume(bootstrap, topic, 60, reader)
    assert [set(r) for r in got] == [set(reader.names)] * 60
    assert got == [{**r, "labels": dict(r["labels"])} for r in gh.expected(v1 + v2, reader)]
    assert got[0]["actor"]["site_admin"] is None and got[0]["org"] is None
    assert got[0]["commits"] == [] and got[1]["commits"][0]["author"] == {"name": "dev1", "email": None}
    slim = pa.schema([("id", pa.int64()), ("actor", pa.struct([("login", pa.string()), ("site_admin", pa.bool_())]))])
    got = _consume(bootstrap, topic, 60, slim)
    assert got[0] == {"id": 0, "actor": {"login": "user0", "site_admin": None}}
    assert got[30] == {"id": 30, "actor": {"login": "user30", "site_admin": True}}


def test_set_schema_again_cuts_the_buffered_records_of_the_old_schema_first(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    # 7 records of v1 buffered (the batch holds 50, linger is a minute), then v2: two segments
    produce_versions(bootstrap, topic, [(gh.schema(1), gh.records(1, 0, 7)), (gh.schema(2), gh.records(2, 7, 5))])
    values = [m.value() for m in message_values(bootstrap, topic, 2)]
    schemas = [pq.read_schema(pa.BufferReader(v)) for v in values]
    assert [pq.ParquetFile(pa.BufferReader(v)).metadata.num_rows for v in values] == [7, 5]
    assert [s.field("actor").type.names for s in schemas] == [["id", "login"], ["id", "login", "site_admin"]]
