"""parka.lake.delta._rs (and _rules) against real Delta tables in tmp_path (delta-rs, no Kafka)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import CommitProperties, Transaction
from parka.consumer._ingest import IngestSettings
from parka.lake import FILE_TAGS_KEY, DataFile, StatsConfig, _stats, _storage, object_store
from parka.lake._files import read_footer
from parka.lake.delta import _rs, _rules

from parka.config import storage_options_for
from parka.errors import CommitConflict, CommitError, ConfigError, SchemaMismatchError, SegmentDecodeError
from parka.schema import schema_fingerprint
from parka.segment import build_segment_table, encode_segment

UTC = dt.timezone.utc
D = decimal.Decimal


def parquet_bytes(table: pa.Table, **kwargs: Any) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue().to_pybytes()


def stats_of(table: pa.Table, schema: pa.Schema | None = None, **kwargs: Any) -> dict[str, Any]:
    write_kwargs = {k: kwargs.pop(k) for k in ("row_group_size", "write_statistics") if k in kwargs}
    data = parquet_bytes(table, **write_kwargs)
    return json.loads(_stats.data_file_stats(data, schema or table.schema, **kwargs))


def add_file(
    uri: str, rel: str, table: pa.Table, schema: pa.Schema, pv: dict[str, str | None] | None = None
) -> DataFile:
    data = parquet_bytes(table)
    size = _storage.write_data_file(uri, rel, data)
    return DataFile(rel, size, _stats.data_file_stats(data, schema, partition_by=list(pv or {})), dict(pv or {}))


def commit(table: DeltaTable, files: list[DataFile], **txns: int) -> int:
    return _rs.commit_add_files(table, files, txns=txns, schema=None)


def segment(data: pa.Table) -> bytes:
    keys = [f"k{i}".encode() for i in range(data.num_rows)]
    stamps = [1_700_000_000_000 + i for i in range(data.num_rows)]
    headers = [[("h", b"v")] if i % 2 else None for i in range(data.num_rows)]
    full = build_segment_table(data, keys, stamps, headers)
    return encode_segment(full, codec="zstd", fingerprint=schema_fingerprint(data.schema)).value


# --- tables and schemas ------------------------------------------------------------------------


def test_open_table_returns_none_where_there_is_no_table(tmp_path: Path) -> None:
    assert _rs.open_table(str(tmp_path)) is None
    assert _rs.open_table(str(tmp_path / "missing")) is None


def test_create_table_is_empty_and_reopens(tmp_path: Path) -> None:
    schema = pa.schema([("x", pa.int64()), ("p", pa.string()), ("t", pa.timestamp("us", "UTC"))])
    table = _rs.create_table(str(tmp_path), schema, partition_by=["p"], name="events")
    assert table.version() == 0
    opened = _rs.open_table(f"file://{tmp_path}")
    assert opened is not None
    assert _rs.arrow_schema(opened) == schema
    assert opened.metadata().partition_columns == ["p"]
    assert opened.to_pyarrow_table().num_rows == 0
    with pytest.raises(CommitConflict):  # someone else (here: we) created it first
        _rs.create_table(str(tmp_path), schema, partition_by=["p"])


@pytest.mark.parametrize(
    ("arrow_type", "field", "why"),
    [
        (pa.uint8(), "c", "unsigned"),
        (pa.uint64(), "c", "unsigned"),
        (pa.float16(), "c", "float32"),
        (pa.time32("ms"), "c", "time-of-day"),
        (pa.time64("us"), "c", "time-of-day"),
        (pa.duration("us"), "c", "interval"),
        (pa.decimal256(40, 2), "c", "precision <= 38"),
        (pa.decimal256(20, 2), "c", "decimal128"),
        (pa.binary(16), "c", "fixed-size binary"),
        (pa.timestamp("ns"), "c", "microsecond"),
        (pa.timestamp("s", "UTC"), "c", "microsecond"),
        (pa.timestamp("us", "America/New_York"), "c", "UTC"),
        (pa.null(), "c", "cannot store"),
        (pa.struct([("t", pa.time64("us"))]), "c.t", "time-of-day"),
        (pa.list_(pa.uint16()), "c.item", "unsigned"),
        (pa.map_(pa.string(), pa.binary(4)), "c.value", "fixed-size"),
    ],
)
def test_types_delta_cannot_store_are_rejected_by_name(
    tmp_path: Path, arrow_type: pa.DataType, field: str, why: str
) -> None:
    schema = pa.schema([("ok", pa.int32()), ("c", arrow_type)])
    with pytest.raises(SchemaMismatchError) as err:
        _rs.create_table(str(tmp_path), schema, partition_by=[])
    assert err.value.field == field
    assert why in str(err.value)
    assert not (tmp_path / "_delta_log").exists()


def test_types_delta_rs_maps_are_accepted_and_read_back(tmp_path: Path) -> None:
    data = pa.table(
        {
            "ls": pa.array(["a", None], pa.large_string()),
            "lb": pa.array([b"x", None], pa.large_binary()),
            "dict": pa.array(["u", "v"]).dictionary_encode(),
            "d64": pa.array([dt.date(2020, 1, 2), None], pa.date64()),
            "ts_ms": pa.array([dt.datetime(2020, 1, 1, 0, 0, 0, 123000, tzinfo=UTC), None], pa.timestamp("ms", "UTC")),
            "ll": pa.array([[1, 2], None], pa.large_list(pa.int16())),
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
            "s": pa.array([{"a": D("1.50")}, None], pa.struct([("a", pa.decimal128(38, 2))])),
        }
    )
    table = _rs.create_table(str(tmp_path), data.schema, partition_by=[])
    target = _rs.arrow_schema(table)
    commit(table, [add_file(str(tmp_path), "f.parquet", data, target)])
    back = DeltaTable(str(tmp_path)).to_pyarrow_table()
    assert back.to_pylist() == data.cast(target).to_pylist()


@pytest.mark.parametrize(
    ("fields", "field", "why"),
    [
        ([("a b", pa.int32())], "a b", "rejects names"),
        ([("x", pa.int32()), ("X", pa.int32())], "X", "case-insensitive"),
        ([("s", pa.struct([("k", pa.int8()), ("K", pa.int8())]))], "s.K", "case-insensitive"),
    ],
)
def test_names_delta_cannot_take_are_rejected(fields: list[tuple[str, pa.DataType]], field: str, why: str) -> None:
    with pytest.raises(SchemaMismatchError) as err:
        _rs.check_schema(pa.schema(fields))
    assert err.value.field == field
    assert why in str(err.value)


def test_partition_columns_must_be_top_level_primitives(tmp_path: Path) -> None:
    schema = pa.schema([("x", pa.int64()), ("s", pa.struct([("a", pa.int8())]))])
    for column in ("nope", "s"):
        with pytest.raises(SchemaMismatchError) as err:
            _rs.create_table(str(tmp_path), schema, partition_by=[column])
        assert err.value.field == column


def test_tables_with_features_raw_files_would_bypass_are_refused(tmp_path: Path) -> None:
    table = _rs.create_table(str(tmp_path), pa.schema([("x", pa.int64())]), partition_by=[])
    table.alter.add_constraint({"positive": "x > 0"})
    with pytest.raises(CommitError, match="CHECK constraints"):
        _rs.open_table(str(tmp_path))
    with pytest.raises(CommitError, match="CHECK constraints"):
        commit(table, [], app=1)


# --- statistics -------------------------------------------------------------------------------


def test_stats_values_of_every_supported_type() -> None:
    ts = pa.timestamp("us", "UTC")
    data = pa.table(
        {
            "i8": pa.array([1, -5, None], pa.int8()),
            "i64": pa.array([10, 2**40, None], pa.int64()),
            "s": pa.array(["b", "a", None]),
            "d": pa.array([dt.date(2020, 1, 1), dt.date(1969, 12, 31), None]),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, 0, 0, 0, 123000, tzinfo=UTC), dt.datetime(1960, 1, 1, tzinfo=UTC), None], ts
            ),
            "ntz": pa.array([dt.datetime(2024, 5, 6, 7, 8, 9), None, None], pa.timestamp("us")),
            "dec": pa.array([D("123.45"), D("-0.01"), None], pa.decimal128(10, 2)),
            "big": pa.array([D("-12345678901234567890123456789012345678"), D("7"), None], pa.decimal128(38, 0)),
            "b": pa.array([True, None, True]),
            "f": pa.array([1.5, float("nan"), None]),
            "bin": pa.array([b"a", b"b", None]),
            "st": pa.array(
                [{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}], pa.struct([("a", pa.int32()), ("b", pa.string())])
            ),
            "l": pa.array([[1, 2], None, []], pa.list_(pa.int32())),
            "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int32())),
            "allnull": pa.array([None, None, None], pa.int32()),
        }
    )
    raw = _stats.data_file_stats(parquet_bytes(data), data.schema)
    assert '"big":-12345678901234567890123456789012345678' in raw  # exact, not through float
    assert json.loads(raw, parse_float=D) == {
        "numRecords": 3,
        "minValues": {
            "i8": -5, "i64": 10, "s": "a", "d": "1969-12-31", "ts": "1960-01-01T00:00:00.000Z",
            "ntz": "2024-05-06T07:08:09.000", "dec": D("-0.01"), "big": -12345678901234567890123456789012345678,
            "b": True, "st": {"a": 1, "b": "x"}, "f": D("1.5"),
        },
        "maxValues": {
            "i8": 1, "i64": 2**40, "s": "b", "d": "2020-01-01", "ts": "2024-01-01T00:00:00.123Z",
            "ntz": "2024-05-06T07:08:09.000", "dec": D("123.45"), "big": 7, "b": True, "st": {"a": 1, "b": "y"},
        },
        "nullCount": {
            "i8": 1, "i64": 1, "s": 1, "d": 1, "ts": 1, "ntz": 2, "dec": 1, "big": 1, "b": 1, "f": 1, "bin": 1,
            "st": {"a": 2, "b": 1}, "allnull": 3,
        },
    }  # fmt: skip


def test_stats_combine_row_groups() -> None:
    data = pa.table(
        {
            "x": pa.array([5, 3, None, None, 9, -2, 4], pa.int64()),
            "s": pa.array(["m", "k", None, None, "z", "a", "b"]),
        }
    )
    stats = stats_of(data, row_group_size=2)  # groups: [5,3] [None,None] [9,-2] [4]
    assert stats == {
        "numRecords": 7,
        "minValues": {"x": -2, "s": "a"},
        "maxValues": {"x": 9, "s": "z"},
        "nullCount": {"x": 2, "s": 2},
    }


def test_columns_without_statistics_get_no_bounds() -> None:
    data = pa.table({"x": pa.array([1, 2], pa.int64()), "y": pa.array([3, None], pa.int64())})
    assert stats_of(data, write_statistics=False) == {
        "numRecords": 2,
        "minValues": {},
        "maxValues": {},
        "nullCount": {},
    }
    partial = stats_of(data, write_statistics=["y"])
    assert partial["minValues"] == {"y": 3}
    assert partial["nullCount"] == {"y": 1}


def test_long_strings_keep_a_prefix_min_and_a_tie_broken_max() -> None:
    data = pa.table({"s": ["b" * 40, "a" * 33 + "z", "ü" * 32]})
    stats = stats_of(data)
    assert stats["minValues"] == {"s": "a" * 32}
    assert stats["maxValues"] == {"s": "ü" * 32}  # 32 characters (64 bytes): kept whole
    assert stats_of(pa.table({"s": ["a", "z" * 33]}))["maxValues"] == {"s": "z" * 32 + "\x7f"}


@pytest.mark.parametrize(
    ("values_us", "unit", "low", "high"),
    [
        ([1_500, 2_000_999], "us", "1970-01-01T00:00:00.001Z", "1970-01-01T00:00:02.001Z"),
        ([-1, 999], "us", "1969-12-31T23:59:59.999Z", "1970-01-01T00:00:00.001Z"),
        ([3_000, 7_000], "us", "1970-01-01T00:00:00.003Z", "1970-01-01T00:00:00.007Z"),
        ([12_000, 13_000], "ms", "1970-01-01T00:00:00.012Z", "1970-01-01T00:00:00.013Z"),
    ],
)
def test_timestamp_bounds_are_milliseconds_min_floored_max_ceiled(
    values_us: list[int], unit: str, low: str, high: str
) -> None:
    array = pa.array(values_us, pa.timestamp("us", "UTC")).cast(pa.timestamp(unit, "UTC"))
    stats = stats_of(pa.table({"t": array}), pa.schema([("t", pa.timestamp("us", "UTC"))]))
    assert (stats["minValues"]["t"], stats["maxValues"]["t"]) == (low, high)


def test_partition_columns_and_indexed_column_budget() -> None:
    data = pa.table({"a": [1], "s": pa.array([{"x": 1, "y": 2}]), "c": [3], "p": ["k"]})
    assert set(stats_of(data, partition_by=["p"])["nullCount"]) == {"a", "s", "c"}
    assert stats_of(data, stats_config=StatsConfig(num_indexed_cols=2))["nullCount"] == {"a": 0, "s": {"x": 0}}
    assert stats_of(data, stats_config=StatsConfig(num_indexed_cols=0))["nullCount"] == {}
    every = stats_of(data, stats_config=StatsConfig(num_indexed_cols=-1))
    assert every["nullCount"] == {"a": 0, "s": {"x": 0, "y": 0}, "c": 0, "p": 0}


def test_file_columns_of_another_type_get_no_bounds() -> None:
    data = pa.table(
        {
            "u": pa.array([1, 200], pa.uint8()),  # table: int8 would overflow
            "wide": pa.array([1, 2**40], pa.int64()),  # table: int32
            "text": ["1", "2"],  # table: int64
            "ntz": pa.array([1, 2], pa.timestamp("us")),  # table: UTC timestamp
        }
    )
    table_schema = pa.schema(
        [("u", pa.int8()), ("wide", pa.int32()), ("text", pa.int64()), ("ntz", pa.timestamp("us", "UTC"))]
    )
    stats = stats_of(data, table_schema)
    assert stats["minValues"] == {} and stats["maxValues"] == {}
    assert stats["nullCount"] == {"u": 0, "wide": 0, "text": 0, "ntz": 0}
    missing = stats_of(pa.table({"a": [1]}), pa.schema([("a", pa.int64()), ("new", pa.int64())]))
    assert missing["nullCount"] == {"a": 0}  # a column the file lacks is not described


def test_stats_from_segment_bytes_and_footer_agree() -> None:
    data = pa.table({"x": pa.array([3, 1], pa.int64()), "s": ["q", "r"]})
    value = segment(data)
    from_bytes = _stats.data_file_stats(value, data.schema)
    assert from_bytes == _stats.data_file_stats(pq.read_metadata(pa.BufferReader(value)), data.schema)
    assert json.loads(from_bytes)["minValues"] == {"x": 1, "s": "q"}  # reserved columns not in the table
    with pytest.raises(SegmentDecodeError):
        _stats.data_file_stats(b"not parquet", data.schema)


def test_stats_of_interleaved_schemas_each_describe_their_own_file() -> None:
    # The column plan is reused per (file schema, table schema): a file or a table that differs
    # in one type, one name or one partition column must not get another's plan.
    ints = pa.table({"x": pa.array([5, 2], pa.int64()), "y": ["b", "a"]})
    strings = pa.table({"x": ["q", "p"], "y": ["b", "a"]})
    renamed = pa.table({"z": pa.array([5, 2], pa.int64()), "y": ["b", "a"]})
    millis = pa.table({"x": pa.array([5, 2], pa.timestamp("ms")), "y": ["b", "a"]})
    as_text = pa.schema([("x", pa.string()), ("y", pa.string())])
    micros = pa.schema([("x", pa.timestamp("us"))])

    def bare(table: pa.Table) -> dict[str, Any]:  # no stored Arrow schema: the Parquet schema decides
        stats = _stats.data_file_stats(parquet_bytes(table, store_schema=False), table.schema)
        return dict(json.loads(stats)["minValues"])

    for _ in range(2):
        assert stats_of(ints)["minValues"] == {"x": 2, "y": "a"}
        assert stats_of(strings)["minValues"] == {"x": "p", "y": "a"}
        assert bare(ints) == {"x": 2, "y": "a"}
        assert bare(strings) == {"x": "p", "y": "a"}
        assert stats_of(ints, as_text)["minValues"] == {"y": "a"}  # an int column read as text: no bounds
        # a stream widening ms to us: same table schema, same names, another file schema
        for unit, ceiled in (("ms", "00.005"), ("us", "00.001")):
            stamps = pa.table({"x": pa.array([5], pa.timestamp(unit))})
            stats = _stats.data_file_stats(parquet_bytes(stamps, store_schema=False), micros)
            assert json.loads(stats)["maxValues"] == {"x": f"1970-01-01T00:00:{ceiled}"}
        assert stats_of(renamed, ints.schema)["minValues"] == {"y": "a"}  # no x in that file
        assert stats_of(millis)["maxValues"] == {"x": "1970-01-01T00:00:00.005", "y": "b"}
        assert stats_of(ints, ints.schema, partition_by=["y"])["minValues"] == {"x": 2}
        assert stats_of(ints, ints.schema, stats_config=StatsConfig(num_indexed_cols=1))["maxValues"] == {"x": 5}


def test_read_footer_gives_each_segment_its_own_arrow_schema() -> None:
    # Schemas are converted once per footer schema; string and large_string share a Parquet
    # schema and differ only in the stored Arrow schema, other metadata only in key-values.
    small = pa.table({"s": pa.array(["a"], pa.string())})
    large = pa.table({"s": pa.array(["a"], pa.large_string())})
    tagged = small.replace_schema_metadata({"origin": "test"})
    for _ in range(2):
        assert read_footer(parquet_bytes(small), 1)[1].field("s").type == pa.string()
        assert read_footer(parquet_bytes(large), 1)[1].field("s").type == pa.large_string()
        assert read_footer(parquet_bytes(tagged), 1)[1].metadata == {b"origin": b"test"}
        assert read_footer(parquet_bytes(small), 1)[1].metadata is None
        ints = pa.table({"s": pa.array([1], pa.int64())})  # no key-values at all: the Parquet schema decides
        assert read_footer(parquet_bytes(small, store_schema=False), 1)[1].field("s").type == pa.string()
        assert read_footer(parquet_bytes(ints, store_schema=False), 1)[1].field("s").type == pa.int64()
    with pytest.raises(SegmentDecodeError, match="footer holds 1 rows"):
        read_footer(parquet_bytes(small), 2)


def test_stats_match_what_delta_rs_writes(tmp_path: Path) -> None:
    rng = random.Random(7)
    base = dt.datetime(2023, 3, 4, 5, 6, 7, tzinfo=UTC)
    struct = pa.struct([("a", pa.int32()), ("b", pa.string())])

    def column(make: Any, arrow_type: pa.DataType | None = None, nulls: float = 0.0) -> pa.Array:
        return pa.array([make() if rng.random() >= nulls else None for _ in range(200)], arrow_type)

    data = pa.table(
        {
            "i16": column(lambda: rng.randint(-300, 300), pa.int16(), nulls=0.1),
            "i64": column(lambda: rng.randint(-(2**50), 2**50), pa.int64()),
            "s": column(lambda: rng.choice(["", "abc", "zz", "Ärger", "日本"]), nulls=0.2),
            "d": column(lambda: dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(-9000, 9000))),
            "ts": column(
                lambda: base + dt.timedelta(milliseconds=rng.randint(-(10**9), 10**9)), pa.timestamp("us", "UTC")
            ),
            "ntz": column(lambda: dt.datetime(2001, 2, 3) + dt.timedelta(milliseconds=rng.randint(0, 10**10))),
            "dec": column(lambda: D(rng.randint(-(10**8), 10**8)) / 100, pa.decimal128(10, 2)),
            "b": column(lambda: rng.random() > 0.5),
            "st": column(lambda: {"a": rng.randint(0, 9), "b": rng.choice(["x", None])}, struct),
        }
    )
    write_deltalake(str(tmp_path), data)
    log = (tmp_path / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    theirs = json.loads(next(json.loads(line)["add"]["stats"] for line in log if '"add"' in line), parse_float=D)
    ours = json.loads(_stats.data_file_stats(parquet_bytes(data), data.schema), parse_float=D)

    def normalized(stats: dict[str, Any]) -> dict[str, Any]:
        for key in ("minValues", "maxValues"):  # delta-rs writes timestamp_ntz as 'YYYY-MM-DD HH:MM:SS.fff'
            stats[key]["ntz"] = dt.datetime.fromisoformat(stats[key]["ntz"])
        return stats

    assert normalized(ours) == normalized(theirs)


def test_stats_give_correct_answers_to_filtered_reads(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema(
        [
            ("i", pa.int64()),
            ("s", pa.string()),
            ("d", pa.date32()),
            ("t", pa.timestamp("us", "UTC")),
            ("dec", pa.decimal128(12, 3)),
            ("st", pa.struct([("a", pa.int32())])),
        ]
    )
    table = _rs.create_table(uri, schema, partition_by=[])
    rng = random.Random(11)
    parts = []

    def column(lo: int, make: Any, arrow_type: pa.DataType | None = None, nulls: float = 0.0) -> pa.Array:
        values = [make(rng.randint(lo, lo + 60)) if rng.random() >= nulls else None for _ in range(30)]
        return pa.array(values, arrow_type)

    for n in range(6):  # files over overlapping ranges, with nulls and sub-millisecond timestamps
        lo = n * 40
        part = pa.table(
            {
                "i": column(lo, lambda v: v, pa.int64(), nulls=0.1),
                "s": column(lo, lambda v: f"k{v:04d}"),
                "d": column(lo, lambda v: dt.date(2020, 1, 1) + dt.timedelta(days=v)),
                "t": column(lo, lambda v: v * 1_000_000 + rng.randint(0, 999), pa.timestamp("us", "UTC")),
                "dec": column(lo, lambda v: D(v * 1000 + rng.randint(0, 999)) / 1000, pa.decimal128(12, 3)),
                "st": column(lo, lambda v: {"a": v}, schema.field("st").type),
            }
        )
        parts.append(part)
        commit(table, [add_file(uri, f"part-{n}.parquet", part, schema)], app=n)
    everything = pa.concat_tables(parts)
    dataset = DeltaTable(uri).to_pyarrow_dataset()
    # Probe right at every file's bounds, where a bound off by one value or one millisecond
    # would skip a file that holds matching rows.
    probes: dict[tuple[str, ...], set[Any]] = {}
    for part in parts:
        for path, values in [((name,), part.column(name)) for name in ("i", "s", "d", "t", "dec")] + [
            (("st", "a"), pc.struct_field(part.column("st"), "a"))
        ]:
            bounds = pc.min_max(values).values()
            probes.setdefault(path, set()).update(bound for bound in bounds if bound.is_valid)
    for t_bound in list(probes[("t",)]):
        for delta_us in (-1, 1, 999):
            probes[("t",)].add(pa.scalar(t_bound.value + delta_us, t_bound.type))
    checked = 0
    for path, values in probes.items():
        for value in values:
            for op in ("equal", "less", "less_equal", "greater", "greater_equal"):
                expr = getattr(pc, op)(ds.field(*path), value)
                got = dataset.to_table(filter=expr).sort_by("t")
                assert got == everything.filter(expr).sort_by("t"), str(expr)
                checked += 1
    assert checked > 300
    null_expr = ds.field("i").is_null()
    assert dataset.to_table(filter=null_expr).num_rows == everything.filter(null_expr).num_rows > 0
    pivot = next(v for v in parts[2].column("i").to_pylist() if v is not None)
    sql = QueryBuilder().register("t", DeltaTable(uri)).execute(f"select count(*) as n from t where i = {pivot}")
    assert pa.table(sql.read_all()).column("n")[0].as_py() == pc.sum(pc.equal(everything["i"], pivot)).as_py()


def test_delta_rs_does_skip_files_by_stats(tmp_path: Path) -> None:
    """The filtered-read test above means something: deliberately wrong stats lose rows."""
    schema = pa.schema([("x", pa.int64())])
    table = _rs.create_table(str(tmp_path), schema, partition_by=[])
    good = add_file(str(tmp_path), "a.parquet", pa.table({"x": pa.array([5, 6], pa.int64())}), schema)
    lying = DataFile(good.path, good.size, '{"numRecords":2,"minValues":{"x":100},"maxValues":{"x":200}}')
    commit(table, [lying])
    reread = DeltaTable(str(tmp_path))
    assert reread.to_pyarrow_dataset().to_table(filter=ds.field("x") == 5).num_rows == 0
    assert reread.to_pyarrow_table(filters=[("x", "=", 5)]).num_rows == 0
    assert reread.to_pyarrow_table().num_rows == 2


# --- commits ----------------------------------------------------------------------------------


def test_segment_committed_raw_reads_back_identically(tmp_path: Path) -> None:
    uri = str(tmp_path)
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "name": ["a", None, "ç"],
            "at": pa.array([1, 2, None], pa.timestamp("us", "UTC")),
            "day": pa.array([dt.date(2024, 2, 29), None, dt.date(1900, 1, 1)]),
            "price": pa.array([D("1.10"), None, D("-3.00")], pa.decimal128(9, 2)),
            "tags": pa.array([["x"], [], None], pa.list_(pa.string())),
            "attrs": pa.array([[("k", 1.5)], None, []], pa.map_(pa.string(), pa.float64())),
            "nested": pa.array([{"a": 1, "b": [True]}, None, {"a": None, "b": None}]),
        }
    )
    value = segment(data)
    full = pq.read_table(pa.BufferReader(value))  # user columns + __parka_key/_timestamp/_headers
    table = _rs.create_table(uri, full.schema, partition_by=[])
    target = _rs.arrow_schema(table)
    size = _storage.write_data_file(uri, "seg/0001.parquet", value)
    file = DataFile("seg/0001.parquet", size, _stats.data_file_stats(value, target), tags={"offset": "17"})
    version = _rs.commit_add_files(table, [file], txns={"app-0": 17}, schema=full.schema)
    assert version == 1 == table.version()
    assert (tmp_path / "seg" / "0001.parquet").read_bytes() == value  # byte for byte
    back = DeltaTable(uri).to_pyarrow_table()
    assert back.to_pylist() == full.cast(target).to_pylist()
    assert _rs.txn_version(table, "app-0") == 17
    assert _rs.referenced_files(table) == {"seg/0001.parquet"}


def test_reserved_columns_outside_the_table_are_ignored(tmp_path: Path) -> None:
    uri = str(tmp_path)
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    value = segment(data)
    table = _rs.create_table(uri, data.schema, partition_by=[])
    size = _storage.write_data_file(uri, "s.parquet", value)
    file_schema = pq.read_schema(pa.BufferReader(value))
    _rs.commit_add_files(table, [DataFile("s.parquet", size, "{}")], txns={"a": 0}, schema=file_schema)
    assert DeltaTable(uri).to_pyarrow_table() == data


def test_partitioned_segment_takes_partition_values_from_the_add_action(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64()), ("region", pa.string())])
    table = _rs.create_table(uri, schema, partition_by=["region"])
    data = pa.table({"x": pa.array([1, 2], pa.int64()), "region": ["eu west/1", "eu west/1"]})
    value = segment(data)  # the file keeps the partition column too
    rel = "region=eu%20west%2F1/00001.parquet"  # Hive-escaped directory name, as Spark writes it
    size = _storage.write_data_file(uri, rel, value)
    stats = _stats.data_file_stats(value, schema, partition_by=["region"])
    file = DataFile(rel, size, stats, {"region": "eu west/1"})
    _rs.commit_add_files(table, [file], txns={"a-0": 1}, schema=data.schema, partition_by=["region"])
    assert _rs.referenced_files(table) == {rel}  # the log holds it URL-encoded once more
    assert os.path.exists(tmp_path / "region=eu%20west%2F1" / "00001.parquet")
    reread = DeltaTable(uri)
    assert reread.to_pyarrow_table().sort_by("x") == data
    assert reread.to_pyarrow_table(filters=[("region", "=", "eu west/1")]).num_rows == 2
    # delta-rs reads the value from the add action, not from the copy inside the file
    other = DataFile("other.parquet", _storage.write_data_file(uri, "other.parquet", value), stats, {"region": "x"})
    commit(table, [other])
    got = DeltaTable(uri).to_pyarrow_dataset().to_table(filter=ds.field("region") == "x")
    assert got.column("region").to_pylist() == ["x", "x"]


def test_stale_handle_conflicts_instead_of_appending(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64())])
    _rs.create_table(uri, schema, partition_by=[])
    a, b = DeltaTable(uri), DeltaTable(uri)
    file_a = add_file(uri, "a.parquet", pa.table({"x": pa.array([1], pa.int64())}), schema)
    file_b = add_file(uri, "b.parquet", pa.table({"x": pa.array([2], pa.int64())}), schema)
    assert commit(a, [file_a], **{"app-0": 10}) == 1
    with pytest.raises(CommitConflict) as err:
        commit(b, [file_b], **{"app-0": 10})  # a zombie that has not seen a's commit
    assert err.value.read_version == 0
    assert _rs.referenced_files(DeltaTable(uri)) == {"a.parquet"}
    assert _rs.refresh(b) == 1
    assert _rs.txn_version(b, "app-0") == 10  # what the caller re-reads before deciding again
    assert commit(b, [file_b], **{"app-0": 11}) == 2


def test_handle_stays_at_its_own_commit(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64())])
    _rs.create_table(uri, schema, partition_by=[])
    mine, theirs = DeltaTable(uri), DeltaTable(uri)
    commit(mine, [], **{"app-0": 1})
    _rs.refresh(theirs)
    commit(theirs, [], **{"app-0": 2})  # e.g. the new owner of the partition after a rebalance
    assert mine.version() == 1
    with pytest.raises(CommitConflict):  # so the old owner cannot commit on top of it unawares
        commit(mine, [], **{"app-0": 3})


def test_the_logs_own_appends_leave_the_handle_and_answer_as_the_table_at_their_version(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64())])
    log = _rs.RsEngine().create(uri, schema, partition_by=[])
    files = [add_file(uri, f"{i}.parquet", pa.table({"x": pa.array([i], pa.int64())}), schema) for i in range(4)]
    assert log.commit_add_files([files[0]], txns={"app-0": 10}) == 1
    assert log.commit_add_files([files[1]], txns={"app-1": 20}) == 2
    assert log.refresh() == 2  # nothing newer than its own commits: a lookup of version 3, no load
    assert log.table.version() == 0  # not loaded again after its own commits
    assert (log.version(), log.txn_version("app-0"), log.txn_version("app-1"), log.txn_version("app-2")) == (
        2,
        10,
        20,
        None,
    )
    assert log.arrow_schema() == pa.schema([("x", pa.int64())])
    reread = DeltaTable(uri)
    assert (reread.version(), reread.transaction_version("app-0"), reread.transaction_version("app-1")) == (2, 10, 20)
    assert sorted(reread.to_pyarrow_table().column("x").to_pylist()) == [0, 1]

    assert log.referenced_files() == {"0.parquet", "1.parquet"}  # reads the files: loads version 2 first
    assert log.table.version() == 2
    assert log.commit_add_files([files[2]], txns={"app-0": 11}) == 3

    other = _rs.RsEngine().open(uri)
    assert other is not None and other.commit_add_files([], txns={"app-1": 21}) == 4
    with pytest.raises(CommitConflict) as err:  # another writer's commit is never stepped over
        log.commit_add_files([files[3]], txns={"app-0": 12})
    assert err.value.read_version == 3
    assert (log.refresh(), log.txn_version("app-0"), log.txn_version("app-1")) == (4, 11, 21)
    assert log.commit_add_files([files[3]], txns={"app-0": 12}) == 5
    log.add_columns([pa.field("y", pa.string())])  # a delta-rs commit: at the log's version + 1
    assert log.version() == 6 and log.arrow_schema().names == ["x", "y"]
    log.commit_add_files([], txns={"app-0": 13})
    log.checkpoint()
    assert json.loads((tmp_path / "_delta_log" / "_last_checkpoint").read_text())["version"] == 7


def test_the_logs_cleanup_past_its_own_appends_is_a_newer_table_and_is_loaded_afresh(tmp_path: Path) -> None:
    """The log's cleanup deletes commits a checkpoint covers: those between the handle and the
    log's own last append (then the handle is opened afresh at that version), and the log's own
    last commit (then a later version exists, whether or not the next commit's file is there)."""
    uri, schema = str(tmp_path), pa.schema([("x", pa.int64())])
    log = _rs.RsEngine().create(uri, schema, partition_by=[])
    for offset in range(3):
        log.commit_add_files(
            [add_file(uri, f"{offset}.parquet", pa.table({"x": [offset]}), schema)], txns={"a": offset}
        )
    DeltaTable(uri).create_checkpoint()  # at version 3
    cleanup = [tmp_path / "_delta_log" / f"{v:020d}.json" for v in (1, 2)]
    for commit in cleanup:
        commit.unlink()
    assert log.referenced_files() == {"0.parquet", "1.parquet", "2.parquet"}  # from the checkpoint
    assert log.commit_add_files([], txns={"a": 3}) == 4

    other = DeltaTable(uri)
    other.alter.set_table_properties({"delta.checkpointInterval": "100"})  # version 5
    other.create_checkpoint()
    for v in (3, 4, 5):
        (tmp_path / "_delta_log" / f"{v:020d}.json").unlink()  # version 5's file too: a checkpoint has it
    assert log.refresh() == 5
    assert (log.txn_version("a"), log.configuration()["delta.checkpointInterval"]) == (3, "100")
    assert log.commit_add_files([], txns={"a": 4}) == 6


def test_the_handle_falls_no_more_than_its_bound_behind_the_logs_own_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_rs, "MAX_APPENDS_AHEAD", 3)
    log = _rs.RsEngine().create(str(tmp_path), pa.schema([("x", pa.int64())]), partition_by=[])
    handle_versions = []
    for offset in range(7):
        log.commit_add_files([], txns={"app-0": offset})
        handle_versions.append(log.table.version())
    assert handle_versions == [0, 0, 3, 3, 3, 6, 6]
    assert (log.version(), log.txn_version("app-0")) == (7, 6)


def test_delta_rs_with_retries_detects_only_same_app_id_conflicts(tmp_path: Path) -> None:
    """Finding: with retries > 0 delta-rs rebases blind appends, unless a txn app id repeats."""
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64())])
    _rs.create_table(uri, schema, partition_by=[])

    def attempt(table: DeltaTable, app_id: str) -> None:
        props = CommitProperties(app_transactions=[Transaction(app_id, 1)], max_commit_retries=5)
        table.create_write_transaction([], mode="append", schema=schema, commit_properties=props)

    first, same, other = DeltaTable(uri), DeltaTable(uri), DeltaTable(uri)
    attempt(first, "app-0")
    with pytest.raises(CommitFailedError, match="Concurrent transaction failed"):
        attempt(same, "app-0")
    attempt(other, "app-1")  # rebased silently onto version 1
    assert DeltaTable(uri).version() == 2


def test_empty_commit_moves_txn_versions(tmp_path: Path) -> None:
    table = _rs.create_table(str(tmp_path), pa.schema([("x", pa.int64())]), partition_by=[])
    assert _rs.commit_add_files(table, [], txns={}, schema=None) == 0  # nothing to do: no commit
    assert _rs.commit_add_files(table, [], txns={"app-3": 41, "app-4": 7}, schema=None) == 1
    reread = DeltaTable(str(tmp_path))
    assert (reread.version(), reread.transaction_version("app-3"), reread.transaction_version("app-4")) == (1, 41, 7)
    assert reread.to_pyarrow_table().num_rows == 0


def test_commit_info_records_metadata_and_file_tags(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64())])
    table = _rs.create_table(uri, schema, partition_by=[])
    plain = add_file(uri, "a.parquet", pa.table({"x": pa.array([1], pa.int64())}), schema)
    tagged = DataFile(plain.path, plain.size, plain.stats, tags={"topic": "t", "partition": "0", "offset": "5"})
    _rs.commit_add_files(table, [tagged], txns={"a": 5}, schema=schema, commit_info={"parka.app_id": "a"})
    info = DeltaTable(uri).history(1)[0]
    assert info["parka.app_id"] == "a"
    assert info[FILE_TAGS_KEY] == {"a.parquet": {"topic": "t", "partition": "0", "offset": "5"}}


def test_commit_refuses_files_the_table_cannot_take(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64()), ("p", pa.string())])
    table = _rs.create_table(uri, schema, partition_by=["p"])
    ok = DataFile("p=a/f.parquet", 1, "{}", {"p": "a"})
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"schema": pa.schema([("x", pa.int64()), ("y", pa.int8())])}, SchemaMismatchError, "add it first"),
        ({"schema": pa.schema([("x", pa.int32())])}, SchemaMismatchError, "table has type"),
        ({"schema": pa.schema([("x", pa.uint64())])}, SchemaMismatchError, "unsigned"),
        ({"partition_by": []}, SchemaMismatchError, "partitioned by"),
        ({"files": [DataFile("../f.parquet", 1, "{}", {"p": "a"})]}, ValueError, "relative"),
        ({"files": [DataFile("_delta_log/f.parquet", 1, "{}", {"p": "a"})]}, ValueError, "relative"),
        ({"files": [DataFile("f.parquet", 1, "{}", {})]}, ValueError, "partition values"),
        ({"txns": {"a": -1}}, ValueError, "non-negative"),
    ]
    for change, error, message in cases:
        kwargs: dict[str, Any] = {"files": [ok], "txns": {"a": 1}, "schema": None, **change}
        files = kwargs.pop("files")
        with pytest.raises(error, match=message):
            _rs.commit_add_files(table, files, **kwargs)
    assert DeltaTable(uri).version() == 0


# --- schema evolution, checkpoints, dead letters ---------------------------------------------


def test_add_columns_old_files_read_nulls_new_files_read_values(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64()), ("s", pa.struct([("a", pa.int32())]))])
    table = _rs.create_table(uri, schema, partition_by=[])
    old = pa.table({"x": pa.array([1], pa.int64()), "s": pa.array([{"a": 1}], schema.field("s").type)})
    commit(table, [add_file(uri, "old.parquet", old, schema)])
    wider_s = pa.field("s", pa.struct([("a", pa.int32()), ("b", pa.string())]))
    new_fields = [pa.field("y", pa.string()), wider_s]
    assert _rs.add_columns(table, new_fields) == 2
    assert _rs.add_columns(table, new_fields) == 2  # already there: no new version
    wide = pa.schema([("x", pa.int64()), wider_s, ("y", pa.string())])
    assert _rs.arrow_schema(table) == wide
    new = pa.table({"x": pa.array([2], pa.int64()), "s": pa.array([{"a": 2, "b": "q"}], wider_s.type), "y": ["hi"]})
    _rs.commit_add_files(table, [add_file(uri, "new.parquet", new, wide)], txns={}, schema=new.schema)
    back = DeltaTable(uri).to_pyarrow_table().sort_by("x").to_pylist()
    assert back == [
        {"x": 1, "s": {"a": 1, "b": None}, "y": None},
        {"x": 2, "s": {"a": 2, "b": "q"}, "y": "hi"},
    ]


@pytest.mark.parametrize(
    ("new_field", "why"),
    [
        (pa.field("z", pa.int32(), nullable=False), "nullable"),
        (pa.field("x", pa.string()), "int64 in the table: the type changed"),
        (pa.field("X", pa.int64()), "case-insensitive"),
        (pa.field("t", pa.time64("us")), "time-of-day"),
    ],
)
def test_add_columns_rejects_what_older_files_or_delta_cannot_take(
    tmp_path: Path, new_field: pa.Field, why: str
) -> None:
    table = _rs.create_table(str(tmp_path), pa.schema([("x", pa.int64())]), partition_by=[])
    with pytest.raises(SchemaMismatchError, match=why) as err:
        _rs.add_columns(table, [new_field])
    assert err.value.field == new_field.name
    assert table.version() == 0


def test_evolve_schema_json_merges_as_add_columns_does() -> None:
    # the delta-spark engine commits this JSON itself: it must say what add_columns makes delta-rs say
    schema = pa.schema([("x", pa.int64()), ("s", pa.struct([("a", pa.int32())]))])
    text = _rules.schema_json(schema)
    assert _rules.evolve_schema_json(text, [pa.field("x", pa.int64())], widening=False) is None  # nothing missing
    wider_s = pa.field("s", pa.struct([("a", pa.int32()), ("b", pa.string())]))
    merged = _rules.evolve_schema_json(text, [pa.field("y", pa.string()), wider_s], widening=False)
    assert merged is not None
    assert _rules.arrow_schema_of_json(merged) == pa.schema([("x", pa.int64()), wider_s, ("y", pa.string())])
    with pytest.raises(SchemaMismatchError, match="type changed") as err:
        _rules.evolve_schema_json(text, [pa.field("x", pa.string())], widening=False)
    assert err.value.field == "x"


def test_nested_fields_join_through_delta_rs_old_files_read_nulls(tmp_path: Path) -> None:
    uri = str(tmp_path)
    commit_t = pa.struct([("sha", pa.string())])
    schema = pa.schema([("id", pa.int64()), ("commits", pa.list_(commit_t)), ("m", pa.map_(pa.string(), commit_t))])
    table = _rs.create_table(uri, schema, partition_by=[])
    old = pa.table({"id": [1], "commits": [[{"sha": "a"}]], "m": [[("k", {"sha": "b"})]]}, schema=schema)
    commit(table, [add_file(uri, "old.parquet", old, schema)])
    commit2 = pa.struct([("sha", pa.string()), ("msg", pa.string())])
    fields = [pa.field("commits", pa.list_(commit2)), pa.field("m", pa.map_(pa.string(), commit2))]
    assert _rs.add_columns(table, fields) == 2
    wide = pa.schema([("id", pa.int64()), *fields])
    new = pa.table({"id": [2], "commits": [[{"sha": "c", "msg": "x"}]], "m": [[("k", {"sha": "d", "msg": "y"})]]}, wide)
    _rs.commit_add_files(table, [add_file(uri, "new.parquet", new, wide)], txns={}, schema=new.schema)
    back = DeltaTable(uri).to_pyarrow_table().sort_by("id").to_pylist()
    assert back == [
        {"id": 1, "commits": [{"sha": "a", "msg": None}], "m": [("k", {"sha": "b", "msg": None})]},
        {"id": 2, "commits": [{"sha": "c", "msg": "x"}], "m": [("k", {"sha": "d", "msg": "y"})]},
    ]


def test_a_widening_records_its_type_change_as_delta_spark_does() -> None:
    text = _rules.schema_json(pa.schema([("id", pa.int32()), ("xs", pa.list_(pa.int16()))]))
    merged = _rules.evolve_schema_json(
        text, [pa.field("id", pa.int64()), pa.field("xs", pa.list_(pa.int32()))], widening=True
    )
    assert merged is not None
    fields = {f["name"]: f for f in json.loads(merged)["fields"]}
    assert fields["id"]["type"] == "long"
    assert fields["id"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    changes = fields["xs"]["metadata"]["delta.typeChanges"]
    assert changes == [{"fromType": "short", "toType": "integer", "fieldPath": "element"}]


@pytest.mark.parametrize(
    ("configuration", "field_metadata", "names"),
    [
        ({"delta.columnMapping.mode": "name"}, [], "delta.columnMapping.mode=name"),
        ({"delta.columnMapping.mode": "id"}, [], "delta.columnMapping.mode=id"),
        ({"delta.constraints.positive": "x > 0"}, [], "delta.constraints.positive"),
        ({}, [{"delta.generationExpression": "x + 1"}], "delta.generationExpression"),
    ],
)
def test_tables_raw_files_cannot_join_are_refused_naming_the_property(
    configuration: dict[str, str], field_metadata: list[dict[str, str]], names: str
) -> None:
    with pytest.raises(CommitError, match=names.replace(".", r"\.")) as err:
        _rules.check_writable(configuration, field_metadata)
    assert "--mode decode" in str(err.value)
    _rules.check_writable({"delta.columnMapping.mode": "none", "delta.enableRowTracking": "true"}, [{}])


def test_checkpoint_is_written_and_readable(tmp_path: Path) -> None:
    uri = str(tmp_path)
    schema = pa.schema([("x", pa.int64())])
    table = _rs.create_table(uri, schema, partition_by=[])
    commit(table, [add_file(uri, "a.parquet", pa.table({"x": pa.array([1], pa.int64())}), schema)], app=4)
    _rs.checkpoint(table)
    assert (tmp_path / "_delta_log" / "00000000000000000001.checkpoint.parquet").exists()
    reread = DeltaTable(uri)
    assert (reread.transaction_version("app"), reread.to_pyarrow_table().num_rows) == (4, 1)


# --- files ------------------------------------------------------------------------------------


def test_write_data_file_is_complete_and_leaves_no_temporary(tmp_path: Path) -> None:
    data = os.urandom(100_000)
    assert _storage.write_data_file(str(tmp_path), "p=1/q=2/f.parquet", data) == len(data)
    assert (tmp_path / "p=1" / "q=2" / "f.parquet").read_bytes() == data
    assert os.listdir(tmp_path / "p=1" / "q=2") == ["f.parquet"]
    _storage.write_data_file(f"file://{tmp_path}", "p=1/q=2/f.parquet", b"again")  # a retry replaces it
    assert (tmp_path / "p=1" / "q=2" / "f.parquet").read_bytes() == b"again"


def test_failed_write_leaves_neither_file_nor_temporary(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_bytes(b"")  # a non-empty directory: the rename must fail
    with pytest.raises(CommitError, match="cannot write"):
        _storage.write_data_file(str(tmp_path), "taken", b"data")
    assert sorted(os.listdir(tmp_path)) == ["taken"]


@pytest.mark.parametrize(
    "bad", ["", "/abs/f.parquet", "../f.parquet", "a/./f", "a//f", "_delta_log/0.json", "s3://b/f"]
)
def test_file_paths_must_be_clean_and_relative(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="relative"):
        _storage.write_data_file(str(tmp_path), bad, b"x")
    with pytest.raises(ValueError, match="relative"):
        _storage.delete_files(str(tmp_path), [bad])


def test_list_and_delete_files(tmp_path: Path) -> None:
    uri = str(tmp_path)
    _rs.create_table(uri, pa.schema([("x", pa.int64())]), partition_by=[])
    before = time.time()
    _storage.write_data_file(uri, "a.parquet", b"12345")
    _storage.write_data_file(uri, "p=1/b.parquet", b"1")
    (tmp_path / "p=1" / ".c.parquet.abc.tmp").write_bytes(b"half")  # left by a crash
    listed = _storage.list_files(uri)
    assert [(f.path, f.size) for f in listed] == [("a.parquet", 5), ("p=1/.c.parquet.abc.tmp", 4), ("p=1/b.parquet", 1)]
    assert all(f.mtime is not None and f.mtime.tzinfo is not None and f.mtime.timestamp() >= before - 2 for f in listed)
    assert [f.path for f in _storage.list_files(uri, prefix_dirs=["p=1/"])] == [
        "p=1/.c.parquet.abc.tmp",
        "p=1/b.parquet",
    ]
    assert _storage.list_files(uri, prefix_dirs=["missing"]) == []
    _storage.delete_files(uri, ["a.parquet", "p=1/.c.parquet.abc.tmp", "never-existed.parquet"])
    assert [f.path for f in _storage.list_files(uri)] == ["p=1/b.parquet"]
    assert (tmp_path / "_delta_log").is_dir()


def test_a_write_whose_temporary_file_was_deleted_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by test_parka_ingest_and_spark_ingest_at_the_same_time_on_one_table: parka ingest's
    orphan cleanup deleted the temporary file of a Spark task writing offsets it had committed
    first, the task's rename failed, and the whole Spark batch with it."""
    real_replace = os.replace
    renamed: list[str] = []

    def cleanup_first(src: str, dst: str) -> None:  # another writer's cleanup, once
        renamed.append(src)
        if len(renamed) == 1:
            os.unlink(src)
        real_replace(src, dst)

    monkeypatch.setattr(_storage.os, "replace", cleanup_first)
    assert _storage.write_data_file(str(tmp_path), "p=1/a.parquet", b"data") == 4
    assert (tmp_path / "p=1" / "a.parquet").read_bytes() == b"data"
    assert len(renamed) == 2 and renamed[0] != renamed[1]  # a new temporary name
    assert not list(tmp_path.rglob("*.tmp"))

    def cleanup_always(src: str, dst: str) -> None:
        renamed.append(src)
        os.unlink(src)
        real_replace(src, dst)

    renamed.clear()
    monkeypatch.setattr(_storage.os, "replace", cleanup_always)
    with pytest.raises(CommitError, match=r"cannot write data file p=1/b\.parquet"):
        _storage.write_data_file(str(tmp_path), "p=1/b.parquet", b"data")
    assert len(renamed) == _storage.LOCAL_WRITE_ATTEMPTS
    assert not list(tmp_path.rglob("*.tmp")) and not (tmp_path / "p=1" / "b.parquet").exists()


def test_the_object_store_takes_the_storage_options_delta_rs_gets() -> None:
    """Data files go through obstore built from delta-rs' storage options: any key
    case, client keys with or without their aws_ prefix, delta-rs' own keys left to delta-rs."""
    options = {
        "AWS_ACCESS_KEY_ID": "id",
        "aws_secret_access_key": "secret",
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://localhost:9000",
        "aws_allow_http": "true",
        "timeout": "30s",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "false",
    }
    store = _storage._root("s3a://bucket/tables/t/", options).store
    assert store is not None
    assert (store.prefix, store.config["bucket"]) == ("tables/t", "bucket")
    assert store.config["access_key_id"] == "id"
    assert store.config["endpoint"] == "http://localhost:9000"
    assert store.config["conditional_put"] == "etag"  # parka's safe default
    assert store.client_options == {"allow_http": "true", "timeout": "30s"}
    assert _storage._root(".", options).store is None  # a local table stays plain files


def test_object_store_is_the_client_parkas_files_go_through() -> None:
    """The public handle on that store (a benchmark's floor shares it): the very object the file
    layer uses for the same URI and options, and a clear error for a local path."""
    options = {"aws_access_key_id": "id", "aws_secret_access_key": "secret", "aws_region": "us-east-1"}
    store = object_store("s3://bucket/tables/t", options)
    assert store is _storage._root("s3://bucket/tables/t", options).store
    assert (store.prefix, store.config["bucket"]) == ("tables/t", "bucket")
    with pytest.raises(ValueError, match="local path"):
        object_store(".", options)


def test_s3_tables_get_conditional_puts_and_unsafe_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_S3_ALLOW_UNSAFE_RENAME", raising=False)
    monkeypatch.delenv("AWS_S3_LOCKING_PROVIDER", raising=False)
    given = {"aws_region": "us-east-1"}
    safe = storage_options_for("s3://b/t", given)
    assert safe == {"aws_region": "us-east-1", "aws_conditional_put": "etag"}
    assert storage_options_for("s3://b/t", safe) == safe
    assert storage_options_for("s3a://b/t", {"AWS_CONDITIONAL_PUT": "etag"}) == {"AWS_CONDITIONAL_PUT": "etag"}
    assert storage_options_for("az://c/t", given) == given  # only S3 needs it
    assert storage_options_for("/tmp/t", given) == given
    assert "aws_conditional_put" in storage_options_for("s3://b/t", {"aws_s3_allow_unsafe_rename": "false"})
    for key, value in [
        ("aws_conditional_put", "disabled"),
        ("AWS_S3_ALLOW_UNSAFE_RENAME", "true"),
        ("aws_s3_locking_provider", "dynamodb"),
    ]:
        with pytest.raises(ConfigError, match=f"'{key}'"):
            storage_options_for("s3://b/t", {key: value})
    monkeypatch.setenv("AWS_S3_ALLOW_UNSAFE_RENAME", "true")  # delta-rs reads it from the environment too
    with pytest.raises(ConfigError, match="AWS_S3_ALLOW_UNSAFE_RENAME"):
        storage_options_for("s3://b/t", {})
    with pytest.raises(ConfigError, match="aws_conditional_put"):
        IngestSettings("t", "s3://b/t", {}, "app", storage_options={"aws_conditional_put": "none"})
    monkeypatch.delenv("AWS_S3_ALLOW_UNSAFE_RENAME")
    settings = IngestSettings("t", "s3://b/t", {}, "app", storage_options={"aws_region": "x"})
    assert settings.storage_options["aws_conditional_put"] == "etag"


def test_make_durable_flushes_a_local_table_and_fails_loudly_on_a_missing_one(tmp_path: Path) -> None:
    from parka.lake._storage import CommitError as _CommitError
    from parka.lake._storage import make_durable, write_data_file

    write_data_file(str(tmp_path), "a.parquet", b"x" * 10)
    make_durable(str(tmp_path))  # no error: the directory exists and syncfs succeeds
    with pytest.raises(_CommitError, match="cannot open table directory"):
        make_durable(str(tmp_path / "missing"))


def test_a_table_with_type_widening_is_refused_by_delta_rs_naming_it(tmp_path: Path) -> None:
    """delta-rs 1.6 can neither read nor write the typeWidening table feature (what delta-spark
    writes for ``delta.enableTypeWidening``): parka ingest says so instead of failing later."""
    schema = _rules.schema_json(pa.schema([("id", pa.int64())]))
    actions = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening"],
                      "writerFeatures": ["typeWidening"]}},
        {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                      "partitionColumns": [], "configuration": {"delta.enableTypeWidening": "true"},
                      "createdTime": 0}},
    ]  # fmt: skip
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    with pytest.raises(CommitError, match=r"delta-rs 1\.6 can neither read nor write a table with type widening"):
        _rs.open_table(str(tmp_path))


def test_a_relaxed_top_level_column_becomes_nullable_a_nested_one_is_refused_by_delta_rs(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("x", pa.int64(), False), pa.field("s", pa.struct([pa.field("a", pa.int32(), False)]))])
    table = _rs.create_table(str(tmp_path), schema, partition_by=[])
    _rs.add_columns(table, [pa.field("x", pa.int64())])
    assert _rs.arrow_schema(table).field("x").nullable
    with pytest.raises(SchemaMismatchError, match="delta-rs cannot make a field inside a struct nullable") as err:
        _rs.add_columns(table, [pa.field("s", pa.struct([("a", pa.int32())]))])
    assert err.value.field == "s.a"


def test_a_commit_writes_no_checkpoint_and_cleans_no_log_the_checkpoint_does(tmp_path: Path) -> None:
    """delta-rs' post-commit hooks are off: its checkpoint every delta.checkpointInterval versions
    and its log cleanup after every commit (a listing of the whole log) would sit on the commit
    path. parka's checkpoint (written beside the commits) cleans the expired log up instead."""
    uri = str(tmp_path)
    _rs.create_table(uri, pa.schema([("x", pa.int64())]), partition_by=[])
    table = DeltaTable(uri)
    table.alter.set_table_properties(
        {"delta.checkpointInterval": "2", "delta.logRetentionDuration": "interval 0 seconds"}
    )
    log = tmp_path / "_delta_log"
    before = {p.name for p in log.iterdir()}  # (the property change's own commit is delta-rs' alone)
    for n in range(5):
        commit(table, [], **{"app-0": n})
    new = {p.name for p in log.iterdir()} - before
    assert sorted(new) == [f"{v:020d}.json" for v in range(2, 7)]  # no checkpoint (delta-rs: every 2nd)
    assert before <= {p.name for p in log.iterdir()}  # and no log cleanup after the commits
    _rs.checkpoint(table)
    assert [p.name for p in log.glob("*.checkpoint.parquet")] == [f"{table.version():020d}.checkpoint.parquet"]
    assert sorted(p.name for p in log.glob("*.json")) == [f"{table.version():020d}.json"]  # the older ones expired
    assert DeltaTable(uri).transaction_version("app-0") == 4
