"""parka.encoding: the per-column choice, tuned segments read back equal, and the segment sort."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parka.encoding import DICTIONARY, SAMPLE_ROWS, LayoutCache, choose_encodings, sort_order
from parka.errors import ConfigError, RecordError
from parka.schema import schema_fingerprint
from parka.segment import build_segment_table, decode_segment, encode_segment, split_reserved

N = 5000
RNG = np.random.default_rng(7)


def choice(array: pa.Array, name: str = "c") -> str:
    return choose_encodings(pa.table({name: array})).of(name)


def written_encodings(value: bytes) -> dict[str, tuple[str, ...]]:
    rg = pq.read_metadata(pa.BufferReader(value)).row_group(0)
    return {rg.column(i).path_in_schema: rg.column(i).encodings for i in range(rg.num_columns)}


@pytest.mark.parametrize(
    ("array", "expected"),
    [
        # event times, ids counting up: small steps against a wide range
        (pa.array(1_700_000_000_000 + np.cumsum(RNG.integers(0, 20, N)), pa.int64()), "DELTA_BINARY_PACKED"),
        (pa.array(1_700_000_000_000_000 + np.arange(N) * 1000, pa.timestamp("us", tz="UTC")), "DELTA_BINARY_PACKED"),
        (pa.array(RNG.choice([200, 404, 500], N), pa.int32()), DICTIONARY),  # few distinct values
        (pa.array(RNG.integers(0, 2**62, N), pa.int64()), "PLAIN"),  # every value new, no order
        (pa.array(RNG.integers(0, 1000, N), pa.int64()), DICTIONARY),  # repeats, no order
        (pa.array(np.repeat(RNG.integers(0, 2**62, N // 10), 10), pa.int64()), "PLAIN"),  # one run per value
        (pa.array(np.round(RNG.normal(0, 10, N), 0)), DICTIONARY),  # doubles that repeat
        (pa.array(RNG.normal(45.0, 0.2, N)), "PLAIN"),  # doubles that do not
        (pa.array(RNG.normal(45.0, 0.2, N), pa.float32()), "PLAIN"),
        (pa.array(RNG.choice(["GET", "POST", "PUT"], N).tolist()), DICTIONARY),
        (pa.array([str(uuid.UUID(bytes=RNG.bytes(16))) for _ in range(N)]), "DELTA_BYTE_ARRAY"),  # never DELTA_LENGTH
        (
            pa.array([(dt.datetime(2021, 3, 24) + dt.timedelta(seconds=i * 0.37)).isoformat() for i in range(N)]),
            "DELTA_BYTE_ARRAY",
        ),
        (
            pa.array([RNG.bytes(16) for _ in range(N)], pa.binary()),
            "DELTA_BYTE_ARRAY",
        ),
        (pa.array(RNG.random(N) < 0.5), "PLAIN"),  # booleans are bit-packed already
        (pa.array([Decimal(int(x)) / 100 for x in RNG.integers(0, 10**6, N)], pa.decimal128(10, 2)), DICTIONARY),
        (pa.nulls(N, pa.float64()), DICTIONARY),  # nothing to judge: pyarrow's default
        (pa.array(["a", "b"] * (N // 2)).dictionary_encode(), DICTIONARY),
        (pa.array(np.arange(N) * 1000, pa.duration("ms")), "DELTA_BINARY_PACKED"),
        (pa.array(np.arange(N), pa.int32()).cast(pa.date32()), "DELTA_BINARY_PACKED"),
        (pa.array(np.arange(N) * 7, pa.time64("us")), "DELTA_BINARY_PACKED"),
    ],
    ids=lambda v: str(v.type) if isinstance(v, pa.Array) else v,
)
def test_the_choice_follows_the_type_and_the_sample(array: pa.Array, expected: str) -> None:
    assert choice(array) == expected


def test_byte_stream_split_is_never_chosen_as_spark_4_refuses_it() -> None:
    """The floats BYTE_STREAM_SPLIT was made for get PLAIN: Spark 4.0.0's vectorized reader
    fails on it ("Unsupported encoding: BYTE_STREAM_SPLIT"), see test_spark_encodings.py."""
    table = pa.table({f"f{i}": RNG.normal(0, 10**i, N) for i in range(-3, 6)})
    layout = choose_encodings(table)
    assert all(enc != "BYTE_STREAM_SPLIT" for _, enc in layout.encodings)
    assert {layout.of(n) for n in table.column_names} == {"PLAIN"}


def test_nested_columns_struct_leaves_are_judged_list_leaves_keep_the_dictionary() -> None:
    stamps = [(dt.datetime(2021, 3, 24) + dt.timedelta(seconds=i)).isoformat() for i in range(N)]
    meta = pa.StructArray.from_arrays(
        [pa.StructArray.from_arrays([pa.array(stamps)], names=["timestamp"]), pa.array(np.arange(N))],
        names=["producer", "seq"],
    )
    tags = pa.array([[f"t{i % 3}", str(uuid.uuid4())] for i in range(N)], pa.list_(pa.string()))
    layout = choose_encodings(pa.table({"meta": meta, "tags": tags}))
    assert layout.of("meta.producer.timestamp") == "DELTA_BYTE_ARRAY"
    assert layout.of("meta.seq") == "DELTA_BINARY_PACKED"
    assert layout.of("tags.list.element") == DICTIONARY


def test_only_the_sample_is_judged() -> None:
    ordered_then_random = np.concatenate([np.arange(SAMPLE_ROWS), RNG.integers(0, 2**62, N)])
    assert choice(pa.array(ordered_then_random)) == "DELTA_BINARY_PACKED"
    assert choose_encodings(pa.table({"c": ordered_then_random}), sample_rows=N).of("c") == "PLAIN"


def test_an_empty_table_gets_a_layout() -> None:
    layout = choose_encodings(pa.table({"a": pa.array([], pa.int64()), "s": pa.array([], pa.string())}))
    assert (layout.of("a"), layout.of("s")) == (DICTIONARY, DICTIONARY)


def _everything(n: int) -> pa.Table:
    """A column of every kind the chooser tells apart, with nulls, plus the reserved columns."""
    stamps = [(dt.datetime(2021, 3, 24) + dt.timedelta(seconds=i)).isoformat() for i in range(n)]
    data = pa.table(
        {
            "ts": pa.array(1_600_000_000_000 + np.arange(n) * 5, pa.timestamp("ms")),
            "seq": pa.array([None if i % 97 == 0 else i for i in range(n)], pa.int64()),
            "device": pa.array(np.repeat(RNG.integers(0, 2**40, n // 10 + 1), 10)[:n]),
            "status": pa.array(RNG.choice([200, 404], n), pa.int16()),
            "lat": pa.array([None if i % 13 == 0 else float(v) for i, v in enumerate(RNG.normal(45, 1, n))]),
            "speed": pa.array(np.round(RNG.uniform(0, 50, n), 0), pa.float32()),
            "id": pa.array([str(uuid.UUID(bytes=RNG.bytes(16))) for _ in range(n)]),
            "url": pa.array([None if i % 11 == 0 else f"https://x/{i % 7}" for i in range(n)]),
            "meta": pa.StructArray.from_arrays([pa.array(stamps)], names=["at"]),
            "tags": pa.array([["a", str(i)] if i % 5 else None for i in range(n)], pa.list_(pa.string())),
            "ok": pa.array(RNG.random(n) < 0.5),
            "day": pa.array(np.arange(n) // 1000, pa.int32()).cast(pa.date32()),
            "price": pa.array([Decimal(i) / 100 for i in range(n)], pa.decimal128(9, 2)),
        }
    )
    keys = [None if i % 3 == 0 else f"k{i % 50}".encode() for i in range(n)]
    headers = [[("h", b"v")] if i % 4 == 0 else None for i in range(n)]
    return build_segment_table(data, keys, list(range(n)), headers)


@pytest.mark.parametrize("codec", ["zstd", "snappy", "none"])
def test_a_tuned_segment_reads_back_equal_with_the_chosen_encodings(codec: str) -> None:
    table = _everything(6000)
    user = table.select([n for n in table.column_names if not n.startswith("__parka_")])
    seg = encode_segment(table, codec=codec, fingerprint=schema_fingerprint(user.schema), tuning="auto")
    back = decode_segment(seg.value, seg.headers, expected_schema=user.schema)
    assert back.equals(table)
    _, meta = split_reserved(back)
    assert meta.keys is not None and meta.keys[1] == b"k1"
    layout = choose_encodings(table)
    written = written_encodings(seg.value)
    for path, encodings in written.items():
        chosen = layout.of(path)
        expected = "RLE_DICTIONARY" if chosen == DICTIONARY else chosen
        assert expected in encodings, (path, chosen, encodings)
    assert {layout.of(p) for p in written} >= {"DELTA_BINARY_PACKED", "DELTA_BYTE_ARRAY", "PLAIN", DICTIONARY}


def test_duckdb_reads_a_tuned_segment(tmp_path: Path) -> None:
    table = _everything(3000).drop_columns(["__parka_headers"])
    seg = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(table.select(["ts"]).schema))
    path = tmp_path / "segment.parquet"
    path.write_bytes(seg.value)
    got = duckdb.sql(f"SELECT seq, id, meta.at AS at, device, lat FROM '{path}'").fetchall()
    expected = table.select(["seq", "id", "device", "lat"]).to_pylist()
    assert [(r["seq"], r["id"], r["device"], r["lat"]) for r in expected] == [(g[0], g[1], g[3], g[4]) for g in got]
    assert [g[2] for g in got] == [m["at"] for m in table.column("meta").to_pylist()]


def test_tuning_none_writes_pyarrows_defaults_and_auto_is_smaller() -> None:
    table = _everything(10_000)
    fingerprint = schema_fingerprint(table.select(["ts"]).schema)
    plain = encode_segment(table, codec="zstd", fingerprint=fingerprint, tuning="none")
    tuned = encode_segment(table, codec="zstd", fingerprint=fingerprint)  # auto is the default
    assert all("RLE_DICTIONARY" in e for p, e in written_encodings(plain.value).items() if p != "ok")
    assert "DELTA_BINARY_PACKED" in written_encodings(tuned.value)["ts"]
    assert len(tuned.value) < len(plain.value)
    assert decode_segment(tuned.value, tuned.headers).equals(decode_segment(plain.value, plain.headers))


def test_an_unknown_tuning_is_a_config_error() -> None:
    table = pa.table({"a": [1]})
    with pytest.raises(ConfigError, match=r"'tuning'.*auto \| none"):
        encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(table.schema), tuning="fast")


def test_the_layout_cache_judges_again_after_every_segments_and_on_a_new_schema() -> None:
    ordered = pa.table({"c": np.arange(N)})
    shuffled = pa.table({"c": RNG.permutation(N)})
    cache = LayoutCache(every=3)
    assert [cache.layout(t).of("c") for t in (ordered, shuffled, shuffled)] == ["DELTA_BINARY_PACKED"] * 3
    assert cache.layout(shuffled).of("c") == "PLAIN"  # the fourth: judged again
    with_key = build_segment_table(ordered, [b"k"] * N, None, None)
    assert cache.layout(with_key).of("__parka_key") == DICTIONARY  # another schema: judged at once
    with pytest.raises(ValueError, match="every"):
        LayoutCache(every=0)


# -- sort_order ------------------------------------------------------------------------------


def test_sort_is_stable_with_nulls_last() -> None:
    table = pa.table({"dev": [3, 1, None, 1, 3, 2], "n": [0, 1, 2, 3, 4, 5]})
    order = sort_order(table, ["dev"])
    assert order is not None
    assert table.take(order)["n"].to_pylist() == [1, 3, 5, 0, 4, 2]


def test_sort_by_two_columns() -> None:
    table = pa.table({"a": ["x", "y", "x", "y"], "b": [2, 1, 1, 0], "n": [0, 1, 2, 3]})
    order = sort_order(table, ["a", "b"])
    assert order is not None
    assert table.take(order)["n"].to_pylist() == [2, 0, 3, 1]


def test_sorted_rows_and_no_columns_stay_as_they_are() -> None:
    table = pa.table({"dev": [1, 1, 2, 3]})
    assert sort_order(table, ["dev"]) is None
    assert sort_order(pa.table({"dev": [2, 1]}), []) is None


def test_records_of_one_key_keep_their_order() -> None:
    # the key is the device: a sort by device never swaps two records of one key
    table = pa.table({"dev": [2, 1, 2, 1], "n": [0, 1, 2, 3]})
    order = sort_order(table, ["dev"], pa.array([b"2", b"1", b"2", b"1"]))
    assert order is not None
    assert table.take(order)["n"].to_pylist() == [1, 3, 0, 2]


def test_a_sort_that_would_swap_two_records_of_one_key_leaves_the_segment_unsorted() -> None:
    table = pa.table({"speed": [50, 10, 30], "n": [0, 1, 2]})
    assert sort_order(table, ["speed"], pa.array([b"car", b"car", b"bus"])) is None


def test_records_without_a_key_may_move() -> None:
    table = pa.table({"speed": [50, 10, 30, 20]})
    order = sort_order(table, ["speed"], pa.array([None, None, b"car", b"bus"]))
    assert order is not None
    assert order.to_pylist() == [1, 3, 2, 0]


def test_sorting_by_a_missing_column_raises() -> None:
    with pytest.raises(KeyError, match="nope"):
        sort_order(pa.table({"a": [2, 1]}), ["nope"])


def test_headers_go_in_and_out_of_the_reserved_column_as_pairs_per_record() -> None:
    """The ``__parka_headers`` column is built and read as two flat columns: the same values as
    Arrow's list-of-dicts conversion, for empty, null, several, null-valued and str-valued
    headers, on slices and chunked columns."""
    n = 50
    headers: list[list[tuple[str, Any]] | None] = [
        [("a", b"1")] if i % 5 == 0 else [] if i % 5 == 1 else None if i % 5 == 2 else [("b", None), ("c", "x")]
        for i in range(n)
    ]
    data = pa.table({"i": list(range(n))})
    table = build_segment_table(data, None, None, headers)
    column = table.column("__parka_headers")
    expected = [
        [{"key": k, "value": v.encode() if isinstance(v, str) else v} for k, v in h] if h else None for h in headers
    ]
    assert column.to_pylist() == expected
    as_pairs = [None if h is None else [(x["key"], x["value"]) for x in h] for h in expected]
    cases = [
        (table, as_pairs),
        (table.slice(7, 30), as_pairs[7:37]),
        (pa.concat_tables([table.slice(0, 11), table.slice(23)]), as_pairs[:11] + as_pairs[23:]),
    ]
    for part, want in cases:
        _, meta = split_reserved(part)
        assert meta.headers == want
    with pytest.raises(RecordError, match="invalid Kafka headers") as info:
        build_segment_table(data, None, None, [[("a", 1)]] * n)
    assert info.value.field == "headers"
