"""Raw mode commits through delta-spark's transaction API: into tables created by delta-spark SQL
with features delta-rs cannot write (row tracking, in-commit timestamps, liquid clustering),
segments land byte for byte, with their Kafka coordinates in the add actions' tags, and read the
same in delta-spark and deltalake. Column mapping is refused before the query starts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from parka.lake import DataFile, FileName
from parka.producer import ParquetProducer
from parka.spark_ext import SparkIngestSettings, ingest
from parka.spark_ext._cli import main
from parka.spark_ext._delta_spark import SparkEngine

from parka.errors import CommitConflict, CommitError, SchemaMismatchError

from .._ingest_util import EVENTS, app_id_of, events, message_values, produce_events, referenced_files, sha256
from ._util import SPARK, USER, rows_via_deltalake, rows_via_spark

pytestmark = SPARK

COLUMNS = "id BIGINT, device STRING, day STRING, value DOUBLE, at TIMESTAMP"


def log_actions(table: Path, kind: str) -> list[dict[str, Any]]:
    """Every ``kind`` action (add, txn, commitInfo...) in the table's JSON commits, oldest first."""
    out = []
    for commit in sorted((table / "_delta_log").glob("[0-9]*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if kind in action:
                out.append(action[kind])
    return out


FEATURES = {
    "row-tracking": "TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
    "in-commit-timestamps": "TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
    "liquid-clustering": "CLUSTER BY (device)",
}


@pytest.mark.parametrize("feature", list(FEATURES))
def test_raw_segments_commit_through_delta_spark_into_tables_with_features(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, feature: str
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "events"
    spark.sql(f"CREATE TABLE delta.`{table}` ({COLUMNS}) USING delta {FEATURES[feature]}")
    segments = produce_events(bootstrap, topic, 0, 400, batch=40)
    # a target below a segment's size: one file per segment, each its Kafka value (stitched files
    # through delta-spark: test_spark_interop.py)
    settings = SparkIngestSettings(
        topic=topic, table_uri=str(table), bootstrap_servers=bootstrap, max_offsets_per_trigger=5, target_file_size=1
    )
    stats = ingest(spark, settings)
    assert (stats.records, stats.segments, stats.files, stats.schema_source) == (400, segments, segments, "table")
    assert stats.batches >= 2  # several commits: the features apply to each

    # read back equal by delta-spark and by deltalake (delta-rs reads these features; it cannot write them)
    produced = sorted(events(0, 400).to_pylist(), key=lambda r: r["id"])
    by_spark, by_rs = rows_via_spark(spark, table), rows_via_deltalake(table)
    assert by_spark == by_rs
    assert [{c: r[c] for c in USER} for r in by_spark] == produced
    assert [r["__parka_key"] for r in by_spark] == [r["device"].encode() for r in produced]  # added by the commit

    # each data file is its Kafka message's value, and its add action carries the coordinates
    values = {(m.partition(), m.offset()): sha256(m.value()) for m in message_values(bootstrap, topic, segments)}
    adds = log_actions(table, "add")
    assert len(adds) == segments
    on_disk = {}
    for add in adds:
        name = FileName.parse(add["path"])
        assert name is not None
        assert add["tags"] == {
            "kafka.topic": topic,
            "kafka.partition": str(name.partition),
            "kafka.offset": str(name.offset),
        }
        on_disk[(name.partition, name.offset)] = sha256((table / add["path"]).read_bytes())
    assert on_disk == values
    assert {a["path"] for a in adds} == referenced_files(table)

    # delta-spark applied the feature to parka's commits
    infos = [i for i in log_actions(table, "commitInfo") if "parka.app_id" in (i.get("userMetadata") or "")]
    assert len(infos) == stats.batches
    assert all(i["engineInfo"].startswith("Apache-Spark/") and i["isBlindAppend"] for i in infos)
    if feature == "row-tracking":
        assert sorted(a["baseRowId"] for a in adds) == sorted({a["baseRowId"] for a in adds})
        row_ids = spark.sql(f"SELECT _metadata.row_id AS r FROM delta.`{table}`").toArrow().column("r").to_pylist()
        assert sorted(row_ids) == list(range(400))  # one fresh id per record
    elif feature == "in-commit-timestamps":
        stamps = [i["inCommitTimestamp"] for i in infos]
        assert stamps == sorted(stamps)
    else:
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").collect()[0]
        assert list(detail["clusteringColumns"]) == ["device"]
    last: dict[int, int] = {}
    for partition, offset in values:
        last[partition] = max(offset, last.get(partition, -1))
    app = app_id_of(topic, table)
    assert {p: DeltaTable(str(table)).transaction_version(f"{app}-{p}") for p in last} == last

    # nothing new: a second run commits nothing
    assert ingest(spark, settings).records == 0
    assert len(log_actions(table, "add")) == segments


def test_a_column_mapping_table_is_refused_before_the_query_starts(
    spark: Any,
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = new_topic(partitions=1)
    produce_events(bootstrap, topic, 0, 50, batch=50)
    table = tmp_path / "mapped"
    spark.sql(
        f"CREATE TABLE delta.`{table}` ({COLUMNS}) USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    settings = SparkIngestSettings(topic=topic, table_uri=str(table), bootstrap_servers=bootstrap)
    active = len(spark.streams.active)
    with pytest.raises(CommitError, match=r"column mapping \(delta.columnMapping.mode=name\)"):
        ingest(spark, settings)
    assert len(spark.streams.active) == active  # no query was started
    assert not [p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts]
    assert main([topic, str(table), "-k", bootstrap, "--end-at-latest"]) == 1
    assert "delta.columnMapping.mode=name" in capsys.readouterr().err


def test_the_delta_rs_engine_is_a_flag_and_both_engines_continue_one_txn(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "events"
    produce_events(bootstrap, topic, 0, 200, batch=50)
    assert main([topic, str(table), "-k", bootstrap, "--end-at-latest", "-q", "--commit-engine", "delta-rs"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["records"] == 200
    produce_events(bootstrap, topic, 200, 200, batch=50)
    assert main([topic, str(table), "-k", bootstrap, "--end-at-latest", "-q"]) == 0  # delta-spark, the default
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["records"] == 200
    infos = [i for i in log_actions(table, "commitInfo") if i.get("operation") == "WRITE"]
    by_rs = [i for i in infos if "parka.fileTags" in i]  # delta-rs: tags in commitInfo, no engineInfo
    by_spark = [i for i in infos if i.get("engineInfo", "").startswith("Apache-Spark/")]
    assert by_rs and by_spark and len(by_rs) + len(by_spark) == len(infos)
    assert sorted(r["id"] for r in rows_via_spark(spark, table)) == list(range(400))
    assert rows_via_spark(spark, table) == rows_via_deltalake(table)


def test_the_delta_spark_log_turns_delta_spark_exceptions_into_parka_errors(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    engine = SparkEngine(spark)
    engine.create(uri, pa.schema([("x", pa.int64())]), partition_by=[]).commit_add_files([], txns={"setup-0": 0})
    with pytest.raises(CommitConflict, match=r"created at .* concurrently"):
        engine.create(uri, pa.schema([("x", pa.int64())]), partition_by=[])
    first, second = engine.open(uri), engine.open(uri)
    assert first is not None and second is not None
    for handle in (first, second):
        handle.refresh()
        assert handle.txn_version("app-0") is None
    version = first.commit_add_files([], txns={"app-0": 5})
    # the second read app-0 before the first committed it: ConcurrentTransactionException
    with pytest.raises(CommitConflict, match="ConcurrentTransactionException"):
        second.commit_add_files([], txns={"app-0": 7})
    second.refresh()
    assert second.txn_version("app-0") == 5
    # a commit that moved no txn this handle read is rebased by delta-spark, not a conflict
    third = engine.open(uri)
    assert third is not None
    third.txn_version("app-1")
    assert third.commit_add_files([], txns={"app-1": 1}) == version + 1
    assert second.commit_add_files([], txns={"app-0": 6}) == version + 2
    second.checkpoint()  # of the latest version, once
    second.checkpoint()
    assert [p.name for p in (tmp_path / "t" / "_delta_log").glob("*.checkpoint*.parquet")] == [
        f"{version + 2:020d}.checkpoint.parquet"
    ]
    # any other failure is a CommitError: here row tracking needs numRecords in each file's stats
    rows = tmp_path / "rows"
    spark.sql(f"CREATE TABLE delta.`{rows}` (x BIGINT) USING delta TBLPROPERTIES (delta.enableRowTracking = true)")
    tracked = engine.open(str(rows))
    assert tracked is not None
    with pytest.raises(CommitError, match="commit on version 0 failed"):
        tracked.commit_add_files([DataFile(path="a.parquet", size=10, stats="{}")], txns={"app-0": 1})


def test_new_columns_join_the_delta_spark_commit_with_merge(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    table = tmp_path / "events"
    spark.sql(f"CREATE TABLE delta.`{table}` ({COLUMNS}) USING delta {FEATURES['row-tracking']}")
    produce_events(bootstrap, topic, 0, 100, batch=50)
    wider = pa.schema([*EVENTS, pa.field("note", pa.string())])
    later = events(100, 50)
    later = later.append_column("note", pa.array([f"n{i}" for i in range(100, 150)]))
    with ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet"}) as producer:
        producer.set_schema(topic, wider)
        producer.produce_batch(topic, later.cast(wider))
        assert producer.flush(30) == 0
    settings = SparkIngestSettings(topic=topic, table_uri=str(table), bootstrap_servers=bootstrap)
    with pytest.raises(SchemaMismatchError, match="rerun with --schema-evolution merge"):
        ingest(spark, settings)  # commits the 100 records before the wider segment, then stops
    merged = SparkIngestSettings(**{**settings.__dict__, "schema_evolution": "merge"})
    assert ingest(spark, merged).records == 50
    rows = rows_via_spark(spark, table)
    assert rows == rows_via_deltalake(table)
    assert [r["note"] for r in rows] == [None] * 100 + [f"n{i}" for i in range(100, 150)]
    # each column arrived with the data that brought it: no metadata-only commit
    metadata = [
        [json.loads(line) for line in commit.read_text().splitlines()]
        for commit in sorted((table / "_delta_log").glob("[0-9]*.json"))
    ]
    with_metadata = [actions for actions in metadata if any("metaData" in a for a in actions)]
    # the CREATE, then __parka_key, then note, each in the commit of the files that brought it
    assert len(with_metadata) == 3 and all(any("add" in a for a in actions) for actions in with_metadata[1:])
    names = [
        [f["name"] for f in json.loads(a["metaData"]["schemaString"])["fields"]]
        for actions in with_metadata[1:]
        for a in actions
        if "metaData" in a
    ]
    assert (names[0][-1], names[1][-2:]) == ("__parka_key", ["__parka_key", "note"])


def test_a_table_made_from_segments_with_headers_and_nested_lists(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """delta-spark refuses NOT NULL nested within arrays; a segment's headers column is a list of
    non-null structs, and Avro arrays have non-null items. The table made from such a segment
    relaxes them, and the segments still land raw."""
    topic = new_topic(partitions=1)
    table = tmp_path / "events"
    avro = {
        "type": "record",
        "name": "E",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
        ],
    }
    with ParquetProducer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "columnar.encoding": "parquet"}
    ) as producer:
        producer.set_schema(topic, avro)
        for i in range(30):
            producer.produce(topic, value={"id": i, "tags": [f"t{i}"]}, key=str(i), headers=[("h", str(i).encode())])
        assert producer.flush(30) == 0
    stats = ingest(spark, SparkIngestSettings(topic=topic, table_uri=str(table), bootstrap_servers=bootstrap))
    assert stats.records == 30
    rows = rows_via_spark(spark, table)
    assert rows == rows_via_deltalake(table)
    assert [(r["id"], r["tags"], r["__parka_headers"]) for r in rows] == [
        (i, [f"t{i}"], [{"key": "h", "value": str(i).encode()}]) for i in range(30)
    ]


def test_a_table_the_delta_spark_engine_creates_arrives_with_its_first_data(spark: Any, tmp_path: Path) -> None:
    """One version, not a CREATE then a WRITE; a writer that raced to create the same table takes
    it (and its commit conflicts, then lands on top), one with another schema is refused."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("x", pa.int64())])
    engine = SparkEngine(spark)
    first, second = (engine.create(uri, schema, partition_by=[]) for _ in range(2))
    other = engine.create(uri, pa.schema([("y", pa.string())]), partition_by=[])
    for handle in (first, second, other):
        assert (handle.version(), handle.txn_version("app-0"), handle.referenced_files()) == (-1, None, set())
        assert handle.arrow_schema().names in (["x"], ["y"])
    first.checkpoint()  # nothing to checkpoint yet: no table
    assert not (tmp_path / "t" / "_delta_log").exists() or not list((tmp_path / "t" / "_delta_log").glob("*.json"))
    first.add_columns([pa.field("note", pa.string())])  # joins the new table's metaData
    assert first.commit_add_files([], txns={"app-0": 3}, commit_info={"who": "first"}) == 0
    (commit,) = sorted((tmp_path / "t" / "_delta_log").glob("[0-9]*.json"))
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    assert {next(iter(a)) for a in actions} == {"commitInfo", "protocol", "metaData", "txn"}
    (metadata,) = [a["metaData"] for a in actions if "metaData" in a]
    assert [f["name"] for f in json.loads(metadata["schemaString"])["fields"]] == ["x", "note"]
    assert [a["commitInfo"]["operation"] for a in actions if "commitInfo" in a] == ["WRITE"]
    # the second read no txn of app-0 in a table that did not exist: its commit conflicts...
    with pytest.raises(CommitConflict):
        second.commit_add_files([], txns={"app-0": 2})
    with pytest.raises(CommitError, match="another schema or partitioning"):
        second.refresh()  # it made ['x'], the table has ['x', 'note']: refused, nothing committed
    third = engine.create(str(tmp_path / "u"), schema, partition_by=[])
    SparkEngine(spark).create(str(tmp_path / "u"), schema, partition_by=[]).commit_add_files([], txns={"b-0": 1})
    assert third.refresh() == 0  # ...and one with the same schema takes the table
    assert (third.txn_version("b-0"), third.txn_version("app-0")) == (1, None)
    assert third.commit_add_files([], txns={"app-0": 1}) == 1
    with pytest.raises(CommitError, match="another schema or partitioning"):
        other.refresh()
    assert DeltaTable(uri).version() == 0
