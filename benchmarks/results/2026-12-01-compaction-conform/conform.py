"""CPU of :func:`parka.lake.delta._rewrite.conform` per file read, before and after it took a
file of the table's schema with one comparison: a small file of the flights rows (as the fleet
load's topics land them, ``--rows`` rows), read back as compaction reads it, conformed
``--calls`` times by each version, the two interleaved over ``--rounds`` rounds.

    PYTHONPATH=. python benchmarks/results/2026-12-01-compaction-conform/conform.py --rows 500 --calls 20000 --rounds 7

Prints each round's CPU µs per call of both, then the medians and the median of the paired ratios."""

from __future__ import annotations

import argparse
import io
import statistics
import time

import pyarrow as pa
import pyarrow.parquet as pq
from parka.lake.delta._rewrite import conform

from benchmarks.datasets import load


def before(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """conform as it was (parka 81feaf6)."""

    def column(f: pa.Field) -> pa.ChunkedArray | pa.Array:
        if f.name not in t.column_names:
            return pa.nulls(t.num_rows, f.type)
        have = t.column(f.name)
        return have if have.type == f.type else have.cast(f.type)

    return pa.Table.from_arrays([column(f) for f in schema], schema=schema)


def per_call(fn, t: pa.Table, schema: pa.Schema, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn(t, schema)
    return (time.process_time() - start) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    table = load("flights", args.rows).table
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    read = pq.ParquetFile(pa.BufferReader(sink.getvalue())).read()
    assert conform(read, table.schema).equals(before(read, table.schema))
    assert conform(read, table.schema).schema.equals(before(read, table.schema).schema, check_metadata=True)
    olds, news = [], []
    for r in range(args.rounds):
        old = per_call(before, read, table.schema, args.calls)
        new = per_call(conform, read, table.schema, args.calls)
        olds.append(old)
        news.append(new)
        print(f"round {r + 1}: before {old:.2f} µs/call, after {new:.2f} µs/call")
    ratios = [n / o for n, o in zip(news, olds, strict=True)]
    print(
        f"medians: before {statistics.median(olds):.2f}, after {statistics.median(news):.2f} µs/call; "
        f"after/before {statistics.median(ratios):.3f} (median of {args.rounds} paired rounds)"
    )


if __name__ == "__main__":
    main()
