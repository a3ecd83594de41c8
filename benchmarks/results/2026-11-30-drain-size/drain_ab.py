"""produce() per dict, drains of an eighth of a segment's bytes (at most 4,096 records, parka
before) against half (at most 8,192, parka after), alternated in one process::

    python benchmarks/results/2026-11-30-drain-size/drain_ab.py DATASET BOOTSTRAP   # from the repo's root
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import producer._topics as topics
from benchmarks import datasets, encodings
from producer import ParquetProducer

ROWS, ROUNDS = 100_000, 7
CONF = {"columnar.encoding": "parquet", "columnar.encoding.compression": "zstd"}


def sized(share: int, cap: int) -> Callable[[int, int, float | None], int]:
    """``drain_size`` with a drain of ``1/share`` of a segment's bytes, at most ``cap`` records."""

    def drain_size(batch_records: int, batch_bytes: int, arrow_bytes_per_row: float | None) -> int:
        by_records = max(1, batch_records)
        if arrow_bytes_per_row is None:
            return max(1, min(16, by_records))
        by_bytes = int(batch_bytes / share / max(arrow_bytes_per_row, 1.0))
        return max(1, min(cap, by_records, max(16, by_bytes)))

    return drain_size


def main(name: str, bootstrap: str) -> None:
    ds = datasets.load(name, ROWS)
    rows = encodings.rows_for(ds, "avro")
    arms = {"1/8 cap 4096": sized(8, 4096), "1/2 cap 8192": sized(2, 8192)}
    cpu: dict[str, list[float]] = {arm: [] for arm in arms}
    topic = f"drain-ab-{name}"
    for _ in range(ROUNDS):
        for arm, drain_size in arms.items():
            topics.drain_size = drain_size  # type: ignore[assignment]
            producer = ParquetProducer({**CONF, "bootstrap.servers": bootstrap})
            producer.set_schema(topic, ds.avro_schema)
            start = time.process_time()
            for row in rows:
                producer.produce(topic, row)
            assert producer.flush(60) == 0
            cpu[arm].append((time.process_time() - start) / ROWS * 1e6)
            producer.close()
    base = cpu["1/8 cap 4096"]
    for arm, values in cpu.items():
        ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
        median = round(statistics.median(values), 3)
        print(name, arm, "median µs", median, "median paired ratio to 1/8", round(ratio, 3))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
