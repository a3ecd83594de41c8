from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import re
import uuid
import zlib
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parka.errors import ConfigError, RecordError, SchemaMismatchError, SegmentDecodeError
from parka.records import compile_validator, records_to_table
from parka.schema import schema_fingerprint, to_arrow_schema
from parka.segment import (
    CODECS,
    HEADERS_COLUMN,
    KEY_COLUMN,
    RESERVED_FIELDS,
    TIMESTAMP_COLUMN,
    RecordMeta,
    SegmentInfo,
    build_segment_table,
    decode_segment,
    encode_segment,
    is_segment,
    read_segment_info,
    split_reserved,
)

UTC = dt.timezone.utc

AVRO = {
    "type": "record",
    "name": "Everything",
    "namespace": "test",
    "fields": [
        {"name": "flag", "type": "boolean"},
        {"name": "i32", "type": "int"},
        {"name": "i64", "type": ["null", "long"]},
        {"name": "f32", "type": "float"},
        {"name": "f64", "type": ["null", "double"]},
        {"name": "text", "type": "string"},
        {"name": "blob", "type": ["null", "bytes"]},
        {"name": "fixed", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "t_us", "type": ["null", {"type": "long", "logicalType": "time-micros"}]},
        {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ts_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "local_ts", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
        {
            "name": "price",
            "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}],
        },
        {
            "name": "big",
            "type": {
                "type": "fixed",
                "name": "Big",
                "size": 20,
                "logicalType": "decimal",
                "precision": 45,
                "scale": 6,
            },
        },
        {"name": "scores", "type": {"type": "array", "items": ["null", "double"]}},
        {"name": "attrs", "type": ["null", {"type": "map", "values": "string"}]},
        {
            "name": "address",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Address",
                    "fields": [
                        {"name": "city", "type": "string"},
                        {"name": "lines", "type": {"type": "array", "items": "string"}},
                    ],
                },
            ],
        },
        {"name": "history", "type": {"type": "array", "items": "test.Address"}},
    ],
}
SCHEMA = to_arrow_schema(AVRO)
FINGERPRINT = schema_fingerprint(SCHEMA)


def sample_records() -> list[dict[str, Any]]:
    full = {
        "flag": True,
        "i32": -(2**31),
        "i64": 2**63 - 1,
        "f32": 1.5,
        "f64": -0.25,
        "text": "héllo ✓",
        "blob": b"\x00\xff",
        "fixed": b"abcd",
        "color": "GREEN",
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "day": dt.date(2024, 2, 29),
        "t_ms": dt.time(23, 59, 59, 999000),
        "t_us": dt.time(0, 0, 0, 1),
        "ts_ms": dt.datetime(2024, 1, 1, 12, 30, tzinfo=UTC),
        "ts_us": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "local_ts": dt.datetime(2024, 6, 1, 8, 0, 0, 123456),
        "price": decimal.Decimal("-1234567.89"),
        "big": decimal.Decimal("123456789012345678901234567890123456789.123456"),
        "scores": [1.0, None, 3.5],
        "attrs": {"a": "1", "b": ""},
        "address": {"city": "Paris", "lines": ["1 rue", "2e étage"]},
        "history": [{"city": "Lyon", "lines": []}, {"city": "Nice", "lines": ["x"]}],
    }
    sparse = {
        "flag": False,
        "i32": 0,
        "f32": 0.0,
        "text": "",
        "fixed": b"\x00\x00\x00\x00",
        "color": "RED",
        "id": "00000000-0000-0000-0000-000000000000",
        "t_ms": 0,
        "ts_ms": 0,
        "big": 0,
        "scores": [],
        "history": [],
    }
    return [full, sparse, {**full, "i64": None, "attrs": {}, "address": None}]


def sample_table() -> pa.Table:
    validate = compile_validator(SCHEMA)
    return records_to_table([validate(r) for r in sample_records()], SCHEMA)


KEYS = [b"k1", None, "k3"]
TIMESTAMPS = [1_700_000_000_000, 1_700_000_000_001, None]
HEADERS: list[Any] = [[("trace", b"abc"), ("empty", None)], None, [("s", "text")]]


def encode(table: pa.Table, codec: str = "zstd", **kwargs: Any) -> tuple[bytes, list[tuple[str, bytes]]]:
    segment = encode_segment(table, codec=codec, fingerprint=FINGERPRINT, **kwargs)
    assert segment.num_records == table.num_rows
    return segment.value, segment.headers


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_round_trip_every_type_and_codec(codec: str) -> None:
    data = sample_table()
    table = build_segment_table(data, KEYS, TIMESTAMPS, HEADERS)
    value, headers = encode(table, codec)

    decoded = decode_segment(value, headers, topic="t", partition=0, offset=5, expected_schema=SCHEMA)
    user, meta = split_reserved(decoded)

    assert user.schema.equals(SCHEMA)
    assert user.equals(data)
    assert user.to_pylist() == data.to_pylist()
    assert meta == RecordMeta(
        keys=[b"k1", None, b"k3"],
        timestamps=TIMESTAMPS,
        headers=[[("trace", b"abc"), ("empty", None)], None, [("s", b"text")]],
    )
    row = user.to_pylist()[0]
    assert row["big"] == decimal.Decimal("123456789012345678901234567890123456789.123456")
    assert row["id"] == "12345678-1234-5678-1234-567812345678"
    assert row["ts_us"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_value_is_a_standalone_parquet_file(codec: str) -> None:
    table = build_segment_table(sample_table(), KEYS, None, None)
    value, headers = encode(table, codec)

    read = pq.read_table(io.BytesIO(value))
    assert read.schema.equals(SCHEMA.append(RESERVED_FIELDS[0]))
    assert read.num_rows == int(dict(headers)["parka.records"])
    metadata = pq.ParquetFile(io.BytesIO(value)).metadata
    assert metadata.num_row_groups == 1
    columns = {metadata.schema.column(i).path: metadata.row_group(0).column(i) for i in range(metadata.num_columns)}
    expected_codec = {"none": "UNCOMPRESSED"}.get(codec, CODECS[codec])
    assert {c.compression for c in columns.values()} == {expected_codec}
    assert columns["i32"].statistics.has_min_max
    assert columns["i32"].statistics.min == -(2**31)
    assert columns["ts_ms"].physical_type == "INT64"  # never INT96
    paths = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    logical = json.loads(metadata.schema.column(paths.index("ts_ms")).logical_type.to_json())
    assert (logical["Type"], logical["isAdjustedToUTC"], logical["timeUnit"]) == (
        "Timestamp",
        True,
        "microseconds",
    )


def test_headers() -> None:
    value, headers = encode(sample_table(), "snappy", extra_headers=[("app", b"x")])
    crc = zlib.crc32(value)
    assert headers == [
        ("parka.format", b"parquet"),
        ("parka.version", b"1"),
        ("parka.codec", b"snappy"),
        ("parka.records", b"3"),
        ("parka.schema", FINGERPRINT.encode()),
        ("parka.crc32", f"{crc:08x}".encode()),
        ("app", b"x"),
    ]
    assert read_segment_info(headers, value=value) == SegmentInfo(
        version=1, codec="snappy", num_records=3, fingerprint=FINGERPRINT, crc32=crc
    )


def test_a_value_that_changed_after_the_producer_wrote_it_is_refused_by_its_crc() -> None:
    """The footer and the headers still parse, so only the CRC tells: ingestion would land it."""
    value, headers = encode(sample_table(), "none")
    middle = len(value) // 2
    altered = value[:middle] + bytes([value[middle] ^ 0x01]) + value[middle + 1 :]
    with pytest.raises(SegmentDecodeError, match=r"has CRC-32 [0-9a-f]{8}, but 'parka.crc32' says") as caught:
        read_segment_info(headers, value=altered, topic="t", partition=1, offset=7)
    assert (caught.value.value, caught.value.offset) == (altered, 7)  # the raw message is kept
    with pytest.raises(SegmentDecodeError, match=r"parka\.crc32"):
        decode_segment(altered, headers)
    # without the header (another producer's segment) the same bytes are not checked this way
    bare = [(k, v) for k, v in headers if k != "parka.crc32"]
    assert read_segment_info(bare, value=altered).crc32 is None
    with pytest.raises(SegmentDecodeError, match=r"malformed .parka\.crc32."):
        read_segment_info([*bare, ("parka.crc32", b"XYZ")], value=value)


def test_reserved_columns_only_when_some_value_is_set() -> None:
    data = sample_table()
    assert build_segment_table(data, None, None, None).column_names == data.column_names
    assert build_segment_table(data, [None] * 3, [None] * 3, [None, [], None]).column_names == data.column_names
    with_ts = build_segment_table(data, [None] * 3, [None, 5, None], [[], [], []])
    assert with_ts.column_names == [*data.column_names, TIMESTAMP_COLUMN]
    everything = build_segment_table(data, KEYS, TIMESTAMPS, HEADERS)
    assert everything.column_names[-3:] == [KEY_COLUMN, TIMESTAMP_COLUMN, HEADERS_COLUMN]
    user, meta = split_reserved(data)
    assert user.equals(data)
    assert meta == RecordMeta(keys=None, timestamps=None, headers=None)


def test_build_segment_table_rejects_bad_input() -> None:
    data = sample_table()
    with pytest.raises(ValueError, match="2 keys for a table of 3 rows"):
        build_segment_table(data, [b"a", b"b"], None, None)
    with pytest.raises(ValueError, match="reserved"):
        build_segment_table(build_segment_table(data, KEYS, None, None), None, None, None)
    with pytest.raises(RecordError) as info:
        build_segment_table(data, [1, None, None], None, None)  # type: ignore[list-item]
    assert info.value.field == "key"
    with pytest.raises(RecordError) as info:
        build_segment_table(data, None, ["yesterday", None, None], None)  # type: ignore[list-item]
    assert info.value.field == "timestamp"


def test_empty_segment() -> None:
    empty = SCHEMA.empty_table()
    value, headers = encode(empty)
    assert decode_segment(value, headers, expected_schema=SCHEMA).num_rows == 0


def test_encode_rejects_bad_options() -> None:
    table = sample_table()
    with pytest.raises(ConfigError, match="brotli"):
        encode_segment(table, codec="brotli", fingerprint=FINGERPRINT)
    with pytest.raises(ConfigError, match="no levels"):
        encode_segment(table, codec="snappy", fingerprint=FINGERPRINT, compression_level=3)
    with pytest.raises(ConfigError, match="from 1 to 9"):
        encode_segment(table, codec="gzip", fingerprint=FINGERPRINT, compression_level=10)
    with pytest.raises(ValueError, match="fingerprint"):
        encode_segment(table, codec="zstd", fingerprint="ABC")
    with pytest.raises(ValueError, match="reserved"):
        encode_segment(table, codec="zstd", fingerprint=FINGERPRINT, extra_headers=[("parka.x", b"1")])
    with pytest.raises(ValueError, match="unknown reserved column"):
        encode_segment(table.append_column("__parka_other", pa.array([1, 2, 3])), codec="none", fingerprint=FINGERPRINT)


def test_compression_level_changes_the_bytes_not_the_data() -> None:
    table = sample_table()
    low, low_headers = encode(table, "zstd", compression_level=1)
    high, headers = encode(table, "zstd", compression_level=19)
    assert low != high
    assert decode_segment(low, low_headers).equals(decode_segment(high, headers))


def test_is_segment() -> None:
    _, headers = encode(sample_table())
    assert is_segment(headers)
    assert is_segment({"parka.format": b"parquet"})
    assert is_segment([(b"parka.format", b"parquet")])
    assert not is_segment(None)
    assert not is_segment([])
    assert not is_segment([("content-type", b"json")])


def test_read_segment_info_accepts_str_values_dicts_and_repeats() -> None:
    headers = {
        "parka.format": "parquet",
        "parka.version": "1",
        "parka.codec": "gzip",
        "parka.records": "42",
        "parka.schema": FINGERPRINT,
    }
    assert read_segment_info(headers).num_records == 42
    repeated = [*headers.items(), ("parka.records", "7")]
    assert read_segment_info(repeated).num_records == 7  # the last one wins, as in Kafka


GOOD_HEADERS = [
    ("parka.format", b"parquet"),
    ("parka.version", b"1"),
    ("parka.codec", b"zstd"),
    ("parka.records", b"3"),
    ("parka.schema", FINGERPRINT.encode()),
]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("parka.format", None, "not a parka segment"),
        ("parka.format", b"avro", "unsupported segment format"),
        ("parka.version", b"2", "version 2 is newer than version 1; upgrade parka"),
        ("parka.version", b"0", "malformed 'parka.version'"),
        ("parka.version", b"one", "malformed 'parka.version'"),
        ("parka.version", None, "malformed 'parka.version'"),
        ("parka.codec", None, "malformed 'parka.codec'"),
        ("parka.records", b"-1", "malformed 'parka.records'"),
        ("parka.records", b"3.0", "malformed 'parka.records'"),
        ("parka.records", b"", "malformed 'parka.records'"),
        ("parka.records", None, "malformed 'parka.records'"),
        ("parka.schema", b"xyz", "malformed 'parka.schema'"),
        ("parka.schema", None, "malformed 'parka.schema'"),
    ],
)
def test_bad_headers_raise_decode_error_keeping_the_message(name: str, value: bytes | None, message: str) -> None:
    headers = [(k, v) for k, v in GOOD_HEADERS if k != name]
    if value is not None:
        headers.append((name, value))
    with pytest.raises(SegmentDecodeError, match=re.escape(message)) as info:
        read_segment_info(headers, value=b"raw", topic="orders", partition=2, offset=9)
    error = info.value
    assert (error.value, error.headers, error.topic, error.partition, error.offset) == (
        b"raw",
        headers,
        "orders",
        2,
        9,
    )
    assert "at orders[2]@9" in str(error)


def test_future_version_is_rejected_by_decode_segment() -> None:
    value, headers = encode(sample_table())
    future = [(k, b"2" if k == "parka.version" else v) for k, v in headers]
    with pytest.raises(SegmentDecodeError, match="newer") as info:
        decode_segment(value, future, topic="t", partition=0, offset=1)
    assert info.value.value == value


def corrupt_middle(value: bytes) -> bytes:
    middle = len(value) // 2
    return value[:4] + bytes(b ^ 0xFF for b in value[4:middle]) + value[middle:]


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda v: b"", "not a readable Parquet file"),
        (lambda v: b'{"json": true}', "not a readable Parquet file"),
        (lambda v: v[: len(v) // 2], "not a readable Parquet file"),
        (lambda v: v[:-1], "not a readable Parquet file"),
        (lambda v: v[:-12] + b"\x00" * 8 + v[-4:], "not a readable Parquet file"),
        (corrupt_middle, "not a readable Parquet file"),
    ],
    ids=["empty", "not-parquet", "truncated-half", "truncated-magic", "bad-footer", "corrupt-pages"],
)
@pytest.mark.parametrize("crc", [True, False], ids=["crc-header", "no-crc-header"])
def test_bad_bytes_raise_decode_error_keeping_raw_bytes(mangle: Any, message: str, crc: bool) -> None:
    """With ``parka.crc32`` the checksum refuses them first; without (another producer's
    segment), Parquet's own checks do."""
    value, headers = encode(sample_table(), "snappy")
    if not crc:
        headers = [(k, v) for k, v in headers if k != "parka.crc32"]
    bad = mangle(value)
    with pytest.raises(SegmentDecodeError, match=r"but 'parka\.crc32' says" if crc else message) as info:
        decode_segment(bad, headers, topic="orders", partition=1, offset=77)
    error = info.value
    assert error.value == bad
    assert error.headers == headers
    assert (error.topic, error.partition, error.offset) == ("orders", 1, 77)


def test_page_checksums_catch_corruption_of_uncompressed_pages() -> None:
    value, headers = encode(sample_table(), "none")
    headers = [(k, v) for k, v in headers if k != "parka.crc32"]  # the pages' own CRCs, not the value's
    footer_start = len(value) - 8 - int.from_bytes(value[-8:-4], "little")
    for position in range(4, footer_start, max(1, footer_start // 50)):
        bad = bytearray(value)
        bad[position] ^= 0x55
        try:
            decoded = decode_segment(bytes(bad), headers)
        except SegmentDecodeError:
            continue
        assert decoded.equals(decode_segment(value, headers)), f"silent corruption at byte {position}"


def test_row_count_must_match_the_header() -> None:
    value, headers = encode(sample_table())
    wrong = [(k, b"4" if k == "parka.records" else v) for k, v in headers]
    with pytest.raises(SegmentDecodeError, match=r"holds 3 rows but 'parka\.records' says 4") as info:
        decode_segment(value, wrong, topic="t", partition=0, offset=0)
    assert info.value.value == value


def test_missing_value_is_a_decode_error() -> None:
    _, headers = encode(sample_table())
    with pytest.raises(SegmentDecodeError, match="no value"):
        decode_segment(None, headers)


def test_decode_without_headers_reads_the_bytes() -> None:
    table = sample_table()
    value, _ = encode(table)
    assert decode_segment(value).equals(table)


def test_expected_schema_mismatch_names_the_column() -> None:
    value, headers = encode(sample_table())
    widened = SCHEMA.set(1, SCHEMA.field("i32").with_type(pa.int64()))
    with pytest.raises(SchemaMismatchError, match="'i32' int32 not null, expected 'i32' int64") as info:
        decode_segment(value, headers, topic="t", partition=3, offset=4, expected_schema=widened)
    error = info.value
    assert error.field == "i32"
    assert (error.value, error.topic, error.partition, error.offset) == (value, "t", 3, 4)

    longer = SCHEMA.append(pa.field("extra", pa.int32()))
    with pytest.raises(SchemaMismatchError, match="is absent") as info:
        decode_segment(value, headers, expected_schema=longer)
    assert info.value.field == "extra"


def test_expected_schema_ignores_metadata() -> None:
    value, headers = encode(sample_table())
    decode_segment(value, headers, expected_schema=SCHEMA.with_metadata({"doc": "x"}))


def test_unknown_reserved_column_in_a_segment_is_rejected() -> None:
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": [1], "__parka_future": [2]}), sink)
    with pytest.raises(SegmentDecodeError, match="unknown reserved column '__parka_future'"):
        decode_segment(sink.getvalue())
    wrong_type = io.BytesIO()
    pq.write_table(pa.table({"a": [1], KEY_COLUMN: ["text"]}), wrong_type)
    with pytest.raises(SegmentDecodeError, match="reserved column '__parka_key' has type string"):
        decode_segment(wrong_type.getvalue())
