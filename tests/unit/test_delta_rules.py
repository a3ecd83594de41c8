"""parka.lake.delta._rules converts schemas without deltalake; delta-rs is the reference it
must match, so that both engines give a new table the same column types."""

import json

import pyarrow as pa
import pytest
from deltalake import Schema as DeltaSchema
from parka.lake.delta import arrow_schema_of_json, check_schema, schema_json

from parka.errors import CommitError, SchemaMismatchError

SCHEMAS = [
    pa.schema([pa.field("a", pa.int8(), nullable=False, metadata={"k": "v", "n": "[1,2]"})]),
    pa.schema(
        [
            (n, t)
            for n, t in [
                ("b", pa.int16()),
                ("c", pa.int32()),
                ("d", pa.int64()),
                ("e", pa.float32()),
                ("f", pa.float64()),
                ("g", pa.string()),
                ("h", pa.large_string()),
                ("i", pa.binary()),
                ("j", pa.large_binary()),
                ("k", pa.bool_()),
                ("l", pa.date32()),
                ("m", pa.timestamp("us")),
                ("n", pa.timestamp("us", "UTC")),
                ("o", pa.decimal128(10, 2)),
                ("u", pa.timestamp("ms")),
                ("v", pa.dictionary(pa.int32(), pa.string())),
                ("y", pa.string_view()),
                ("z", pa.date64()),
                ("aa", pa.timestamp("ms", "UTC")),
            ]
        ]
    ),
    pa.schema(
        [
            ("p", pa.list_(pa.int32())),
            ("q", pa.list_(pa.field("x", pa.int32(), nullable=False))),
            ("r", pa.map_(pa.string(), pa.int64())),
            (
                "s",
                pa.struct(
                    [pa.field("t", pa.string(), nullable=False), ("w", pa.large_list(pa.struct([("z", pa.int8())])))]
                ),
            ),
            ("mm", pa.map_(pa.string(), pa.list_(pa.float64()))),
        ]
    ),
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_schema_json_is_delta_rs_conversion(schema: pa.Schema) -> None:
    assert json.loads(schema_json(schema)) == json.loads(DeltaSchema.from_arrow(schema).to_json())


@pytest.mark.parametrize("schema", SCHEMAS)
def test_arrow_schema_of_json_is_delta_rs_conversion(schema: pa.Schema) -> None:
    text = DeltaSchema.from_arrow(schema).to_json()
    ours = arrow_schema_of_json(text)
    theirs = pa.schema(DeltaSchema.from_json(text).to_arrow())
    assert ours.equals(theirs, check_metadata=False)
    assert [f.metadata for f in ours] == [f.metadata for f in theirs]


def test_metadata_values_that_are_not_strings_come_back_as_their_json() -> None:
    text = json.dumps(
        {
            "type": "struct",
            "fields": [
                {
                    "name": "a",
                    "type": "long",
                    "nullable": True,
                    "metadata": {"delta.typeChanges": [{"fromType": "integer", "toType": "long"}], "n": 5, "s": "str"},
                }
            ],
        }
    )
    ours = arrow_schema_of_json(text)
    theirs = pa.schema(DeltaSchema.from_json(text).to_arrow())
    assert ours.field("a").metadata == theirs.field("a").metadata
    assert ours.field("a").metadata[b"delta.typeChanges"] == b'[{"fromType":"integer","toType":"long"}]'


def test_types_delta_cannot_store_are_refused_with_the_field() -> None:
    with pytest.raises(SchemaMismatchError, match="unsigned") as info:
        schema_json(pa.schema([("ok", pa.int8()), ("s", pa.struct([("u", pa.uint32())]))]))
    assert info.value.field == "s.u"
    with pytest.raises(SchemaMismatchError, match="case-insensitive"):
        check_schema(pa.schema([("A", pa.int8()), ("a", pa.int8())]))


def test_json_that_is_not_a_schema_is_a_commit_error() -> None:
    with pytest.raises(CommitError, match="unknown Delta type 'variant'"):
        arrow_schema_of_json('{"type":"struct","fields":[{"name":"v","type":"variant","nullable":true,"metadata":{}}]}')
    with pytest.raises(CommitError, match="cannot read the table schema"):
        arrow_schema_of_json("not json")
