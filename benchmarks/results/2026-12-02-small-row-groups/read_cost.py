"""CPU to read a data file ``parka ingest`` writes (segments stitched, a row group each) as
compaction reads it, by the segments' size and codec.

For each size and codec: 40 files (as many as the flights' 336,776 rows fill), each of 10
segments of the flights rows stitched (``parka.lake._stitch``), read with
``pq.ParquetFile(...).read(use_threads=False)`` as background compaction reads its inputs;
CPU-seconds (``time.process_time``) of reading them all, five rounds, the median reported per
file and per row.

    python benchmarks/results/2026-12-02-small-row-groups/read_cost.py
"""

from __future__ import annotations

import statistics
import time

import pyarrow as pa
import pyarrow.parquet as pq
from parka.lake._stitch import Source, read_footer, stitch

from benchmarks.datasets import load
from parka.segment import encode_segment

FILES, SEGMENTS, ROUNDS = 40, 10, 5


def main() -> None:
    rows = load("flights", None).table
    print(f"pyarrow {pa.__version__}; files of {SEGMENTS} segments each, median of {ROUNDS} rounds")
    print("| rows per segment (row group) | codec | files | CPU ms per file | CPU µs per row |")
    print("|---|---|---|---|---|")
    for size in (50, 500, 2500):
        count = min(FILES, rows.num_rows // (SEGMENTS * size))
        for codec in ("zstd", "lz4", "snappy", "none"):
            files = []
            for f in range(count):
                segments = [
                    encode_segment(rows.slice((f * SEGMENTS + i) * size, size), codec=codec, fingerprint="0" * 16).value
                    for i in range(SEGMENTS)
                ]
                files.append(stitch([Source(read_footer(s)) for s in segments]))
            rounds = []
            for _ in range(ROUNDS):
                start = time.process_time()
                for data in files:
                    pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
                rounds.append(time.process_time() - start)
            cpu = statistics.median(rounds)
            per_row = cpu / (count * SEGMENTS * size) * 1e6
            print(f"| {size:,} | {codec} | {count} | {cpu / count * 1e3:.2f} | {per_row:.2f} |")


if __name__ == "__main__":
    main()
