"""What one ``produce(topic, dict)`` costs when it only stages the record (no drain, no segment
cut), against calling an empty function of the same signature and against ``list.append``:
wall ns per call, the best of five timings of 200,000 calls each, in one process.

    python benchmarks/results/2026-12-02-dropin-quiet/produce_call.py

The producer is made but never sends (``linger.ms`` 60 s, a drain threshold no run reaches), so
no broker need be reachable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from parka.producer import ParquetProducer

CALLS, ROUNDS = 200_000, 5


def empty(
    topic: str,
    value: Any = None,
    key: Any = None,
    partition: int = -1,
    on_delivery: Any = None,
    timestamp: int = 0,
    headers: Any = None,
    *,
    callback: Any = None,
) -> None:
    pass


def best_ns(call: Callable[[], None], reset: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(CALLS):
            call()
        best = min(best, (time.perf_counter() - started) / CALLS * 1e9)
        reset()
    return best


def main() -> None:
    producer = ParquetProducer(
        {"bootstrap.servers": "127.0.0.1:1", "linger.ms": 60_000, "columnar.encoding": "parquet"}
    )
    producer.set_schema("t", pa.schema([("a", pa.int64()), ("b", pa.string())]))
    state = producer._columnar_topics["t"]  # the topic's staging: its drain threshold out of reach
    state.drain_at = 10**9
    row = {"a": 1, "b": "x"}
    produce, staged = producer.produce, state.items
    out: list[Any] = []
    append = out.append
    print(f"ns per call, best of {ROUNDS} x {CALLS:,} calls")
    print(f"produce(topic, dict), staging only: {best_ns(lambda: produce('t', row), staged.clear):.0f}")
    print(f"empty function of produce()'s signature: {best_ns(lambda: empty('t', row), lambda: None):.0f}")
    print(f"list.append: {best_ns(lambda: append(row), out.clear):.0f}")
    staged.clear()


if __name__ == "__main__":
    main()
