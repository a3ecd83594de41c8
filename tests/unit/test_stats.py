"""Add-action statistics from Parquet footers, per type, against what delta-spark's writer puts
in the log for the same rows, and the table properties that choose them. The ``SPARK_*``
values were recorded from delta-spark 4.0.0 (``df.write.format("delta")``, one file per write);
``tests/integration/spark/test_spark_stats.py`` compares with a live delta-spark."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder
from parka.lake import DataFile, StatsConfig, _stats, _storage
from parka.lake.delta import _rs

from parka.errors import ConfigError

NAN, INF = float("nan"), float("inf")


def parquet_bytes(table: pa.Table, **kwargs: Any) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue().to_pybytes()


def raw_stats(table: pa.Table, schema: pa.Schema | None = None, **kwargs: Any) -> str:
    write = {k: kwargs.pop(k) for k in ("row_group_size",) if k in kwargs}
    return _stats.data_file_stats(parquet_bytes(table, **write), schema or table.schema, **kwargs)


def stats_of(table: pa.Table, schema: pa.Schema | None = None, **kwargs: Any) -> dict[str, Any]:
    return dict(json.loads(raw_stats(table, schema, **kwargs)))


# --- floats ----------------------------------------------------------------------------------

SPARK_FLOATS = [  # (columns, delta-spark's stats JSON for them)
    (
        {"f": [1.5, NAN, 3.0], "g": [1.0, 2.0, 0.5]},
        '{"numRecords":3,"minValues":{"f":1.5,"g":0.5},"maxValues":{"f":"NaN","g":2.0},"nullCount":{"f":0,"g":0}}',
    ),
    (
        {"f": [INF, 1.0, -INF], "g": [-0.0, 0.0, -0.0]},
        '{"numRecords":3,"minValues":{"f":"-Infinity","g":-0.0},"maxValues":{"f":"Infinity","g":-0.0},'
        '"nullCount":{"f":0,"g":0}}',
    ),
    (
        {"f": [NAN, NAN, NAN], "g": [0.0, -0.0, 0.0]},
        '{"numRecords":3,"minValues":{"f":"NaN","g":0.0},"maxValues":{"f":"NaN","g":0.0},"nullCount":{"f":0,"g":0}}',
    ),
    (
        {"f": pa.array([0.1, 1e-45, 3.4e38], pa.float32()), "g": pa.array([1.1, 2.2, 1.5], pa.float32())},
        '{"numRecords":3,"minValues":{"f":1.4E-45,"g":1.1},"maxValues":{"f":3.4E38,"g":2.2},"nullCount":{"f":0,"g":0}}',
    ),
]


@pytest.mark.parametrize(("columns", "spark"), SPARK_FLOATS)
def test_float_min_is_delta_sparks_and_a_pyarrow_max_is_left_out(columns: dict[str, Any], spark: str) -> None:
    ours, theirs = stats_of(pa.table(columns)), json.loads(spark)
    assert ours["nullCount"] == theirs["nullCount"]
    assert ours["maxValues"] == {}  # pyarrow leaves NaN out of its max: it may hide one
    for name, spark_min in theirs["minValues"].items():
        if spark_min == "NaN":  # all NaN: pyarrow writes no bounds, so neither do we
            assert name not in ours["minValues"]
        else:  # -0.0 == 0.0: Spark keeps whichever came first
            assert ours["minValues"][name] == spark_min


def test_float_renderings_are_what_delta_spark_writes() -> None:
    data = pa.table(
        {
            "f32": pa.array([0.1, 1e-45, 3.4e38], pa.float32()),
            "inf": [-INF, 1.0, None],
            "zero": [0.0, 1.0, 2.0],
            "widened": pa.array([0.1, 0.5, 0.7], pa.float32()),  # a float32 file column of a double table column
        }
    )
    table = pa.schema([*list(data.schema)[:3], pa.field("widened", pa.float64())])
    raw = raw_stats(data, table)
    # float32 as Java's Float.toString writes it (not 1.401298464324817e-45); strings for what JSON lacks
    assert raw.startswith('{"numRecords":3,"minValues":{"f32":1.4e-45,"inf":"-Infinity","zero":-0.0,')
    assert json.loads(raw)["minValues"]["widened"] == 0.10000000149011612  # what a double reader sees
    narrowed = stats_of(pa.table({"x": [0.5]}), pa.schema([("x", pa.float32())]))
    assert narrowed["minValues"] == {}  # double values are no float32 bounds


def test_float_bounds_over_row_groups_are_nan_aware() -> None:
    groups = pa.table({"x": [3.0, NAN, NAN, -1.0, None, None]})  # [3, NaN] [NaN, -1] [None, None]
    assert stats_of(groups, row_group_size=2) == {
        "numRecords": 6,
        "minValues": {"x": -1.0},
        "maxValues": {},
        "nullCount": {"x": 2},
    }
    all_nan_group = pa.table({"x": [1.0, 2.0, NAN, NAN]})  # [1, 2] [NaN, NaN]: the second has no bounds
    assert stats_of(all_nan_group, row_group_size=2)["minValues"] == {}


def test_float_stats_never_change_delta_rs_answers(tmp_path: Path) -> None:
    # The same files twice: with parka's stats, and with none, which delta-rs cannot skip by.
    schema = pa.schema([("x", pa.float64()), ("n", pa.int64())])
    parts = [
        pa.table({"x": [NAN, 1.0], "n": [0, 1]}, schema=schema),
        pa.table({"x": [-INF, 5.0], "n": [2, 3]}, schema=schema),
        pa.table({"x": [2.0, 3.0], "n": [4, 5]}, schema=schema),
        pa.table({"x": [-0.0, None], "n": [6, 7]}, schema=schema),
        pa.table({"x": [INF, 7.5], "n": [8, 9]}, schema=schema),
    ]
    tables = {}
    for name, with_stats in (("stats", True), ("bare", False)):
        uri = str(tmp_path / name)
        table = _rs.create_table(uri, schema, partition_by=[])
        files = []
        for i, part in enumerate(parts):
            data = parquet_bytes(part)
            size = _storage.write_data_file(uri, f"p{i}.parquet", data)
            stats = _stats.data_file_stats(data, schema) if with_stats else '{"numRecords":2}'
            files.append(DataFile(f"p{i}.parquet", size, stats))
        _rs.commit_add_files(table, files, txns={}, schema=None)
        tables[name] = DeltaTable(uri)
    assert pa.table(tables["stats"].get_add_actions(flatten=True)).column("min.x")[1].as_py() == -INF  # parsed

    def answer(name: str, where: str) -> list[int]:
        sql = QueryBuilder().register("t", tables[name]).execute(f"select n from t where {where} order by n")
        return [row["n"] for row in pa.table(sql.read_all()).to_pylist()]

    checked = 0
    for value in ("'-Infinity'", "-1.0", "0.0", "1.0", "2.5", "5.0", "7.5", "'Infinity'", "'NaN'"):
        for op in ("=", "<", "<=", ">", ">="):
            where = f"x {op} cast({value} as double)"
            assert answer("stats", where) == answer("bare", where), where
            checked += bool(answer("bare", where))
    assert checked > 20


# --- strings ---------------------------------------------------------------------------------

SPARK_STRINGS = [  # (column, delta-spark's min and max; None: no max)
    (["a" * 40, "b" * 31 + "ÿ" * 5, "c"], "a" * 32, "c"),
    (["😀" * 40, "x" * 32 + "\x7f" * 3, "x" * 32 + "~z"], "x" * 32, "😀" * 16 + "\U0010ffff"),
    (["y" * 31 + "😀😀", "y"], "y", "y" * 31 + "😀\U0010ffff"),
    (["😀" * 40, "😀" * 41], "😀" * 32, "😀" * 16 + "\U0010ffff"),  # min: code points, max: UTF-16 units
    (["z" * 40, "z" * 33], "z" * 32, "z" * 32 + "\x7f"),
    (["\U0010ffff" * 40, "a"], "a", None),  # no tie-breaker fits in 64 units
    (["a" * 32 + "\U0010ffff" * 3 + "b", "a"], "a", "a" * 32 + "\U0010ffff" * 3 + "\x7f"),
]


@pytest.mark.parametrize(("values", "spark_min", "spark_max"), SPARK_STRINGS)
def test_strings_are_cut_as_delta_spark_cuts_them(values: list[str], spark_min: str, spark_max: str | None) -> None:
    stats = stats_of(pa.table({"s": values}))
    assert stats["minValues"] == {"s": spark_min}
    assert stats["maxValues"] == ({} if spark_max is None else {"s": spark_max})
    assert min(v.encode() for v in values) >= spark_min.encode()  # still bounds, in UTF-8 byte order
    assert spark_max is None or max(v.encode() for v in values) <= spark_max.encode()


def test_string_prefix_length_is_the_tables() -> None:
    data = pa.table({"s": ["abcdefgh", "abcdefgz"]})
    short = stats_of(data, stats_config=StatsConfig.from_properties({"delta.dataSkippingStringPrefixLength": "4"}))
    assert (short["minValues"], short["maxValues"]) == ({"s": "abcd"}, {"s": "abcd\x7f"})
    none = stats_of(data, stats_config=StatsConfig(string_prefix_length=0))
    assert (none["minValues"], none["maxValues"]) == ({"s": ""}, {})  # Spark's substring(min, 0, 0): ''


def test_binary_gets_no_bounds_as_in_delta_spark() -> None:
    assert stats_of(pa.table({"b": [b"a", b"z"]})) == {
        "numRecords": 2,
        "minValues": {},
        "maxValues": {},
        "nullCount": {"b": 0},
    }


# --- the table's properties ------------------------------------------------------------------


def test_stats_config_reads_the_properties_as_delta_spark_does() -> None:
    assert StatsConfig.from_properties({}) == StatsConfig(32, None, 32)
    assert StatsConfig.from_properties({"other": "x", "delta.dataSkippingNumIndexedCols": "+3"}).num_indexed_cols == 3
    assert StatsConfig.from_properties({"delta.dataSkippingNumIndexedCols": "-1"}).num_indexed_cols == -1
    spec = "s.y, `we.ird`,C , `a``b`.X,a . b"
    assert StatsConfig.from_properties({"delta.dataSkippingStatsColumns": spec}).stats_columns == (
        ("s", "y"),
        ("we.ird",),
        ("c",),
        ("a`b", "x"),
        ("a", "b"),
    )
    assert StatsConfig.from_properties({"delta.dataSkippingStatsColumns": " "}).stats_columns == ()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("delta.dataSkippingNumIndexedCols", "-2"),
        ("delta.dataSkippingNumIndexedCols", " 4"),
        ("delta.dataSkippingNumIndexedCols", "x"),
        ("delta.dataSkippingNumIndexedCols", "2147483648"),
        ("delta.dataSkippingStringPrefixLength", "-1"),
        ("delta.dataSkippingStatsColumns", "a,"),
        ("delta.dataSkippingStatsColumns", "123"),
        ("delta.dataSkippingStatsColumns", "a-b"),
        ("delta.dataSkippingStatsColumns", "ä"),
        ("delta.dataSkippingStatsColumns", "a..b"),
        ("delta.dataSkippingStatsColumns", "``"),
    ],
)  # each refused by delta-spark 4.0.0 too
def test_bad_property_values_are_refused_naming_the_property(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(key)) as info:
        StatsConfig.from_properties({key: value})
    assert (info.value.key, info.value.value) == (key, value)


def test_stats_columns_replace_the_count_rule() -> None:
    data = pa.table(
        {
            "a": [1, 2],
            "s": pa.array([{"x": 1, "y": "q"}, {"x": 2, "y": "r"}]),
            "c": [3.0, 4.0],
            "we.ird": [5, 6],
            "p": ["k", "k"],
        }
    )

    def chosen(spec: str, **kwargs: Any) -> dict[str, Any]:
        properties = {"delta.dataSkippingStatsColumns": spec, "delta.dataSkippingNumIndexedCols": "1"}
        return stats_of(data, stats_config=StatsConfig.from_properties(properties), **kwargs)

    spark = json.loads(  # delta-spark, for 's.y, `we.ird`,C' (the double max left out here: pyarrow)
        '{"numRecords":2,"minValues":{"s":{"y":"q"},"c":3.0,"we.ird":5},"maxValues":{"s":{"y":"r"},"c":4.0,'
        '"we.ird":6},"nullCount":{"s":{"y":0},"c":0,"we.ird":0}}'
    )
    del spark["maxValues"]["c"]
    assert chosen("s.y, `we.ird`,C") == spark
    assert chosen("S")["nullCount"] == {"s": {"x": 0, "y": 0}}  # a struct: all its leaves
    assert chosen("nothing, a.b, s.x.deeper")["nullCount"] == {}  # no such columns: ignored
    assert chosen("p, a", partition_by=["p"])["nullCount"] == {"a": 0}
    assert chosen("")["nullCount"] == {}
