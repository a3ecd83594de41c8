"""Stitching segments into one Parquet file: the rows read back the same in pyarrow and DuckDB
(delta-spark reads stitched tables in tests/integration/spark/test_spark_interop.py), the file
is the row groups' bytes plus one footer, page indexes and checksums stay valid, and what is
not safe to stitch says why."""

from __future__ import annotations

import io
import random
import struct
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from parka.lake._stitch import (
    NotStitchable,
    Source,
    parts_metadata,
    read_footer,
    stitch,
    stitch_parts,
)
from parka.lake._storage import write_data_file

from parka.schema import schema_fingerprint
from parka.segment import encode_segment


def events(n: int, seed: int) -> pa.Table:
    r = random.Random(seed)
    return pa.table(
        {
            "id": pa.array([seed * 100_000 + i for i in range(n)], pa.int64()),
            "carrier": [r.choice(["AA", "UA", "DL", None]) for _ in range(n)],  # dictionary-encoded
            "delay": [r.gauss(5, 20) for _ in range(n)],
            "at": pa.array([1_700_000_000_000_000 + i * 1000 for i in range(n)], pa.timestamp("us", tz="UTC")),
            "tags": [[r.choice("xyz")] * r.randint(0, 3) for _ in range(n)],
            "where": [{"lat": r.random(), "lon": r.random()} for _ in range(n)],
        }
    )


def segments(count: int, **write: object) -> list[tuple[pa.Table, bytes]]:
    out = []
    for i in range(count):
        t = events(500 + 37 * i, i)
        if write:
            buf = io.BytesIO()
            pq.write_table(t, buf, compression="zstd", store_schema=True, **write)  # type: ignore[arg-type]
            out.append((t, buf.getvalue()))
        else:  # as the producer writes them
            out.append((t, encode_segment(t, codec="zstd", fingerprint=schema_fingerprint(t.schema)).value))
    return out


def test_a_stitched_file_reads_the_same_rows_in_pyarrow_and_duckdb(tmp_path: Path) -> None:
    parts = segments(5)
    data = stitch([Source(read_footer(value)) for _, value in parts])
    expected = pa.concat_tables([t for t, _ in parts])
    got = pq.read_table(pa.BufferReader(data))
    assert got.equals(expected)
    assert got.schema.equals(expected.schema, check_metadata=False)  # the Arrow schema travelled
    path = tmp_path / "stitched.parquet"
    path.write_bytes(data)
    # "at" and "where" are keywords; the instant as epoch microseconds (no time zone module needed)
    columns = ", ".join(f'epoch_us("{c}")' if c == "at" else f'"{c}"' for c in expected.column_names)
    rows = duckdb.sql(f"SELECT {columns} FROM '{path}' ORDER BY id").fetchall()
    ordered = expected.sort_by("id")
    assert [r[0] for r in rows] == ordered["id"].to_pylist()
    assert [r[1] for r in rows] == ordered["carrier"].to_pylist()
    assert [r[2] for r in rows] == ordered["delay"].to_pylist()
    assert [r[3] for r in rows] == ordered["at"].cast(pa.int64()).to_pylist()
    assert [r[4] for r in rows] == ordered["tags"].to_pylist()
    assert [r[5] for r in rows] == ordered["where"].to_pylist()


def test_its_size_is_the_row_groups_bytes_plus_one_footer() -> None:
    parts = segments(4)
    footers = [read_footer(value) for _, value in parts]
    data = stitch([Source(f) for f in footers])
    (footer_length,) = struct.unpack("<I", data[-8:-4])
    row_group_bytes = sum(f.row_group_bytes(i) for f in footers for i in range(f.num_row_groups))
    assert len(data) == 4 + row_group_bytes + footer_length + 8
    meta = pq.read_metadata(pa.BufferReader(data))
    assert (meta.num_row_groups, meta.num_rows) == (4, sum(t.num_rows for t, _ in parts))
    # every row group's column chunks are the source's bytes, unchanged
    for i, (_, value) in enumerate(parts):
        source = pq.read_metadata(pa.BufferReader(value)).row_group(0)
        for c in range(source.num_columns):
            was, now = source.column(c), meta.row_group(i).column(c)
            start_was = was.dictionary_page_offset or was.data_page_offset
            start_now = now.dictionary_page_offset or now.data_page_offset
            size = was.total_compressed_size
            assert data[start_now : start_now + size] == value[start_was : start_was + size]
            assert now.statistics == was.statistics


def test_page_checksums_and_page_indexes_survive() -> None:
    parts = segments(3, write_page_index=True, write_page_checksum=True, data_page_size=2048)
    data = stitch([Source(read_footer(value)) for _, value in parts])
    expected = pa.concat_tables([t for t, _ in parts])
    got = pq.read_table(pa.BufferReader(data), page_checksum_verification=True)
    assert got.equals(expected)
    # a page-index-pruned read lands on the right pages of every row group
    cut = expected["id"][len(expected) // 2].as_py()
    pruned = pq.read_table(pa.BufferReader(data), filters=[("id", ">=", cut)])
    assert pruned["id"].to_pylist() == expected.filter(pc.greater_equal(expected["id"], cut))["id"].to_pylist()
    meta = pq.read_metadata(pa.BufferReader(data))
    assert meta.row_group(2).column(0).has_offset_index and meta.row_group(2).column(0).has_column_index


def test_a_subset_of_row_groups_is_a_file_of_its_own() -> None:
    parts = segments(4)
    whole = stitch([Source(read_footer(value)) for _, value in parts])
    kept = stitch([Source(read_footer(whole), [1, 3])])
    assert pq.read_table(pa.BufferReader(kept)).equals(pa.concat_tables([parts[1][0], parts[3][0]]))


def test_a_file_written_part_by_part_is_the_stitched_file(tmp_path: Path) -> None:
    parts = segments(4, write_page_index=True)
    sources = [Source(read_footer(value)) for _, value in parts]
    pieces = stitch_parts(sources)
    size = write_data_file(str(tmp_path), "p0/stitched.parquet", pieces)
    written = (tmp_path / "p0" / "stitched.parquet").read_bytes()
    assert written == stitch(sources) and size == len(written)
    # the last parts are the footer, its length and the magic: the statistics read them alone
    assert parts_metadata(pieces).equals(pq.read_metadata(pa.BufferReader(written)))


def test_stitching_leaves_its_sources_footers_as_they_were() -> None:
    """The row groups' offsets move in the copies only: a source stitched twice lands the same."""
    parts = segments(3, write_page_index=True)
    footers = [read_footer(value) for _, value in parts]
    before = [bytes(f.meta.to_bytes()) for f in footers]
    first = stitch([Source(f) for f in footers])
    assert [bytes(f.meta.to_bytes()) for f in footers] == before
    assert stitch([Source(f) for f in footers]) == first


def test_what_is_not_safe_to_stitch_says_why() -> None:
    (_, a), (_, b) = segments(2)
    other = encode_segment(
        pa.table({"id": [1]}), codec="zstd", fingerprint=schema_fingerprint(pa.schema([("id", pa.int64())]))
    ).value
    with pytest.raises(NotStitchable, match="Parquet schemas differ"):
        stitch([Source(read_footer(a)), Source(read_footer(other))])
    (_, bloom), *_ = segments(1, bloom_filter_options={"id": {}})
    with pytest.raises(NotStitchable, match="bloom filter"):
        stitch([Source(read_footer(a)), Source(read_footer(bloom))])
    with pytest.raises(NotStitchable, match="magic bytes"):
        read_footer(b"PAR1" + b"\0" * 20 + b"PARE")
    with pytest.raises(NotStitchable, match="footer length"):
        read_footer(b"PAR1" + b"\0" * 8 + struct.pack("<I", 999) + b"PAR1")
    assert stitch([Source(read_footer(a)), Source(read_footer(b))])  # the two good ones do


def test_the_thrift_codec_comes_without_pandas_and_is_fastparquets_own() -> None:
    """``parka.lake`` loads fastparquet's Thrift codec alone (the package's ``__init__`` imports
    pandas: half a second of every daemon's start); ``import fastparquet`` afterwards uses it."""
    script = (
        "import sys; import parka.lake._stitch as s; loaded = 'pandas' in sys.modules\n"
        "from fastparquet import cencoding\n"
        "print(loaded, cencoding is s.cencoding, s.cencoding.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "fastparquet.cencoding"]
