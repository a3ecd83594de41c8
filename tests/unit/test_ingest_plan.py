from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from parka.lake._plan import CommitPolicy, FileName, check_schema, partition_path, partition_value_string


def test_commit_policy_latency_bytes_count() -> None:
    policy = CommitPolicy(allowed_latency_s=5.0, min_bytes=1000, max_segments=3)
    assert not policy.due(segments=0, buffered_bytes=10**9, oldest_at=0.0, now=100.0)
    assert not policy.due(segments=1, buffered_bytes=10, oldest_at=10.0, now=14.9)
    assert policy.due(segments=1, buffered_bytes=10, oldest_at=10.0, now=15.0)
    assert policy.due(segments=1, buffered_bytes=1000, oldest_at=10.0, now=10.0)
    assert policy.due(segments=3, buffered_bytes=1, oldest_at=10.0, now=10.0)


def test_commit_policy_commits_before_a_segment_that_would_overflow_the_batch() -> None:
    policy = CommitPolicy(allowed_latency_s=5.0, min_bytes=1000, max_segments=3)
    assert policy.overflows(buffered_bytes=900, next_bytes=101)
    assert not policy.overflows(buffered_bytes=900, next_bytes=100)  # exactly full: due after it
    assert not policy.overflows(buffered_bytes=0, next_bytes=5000)  # a lone large segment still goes


def test_file_names_carry_kafka_coordinates() -> None:
    name = FileName.new("web.requests-v2", 3, 12345)
    text = str(name)
    assert text.startswith("web.requests-v2-p3-o00000000000000012345-") and text.endswith(".parquet")
    assert FileName.parse(text) == name
    assert FileName.parse("day=2024-01-01/" + str(FileName.new("t", 0, 7, split=2))).split == 2
    assert FileName.parse("part-00000-abc.snappy.parquet") is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, "true"),
        (42, "42"),
        ("a/b", "a/b"),
        (dt.date(2024, 2, 29), "2024-02-29"),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 6), "2024-01-02 03:04:05.000006"),
    ],
)
def test_partition_values_as_delta_serialises_them(value: object, expected: str | None) -> None:
    assert partition_value_string(value) == expected


def test_partition_path_escapes() -> None:
    assert partition_path({"day": "2024-01-01", "site": "a/b"}) == "day=2024-01-01/site=a%2Fb"
    assert partition_path({"day": None}) == "day=__HIVE_DEFAULT_PARTITION__"


TABLE = pa.schema([("id", pa.int64(), False), ("name", pa.string()), ("at", pa.timestamp("us", tz="UTC"))])


def test_same_schema_fits_modulo_large_types_and_units() -> None:
    seg = pa.schema([("id", pa.int64(), False), ("name", pa.large_string()), ("at", pa.timestamp("ms", tz="UTC"))])
    assert check_schema(TABLE, seg).fits


def test_missing_nullable_column_fits_missing_required_does_not() -> None:
    assert check_schema(TABLE, pa.schema([("id", pa.int64(), False)])).fits
    verdict = check_schema(TABLE, pa.schema([("name", pa.string())]))
    assert verdict.problems == (
        "column 'id' is missing in the segment but int64 in the table: the table's field is NOT NULL, the segment "
        "lacks it",
    )


def test_new_nullable_column_is_an_evolution_new_required_is_a_problem() -> None:
    seg = TABLE.append(pa.field("extra", pa.int32()))
    verdict = check_schema(TABLE, seg)
    assert [f.name for f in verdict.new_fields] == ["extra"] and not verdict.problems
    verdict = check_schema(TABLE, TABLE.append(pa.field("extra", pa.int32(), nullable=False)))
    assert verdict.problems == (
        "column 'extra' is int32 in the segment but missing in the table: a new field must be nullable: older rows "
        "have no value",
    )


def test_a_type_change_is_a_problem_relaxed_nullability_an_evolution() -> None:
    seg = pa.schema([("id", pa.int32(), False), ("name", pa.string())])
    assert check_schema(TABLE, seg).problems == (
        "column 'id' is int32 in the segment but int64 in the table: a narrowing; with type widening on the table "
        "an older, narrower segment would be taken",
    )
    seg = pa.schema([("id", pa.int64(), True)])
    verdict = check_schema(TABLE, seg)
    assert not verdict.problems and [(c.path, c.kind) for c in verdict.changes] == [("id", "relaxed")]
    assert verdict.new_fields == (pa.field("id", pa.int64(), True),)


def test_a_nanosecond_or_zoneless_timestamp_does_not_enter_a_microsecond_utc_table() -> None:
    # the check compares unit and zone, so a nanosecond segment does not enter a microsecond table
    nanos = pa.schema([("id", pa.int64(), False), ("at", pa.timestamp("ns", tz="UTC"))])
    assert check_schema(TABLE, nanos).problems == (
        "column 'at' is timestamp[ns, tz=UTC] in the segment but timestamp[us, tz=UTC] in the table: the type changed "
        "(only widenings can join, with type widening on the table)",
    )
    nested = pa.schema([("id", pa.int64(), False), ("s", pa.struct([("at", pa.timestamp("ns"))]))])
    wider = TABLE.append(pa.field("s", pa.struct([("at", pa.timestamp("us"))])))
    assert check_schema(wider, nested).problems
    zoneless = pa.schema([("id", pa.int64(), False), ("at", pa.timestamp("us"))])
    assert check_schema(TABLE, zoneless).problems


def test_fit_segment_is_the_one_rule_for_new_columns() -> None:
    from parka.lake import fit_segment

    with_key = TABLE.append(pa.field("__parka_key", pa.binary()))
    assert [f.name for f in fit_segment(TABLE, with_key, partition_by=(), merge=False).new_fields] == ["__parka_key"]
    extra = TABLE.append(pa.field("extra", pa.int32()))
    refused = fit_segment(TABLE, extra, partition_by=(), merge=False)
    assert (refused.field, refused.new_fields) == ("extra", ())
    assert refused.problem is not None and "--schema-evolution merge" in refused.problem
    assert [f.name for f in fit_segment(TABLE, extra, partition_by=(), merge=True).new_fields] == ["extra"]
    lacking = fit_segment(TABLE, TABLE, partition_by=("day",), merge=True)
    assert (lacking.field, lacking.problem) == ("day", "partition column 'day' is not in the segment")


def test_temporary_files_of_interrupted_writes_carry_their_coordinates() -> None:
    name = FileName.new("t", 3, 42)
    temporary = f"day=1/.{name}.{'ab' * 16}.tmp"
    assert FileName.parse(temporary) is None  # not a data file
    assert FileName.parse(temporary, temporary=True) == name
    assert FileName.parse(f".{name}.tmp", temporary=True) is None  # not the writer's pattern


def test_a_new_tables_schema_allows_nulls_inside_lists_and_maps() -> None:
    """delta-spark refuses NOT NULL nested within arrays or maps (the reserved headers column
    is a list of non-null structs), so a table made from a segment relaxes them."""
    from parka.lake._plan import table_schema_from_segment

    from parka.segment import RESERVED_FIELDS

    item = pa.struct([pa.field("k", pa.string(), nullable=False)])
    segment = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
            pa.field("s", pa.struct([pa.field("xs", pa.list_(pa.field("element", item, nullable=False)))])),
            pa.field("m", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
            RESERVED_FIELDS[2].with_nullable(False),
        ]
    )
    table = table_schema_from_segment(segment)
    assert not table.field("id").nullable and not table.field("tags").nullable  # top level kept
    assert table.field("tags").type.value_field.nullable
    inner = table.field("s").type.field("xs").type.value_field
    assert inner.nullable and inner.type.field("k").nullable
    assert table.field("m").type.item_field.nullable
    headers = table.field("__parka_headers")
    assert headers.nullable and headers.type.value_field.nullable
    assert headers.type.value_field.type.field("key").nullable
    assert check_schema(table, segment).fits  # the segment's own files still fit the table
