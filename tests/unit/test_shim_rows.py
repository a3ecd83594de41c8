"""The shim's Arrow -> Python conversion equals pyarrow's own, and positions are worked out right."""

from __future__ import annotations

import datetime as dt
import decimal
import gc
from typing import Any

import pyarrow as pa
import pytest
from parka.consumer import SegmentTable
from parka.consumer._rows import column_values, rows, segment_records
from parka.consumer._segments import Cursor, position_after
from parka.consumer._shim import ParquetConsumer

from parka.errors import ConfigError
from parka.message import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, SegmentRecords
from parka.segment import build_segment_table

UTC = dt.timezone.utc


def _mixed_table() -> pa.Table:
    """Every kind of column the conversion treats apart, with nulls, repeats and two chunks."""
    n = 12
    hours = [dt.datetime(2024, 3, 31, i % 3, tzinfo=UTC) if i % 4 else None for i in range(n)]
    first = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "name": pa.array([None if i % 5 == 0 else f"n{i}" for i in range(n)], pa.string()),
            "ratio": pa.array([i / 3 for i in range(n)], pa.float64()),
            "hour": pa.array(hours, pa.timestamp("us", tz="UTC")),
            "paris": pa.array(hours, pa.timestamp("ms", tz="Europe/Paris")),
            "naive": pa.array([h if h is None else h.replace(tzinfo=None) for h in hours], pa.timestamp("us")),
            "day": pa.array([dt.date(2024, 1, 1 + i % 2) for i in range(n)], pa.date32()),
            "tod": pa.array([dt.time(i % 24, 30) for i in range(n)], pa.time64("us")),
            "wait": pa.array([dt.timedelta(seconds=i % 2) for i in range(n)], pa.duration("ms")),
            "price": pa.array(
                [None if i % 3 == 0 else decimal.Decimal(i % 2).scaleb(-2) for i in range(n)], pa.decimal128(9, 2)
            ),
            "attrs": pa.array([[("a", i), ("b", None)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
            "tags": pa.array([[f"t{j}" for j in range(i % 3)] for i in range(n)], pa.list_(pa.string())),
            "nested": pa.array(
                [{"maps": [[("k", i)]] * (i % 2)} for i in range(n)],
                pa.struct([("maps", pa.list_(pa.map_(pa.string(), pa.int64())))]),
            ),
            "place": pa.array(
                [None if i % 4 == 1 else {"at": hours[i], "label": f"p{i}", "inner": {"x": i}} for i in range(n)],
                pa.struct(
                    [
                        ("at", pa.timestamp("us", tz="UTC")),
                        ("label", pa.string()),
                        ("inner", pa.struct([("x", pa.int64())])),
                    ]
                ),
            ),
            "empty": pa.array([{}] * n, pa.struct([])),
        }
    )
    return pa.concat_tables([first, first.slice(3, 5)])


def test_rows_equal_pyarrows_to_pylist() -> None:
    table = _mixed_table()
    assert table.column("hour").num_chunks == 2
    assert rows(table) == table.to_pylist(maps_as_pydicts="strict")


def test_temporal_and_decimal_values_are_converted_once_per_distinct_value() -> None:
    column = pa.chunked_array(
        [pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC)] * 4 + [None], pa.timestamp("us", tz="UTC"))]
    )
    values = column_values(column)
    assert values == column.to_pylist()
    assert values[0] is values[3]  # shared, immutable
    assert values[4] is None


def test_a_table_without_columns_gives_one_empty_dict_per_row() -> None:
    out = rows(pa.table({"x": [1, 2, 3]}).drop_columns(["x"]))
    assert out == [{}, {}, {}]
    assert out[0] is not out[1]


def test_a_map_with_duplicate_keys_raises() -> None:
    table = pa.table({"m": pa.array([[("a", 1), ("a", 2)]], pa.map_(pa.string(), pa.int64()))})
    with pytest.raises(KeyError, match="duplicate"):
        rows(table)


def test_segment_records_from_a_start_index_keep_the_segments_indexes() -> None:
    data = pa.table({"id": list(range(5))})
    table = build_segment_table(
        data, [f"k{i}".encode() for i in range(5)], [None, 11, None, 13, 14], [[("h", b"1")]] * 5
    )
    records = segment_records(
        table, 2, topic="t", partition=3, offset=40, segment_timestamp=(TIMESTAMP_LOG_APPEND_TIME, 9)
    )
    assert isinstance(records, SegmentRecords)
    assert len(records) == 5
    got = records.records(2, 5)
    assert [r.index() for r in got] == [2, 3, 4]
    assert [r.value() for r in got] == [{"id": 2}, {"id": 3}, {"id": 4}]
    assert [r.key() for r in got] == [b"k2", b"k3", b"k4"]
    assert [r.timestamp() for r in got] == [
        (TIMESTAMP_LOG_APPEND_TIME, 9),
        (TIMESTAMP_CREATE_TIME, 13),
        (TIMESTAMP_CREATE_TIME, 14),
    ]
    assert [r.headers() for r in got] == [[("h", b"1")]] * 3
    assert (got[0].topic(), got[0].partition(), got[0].offset(), got[0].segment_records()) == ("t", 3, 40, 5)


def test_cursor_positions_are_record_precise_and_carry_the_leader_epoch() -> None:
    table = pa.table({"id": list(range(3))})
    cursor = Cursor("t", 0, 7, table=table, epoch=4)
    assert cursor.position() == (7, "", 4)
    cursor.next = 2
    assert cursor.position() == (7, "parka:1:7:2", 4)
    cursor.next = 3
    assert cursor.position() == (8, "", 4)
    assert Cursor("t", 0, 7, table=table, start=5).position() == (8, "", None)  # resumed past the end
    assert Cursor("t", 0, 7, epoch=0).position() == (8, "", 0)  # a plain message


def test_position_after_a_record_or_a_table_keeps_its_leader_epoch() -> None:
    records = SegmentRecords(topic="t", partition=0, offset=7, values=[{}, {}, {}], leader_epoch=2)
    assert position_after(records.record(0)) == (7, "parka:1:7:1", 2)
    assert position_after(records.record(2)) == (8, "", 2)
    assert records.record(1).leader_epoch() == 2

    def table(index: int, rows_: int) -> SegmentTable:
        data = pa.table({"id": list(range(rows_))})
        return SegmentTable(data, topic="t", partition=0, offset=7, index=index, segment_records=3, timestamp=(0, 0))

    assert position_after(table(1, 2)) == (8, "", None)
    assert position_after(table(0, 2)) == (7, "parka:1:7:2", None)
    assert len(table(1, 2)) == 2
    assert table(1, 2).error() is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("enable.auto.commit", "maybe"),
        ("enable.auto.offset.store", 2),
        ("auto.commit.interval.ms", -1),
        ("auto.commit.interval.ms", "soon"),
    ],
)
def test_bad_commit_settings_are_rejected_by_name(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ParquetConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", key: value})


def test_any_column_name_becomes_the_same_key() -> None:
    names = ["a'b", 'q"', "back\\slash", "new\nline", "__import__('os').system('false')", "", "é ü", "x", "x"]
    table = pa.Table.from_arrays([pa.array([i, i + 1]) for i in range(len(names))], names=names)
    assert rows(table) == table.to_pylist()
    assert list(rows(table)[0]) == list(dict.fromkeys(names))


def test_many_columns() -> None:
    table = pa.table({f"c{i}": [i, -i] for i in range(600)})
    assert rows(table) == table.to_pylist()


def test_distinct_temporal_values_and_nested_maps_equal_pyarrows_to_pylist() -> None:
    """Mostly distinct timestamps and dates go through numpy; maps and lists of structs are
    converted child by child: the values are still pyarrow's, nulls, slices and bounds included."""
    n = 40
    moments = [None if i % 7 == 3 else dt.datetime(2024, 1, 1, 0, 0, i, i, tzinfo=UTC) for i in range(n)]
    table = pa.table(
        {
            "utc": pa.array(moments, pa.timestamp("us", tz="UTC")),
            "ms": pa.array(moments, pa.timestamp("ms", tz="+00:00")),
            "naive": pa.array([m and m.replace(tzinfo=None) for m in moments], pa.timestamp("s")),
            "ns": pa.array(moments, pa.timestamp("ns", tz="UTC")),
            "tokyo": pa.array(moments, pa.timestamp("us", tz="Asia/Tokyo")),
            "edges": pa.array(
                [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)] * (n // 2), pa.timestamp("us")
            ),
            "day": pa.array([None if i % 5 == 0 else dt.date(2024, 1, 1 + i % 28) for i in range(n)], pa.date32()),
            "maps": pa.array(
                [None if i % 6 == 0 else [[(f"k{j}", j) for j in range(i % 3)], None] for i in range(n)],
                pa.list_(pa.map_(pa.string(), pa.int64())),
            ),
            "commits": pa.array(
                [[{"sha": f"s{i}", "at": moments[i], "labels": [("a", "b")]}] * (i % 2) for i in range(n)],
                pa.list_(
                    pa.struct(
                        [
                            ("sha", pa.string()),
                            ("at", pa.timestamp("us", tz="UTC")),
                            ("labels", pa.map_(pa.string(), pa.string())),
                        ]
                    )
                ),
            ),
        }
    )
    for part in (table, table.slice(5, 20), pa.concat_tables([table.slice(0, 9), table.slice(13)])):
        assert rows(part) == part.to_pylist(maps_as_pydicts="strict")
    assert rows(table)[0]["utc"].tzinfo == table.column("utc")[0].as_py().tzinfo


def test_a_map_with_a_duplicate_key_raises_as_pyarrow_does() -> None:
    column = pa.chunked_array([pa.array([[("a", 1), ("a", 2)]], pa.map_(pa.string(), pa.int64()))])
    with pytest.raises(KeyError, match="duplicate key was 'a'"):
        column_values(column)


def test_records_are_built_with_the_collector_paused_and_it_runs_again_after(monkeypatch: pytest.MonkeyPatch) -> None:
    import parka.consumer._rows as rows_module

    import parka.message as message_module

    seen: list[bool] = []

    def watched(column: pa.ChunkedArray) -> list[Any]:
        seen.append(gc.isenabled())
        return column_values(column)

    class Watched(message_module.RecordMessage):
        def __init__(self, segment: SegmentRecords, index: int) -> None:
            seen.append(gc.isenabled())
            super().__init__(segment, index)

    monkeypatch.setattr(rows_module, "column_values", watched)
    monkeypatch.setattr(message_module, "RecordMessage", Watched)
    assert gc.isenabled()
    assert rows(pa.table({"a": pa.array([1, 2], pa.int64())})) == [{"a": 1}, {"a": 2}]
    records = SegmentRecords(topic="t", partition=0, offset=0, values=[{"a": 1}, {"a": 2}])
    assert [m.value() for m in records.records()] == [{"a": 1}, {"a": 2}]
    assert seen == [False, False, False] and gc.isenabled()
