"""The CPU of building a segment's records (``consumer._rows.segment_records`` and then
``SegmentRecords.records``, what ``ParquetConsumer.consume`` does per segment), with Python's
cyclic garbage collector held off during the build (as parka does) and left on, per data set.

    PYTHONPATH=. python benchmarks/results/2026-12-01-consume-gc/build.py --rows 100000 --segment 10000 --rounds 7

Each round builds the records of every segment once each way, the order alternating from round
to round; the records of the last ten segments stay referenced, as an application's would while
it works on them. Figures: the median over the rounds of ``time.process_time`` per row.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections import deque
from contextlib import nullcontext
from typing import Any
from unittest import mock

import pyarrow as pa

from benchmarks import datasets
from consumer import _rows
from parka import message


def build(segments: list[pa.Table], held: deque[Any]) -> None:
    for table in segments:
        records = _rows.segment_records(table, 0, topic="t", partition=0, offset=0, segment_timestamp=(1, 0))
        held.append(records.records())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--segment", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--datasets", default="flights,web_requests,gps,github_events")
    args = parser.parse_args()
    print(f"{'data set':14} {'collector paused':>16} {'collector on':>12} {'ratio':>6}  (CPU us per row)")
    for name in args.datasets.split(","):
        table = datasets.load(name, args.rows).table
        segments = [table.slice(i, args.segment) for i in range(0, table.num_rows, args.segment)]
        cpu: dict[bool, list[float]] = {True: [], False: []}
        held: deque[Any] = deque(maxlen=10)
        for r in range(args.rounds):
            for paused in (True, False) if r % 2 == 0 else (False, True):
                # "on": the pause made a no-op where parka's code calls it
                patch = nullcontext() if paused else mock.patch.object(message, "gc_paused", nullcontext)
                patch_rows = nullcontext() if paused else mock.patch.object(_rows, "gc_paused", nullcontext)
                with patch, patch_rows:
                    gc.collect()
                    began = time.process_time()
                    build(segments, held)
                    cpu[paused].append((time.process_time() - began) / table.num_rows * 1e6)
        on, off = statistics.median(cpu[False]), statistics.median(cpu[True])
        print(f"{name:14} {off:16.3f} {on:12.3f} {off / on:6.2f}")


if __name__ == "__main__":
    main()
