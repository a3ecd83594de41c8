from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from parka.errors import RecordError, SchemaError
from parka.records import RecordConverter, compile_validator, records_to_table

UTC = dt.timezone.utc


def f(name: str, arrow_type: pa.DataType, nullable: bool = False) -> pa.Field:
    return pa.field(name, arrow_type, nullable=nullable)


SCHEMA = pa.schema(
    [
        f("flag", pa.bool_()),
        f("i32", pa.int32()),
        f("i64", pa.int64()),
        f("u8", pa.uint8(), nullable=True),
        f("f32", pa.float32()),
        f("f64", pa.float64(), nullable=True),
        f("s", pa.string()),
        f("opt", pa.string(), nullable=True),
        f("blob", pa.binary()),
        f("fixed", pa.binary(4), nullable=True),
        f("amount", pa.decimal128(6, 2), nullable=True),
        f("ts", pa.timestamp("us", tz="UTC"), nullable=True),
        f("local_ts", pa.timestamp("us"), nullable=True),
        f("day", pa.date32(), nullable=True),
        f("t_ms", pa.time32("ms"), nullable=True),
        f("t_us", pa.time64("us"), nullable=True),
        f("tags", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=True),
        f("attrs", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)), nullable=True),
        f("color", pa.dictionary(pa.int32(), pa.string()), nullable=True),
        f(
            "a",
            pa.struct(
                [
                    f(
                        "b",
                        pa.list_(pa.field("element", pa.struct([f("c", pa.int32()), f("d", pa.string(), True)]))),
                    )
                ]
            ),
            nullable=True,
        ),
    ]
)

VALID: dict[str, Any] = {"flag": True, "i32": 1, "i64": 2, "f32": 1.5, "s": "x", "blob": b"\x00\x01"}


def check(**changes: Any) -> dict[str, Any]:
    return compile_validator(SCHEMA)({**VALID, **changes})


def reject(record: Any) -> RecordError:
    with pytest.raises(RecordError) as info:
        compile_validator(SCHEMA)(record)
    return info.value


def test_valid_record_is_copied_and_builds_a_table() -> None:
    record = dict(VALID)
    out = compile_validator(SCHEMA)(record)
    assert out == record
    assert out is not record
    record["s"] = "changed later"
    assert out["s"] == "x"
    table = records_to_table([out], SCHEMA)
    assert table.schema.equals(SCHEMA)
    assert table.to_pylist()[0]["u8"] is None  # absent nullable field
    assert table.to_pylist()[0]["s"] == "x"


def test_record_that_is_not_a_mapping() -> None:
    error = reject([("flag", True)])
    assert error.field is None
    assert "mapping" in str(error)


@pytest.mark.parametrize("name", ["flag", "i32", "s", "blob"])
def test_missing_required_field(name: str) -> None:
    record = {k: v for k, v in VALID.items() if k != name}
    error = reject(record)
    assert error.field == name
    assert "missing" in str(error)
    assert str(error).startswith(f"field '{name}': ")


def test_null_required_field() -> None:
    error = reject({**VALID, "i64": None})
    assert error.field == "i64"
    assert "null" in str(error)


def test_unknown_field_is_rejected_by_name() -> None:
    error = reject({**VALID, "surprise": 1})
    assert error.field == "surprise"
    assert "unknown" in str(error)


def test_topic_is_added_by_the_caller() -> None:
    error = reject({**VALID, "i32": "1"})
    again = RecordError(error.args[0], topic="orders", field=error.field)
    assert str(again).startswith("topic 'orders', field 'i32': ")


WRONG_VALUES: list[tuple[str, Any, str]] = [
    ("i32", "1", "expected int32, got str"),
    ("i32", 1.0, "expected int32, got float"),
    ("i32", True, "expected int32, got bool"),
    ("i64", np.bool_(True), "expected int64, got bool"),
    ("i32", 2**31, "out of range for int32"),
    ("i32", -(2**31) - 1, "out of range for int32"),
    ("i64", 2**63, "out of range for int64"),
    ("u8", 256, "out of range for uint8"),
    ("u8", -1, "out of range for uint8"),
    ("flag", 1, "expected bool, got int"),
    ("f32", "1.5", "expected float, got str"),
    ("f64", decimal.Decimal("1.5"), "expected float, got Decimal"),
    ("s", b"x", "expected str, got bytes"),
    ("s", 5, "expected str, got int"),
    ("blob", "text", "expected bytes, got str"),
    ("fixed", b"abc", "exactly 4 bytes"),
    ("amount", 1.5, "expected Decimal or int"),
    ("amount", decimal.Decimal("1.005"), "more than 2 decimal places"),
    ("amount", decimal.Decimal("10000.00"), "does not fit decimal(6, 2)"),
    ("amount", 10_000, "does not fit decimal(6, 2)"),
    ("amount", decimal.Decimal("NaN"), "not a finite"),
    ("ts", "2024-01-01", "expected datetime or int"),
    ("ts", dt.date(2024, 1, 1), "expected datetime or int"),
    ("ts", 2**63, "out of range for int64"),
    ("day", dt.datetime(2024, 1, 1), "expected a date, got datetime"),
    ("day", "2024-01-01", "expected date or int days"),
    ("day", 2**31, "out of range for date32"),
    ("t_ms", 86_400_000, "not a time of day"),
    ("t_us", -1, "not a time of day"),
    ("t_us", 1.5, "expected time or int"),
    ("tags", "abc", "expected a list, got str"),
    ("attrs", [("k", 1)], "expected a mapping for a map"),
    ("color", 3, "expected str, got int"),
    ("a", "x", "expected a mapping for a struct"),
]


@pytest.mark.parametrize(("name", "value", "message"), WRONG_VALUES)
def test_wrong_value_names_the_field(name: str, value: Any, message: str) -> None:
    error = reject({**VALID, name: value})
    assert error.field == name
    assert message in str(error)


NESTED_ERRORS: list[tuple[Any, str, str]] = [
    ({"b": [{"c": 1}, {"c": 2}, {"c": 3}, {"c": "4"}]}, "a.b[3].c", "expected int32, got str"),
    ({"b": [{"c": 1, "e": 0}]}, "a.b[0].e", "unknown field"),
    ({"b": [{"d": "x"}]}, "a.b[0].c", "missing"),
    ({"b": [{"c": 1, "d": b"x"}]}, "a.b[0].d", "expected str, got bytes"),
    ({"b": [None, 1]}, "a.b[1]", "expected a mapping for a struct, got int"),
    ({}, "a.b", "missing"),
    ({"b": "nope"}, "a.b", "expected a list"),
]


@pytest.mark.parametrize(("value", "field", "message"), NESTED_ERRORS)
def test_nested_errors_carry_the_path(value: Any, field: str, message: str) -> None:
    error = reject({**VALID, "a": value})
    assert error.field == field
    assert message in str(error)


def test_list_and_map_item_errors() -> None:
    assert reject({**VALID, "tags": ["a", None]}).field == "tags[1]"
    assert reject({**VALID, "tags": ["a", 2]}).field == "tags[1]"
    error = reject({**VALID, "attrs": {"k": "v"}})
    assert error.field == "attrs['k']"
    assert "expected int64" in str(error)
    assert reject({**VALID, "attrs": {"k": None}}).field == "attrs['k']"
    error = reject({**VALID, "attrs": {1: 2}})
    assert error.field == "attrs[1]"
    assert "bad map key" in str(error)


def test_conversions() -> None:
    some_uuid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    out = check(
        i64=np.int64(7),
        f32=3,
        f64=np.float32(0.5),
        s=some_uuid,
        blob=bytearray(b"ab"),
        amount=decimal.Decimal("1.5"),
        tags=("x", "y"),
        attrs={"k": np.int32(1)},
        flag=np.bool_(False),
    )
    assert out["i64"] == 7 and type(out["i64"]) is int
    assert out["f32"] == 3.0 and type(out["f32"]) is float
    assert out["s"] == "12345678-1234-5678-1234-567812345678"
    assert out["blob"] == b"ab" and type(out["blob"]) is bytes
    assert out["amount"] == decimal.Decimal("1.50")
    assert out["amount"].as_tuple().exponent == -2
    assert out["tags"] == ["x", "y"]
    assert out["flag"] is False
    row = records_to_table([out], SCHEMA).to_pylist()[0]
    assert row["attrs"] == [("k", 1)]
    assert row["amount"] == decimal.Decimal("1.50")


def test_decimal_accepts_exact_values() -> None:
    assert check(amount=decimal.Decimal("1234.5"))["amount"] == decimal.Decimal("1234.50")
    assert check(amount=decimal.Decimal("-9999.99"))["amount"] == decimal.Decimal("-9999.99")
    assert check(amount=decimal.Decimal("1.2300"))["amount"] == decimal.Decimal("1.23")
    assert check(amount=42)["amount"] == decimal.Decimal("42.00")


def test_timestamps_dates_and_times() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    records = [
        check(ts=dt.datetime(2024, 1, 1, 12, tzinfo=plus_two), local_ts=dt.datetime(2024, 1, 1, 12)),
        check(ts=dt.datetime(2024, 1, 1, 10), day=19_723, t_ms=1_000, t_us=dt.time(1, 2, 3)),
        check(ts=1_704_103_200_000_000, day=dt.date(2024, 1, 1), t_ms=dt.time(0, 0, 1)),
    ]
    rows = records_to_table(records, SCHEMA).to_pylist()
    instant = dt.datetime(2024, 1, 1, 10, tzinfo=UTC)
    assert [row["ts"] for row in rows] == [instant] * 3  # aware converted; naive taken as UTC; int micros
    assert rows[0]["local_ts"] == dt.datetime(2024, 1, 1, 12)
    assert rows[1]["day"] == rows[2]["day"] == dt.date(2024, 1, 1)
    assert rows[1]["t_ms"] == rows[2]["t_ms"] == dt.time(0, 0, 1)
    assert rows[1]["t_us"] == dt.time(1, 2, 3)


def test_nested_values_round_trip() -> None:
    out = check(a={"b": [{"c": 1}, None, {"c": 2, "d": "x"}]}, tags=[], attrs={})
    row = records_to_table([out], SCHEMA).to_pylist()[0]
    assert row["a"] == {"b": [{"c": 1, "d": None}, None, {"c": 2, "d": "x"}]}
    assert row["tags"] == []
    assert row["attrs"] == []


def test_unsupported_schema_type_fails_at_compile_time() -> None:
    with pytest.raises(SchemaError, match="not supported"):
        compile_validator(pa.schema([pa.field("d", pa.duration("s"))]))


def test_records_to_table_wraps_arrow_errors() -> None:
    with pytest.raises(RecordError, match="cannot convert"):
        records_to_table([{"i32": "not validated"}], pa.schema([pa.field("i32", pa.int32())]))


def test_plain_ints_for_timestamp_millis_are_epoch_millis() -> None:
    import datetime as _dt

    from parka.records import compile_validator as _compile
    from parka.records import records_to_table as _to_table
    from parka.schema import to_arrow_schema as _to_arrow

    avro = {
        "type": "record",
        "name": "T",
        "fields": [
            {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
            {"name": "opt_ms", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        ],
    }
    schema = _to_arrow(avro)
    validate = _compile(schema)
    row = validate({"ms": 1_700_000_000_123, "us": 1_700_000_000_123_456, "opt_ms": 1_700_000_000_123})
    table = _to_table([row], schema)
    when = _dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=_dt.timezone.utc)
    assert table["ms"][0].as_py() == when
    assert table["opt_ms"][0].as_py() == when
    assert table["us"][0].as_py() == when.replace(microsecond=123456)


# -- RecordConverter: the batch path must agree with the validator record for record ------------

# Time columns always take the per-record path; without them the batch path is exercised.
NO_TIME = pa.schema([fld for fld in SCHEMA if not pa.types.is_time(fld.type)])
FULL: dict[str, Any] = {
    **VALID,
    "u8": 255,
    "f64": 2,
    "opt": "o",
    "fixed": b"abcd",
    "amount": decimal.Decimal("12.5"),
    "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    "local_ts": dt.datetime(2024, 1, 2, 3, 4, 5),
    "day": dt.date(2024, 1, 2),
    "tags": ["a", "b"],
    "attrs": {"k": 1, "l": 2},
    "color": "red",
    "a": {"b": [{"c": 1}, None, {"c": 2, "d": "x"}]},
}
GOOD = [VALID, FULL, {**FULL, "a": None, "ts": 1_700_000_000_000_000, "day": 19_000, "amount": 7}]


def _expected(records: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    validate = compile_validator(schema)
    return records_to_table([validate(r) for r in records], schema)


def test_good_records_take_the_batch_path_and_equal_the_validators_table() -> None:
    converter = RecordConverter(NO_TIME)
    table = converter._fast(GOOD)  # raises if the batch path refused them
    assert table.equals(_expected(GOOD, NO_TIME))
    result = converter.convert(GOOD)
    assert result.bad == [] and result.kept is None and result.table.equals(table)


def test_datetimes_aware_and_naive_take_the_batch_path_and_equal_the_validators_table() -> None:
    """A column of datetimes alone is converted to its declared type at once: aware ones to UTC,
    naive ones as UTC, into a zoned and a local column and into coarser and finer units."""
    plus_two = dt.timezone(dt.timedelta(hours=2))
    schema = pa.schema(
        [
            f("ts", pa.timestamp("us", tz="UTC")),
            f("local_ts", pa.timestamp("us"), nullable=True),
            f("ms", pa.timestamp("ms", tz="UTC"), nullable=True),
            f("ns", pa.timestamp("ns"), nullable=True),
        ]
    )
    records = [
        {"ts": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=plus_two), "local_ts": dt.datetime(2024, 1, 2, 3)},
        {
            "ts": dt.datetime(2024, 1, 2, 1, 4, 5, 678901),
            "local_ts": None,
            "ms": dt.datetime(2024, 1, 2, 3, 4, 5, 6000),
        },
        {"ts": dt.datetime(2024, 1, 2, 1, tzinfo=UTC), "ns": dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=plus_two)},
    ]
    table = RecordConverter(schema)._fast(records)  # raises if the batch path refused them
    assert table.equals(_expected(records, schema))
    assert table["ts"][0] == table["ts"][1]  # 03:04 at +02:00 is 01:04 UTC, the naive 01:04 taken as UTC
    bad = RecordConverter(schema).convert([*records, {"ts": "2024-01-02"}, {"ts": None}])
    assert [(i, e.field) for i, e in bad.bad] == [(3, "ts"), (4, "ts")]
    assert bad.table.equals(table)


class _Repeats(dt.tzinfo):
    """A zone whose 01:00-02:00 happens twice (fold 0 at -04:00, fold 1 at -05:00), as a DST
    end does, without the tz database."""

    def utcoffset(self, when: dt.datetime | None) -> dt.timedelta:
        ambiguous = when is not None and when.hour == 1 and when.fold == 1
        return dt.timedelta(hours=-5 if ambiguous or (when is not None and when.hour > 1) else -4)

    def dst(self, when: dt.datetime | None) -> dt.timedelta:
        return dt.timedelta(0)

    def tzname(self, when: dt.datetime | None) -> str:
        return "Repeats"


def _repeating(values: list[Any], n: int = 600) -> list[Any]:
    return [values[i % len(values)] for i in range(n)]


@pytest.mark.parametrize(
    ("column", "values"),
    [
        # the hour of an event, in UTC by name, at a fixed offset and naive (taken as UTC), and nulls
        (
            "ts",
            [
                dt.datetime(2024, 1, 2, 3, tzinfo=UTC),
                dt.datetime(2024, 1, 2, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
                dt.datetime(2024, 1, 2, 4),
                None,
                dt.datetime(2024, 1, 2, 3, tzinfo=dt.timezone(dt.timedelta(hours=-1))),
            ],
        ),
        ("local_ts", [dt.datetime(2024, 1, 2, h) for h in range(5)] + [None]),
        ("day", [dt.date(2024, 1, d) for d in range(1, 8)] + [None]),
    ],
)
def test_a_column_of_repeated_datetimes_or_dates_converts_each_distinct_value_once_to_the_same_table(
    column: str, values: list[Any]
) -> None:
    records = [{**VALID, column: v} for v in _repeating(values)]
    [field] = [fld for fld in NO_TIME if fld.name == column]
    assert _repeated_path(records, field) is not None  # the path this test is about
    table = RecordConverter(NO_TIME)._fast(records)
    assert table.equals(_expected(records, NO_TIME))


def _repeated_path(records: list[dict[str, Any]], field: pa.Field) -> Any:
    from parka.records import _repeated

    return _repeated([r[field.name] for r in records], field.type)


def test_a_repeated_wall_time_its_zone_holds_twice_keeps_both_instants() -> None:
    """01:30 with fold 0 and with fold 1 in one zone are equal as Python values (a comparison in
    one zone ignores fold) but an hour apart: each row keeps its own instant."""
    zone = _Repeats()
    first, second = (dt.datetime(2024, 11, 3, 1, 30, tzinfo=zone, fold=fold) for fold in (0, 1))
    assert first == second and first.astimezone(UTC) != second.astimezone(UTC)
    records = [{**VALID, "ts": v} for v in _repeating([first, second, dt.datetime(2024, 11, 3, 3, tzinfo=zone)])]
    assert _repeated_path(records, NO_TIME.field("ts")) is None
    table = RecordConverter(NO_TIME)._fast(records)
    assert table.equals(_expected(records, NO_TIME))
    instants = table["ts"].to_pylist()[:3]
    assert instants == [first.astimezone(UTC), second.astimezone(UTC), dt.datetime(2024, 11, 3, 8, tzinfo=UTC)]


@pytest.mark.parametrize(
    "values",
    [
        [dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i) for i in range(600)],  # mostly distinct
        _repeating([1_700_000_000_000_000, 1_700_000_003_600_000]),  # ints: the plain path
        _repeating([dt.datetime(2024, 1, 1, tzinfo=UTC)], 100),  # short
    ],
)
def test_columns_that_do_not_repeat_datetimes_take_the_plain_path(values: list[Any]) -> None:
    records = [{**VALID, "ts": v} for v in values]
    assert _repeated_path(records, NO_TIME.field("ts")) is None
    assert RecordConverter(NO_TIME)._fast(records).equals(_expected(records, NO_TIME))


@pytest.mark.parametrize(
    ("name", "value", "message"),
    # time columns never take the batch path; a numpy bool among ints is its documented leniency
    [c for c in WRONG_VALUES if not c[0].startswith("t_") and not isinstance(c[1], np.bool_)],
)
def test_a_bad_record_in_a_batch_is_named_and_only_it_is_left_out(name: str, value: Any, message: str) -> None:
    records = [*GOOD, {**VALID, name: value}, FULL]
    result = RecordConverter(NO_TIME).convert(records)
    assert [(i, e.field) for i, e in result.bad] == [(3, name)]
    assert message in str(result.bad[0][1])
    assert result.kept == [0, 1, 2, 4]
    assert result.table.equals(_expected([*GOOD, FULL], NO_TIME))


@pytest.mark.parametrize(("value", "field", "message"), NESTED_ERRORS)
def test_a_bad_nested_value_in_a_batch_is_named(value: Any, field: str, message: str) -> None:
    result = RecordConverter(NO_TIME).convert([FULL, {**VALID, "a": value}])
    assert [(i, e.field) for i, e in result.bad] == [(1, field)]
    assert message in str(result.bad[0][1])


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("i32", 1.5),  # Arrow's typed conversion would truncate to 1
        ("s", b"x"),  # ... and decode bytes as text
        ("blob", "x"),  # ... and encode text as bytes
        ("day", dt.datetime(2024, 1, 1, 12)),  # ... and drop the time
        ("a", {"b": [], "extra": 1}),  # ... and drop the unknown struct field
        ("attrs", {"k": 1.5}),  # ... and truncate a map value
        ("extra", 1),  # ... and ignore an unknown column
    ],
)
def test_nothing_arrow_would_bend_gets_through(name: str, value: Any) -> None:
    result = RecordConverter(NO_TIME).convert([FULL, {**FULL, name: value}])
    assert [i for i, _ in result.bad] == [1]
    assert result.table.num_rows == 1


def test_bools_are_numbers_in_float_columns_on_both_paths() -> None:
    records = [{**FULL, "f64": 2.5}, {**FULL, "f64": True}]
    batch = RecordConverter(NO_TIME)._fast(records)
    assert batch["f64"].to_pylist() == [2.5, 1.0]
    assert batch.equals(_expected(records, NO_TIME))
    with_numpy = [*records, {**FULL, "f32": np.bool_(False)}]  # Arrow refuses this mix: per record
    result = RecordConverter(NO_TIME).convert(with_numpy)
    assert result.bad == []
    assert result.table.equals(_expected(with_numpy, NO_TIME))


def test_a_numpy_bool_among_ints_is_the_one_leniency_of_the_batch_path() -> None:
    records = [{**FULL, "i64": 5}, {**FULL, "i64": np.bool_(True)}]
    assert RecordConverter(NO_TIME).convert(records).table["i64"].to_pylist() == [5, 1]


def test_time_columns_take_the_per_record_path_with_the_same_rules() -> None:
    schema = pa.schema([f("t", pa.time64("us"), True), f("i", pa.int32())])
    result = RecordConverter(schema).convert([{"t": dt.time(1, 2, 3), "i": 1}, {"t": 86_400_000_000, "i": 2}])
    assert [(i, e.field) for i, e in result.bad] == [(1, "t")]
    assert result.table.to_pylist() == [{"t": dt.time(1, 2, 3), "i": 1}]


@pytest.mark.parametrize("present", [0, 1, 500])
def test_a_null_struct_with_never_null_children_encodes(present: int) -> None:
    """Avro's ``["null", record]`` with required fields (GitHub events' optional ``org``): a null
    struct's children must hold no nulls where the schema says never, or Parquet refuses the
    segment ("Column 'id' is declared non-nullable but contains nulls")."""
    from parka.segment import decode_segment, encode_segment

    inner = pa.struct(
        [
            pa.field("login", pa.string(), False),
            pa.field("tags", pa.list_(pa.int32()), False),
            pa.field("labels", pa.map_(pa.string(), pa.int64()), False),
            pa.field("at", pa.timestamp("us", tz="UTC"), False),
            pa.field("day", pa.date32(), False),
            pa.field("admin", pa.bool_(), False),
            pa.field("score", pa.decimal128(5, 2), False),
        ]
    )
    schema = pa.schema(
        [("id", pa.int64(), False), ("org", pa.struct([pa.field("id", pa.int64(), False), ("m", inner)]))]
    )
    full = {
        "id": 7,
        "m": {
            "login": "acme",
            "tags": [1],
            "labels": {"k": 1},
            "at": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
            "day": dt.date(2024, 1, 1),
            "admin": True,
            "score": decimal.Decimal("1.50"),
        },
    }
    records = [{"id": i, "org": full if i < present else None} for i in range(max(present, 3))]
    converted = RecordConverter(schema).convert(records)
    assert not converted.bad
    segment = encode_segment(converted.table, codec="zstd", fingerprint="0123456789abcdef")
    back = decode_segment(segment.value, segment.headers, topic="t", partition=0, offset=0)
    assert back.select(["id", "org"]).to_pylist(maps_as_pydicts="strict") == records


# Maps and lists of structs or maps are built child by child on the batch path: each level is
# converted and checked as a column of its own.
NESTED = pa.schema(
    [
        f("maps", pa.list_(pa.field("element", pa.map_(pa.string(), pa.int64()), nullable=True)), nullable=True),
        f(
            "deep",
            pa.map_(pa.string(), pa.field("value", pa.list_(pa.struct([f("x", pa.int32())])), nullable=False)),
            nullable=True,
        ),
        f("strict", pa.large_list(pa.field("element", pa.struct([f("y", pa.string(), True)]), nullable=False))),
    ]
)
NESTED_GOOD: list[dict[str, Any]] = [
    {"maps": [{"a": 1}, None, {}], "deep": {"k": [{"x": 1}, {"x": 2}], "l": []}, "strict": [{"y": "s"}, {}]},
    {"maps": None, "deep": None, "strict": []},
    {"maps": [], "deep": {}, "strict": ({"y": None},)},
]


def test_nested_lists_and_maps_take_the_batch_path_and_equal_the_validators_table() -> None:
    converter = RecordConverter(NESTED)
    table = converter._fast(NESTED_GOOD)
    assert table.equals(_expected(NESTED_GOOD, NESTED))
    assert table.to_pylist(maps_as_pydicts="strict")[0]["deep"] == {"k": [{"x": 1}, {"x": 2}], "l": []}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"maps": [{"a": 1.5}]}, "maps[0]['a']"),  # a float bent into an int map
        ({"maps": [[("a", 1)]]}, "maps[0]"),  # pairs are not a mapping
        ({"maps": {"a": 1}}, "maps"),  # a mapping is not a list
        ({"deep": {"k": None}}, "deep['k']"),  # null where the map's values never are
        ({"deep": {"k": [{"x": "1"}]}}, "deep['k'][0].x"),
        ({"deep": {None: []}}, "deep[None]"),
        ({"strict": [None]}, "strict[0]"),  # null where the list's elements never are
        ({"strict": "ab"}, "strict"),  # a str is not a list
        ({"strict": [{"y": 1}]}, "strict[0].y"),
    ],
)
def test_a_bad_value_inside_a_nested_list_or_map_is_named(change: dict[str, Any], field: str) -> None:
    records = [*NESTED_GOOD, {**NESTED_GOOD[0], **change}]
    result = RecordConverter(NESTED).convert(records)
    assert [(i, e.field) for i, e in result.bad] == [(3, field)]
    assert result.table.equals(_expected(NESTED_GOOD, NESTED))
