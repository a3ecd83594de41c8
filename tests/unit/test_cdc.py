"""``--cdc debezium``'s unwrapping of Debezium's envelope and its reading of the flattened shape."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from parka.lake._cdc import Debezium

from parka.errors import SegmentError

ROW = pa.struct([("id", pa.int64()), ("name", pa.string())])
SOURCE = pa.struct([("db", pa.string()), ("lsn", pa.int64()), ("ts_ms", pa.int64())])


def envelope(events: list[tuple[str, dict | None, dict | None, int]], *, source: pa.DataType = SOURCE) -> pa.Table:
    """Debezium envelopes (op, before, after, lsn) with the record key column."""
    return pa.table(
        {
            "before": pa.array([e[1] for e in events], ROW),
            "after": pa.array([e[2] for e in events], ROW),
            "source": pa.array([{"db": "shop", "lsn": e[3], "ts_ms": 1000 + e[3]} for e in events], source),
            "op": pa.array([e[0] for e in events], pa.string()),
            "ts_ms": pa.array([2000 + e[3] for e in events], pa.int64()),
            "__parka_key": pa.array([b"%d" % ((e[2] or e[1] or {}).get("id") or 0) for e in events], pa.binary()),
        }
    )


def test_an_envelope_becomes_the_rows_with_the_op_the_sequence_and_the_record_key() -> None:
    events = [
        ("r", None, {"id": 1, "name": "a"}, 10),
        ("c", None, {"id": 2, "name": "b"}, 11),
        ("u", {"id": 1, "name": "a"}, {"id": 1, "name": "a2"}, 12),
        ("d", {"id": 2, "name": "b"}, None, 13),
    ]
    out = Debezium().unwrap(envelope(events))
    assert out is not None
    assert out.column_names == ["id", "name", "__op", "__source_lsn", "__parka_key"]
    assert out.column("id").to_pylist() == [1, 2, 1, 2]  # the delete's row is its before
    assert out.column("name").to_pylist() == ["a", "b", "a2", "b"]
    assert out.column("__op").to_pylist() == ["r", "c", "u", "d"]
    assert out.column("__source_lsn").to_pylist() == [10, 11, 12, 13]
    assert Debezium.delete_column(out.schema) == "__op"
    assert Debezium.deleting(out.column("__op"), "__op").tolist() == [False, False, False, True]
    assert Debezium.default_sequence(out.schema) == "__source_lsn"


def test_without_an_lsn_the_sequence_is_ts_ms_and_cdc_fields_keeps_more_metadata() -> None:
    no_lsn = pa.struct([("db", pa.string()), ("ts_ms", pa.int64())])
    table = envelope([("c", None, {"id": 1, "name": "a"}, 5)], source=no_lsn)
    out = Debezium(fields=("source.db", "source.ts_ms")).unwrap(table)
    assert out is not None
    assert out.column_names == ["id", "name", "__op", "__source_db", "__source_ts_ms", "__ts_ms", "__parka_key"]
    assert out.column("__ts_ms").to_pylist() == [2005]
    assert Debezium.default_sequence(out.schema) == "__ts_ms"
    with pytest.raises(SegmentError, match="the envelope's source has no field 'lsn2'"):
        Debezium(fields=("source.lsn2",)).unwrap(table)
    with pytest.raises(ValueError, match="not an envelope field"):
        Debezium(fields=("after.id",))


def test_a_flattened_event_lands_as_it_is_and_its_deletes_are_read_from_deleted() -> None:
    flat = pa.table({"id": [1, 2], "__deleted": ["false", "true"], "__source_lsn": [3, 4]})
    assert Debezium().unwrap(flat) is None
    assert Debezium.delete_column(flat.schema) == "__deleted"
    assert Debezium.deleting(flat.column("__deleted"), "__deleted").tolist() == [False, True]
    flags = pa.chunked_array([pa.array([True, None, False])])
    assert Debezium.deleting(flags, "__deleted").tolist() == [True, False, False]
    assert Debezium.default_sequence(flat.schema) == "__source_lsn"
    assert Debezium.default_sequence(pa.schema([("id", pa.int64()), ("__deleted", pa.bool_())])) is None
    with pytest.raises(SegmentError, match="__deleted is int64, not a boolean or a string"):
        Debezium().unwrap(pa.table({"id": [1], "__deleted": [0]}))


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([("t", None, None, 1)], r"op 't' \(a truncate names no key"),
        ([("c", None, {"id": 1, "name": "a"}, 1), ("m", None, None, 2)], "op 'm'; an upsert table takes c, r, u and d"),
        ([(None, None, {"id": 1, "name": "a"}, 1)], "a null op"),
        ([("u", {"id": 1, "name": "a"}, None, 1)], "1 c, r or u event"),
    ],
)
def test_events_that_name_no_row_are_refused_naming_why(events: list, message: str) -> None:
    with pytest.raises(SegmentError, match=message):
        Debezium().unwrap(envelope(events))


def test_shapes_it_cannot_read_are_refused_naming_the_columns() -> None:
    with pytest.raises(SegmentError, match=r"neither a Debezium envelope.*columns: id, name"):
        Debezium().unwrap(pa.table({"id": [1], "name": ["a"]}))
    other = pa.struct([("id", pa.int32())])
    mixed = pa.table({"op": ["c"], "before": pa.array([None], other), "after": pa.array([{"id": 1, "name": "a"}], ROW)})
    with pytest.raises(SegmentError, match=r"before \(struct<id: int32>\) and after .* differ"):
        Debezium().unwrap(mixed)
    clash = pa.table(
        {"op": ["c"], "after": pa.array([{"__op": "x"}], pa.struct([("__op", pa.string())])), "ts_ms": [1]}
    )
    with pytest.raises(SegmentError, match="a column '__op'"):
        Debezium().unwrap(clash)


def test_a_delete_without_before_gets_a_row_of_nulls_and_a_null_sequence_is_refused() -> None:
    table = envelope([("d", None, None, 7)])
    out = Debezium().unwrap(table)
    assert out is not None and out.column("id").to_pylist() == [None]
    assert np.array_equal(Debezium.deleting(out.column("__op"), "__op"), [True])
    nulls = table.set_column(2, "source", pa.array([{"db": "x", "lsn": None, "ts_ms": 1}], SOURCE))
    with pytest.raises(SegmentError, match=r"source\.lsn, the events' sequence, is null in 1 event"):
        Debezium().unwrap(nulls)
