"""Partition specs (``day=date(ts)``): parsing, evaluation, and the footer-only decision."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from parka.lake import RsEngine, check_segment, read_segment, write_segments
from parka.lake._partitions import segment_partition_values, split_by_partition
from parka.lake._plan import (
    LandedSegment,
    fit_segment,
    partition_path,
    table_partitioning,
    table_schema_from_segment,
)

from parka.errors import ConfigError, SchemaError, SchemaMismatchError, SegmentDecodeError
from parka.partitioning import EXPRESSION_KEY, PartitionSpec, parse_partition_by, parse_spec, partition_keys, runs
from parka.schema import schema_fingerprint
from parka.segment import encode_segment

UTC = dt.timezone.utc
TS = pa.timestamp("us", tz="UTC")


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def test_specs_parse_and_print_back() -> None:
    specs = parse_partition_by("day=date(ts), country ,b=truncate(id, 10),h = hour( ts )")
    assert specs == (
        PartitionSpec("day", "ts", "date"),
        PartitionSpec("country", "country"),
        PartitionSpec("b", "id", "truncate", 10),
        PartitionSpec("h", "ts", "hour"),
    )
    assert [str(s) for s in specs] == ["day=date(ts)", "country", "b=truncate(id, 10)", "h=hour(ts)"]
    assert parse_partition_by([str(s) for s in specs]) == specs  # what settings hold, parsed again
    assert parse_partition_by(["country", specs[0]]) == (PartitionSpec("country", "country"), specs[0])
    with pytest.raises(ConfigError, match="'day' is named twice"):
        parse_partition_by(["day", specs[0]])
    with pytest.raises(ConfigError, match="'day' is named twice"):
        parse_partition_by("day=date(ts),day=date(ts)")
    assert parse_partition_by("") == ()


def test_year_month_and_bucket_parse_and_print_back() -> None:
    specs = parse_partition_by("y=year(ts),m = month( ts ),b=bucket(id, 16)")
    assert specs == (
        PartitionSpec("y", "ts", "year"),
        PartitionSpec("m", "ts", "month"),
        PartitionSpec("b", "id", "bucket", 16),
    )
    assert [str(s) for s in specs] == ["y=year(ts)", "m=month(ts)", "b=bucket(id, 16)"]
    assert parse_partition_by([str(s) for s in specs]) == specs
    assert [s.monotonic for s in specs] == [True, True, False]
    assert [s.output_type(TS) for s in specs[:2]] == [pa.int32(), pa.string()]
    assert specs[2].output_type(pa.string()) == pa.int32()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("day=dat(ts)", "unknown transform 'dat'"),
        ("day=date(ts, 3)", "date() takes one column"),
        ("b=truncate(id)", "width N >= 1"),
        ("b=truncate(id, 0)", "width N >= 1"),
        ("b=bucket(id)", "number of buckets N >= 1"),
        ("b=bucket(id, -4)", "number of buckets N >= 1"),
        ("b=bucket(id, 2147483648)", "N <= 2147483647"),
        ("y=year(ts, 2)", "year() takes one column"),
        ("m=months(ts)", "unknown transform 'months'"),
        ("ts=date(ts)", "a name of its own"),
        ("day=date(ts),DAY", "'day' and 'DAY' name one column"),
        ("day=date(", None),
        ("day date(ts)", None),
    ],
)
def test_a_bad_spec_is_a_config_error_naming_it(text: str, reason: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        parse_partition_by(text, key="columnar.partition.by")
    assert info.value.key == "columnar.partition.by"
    assert info.value.value == text
    assert "name=date(col)" in info.value.allowed and "name=bucket(col, N)" in info.value.allowed
    if reason is not None:
        assert reason in str(info.value)


def test_date_is_the_utc_date_at_the_microsecond_boundary() -> None:
    day = parse_spec("day=date(ts)")
    values = pa.array(
        [utc(2026, 11, 22, 23, 59, 59, 999999), utc(2026, 11, 23), None, utc(1969, 12, 31, 23, 59, 59, 999999)], TS
    )
    assert day.evaluate(values).to_pylist() == [
        dt.date(2026, 11, 22),
        dt.date(2026, 11, 23),
        None,
        dt.date(1969, 12, 31),
    ]
    # without a time zone (timestamp_ntz): the wall-clock date; milliseconds alike; a date as is
    naive = pa.array([dt.datetime(2026, 11, 22, 23, 59, 59, 999000)], pa.timestamp("ms"))
    assert day.evaluate(naive).to_pylist() == [dt.date(2026, 11, 22)]
    assert day.evaluate(pa.array([dt.date(2026, 1, 2)])).to_pylist() == [dt.date(2026, 1, 2)]
    assert day.output_type(TS) == pa.date32()


def test_hour_is_a_sortable_utc_string() -> None:
    hour = parse_spec("hour=hour(ts)")
    values = pa.array([utc(2026, 11, 23, 9, 59, 59, 999999), utc(2026, 11, 23, 10), utc(1969, 12, 31, 23, 30)], TS)
    assert hour.evaluate(values).to_pylist() == ["2026-11-23-09", "2026-11-23-10", "1969-12-31-23"]
    assert hour.output_type(TS) == pa.string()


def test_truncate_floors_integers_and_cuts_strings() -> None:
    ints = parse_spec("b=truncate(id, 10)")
    assert ints.evaluate(pa.array([-11, -10, -1, 0, 9, 10, None])).to_pylist() == [-20, -10, -10, 0, 0, 10, None]
    assert ints.output_type(pa.int32()) == pa.int32()
    prefix = parse_spec("p=truncate(name, 2)")
    assert prefix.evaluate(pa.array(["abc", "é€x", "a", None])).to_pylist() == ["ab", "é€", "a", None]


def test_a_transform_refuses_a_type_it_cannot_take() -> None:
    with pytest.raises(SchemaError) as info:
        parse_spec("day=date(n)").output_type(pa.int64())
    assert info.value.field == "n"
    assert "date(n) needs a timestamp or a date, not int64" in str(info.value)
    assert parse_spec("h=hour(d)").problem(pa.date32()) is not None
    assert parse_spec("b=truncate(x, 2)").problem(pa.float64()) is not None


def test_value_of_range_is_one_value_or_none() -> None:
    day = parse_spec("day=date(ts)")
    assert day.value_of_range(utc(2026, 11, 23), utc(2026, 11, 23, 23, 59, 59, 999999), TS) == dt.date(2026, 11, 23)
    assert day.value_of_range(utc(2026, 11, 22, 23, 59, 59, 999999), utc(2026, 11, 23), TS) is None
    assert parse_spec("b=truncate(id, 100)").value_of_range(100, 199, pa.int64()) == 100
    assert parse_spec("b=truncate(id, 100)").value_of_range(-1, 0, pa.int64()) is None
    assert parse_spec("c").value_of_range("x", "x", pa.string()) == "x"
    assert parse_spec("c").value_of_range("x", "y", pa.string()) is None


def test_year_and_month_of_a_zoned_timestamp_are_utcs_and_of_a_date_its_own() -> None:
    year, month = parse_spec("y=year(ts)"), parse_spec("m=month(ts)")
    values = pa.array([utc(2025, 12, 31, 23, 59, 59, 999999), utc(2026, 1, 1), None, utc(1969, 12, 31, 23)], TS)
    assert year.evaluate(values).to_pylist() == [2025, 2026, None, 1969]
    assert month.evaluate(values).to_pylist() == ["2025-12", "2026-01", None, "1969-12"]
    paris = pa.array([utc(2025, 12, 31, 23, 30)], TS).cast(pa.timestamp("us", tz="Europe/Paris"))
    assert (year.evaluate(paris).to_pylist(), month.evaluate(paris).to_pylist()) == ([2025], ["2025-12"])
    assert month.evaluate(pa.array([dt.date(2026, 2, 28)])).to_pylist() == ["2026-02"]
    assert "needs a timestamp or a date" in (year.problem(pa.int64()) or "")


def test_value_of_range_of_a_bucket_is_known_only_for_one_value() -> None:
    b = parse_spec("b=bucket(id, 4)")
    assert b.value_of_range(7, 7, pa.int64()) == b.evaluate(pa.array([7])).to_pylist()[0]
    buckets = b.evaluate(pa.array(range(100))).to_pylist()
    same = next(i for i in range(9, 100) if buckets[i] == buckets[8])
    assert b.value_of_range(8, same, pa.int64()) is None  # one bucket at both ends proves nothing between
    assert parse_spec("m=month(ts)").value_of_range(utc(2026, 11, 1), utc(2026, 11, 30, 23), TS) == "2026-11"
    assert parse_spec("y=year(ts)").value_of_range(utc(2026, 11, 1), utc(2027, 1, 1), TS) is None


def test_runs_keep_row_order() -> None:
    ts = pa.array([utc(2026, 1, 1), utc(2026, 1, 1, 1), utc(2026, 1, 2), utc(2026, 1, 1), None, None], TS)
    keys = partition_keys(pa.table({"ts": ts}), [parse_spec("day=date(ts)")])
    assert runs(keys) == [
        (0, 2, (dt.date(2026, 1, 1),)),
        (2, 3, (dt.date(2026, 1, 2),)),
        (3, 4, (dt.date(2026, 1, 1),)),
        (4, 6, (None,)),
    ]
    assert runs(keys.slice(0, 0)) == []


def _segment(ts: list[dt.datetime | None], *, statistics: bool = True) -> tuple[bytes, pq.FileMetaData, pa.Table]:
    table = pa.table({"id": pa.array(range(len(ts)), pa.int64()), "ts": pa.array(ts, TS)})
    buf = io.BytesIO()
    pq.write_table(table, buf, store_schema=True, write_statistics=statistics, row_group_size=2)
    value = buf.getvalue()
    return value, pq.read_metadata(pa.BufferReader(value)), table


DAY = (parse_spec("day=date(ts)"),)


def test_the_footer_decides_without_reading_a_data_page() -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", TS)])
    _, one_day, _ = _segment([utc(2026, 11, 23), utc(2026, 11, 23, 12), utc(2026, 11, 23, 23, 59, 59, 999999)])
    # the value's bytes are never looked at: garbage in their place changes nothing
    assert segment_partition_values(one_day, b"garbage", DAY, schema) == {"day": "2026-11-23"}
    _, midnight, _ = _segment([utc(2026, 11, 22, 23, 59, 59, 999999), utc(2026, 11, 23)])
    assert segment_partition_values(midnight, b"garbage", DAY, schema) is None
    _, nulls, _ = _segment([None, None, None])
    assert segment_partition_values(nulls, b"garbage", DAY, schema) == {"day": None}
    _, some_null, _ = _segment([utc(2026, 11, 23), None])
    assert segment_partition_values(some_null, b"garbage", DAY, schema) is None


def test_without_statistics_the_source_column_decides() -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", TS)])
    value, meta, _ = _segment([utc(2026, 11, 23), utc(2026, 11, 23, 5)], statistics=False)
    assert segment_partition_values(meta, value, DAY, schema) == {"day": "2026-11-23"}
    value, meta, _ = _segment([utc(2026, 11, 23), utc(2026, 11, 24, 5)], statistics=False)
    assert segment_partition_values(meta, value, DAY, schema) is None


def test_a_split_holds_every_row_once_and_nulls_go_to_the_default_partition() -> None:
    _, _, table = _segment([utc(2026, 11, 22, 23), None, utc(2026, 11, 23), utc(2026, 11, 22, 1)])
    parts = split_by_partition(table, DAY)
    by_value = {values["day"]: part["id"].to_pylist() for values, part in parts}
    assert by_value == {"2026-11-22": [0, 3], None: [1], "2026-11-23": [2]}
    assert all(part.column_names == ["id", "ts"] for _, part in parts)  # no derived column in the files
    assert partition_path({"day": None}) == "day=__HIVE_DEFAULT_PARTITION__"


def _landed(tmp_path: Path, ts: list[dt.datetime | None], offset: int) -> tuple[LandedSegment, bytes]:
    table = pa.table({"id": pa.array(range(len(ts)), pa.int64()), "ts": pa.array(ts, TS)})
    seg = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(table.schema))
    read = read_segment(topic="t", partition=0, offset=offset, value=seg.value, headers=seg.headers)
    schema = table_schema_from_segment(table.schema, DAY)
    checked = check_segment(
        read, table_schema=schema, partition_by=DAY, merge=False, check_columns=RsEngine.check_columns
    )
    [landed] = write_segments([checked], table_uri=str(tmp_path), table_schema=schema, partition_by=DAY)
    return landed, seg.value


def test_a_segment_is_written_raw_when_one_day_split_when_two(tmp_path: Path) -> None:
    landed, value = _landed(tmp_path, [utc(2026, 11, 23, 1), utc(2026, 11, 23, 2)], 7)
    assert not landed.split
    assert [f.partition_values for f in landed.files] == [{"day": "2026-11-23"}]
    assert landed.files[0].path.startswith("day=2026-11-23/t-p0-o")
    assert (tmp_path / landed.files[0].path).read_bytes() == value  # byte for byte
    landed, _ = _landed(tmp_path, [utc(2026, 11, 22, 23, 59, 59, 999999), utc(2026, 11, 23), None], 8)
    assert landed.split
    assert sorted((f.partition_values["day"] or "") for f in landed.files) == ["", "2026-11-22", "2026-11-23"]
    back = pa.concat_tables(pq.read_table(tmp_path / f.path) for f in landed.files)
    assert sorted(back["id"].to_pylist()) == [0, 1, 2]
    assert "day" not in back.column_names


def test_the_table_records_how_a_derived_column_is_computed() -> None:
    segment = pa.schema([("id", pa.int64(), False), ("ts", TS), ("__parka_key", pa.binary())])
    schema = table_schema_from_segment(segment, DAY)
    assert schema.names == ["id", "ts", "day", "__parka_key"]
    assert schema.field("day").type == pa.date32() and schema.field("day").nullable
    assert schema.field("day").metadata == {EXPRESSION_KEY.encode(): b"date(ts)"}
    assert table_partitioning(schema, ["day"]) == DAY
    assert table_partitioning(schema, ["id"]) == (parse_spec("id"),)
    with pytest.raises(SchemaMismatchError, match="the segment has no column 'at'"):
        table_schema_from_segment(segment, [parse_spec("day=date(at)")])
    with pytest.raises(SchemaMismatchError, match="needs a timestamp or a date"):
        table_schema_from_segment(segment, [parse_spec("day=date(id)")])


def test_fit_segment_checks_a_derived_columns_source() -> None:
    table = table_schema_from_segment(pa.schema([("id", pa.int64()), ("ts", TS)]), DAY)
    assert (
        fit_segment(table, pa.schema([("id", pa.int64()), ("ts", TS)]), partition_by=DAY, merge=False).problem is None
    )
    lacking = fit_segment(table, pa.schema([("id", pa.int64())]), partition_by=DAY, merge=True)
    assert (lacking.field, lacking.problem) == ("ts", "column 'ts' (for day=date(ts)) is not in the segment")
    wrong = fit_segment(table, pa.schema([("id", pa.int64()), ("ts", pa.int64())]), partition_by=DAY, merge=False)
    assert wrong.field == "ts" and wrong.problem is not None and "needs a timestamp" in wrong.problem
    own = pa.schema([("id", pa.int64()), ("ts", TS), ("day", pa.date32())])
    clash = fit_segment(table, own, partition_by=DAY, merge=False)
    assert clash.field == "day" and clash.problem is not None and "has its own" in clash.problem


def test_spark_decode_mode_refuses_a_derived_partition_column() -> None:
    from parka.spark_ext import SparkIngestSettings

    with pytest.raises(ConfigError, match="needs mode raw") as info:
        SparkIngestSettings(
            topic="t", table_uri="/x", bootstrap_servers="b", mode="decode", partition_by=("day=date(ts)",)
        )
    assert (info.value.key, info.value.value) == ("partition_by", "day=date(ts)")
    raw = SparkIngestSettings(topic="t", table_uri="/x", bootstrap_servers="b", partition_by=("day=date(ts)",))
    assert raw.partition_by == ("day=date(ts)",)


BUCKET = (parse_spec("b=bucket(id, 4)"),)


def _ids(ids: list[int]) -> tuple[bytes, pq.FileMetaData, pa.Table]:
    table = pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([utc(2026, 11, 23)] * len(ids), TS)})
    buf = io.BytesIO()
    pq.write_table(table, buf, store_schema=True, row_group_size=2)
    value = buf.getvalue()
    return value, pq.read_metadata(pa.BufferReader(value)), table


def _buckets(ids: list[int]) -> list[int]:
    return list(BUCKET[0].evaluate(pa.array(ids, pa.int64())).to_pylist())


def _one_bucket_ids(n: int) -> list[int]:
    """``n`` different ids (not in order) that bucket[4] puts in one bucket."""
    buckets = _buckets(list(range(100)))
    return [i for i in range(100) if buckets[i] == buckets[0]][:n][::-1]


def test_a_bucket_is_read_from_the_column_unless_the_footer_shows_one_value() -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", TS)])
    _, one_value, _ = _ids([5, 5, 5])
    # min == max: the footer settles it; the value's bytes are never looked at
    assert segment_partition_values(one_value, b"garbage", BUCKET, schema) == {"b": str(_buckets([5])[0])}
    ids = _one_bucket_ids(5)
    value, meta, _ = _ids(ids)
    with pytest.raises(SegmentDecodeError):  # min != max: the footer cannot tell, the column is read
        segment_partition_values(meta, b"garbage", BUCKET, schema)
    assert segment_partition_values(meta, value, BUCKET, schema) == {"b": str(_buckets(ids)[0])}
    value, meta, _ = _ids([*ids, ids[0] + 1])
    assert len(set(_buckets([*ids, ids[0] + 1]))) == 2
    assert segment_partition_values(meta, value, BUCKET, schema) is None  # two buckets: split


def test_the_footer_decides_a_month_and_a_year() -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", TS)])
    month, year = (parse_spec("m=month(ts)"),), (parse_spec("y=year(ts)"),)
    _, november, _ = _segment([utc(2026, 11, 1), utc(2026, 11, 17), utc(2026, 11, 30, 23, 59, 59, 999999)])
    assert segment_partition_values(november, b"garbage", month, schema) == {"m": "2026-11"}
    assert segment_partition_values(november, b"garbage", year, schema) == {"y": "2026"}
    _, new_year, _ = _segment([utc(2026, 12, 31, 23, 59, 59, 999999), utc(2027, 1, 1)])
    assert segment_partition_values(new_year, b"garbage", month, schema) is None
    assert segment_partition_values(new_year, b"garbage", year, schema) is None


def _landed_ids(tmp_path: Path, ids: list[int], offset: int) -> tuple[LandedSegment, bytes]:
    table = pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([utc(2026, 11, 23)] * len(ids), TS)})
    seg = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(table.schema))
    read = read_segment(topic="t", partition=0, offset=offset, value=seg.value, headers=seg.headers)
    schema = table_schema_from_segment(table.schema, BUCKET)
    checked = check_segment(
        read, table_schema=schema, partition_by=BUCKET, merge=False, check_columns=RsEngine.check_columns
    )
    [landed] = write_segments([checked], table_uri=str(tmp_path), table_schema=schema, partition_by=BUCKET)
    return landed, seg.value


def test_a_segment_in_one_bucket_is_written_raw_and_one_spanning_buckets_is_split(tmp_path: Path) -> None:
    ids = _one_bucket_ids(6)
    landed, value = _landed_ids(tmp_path, ids, 3)
    bucket = str(_buckets(ids)[0])
    assert not landed.split
    assert [f.partition_values for f in landed.files] == [{"b": bucket}]
    assert landed.files[0].path.startswith(f"b={bucket}/t-p0-o")
    assert (tmp_path / landed.files[0].path).read_bytes() == value  # byte for byte
    mixed = list(range(40, 0, -1))
    landed, _ = _landed_ids(tmp_path, mixed, 4)
    assert landed.split and len(landed.files) == len(set(_buckets(mixed))) == 4
    seen = []
    for f in landed.files:
        part = pq.read_table(tmp_path / f.path)
        assert "b" not in part.column_names
        assert {str(b) for b in _buckets(part["id"].to_pylist())} == {f.partition_values["b"]}
        seen += part["id"].to_pylist()
    assert sorted(seen) == sorted(mixed)  # every row once
    by_split = split_by_partition(pa.table({"id": pa.array(mixed, pa.int64())}), BUCKET)
    for values, part in by_split:  # each part keeps its rows' order
        ids_in = part["id"].to_pylist()
        assert ids_in == [i for i in mixed if str(_buckets([i])[0]) == values["b"]]


def test_a_delta_table_takes_year_and_month_as_columns_readers_filter(tmp_path: Path) -> None:
    """``y=year(ts)`` is an int (2026) and ``m=month(ts)`` a ``yyyy-MM`` string in a Delta
    table: what Iceberg shows for its year and month transforms."""
    from deltalake import DeltaTable
    from parka.lake import Committer, RsEngine

    specs = ["y=year(ts)", "m=month(ts)"]
    c = Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="t", app_id="app", partition_by=specs)
    ts = [utc(2026, 12, 31, 23, 59, 59, 999999), utc(2027, 1, 1), utc(2027, 1, 31)]
    table = pa.table({"id": pa.array([0, 1, 2], pa.int64()), "ts": pa.array(ts, TS)})
    seg = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(table.schema))
    read = read_segment(topic="t", partition=0, offset=0, value=seg.value, headers=seg.headers)
    c.ensure_table(read.schema)
    checked = check_segment(
        read,
        table_schema=c.table_schema(),
        partition_by=c.partitioning,
        merge=False,
        check_columns=c.engine.check_columns,
    )
    files = write_segments([checked], table_uri=c.root, table_schema=c.table_schema(), partition_by=c.partitioning)
    c.commit(files)
    rows = DeltaTable(str(tmp_path / "t")).to_pyarrow_table().sort_by("id")
    assert rows.schema.field("y").type == pa.int32() and rows.schema.field("m").type == pa.string()
    assert rows.select(["id", "y", "m"]).to_pylist() == [
        {"id": 0, "y": 2026, "m": "2026-12"},
        {"id": 1, "y": 2027, "m": "2027-01"},
        {"id": 2, "y": 2027, "m": "2027-01"},
    ]
    assert [str(s) for s in Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="t").partitioning] == specs


def test_a_delta_table_refuses_a_bucket_naming_the_spec(tmp_path: Path) -> None:
    from parka.consumer import IngestSettings
    from parka.lake import Committer, RsEngine
    from parka.spark_ext import SparkIngestSettings

    spec = "b=bucket(id, 8)"
    base = {"topic": "t", "table_uri": str(tmp_path / "t"), "kafka_conf": {}, "app_id": "a"}
    with pytest.raises(ConfigError, match="Iceberg-only") as info:
        IngestSettings(**base, partition_by=("day", spec))  # type: ignore[arg-type]
    assert (info.value.key, info.value.value) == ("partition_by", spec)
    assert "--partition-by" in str(info.value) and "--z-order id" in str(info.value)
    assert IngestSettings(**base, partition_by=(spec,), catalog="lake").partition_by == (spec,)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="Iceberg-only"):
        SparkIngestSettings(topic="t", table_uri="/x", bootstrap_servers="b", partition_by=(spec,))
    # a library caller's committer on a Delta engine: the table is never created
    c = Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="t", partition_by=[spec])
    with pytest.raises(ConfigError, match="Iceberg-only") as info:
        c.ensure_table(pa.schema([("id", pa.int64())]))
    assert info.value.value == spec
    assert not (tmp_path / "t" / "_delta_log").exists()


def test_a_new_table_partitioned_by_what_its_first_segment_cannot_give_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    from parka.lake import Committer, RsEngine

    segment = pa.schema([("id", pa.int64()), ("day", pa.string()), ("ts", TS), ("tags", pa.list_(pa.string()))])
    columns = "day: string, id: int64, tags: list<item: string>, ts: timestamp[us, tz=UTC]"
    cases = {
        "dya": "dya: the topic's first segment has no column 'dya'",
        "id,d=date(tss)": "d=date(tss): the topic's first segment has no column 'tss'",
        "tags": "tags: a partition column must be a primitive column",
        "d=date(id)": "d=date(id): date(id) needs a timestamp or a date, not int64",
        "day=date(ts)": "day=date(ts): the topic's first segment has a column 'day' already",
    }
    for spec, reason in cases.items():
        c = Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="t", partition_by=[spec])
        with pytest.raises(ConfigError) as info:
            c.ensure_table(segment)
        text = str(info.value)
        assert info.value.value == spec, text
        assert "--partition-by or PARKA_PARTITION_BY" in text and reason in text, text
        assert text.endswith(f"allowed: columns of the topic's first segment, or derived specs of them: {columns}")
        assert not (tmp_path / "t").exists()
    c = Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="t", partition_by=["id,d=date(ts)"])
    c.ensure_table(segment)
    assert (tmp_path / "t" / "_delta_log").exists()
    # once the table exists, a later segment without the column is data (a dead letter), not configuration
    later = fit_segment(c.table_schema(), pa.schema([("id", pa.int64())]), partition_by=c.partitioning, merge=True)
    assert later.problem is not None and "'ts'" in later.problem


def test_the_columns_an_error_lists_are_sorted_with_their_types_and_cut() -> None:
    from parka.lake._plan import columns_text

    assert columns_text(pa.schema([("b", pa.string()), ("a", pa.int32())])) == "a: int32, b: string"
    assert columns_text(pa.schema([])) == "none"
    wide = pa.schema([(f"c{i:03d}", pa.float64()) for i in range(500)])
    text = columns_text(wide)
    assert text.startswith("c000: double, c001: double") and text.endswith(" more") and len(text) < 330
    shown = text.count(": double")
    assert text.endswith(f", and {500 - shown} more")
    nested = columns_text(pa.schema([("s", pa.struct([(f"f{i}", pa.int64()) for i in range(20)]))]))
    assert nested.startswith("s: struct<") and nested.endswith("...") and len(nested) == len("s: ") + 40
