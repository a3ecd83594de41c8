"""Property-based fuzzing of the segment decoder and the header parser.

Whatever bytes and headers arrive, :func:`parka.segment.decode_segment`,
:func:`~parka.segment.read_segment_info`, :func:`~parka.segment.is_segment` and
:func:`parka.lake._files.read_segment` either answer correctly or raise one of parka's own
errors (:class:`~parka.errors.ParkaError`), never another exception, and never a silent wrong
result: a decoded table always has the row count its ``parka.records`` header says, and a
mutated segment that still decodes against its schema decodes to the original rows.

Deterministic in CI (``derandomize``, no example database, a bounded number of examples);
``PARKA_FUZZ_EXAMPLES`` raises the number (``make reliability`` runs many more).
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parka.lake import read_segment

from parka.errors import ParkaError, SegmentError
from parka.schema import schema_fingerprint
from parka.segment import (
    CODECS,
    FORMAT_HEADER,
    RECORDS_HEADER,
    SCHEMA_HEADER,
    VERSION_HEADER,
    build_segment_table,
    decode_segment,
    encode_segment,
    is_segment,
    read_segment_info,
)

EXAMPLES = int(os.environ.get("PARKA_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("name", pa.string()),
        ("score", pa.float64()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("tags", pa.list_(pa.string())),
    ]
)
FINGERPRINT = schema_fingerprint(SCHEMA)
HEADER_NAMES = [FORMAT_HEADER, VERSION_HEADER, "parka.codec", RECORDS_HEADER, SCHEMA_HEADER]


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 40))
    text = st.none() | st.text(max_size=30)
    return pa.table(
        {
            "id": draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)),
            "name": draw(st.lists(text, min_size=n, max_size=n)),
            "score": draw(st.lists(st.none() | st.floats(allow_nan=False), min_size=n, max_size=n)),
            "at": pa.array(draw(st.lists(st.none() | st.integers(0, 2**62), min_size=n, max_size=n)), SCHEMA[3].type),
            "tags": draw(st.lists(st.none() | st.lists(text, max_size=4), min_size=n, max_size=n)),
        },
        schema=SCHEMA,
    )


@st.composite
def segments(draw: st.DrawFn) -> tuple[pa.Table, bytes, list[tuple[str, bytes]]]:
    """A valid segment: the table it holds (reserved columns included), its value and headers."""
    data = draw(tables())
    n = data.num_rows
    keys = draw(st.none() | st.lists(st.none() | st.binary(max_size=8), min_size=n, max_size=n))
    stamps = draw(st.none() | st.lists(st.none() | st.integers(0, 2**50), min_size=n, max_size=n))
    table = build_segment_table(data, keys, stamps, None)
    seg = encode_segment(table, codec=draw(st.sampled_from(sorted(CODECS))), fingerprint=FINGERPRINT)
    return table, seg.value, seg.headers


header_values = st.one_of(
    st.none(),
    st.binary(max_size=24),
    st.sampled_from([b"parquet", b"1", b"2", b"0", b"-1", b"zstd", b"", b"007", b"9" * 25, b"0" * 16, b"\xff"]),
    st.text(max_size=12),
)
header_names = st.one_of(st.sampled_from(HEADER_NAMES), st.text(max_size=12), st.binary(max_size=12))
headers_lists = st.lists(st.tuples(header_names, header_values), max_size=8)


@st.composite
def mutated(draw: st.DrawFn, value: bytes) -> bytes:
    """``value`` truncated, cut, spliced, or with bytes flipped, inserted or overwritten."""
    kind = draw(st.sampled_from(["truncate", "drop-head", "flip", "insert", "overwrite", "splice"]))
    size = len(value)
    if kind == "truncate":
        return value[: draw(st.integers(0, max(size - 1, 0)))]
    if kind == "drop-head":
        return value[draw(st.integers(1, max(size, 1))) :]
    if kind == "flip":
        out = bytearray(value)
        for pos in draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4)):
            out[pos] ^= draw(st.integers(1, 255))
        return bytes(out)
    at = draw(st.integers(0, size))
    chunk = draw(st.binary(min_size=1, max_size=16))
    if kind == "insert":
        return value[:at] + chunk + value[at:]
    if kind == "overwrite":
        return value[:at] + chunk + value[at + len(chunk) :]
    other = draw(st.integers(0, size))
    return value[: min(at, other)] + value[max(at, other) :]


def _records(headers: Any) -> int | None:
    """What a header list's last ``parka.records`` says, when it is a plain count."""
    found = [v for k, v in headers if k in (RECORDS_HEADER, RECORDS_HEADER.encode())]
    raw = found[-1] if found else None
    raw = raw.encode() if isinstance(raw, str) else raw
    return int(raw) if raw is not None and raw.isdigit() and 0 < len(raw) <= 19 else None


def _decode_or_parka_error(value: bytes | None, headers: Any, **kwargs: Any) -> pa.Table | None:
    try:
        table = decode_segment(value, headers, **kwargs)
    except ParkaError:
        return None
    assert isinstance(table, pa.Table)
    if headers is not None:
        assert table.num_rows == _records(headers), "decoded a row count its header does not say"
    return table


@FUZZ
@given(headers=headers_lists)
def test_header_parsing_answers_or_raises_a_parka_error(headers: list[tuple[Any, Any]]) -> None:
    assert isinstance(is_segment(headers), bool)
    try:
        info = read_segment_info(headers, value=b"x", topic="t", partition=0, offset=1)
    except SegmentError as exc:
        error = exc
    else:
        assert is_segment(headers)
        assert info.version == 1
        assert info.num_records == _records(headers)
        return
    assert (error.topic, error.partition, error.offset, error.value) == ("t", 0, 1, b"x")


@FUZZ
@given(value=st.none() | st.binary(max_size=200), headers=st.none() | headers_lists)
def test_arbitrary_bytes_and_headers_decode_only_to_parka_errors(value: bytes | None, headers: Any) -> None:
    _decode_or_parka_error(value, headers)


@FUZZ
@given(segment=segments(), data=st.data())
def test_mutated_segments_never_decode_to_wrong_rows(segment: Any, data: st.DataObject) -> None:
    table, value, headers = segment
    assert decode_segment(value, headers, expected_schema=SCHEMA).equals(table)
    bad = data.draw(mutated(value))
    got = _decode_or_parka_error(bad, headers, expected_schema=SCHEMA, topic="t", partition=0, offset=9)
    if got is not None:
        assert got.equals(table), "a mutated segment decoded to other rows than it holds"


@FUZZ
@given(segment=segments(), records=st.integers(0, 2**40), data=st.data())
def test_headers_that_lie_are_refused(segment: Any, records: int, data: st.DataObject) -> None:
    table, value, headers = segment
    lie = records if records != table.num_rows else records + 1
    lying = [(k, str(lie).encode() if k == RECORDS_HEADER else v) for k, v in headers]
    assert _decode_or_parka_error(value, lying) is None
    # another envelope version, a garbled header, or one missing: refused with the raw bytes kept
    name = data.draw(st.sampled_from(HEADER_NAMES))
    garbled = data.draw(st.sampled_from([None, b"", b"2", b"x" * 17, "\u00e9".encode()]))
    changed = [(k, garbled if k == name else v) for k, v in headers]
    missing = [(k, v) for k, v in headers if k != name]
    for variant in (changed, missing):
        try:
            info = read_segment_info(variant)
        except SegmentError:
            assert _decode_or_parka_error(value, variant) is None
            continue
        got = _decode_or_parka_error(value, variant)
        if info.num_records != table.num_rows:  # a garbled count that still parses is a lie too
            assert got is None
        else:
            assert got is not None and got.equals(table)


@FUZZ
@given(segment=segments(), data=st.data())
def test_read_segment_reads_footers_or_raises_a_parka_error(segment: Any, data: st.DataObject) -> None:
    """``parka ingest`` and Spark raw mode read only headers and footer: whatever that accepts
    has a footer whose row count is the header's and an Arrow schema."""
    table, value, headers = segment
    variant = data.draw(st.sampled_from(["as-is", "mutated", "random", "tombstone", "lying"]))
    if variant == "mutated":
        value = data.draw(mutated(value))
    elif variant == "random":
        value = data.draw(st.binary(max_size=300))
    elif variant == "tombstone":
        value = None
    elif variant == "lying":
        headers = [(k, str(table.num_rows + 3).encode() if k == RECORDS_HEADER else v) for k, v in headers]
    try:
        seg = read_segment(topic="t", partition=2, offset=7, value=value, headers=headers)
    except SegmentError as exc:
        error = exc
    else:
        assert variant in ("as-is", "mutated")
        assert seg.meta.num_rows == seg.info.num_records == table.num_rows
        assert isinstance(seg.schema, pa.Schema)
        if variant == "as-is":
            assert seg.schema.names == table.column_names
            assert pq.read_table(pa.BufferReader(value)).equals(table)
        return
    assert variant != "as-is"
    assert (error.topic, error.partition, error.offset) == ("t", 2, 7)
    assert error.value == value  # the raw message is kept for a dead-letter row
