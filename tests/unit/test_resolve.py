"""The shim's reader schema (``consumer/_resolve.py``): a decoded segment resolved by name at
any depth, Avro-style."""

from __future__ import annotations

import pyarrow as pa
import pytest
from parka.consumer._resolve import resolve_table

WRITER = pa.schema(
    [
        ("id", pa.int32()),
        ("actor", pa.struct([("id", pa.int64()), ("login", pa.string()), ("gone", pa.string())])),
        ("commits", pa.list_(pa.struct([("sha", pa.string())]))),
        ("labels", pa.map_(pa.string(), pa.struct([("color", pa.string())]))),
        ("__parka_key", pa.binary()),
    ]
)
READER = pa.schema(
    [
        ("id", pa.int64()),
        ("actor", pa.struct([("login", pa.string()), ("site_admin", pa.bool_())])),
        ("commits", pa.list_(pa.struct([("sha", pa.string()), ("msg", pa.string())]))),
        ("labels", pa.map_(pa.string(), pa.struct([("color", pa.string()), ("default", pa.bool_())]))),
        ("org", pa.struct([("login", pa.string())])),
    ]
)
ROWS = [
    {
        "id": 1,
        "actor": {"id": 1, "login": "a", "gone": "x"},
        "commits": [{"sha": "s"}],
        "labels": [("k", {"color": "red"})],
        "__parka_key": b"k1",
    },
    {"id": 2, "actor": None, "commits": None, "labels": None, "__parka_key": None},
    {"id": 3, "actor": {"id": 3, "login": "c", "gone": None}, "commits": [], "labels": [], "__parka_key": b"k3"},
]


def test_fields_resolve_by_name_at_any_depth_reserved_columns_pass_through() -> None:
    table = pa.Table.from_pylist(ROWS, schema=WRITER).slice(1)  # a cursor's offset into its segment
    got = resolve_table(pa.concat_tables([pa.Table.from_pylist(ROWS[:1], schema=WRITER), table]), READER)
    assert got.column_names == [*READER.names, "__parka_key"]
    assert got.to_pylist() == [
        {
            "id": 1,
            "actor": {"login": "a", "site_admin": None},
            "commits": [{"sha": "s", "msg": None}],
            "labels": [("k", {"color": "red", "default": None})],
            "org": None,
            "__parka_key": b"k1",
        },
        {"id": 2, "actor": None, "commits": None, "labels": None, "org": None, "__parka_key": None},
        {
            "id": 3,
            "actor": {"login": "c", "site_admin": None},
            "commits": [],
            "labels": [],
            "org": None,
            "__parka_key": b"k3",
        },
    ]


def test_a_type_with_no_safe_cast_names_the_field() -> None:
    reader = pa.schema([("actor", pa.struct([("login", pa.int64())]))])
    with pytest.raises(ValueError, match=r"field 'actor\.login' is string in the segment, int64 in the reader schema"):
        resolve_table(pa.Table.from_pylist(ROWS, schema=WRITER), reader)
