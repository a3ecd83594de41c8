"""CPU per small file of compaction's read and conform, before (read_table's dataset) and after
(the file's reader), timed with time.process_time, one run: python compaction_reads.py (from the
repo's root: PYTHONPATH=. .venv/bin/python benchmarks/results/2026-11-30-fleet-load/compaction_reads.py).
Run at e19f2b8, where conform still cast every column; its output is compaction_reads.txt (tidied for the
linter after that run, its calls the same)."""

import io
import time

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.datasets import load
from lake._stitch import encrypted_columns
from lake.delta._rewrite import conform


def per_call_ms(f, k: int) -> float:
    f()
    s = time.process_time()
    for _ in range(k):
        f()
    return (time.process_time() - s) / k * 1e3


ds = load("flights", 100_000)
for n in (500, 5000, 50000):
    buf = io.BytesIO()
    pq.write_table(ds.table.slice(0, n), buf, compression="zstd")
    raw = buf.getvalue()
    read = pq.read_table(pa.BufferReader(raw), use_threads=False)
    calls = {
        "read_table": lambda raw=raw: pq.read_table(pa.BufferReader(raw), use_threads=False),
        "ParquetFile.read": lambda raw=raw: pq.ParquetFile(pa.BufferReader(raw)).read(use_threads=False),
        "encrypted_columns": lambda raw=raw: encrypted_columns(raw),
        "conform same schema": lambda read=read: conform(read, read.schema),
    }
    for name, f in calls.items():
        print(n, name, f"{per_call_ms(f, 200 if n < 50000 else 20):.3f} ms")
    assert calls["read_table"]().equals(calls["ParquetFile.read"]())
