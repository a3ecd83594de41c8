"""The one rule of schema evolution at any depth (``parka.evolution``), both engines' input."""

from __future__ import annotations

import pyarrow as pa
import pytest

from parka.evolution import TYPE_WIDENING_KEY, merge_schemas, widening_enabled

ACTOR = pa.struct([("id", pa.int64()), ("login", pa.string())])
AUTHOR = pa.struct([("name", pa.string())])
COMMIT = pa.struct([("sha", pa.string()), ("author", AUTHOR)])
V1 = pa.schema(
    [
        ("id", pa.int32()),
        ("actor", ACTOR),
        ("commits", pa.list_(COMMIT)),
        ("labels", pa.map_(pa.string(), pa.struct([("color", pa.string())]))),
        ("tags", pa.list_(pa.string())),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
)


def _evolved() -> pa.Schema:
    actor = pa.struct([("id", pa.int64()), ("login", pa.string()), ("site_admin", pa.bool_())])
    author = pa.struct([("name", pa.string()), ("email", pa.string())])
    commit = pa.struct([("sha", pa.string()), ("author", author)])
    labels = pa.map_(pa.string(), pa.struct([("color", pa.string()), ("default", pa.bool_())]))
    return pa.schema(
        [
            ("id", pa.int64()),
            ("actor", actor),
            ("commits", pa.list_(commit)),
            ("labels", labels),
            ("tags", pa.list_(pa.string())),
            ("at", pa.timestamp("ms", tz="UTC")),
            ("org", pa.struct([("login", pa.string())])),
        ]
    )


def test_new_fields_join_at_any_depth_and_are_named_by_path() -> None:
    merge = merge_schemas(V1, _evolved(), widening=True)
    assert not merge.problems
    assert {(c.path, c.kind) for c in merge.changes} == {
        ("id", "widened"),
        ("actor.site_admin", "added"),
        ("commits.element.author.email", "added"),
        ("labels.value.default", "added"),
        ("org", "added"),
    }
    assert merge.schema.names == [*V1.names, "org"]  # the table's order, new columns after
    assert merge.schema.field("id").type == pa.int64()
    assert merge.schema.field("at").type == pa.timestamp("us", tz="UTC")  # units alike: the table's kept
    email = merge.schema.field("commits").type.value_type.field("author").type.field("email")
    assert email.nullable


def test_an_older_segment_is_a_subset_and_fits_without_changes() -> None:
    table = merge_schemas(V1, _evolved(), widening=True).schema
    older = merge_schemas(table.with_metadata({TYPE_WIDENING_KEY: "true"}), V1)
    assert not older.problems and not older.changes  # narrower id: written before the widening


def test_without_type_widening_a_wider_integer_is_refused_naming_both_types() -> None:
    merge = merge_schemas(V1, _evolved())
    assert [(p.path, p.segment, p.table) for p in merge.problems] == [("id", pa.int64(), pa.int32())]
    assert "delta.enableTypeWidening" in str(merge.problems[0])
    assert widening_enabled(V1.with_metadata({TYPE_WIDENING_KEY: "true"}))


@pytest.mark.parametrize(
    ("segment", "path", "words"),
    [
        (pa.schema([("actor", pa.struct([("id", pa.int16()), ("login", pa.string())]))]), "actor.id", "narrowing"),
        (pa.schema([("actor", pa.struct([("id", pa.string())]))]), "actor.id", "type changed"),
        (pa.schema([("commits", pa.list_(pa.struct([("sha", pa.int64())])))]), "commits.element.sha", "type changed"),
        (pa.schema([("labels", pa.map_(pa.int32(), pa.struct([])))]), "labels.key", "key type"),
        (pa.schema([("actor", pa.string())]), "actor", "a leaf cannot replace a struct"),
        (pa.schema([("actor", pa.struct([pa.field("new", pa.int8(), False)]))]), "actor.new", "must be nullable"),
    ],
)
def test_what_cannot_join_is_refused_by_path(segment: pa.Schema, path: str, words: str) -> None:
    problems = merge_schemas(V1, segment, widening=words != "narrowing").problems
    assert [p.path for p in problems] == [path]
    assert words in str(problems[0]) and f"'{path}'" in str(problems[0])


def test_a_field_vanished_from_a_not_null_struct_field_is_refused_nullability_relaxes() -> None:
    table = pa.schema([pa.field("actor", pa.struct([pa.field("id", pa.int64(), False), ("login", pa.string())]))])
    gone = merge_schemas(table, pa.schema([("actor", pa.struct([("login", pa.string())]))]))
    assert [(p.path, p.segment, p.table) for p in gone.problems] == [("actor.id", None, pa.int64())]
    relaxed = merge_schemas(table, pa.schema([("actor", pa.struct([("id", pa.int64()), ("login", pa.string())]))]))
    assert [(c.path, c.kind) for c in relaxed.changes] == [("actor.id", "relaxed")]
    assert relaxed.schema.field("actor").type.field("id").nullable


@pytest.mark.parametrize(
    ("narrow", "wide", "ok"),
    [
        (pa.int8(), pa.int64(), True),
        (pa.float32(), pa.float64(), True),
        (pa.decimal128(10, 2), pa.decimal128(12, 4), True),
        (pa.decimal128(10, 2), pa.decimal128(10, 4), False),  # fewer digits before the point
        (pa.int64(), pa.float64(), False),
    ],
)
def test_delta_type_widening(narrow: pa.DataType, wide: pa.DataType, ok: bool) -> None:
    merge = merge_schemas(pa.schema([("x", narrow)]), pa.schema([("x", wide)]), widening=True)
    assert (not merge.problems) is ok
