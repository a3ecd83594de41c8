"""zstd levels 1, 2 and 3 for a segment of parka's ``auto`` layout: bytes per row and CPU per row
of ``encode_segment``, per data set, in one process.

    python benchmarks/results/2026-11-30-zstd-level/levels.py --rows 40000 --segment 10000 --rounds 7

Each round encodes every segment of a data set once at each level, the levels' order rotating
from round to round; the CPU figure is the median over the rounds of ``time.process_time`` per
row, the bytes are the segments' total (the same every round).
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks import datasets
from parka.encoding import choose_encodings
from parka.segment import encode_segment

LEVELS = (1, 2, 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--segment", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--datasets", default="flights,web_requests,gps,github_events")
    args = parser.parse_args()
    print(f"{'data set':14} {'level':>5} {'CPU us/row':>10} {'bytes/row':>9}")
    for name in args.datasets.split(","):
        table = datasets.load(name, args.rows).table
        segments = [table.slice(i, args.segment) for i in range(0, table.num_rows, args.segment)]
        layout = choose_encodings(segments[0])

        def encode(level: int, segments: list = segments, layout: object = layout) -> int:
            return sum(
                len(encode_segment(s, codec="zstd", fingerprint="0" * 16, layout=layout, compression_level=level).value)
                for s in segments
            )

        cpu: dict[int, list[float]] = {level: [] for level in LEVELS}
        size: dict[int, int] = {}
        for r in range(args.rounds):
            for level in LEVELS[r % len(LEVELS) :] + LEVELS[: r % len(LEVELS)]:
                began = time.process_time()
                size[level] = encode(level)
                cpu[level].append((time.process_time() - began) / table.num_rows * 1e6)
        for level in LEVELS:
            print(f"{name:14} {level:>5} {statistics.median(cpu[level]):10.3f} {size[level] / table.num_rows:9.2f}")


if __name__ == "__main__":
    main()
