"""Raw mode's two halves without Spark: the executors' file writer, and the driver handing its
rows to the one committer."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from parka.lake import ENABLE_DELETION_VECTORS, Committer, RsEngine
from parka.ops.row_values import RowFormat
from parka.spark_ext import SparkIngestSettings
from parka.spark_ext._raw import FILE_ROWS, SegmentFileWriter, committer_input, row_schema, segment_schema

from parka.errors import ConfigError, SegmentError

from .test_spark_decoder import SCHEMA, kafka_rows, rows, segment


def written(committer: Committer, batch: pa.RecordBatch, row_format: RowFormat | None = None) -> pa.Table:
    """What the executors return for ``batch``, written against the table as it is now."""
    committer.refresh()
    writer = SegmentFileWriter(
        committer.table_uri,
        committer.table_schema(),
        committer.partition_by,
        merge=committer.merge,
        check_columns=committer.engine.check_columns,
        row_format=row_format,
    )
    return pa.Table.from_batches(list(writer([batch])), schema=FILE_ROWS)


def commit(committer: Committer, rows: pa.Table | list[dict[str, object]]) -> None:
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows, schema=FILE_ROWS)
    given = committer_input(table)
    committer.commit(given.landed, given.refused, durable=True, tombstones=given.tombstones)


def new_table(tmp_path: Path) -> Committer:
    committer = Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="gps", app_id="app")
    committer.ensure_table(SCHEMA)
    return committer


def test_raw_mode_settings_are_validated_where_they_enter() -> None:
    base = {"topic": "gps", "table_uri": "/t", "bootstrap_servers": "b:9092"}
    assert SparkIngestSettings(**base).mode == "raw"
    with pytest.raises(ConfigError, match="'mode'"):
        SparkIngestSettings(**base, mode="fast")
    with pytest.raises(ConfigError, match="'reserved'"):
        SparkIngestSettings(**base, reserved="drop")
    with pytest.raises(ConfigError, match="'metadata'"):
        SparkIngestSettings(**base, metadata=("offset",))
    with pytest.raises(ConfigError, match="'dlq_table_uri'"):
        SparkIngestSettings(**base, mode="decode", dlq_table_uri="/dlq")
    assert SparkIngestSettings(**base, mode="decode", reserved="drop").reserved == "drop"
    assert SparkIngestSettings(**base).commit_engine == "delta-spark"
    assert SparkIngestSettings(**base, commit_engine="delta-rs").commit_engine == "delta-rs"
    with pytest.raises(ConfigError, match=r"'commit_engine'.*allowed: delta-spark \| delta-rs"):
        SparkIngestSettings(**base, commit_engine="delta-go")
    with pytest.raises(ConfigError, match=r"'commit_engine'.*decode mode writes with delta-spark"):
        SparkIngestSettings(**base, mode="decode", commit_engine="delta-rs")


def test_segments_are_written_unchanged_and_bad_ones_reported(tmp_path: Path) -> None:
    committer = new_table(tmp_path)
    good = segment(rows(0, 3), keys=[b"a", None, b"c"])
    wrong = segment(pa.table({"id": ["x"]}))
    out = sorted(written(committer, kafka_rows(good, (b"plain", []), wrong)).to_pylist(), key=lambda r: r["offset"])
    assert [(r["offset"], r["records"], r["error_class"]) for r in out] == [
        (10, 3, None),
        (11, 0, "SegmentError"),
        (12, 0, "SchemaMismatchError"),
    ]
    assert (tmp_path / "t" / out[0]["path"]).read_bytes() == good[0]
    assert out[0]["new_fields"] is not None  # __parka_key: added at commit, as parka ingest does
    assert "column 'id' is string in the segment but int64 in the table" in out[2]["error"]
    assert out[1]["value"] is None  # no dead-letter table: bad bytes stay on the executor
    with pytest.raises(SegmentError) as info:
        commit(committer, out)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("gps", 3, 11)
    # what came before the bad message is committed; the txn stops before it, so a rerun stops there again
    table = DeltaTable(str(tmp_path / "t"))
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2]
    assert table.transaction_version("app-3") == 10


def test_row_records_are_decoded_in_runs_between_segments_and_land_with_each_rows_offset(tmp_path: Path) -> None:
    committer = new_table(tmp_path)

    def record(i: int) -> tuple[bytes, list[tuple[str, bytes]]]:
        return json.dumps({"id": i, "name": f"n{i}"}).encode(), [("source", b"json")]

    batch = kafka_rows(record(0), record(1), segment(rows(2, 2)), (b"not json", []), record(4), record(5))
    out = written(committer, batch, RowFormat("json"))
    got = sorted(out.to_pylist(), key=lambda r: r["offset"])
    assert [(r["offset"], r["records"], r["offsets"], r["error_class"]) for r in got] == [
        (11, 2, [10, 11], None),  # the run before the segment: decoded when the segment came
        (12, 2, None, None),
        (13, 0, None, "SegmentError"),  # a bad record splits the runs
        (15, 2, [14, 15], None),
    ]
    assert "--value-format json" in got[2]["error"]
    given = committer_input(out)
    assert [(s.first_offset, s.offset) for s in sorted(given.landed, key=lambda s: s.offset)] == [
        (10, 11),
        (12, 12),
        (14, 15),
    ]
    with pytest.raises(SegmentError, match="--value-format json"):  # no dead-letter table: it stops there
        commit(committer, out)
    table = DeltaTable(str(tmp_path / "t")).to_pyarrow_table().sort_by("id")
    assert table.column("id").to_pylist() == [0, 1, 2, 3]  # what came before the bad record
    assert table.column("__parka_headers").to_pylist()[:2] == [[{"key": "source", "value": b"json"}]] * 2


def test_a_table_is_made_from_the_first_row_records_that_decode(tmp_path: Path) -> None:
    good = [json.dumps({"id": i, "tags": ["a"]}).encode() for i in range(3)]
    sample = pa.Table.from_batches([kafka_rows((b"{", []), *((v, []) for v in good))])
    schema = row_schema(sample, RowFormat("json"))
    assert schema.field("id").type == pa.int64() and schema.field("tags").type == pa.list_(pa.string())
    assert "__parka_timestamp" in schema.names  # the columns a segment of them has (no key: none had one)
    with pytest.raises(SegmentError, match=r"none of the first 1 row records .* gps\[3\]@10"):
        row_schema(pa.Table.from_batches([kafka_rows((b"{", []))]), RowFormat("json"))


def test_a_replayed_batch_commits_nothing_and_leaves_no_file(tmp_path: Path) -> None:
    committer = new_table(tmp_path)
    batch = kafka_rows(segment(rows(0, 3)), segment(rows(3, 2)))
    commit(committer, written(committer, batch))
    table = DeltaTable(str(tmp_path / "t"))
    assert (table.version(), table.transaction_version("app-3")) == (1, 11)
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]
    replay = written(committer, batch)  # Spark re-runs a batch it did not mark done
    assert len(set(replay.column("path").to_pylist())) == 1  # the task's two segments, stitched
    commit(committer, replay)
    assert DeltaTable(str(tmp_path / "t")).version() == 1
    assert committer.stats.covered_files == 1
    assert not any((tmp_path / "t" / p).exists() for p in replay.column("path").to_pylist())
    # a batch overlapping the txn version (another writer got part of it) commits the rest only
    overlap = written(committer, kafka_rows(segment(rows(3, 2)), segment(rows(5, 1)), first_offset=11))
    commit(committer, overlap)
    table = DeltaTable(str(tmp_path / "t"))
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4, 5]
    assert committer.stats.trimmed_files == 1  # the stitched file of 11-12, rewritten with 12 alone
    assert table.transaction_version("app-3") == 12


def test_new_user_columns_need_merge(tmp_path: Path) -> None:
    committer = new_table(tmp_path)
    wider = rows(0, 1).append_column(pa.field("extra", pa.float64()), pa.array([1.5]))
    out = written(committer, kafka_rows(segment(wider))).to_pylist()
    assert out[0]["error_class"] == "SchemaMismatchError" and out[0]["error_field"] == "extra"
    committer.merge = True
    out = written(committer, kafka_rows(segment(wider))).to_pylist()
    commit(committer, out)
    assert "extra" in DeltaTable(str(tmp_path / "t")).schema().to_arrow().names


def test_the_cli_defaults_to_raw_mode() -> None:
    from parka.spark_ext._cli import build_parser, settings_from_args

    def settings(*argv: str) -> SparkIngestSettings:
        parsed: SparkIngestSettings = settings_from_args(build_parser().parse_args(["gps", "/lake/gps", *argv]))
        return parsed

    assert (settings().mode, settings().dlq_table_uri) == ("raw", None)
    assert settings("--dlq-table", "/lake/dlq").dlq_table_uri == "/lake/dlq"
    assert settings("--mode", "decode", "--reserved", "drop").mode == "decode"
    with pytest.raises(ConfigError, match="'reserved'"):
        settings("--reserved", "drop")


def test_the_default_checkpoint_is_one_hadoop_writes(caplog: pytest.LogCaptureFixture) -> None:
    from parka.spark_ext._cli import _s3a_jars, build_parser, main, settings_from_args
    from parka.spark_ext._session import hadoop_version

    base = {"topic": "gps", "bootstrap_servers": "b:9092", "commit_engine": "delta-rs"}
    # Hadoop calls S3 s3a://: an s3:// table's default checkpoint, or an s3:// one given, is written through it
    s3 = SparkIngestSettings(**base, table_uri="s3://lake/gps")
    assert s3.checkpoint == "s3a://lake/gps/_parka_checkpoints/parka-gps"
    assert SparkIngestSettings(**base, table_uri="/t", checkpoint_location="s3://b/ck").checkpoint == "s3a://b/ck"
    abfss = "abfss://lake@acct.dfs.core.windows.net/gps"
    assert SparkIngestSettings(**base, table_uri=abfss).checkpoint == f"{abfss}/_parka_checkpoints/parka-gps"
    # az:// names no account, and Hadoop has no FileSystem for it: the default is refused, saying what to give
    with pytest.raises(ConfigError, match=r"'checkpoint_location'.*no FileSystem for az://.*give the checkpoint"):
        SparkIngestSettings(**base, table_uri="az://lake/gps")
    with pytest.raises(ConfigError, match=r"allowed: a local path, or a URI Hadoop writes: s3a://"):
        SparkIngestSettings(**base, table_uri="/t", checkpoint_location="memory:///ck")
    assert SparkIngestSettings(**base, table_uri="az://lake/gps", checkpoint_location="/ck").checkpoint == "/ck"
    with caplog.at_level("ERROR"):
        assert main(["gps", "az://lake/gps", "--commit-engine", "delta-rs", "-q"]) == 2
    assert "--checkpoint-location" in caplog.text

    # the command adds s3a's jars (at pyspark's Hadoop) for a checkpoint in S3, and only then
    def jars(*argv: str) -> tuple[list[str], dict[str, str]]:
        args = build_parser().parse_args(["gps", *argv])
        return _s3a_jars(settings_from_args(args), args.packages, args.spark_conf)

    packages, conf = jars("s3://lake/gps", "--commit-engine", "delta-rs")
    assert packages[0] == f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"
    assert conf == {"spark.jars.excludes": "software.amazon.awssdk:bundle"}
    assert jars("/lake/gps") == ([], {})
    assert jars("s3://lake/gps", "--commit-engine", "delta-rs", "--packages", "org.apache.hadoop:hadoop-aws:3.4.0") == (
        [],
        {},
    )


def test_an_upsert_table_takes_the_executors_files_and_tombstones_as_parka_ingest_does(tmp_path: Path) -> None:
    """Raw mode with ``--upsert``: the executors pass tombstones (a key, no value, no headers) to
    the driver, between stitched files, and the one committer makes the table the latest row per
    record key; under ``--key-columns`` a tombstone comes back refused."""
    uri = str(tmp_path / "t")
    engine = RsEngine(properties_at={uri: {ENABLE_DELETION_VECTORS: "true"}})
    committer = Committer(engine, table_uri=uri, topic="gps", app_id="app", upsert=True)
    value, headers = segment(rows(0, 1), keys=[b"0"])
    committer.ensure_table(segment_schema(value, headers, topic="gps", partition=3, offset=0))

    def keyed(ids: list[int], names: list[str]) -> tuple[bytes, list[tuple[str, bytes]]]:
        table = pa.table({"id": ids, "name": names, "at": pa.array([0] * len(ids), pa.timestamp("us", "UTC"))})
        return segment(table.cast(SCHEMA), keys=[str(i).encode() for i in ids])

    messages = [keyed([1, 2, 3], ["a", "b", "c"]), (None, []), keyed([2, 4], ["b2", "d"]), keyed([3], ["c2"])]
    batch = kafka_rows(*messages)
    batch = batch.append_column("key", pa.array([None, b"1", None, None], pa.binary()))
    writer = SegmentFileWriter(uri, committer.table_schema(), check_columns=engine.check_columns, upsert=True)
    out = pa.Table.from_batches(list(writer([batch])), schema=FILE_ROWS)
    assert out.column("tombstone_key").to_pylist().count(b"1") == 1
    # the tombstone at offset 11 cuts the stitching: offsets 10 and 12-13 are in different files
    paths = {r["offset"]: r["path"] for r in out.to_pylist() if r["path"]}
    assert paths[10] != paths[12] == paths[13]
    commit(committer, out)
    got = QueryBuilder().register("t", DeltaTable(uri)).execute("select id, name from t order by id").read_all()
    assert pa.table(got).to_pylist() == [{"id": 2, "name": "b2"}, {"id": 3, "name": "c2"}, {"id": 4, "name": "d"}]

    by_columns = SegmentFileWriter(
        uri, committer.table_schema(), check_columns=engine.check_columns, upsert=True, key_columns=("id",)
    )
    refused = pa.Table.from_batches(list(by_columns([batch])), schema=FILE_ROWS).to_pylist()
    assert [r["error"] for r in refused if r["error_class"]] == [
        "--key-columns: a tombstone (a key and no value) cannot name a row by its key columns; "
        "delete rows by the record key (no --key-columns)"
    ]
