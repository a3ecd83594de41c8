"""confluent-kafka's ``test_Consumer.py::test_callback_exception_no_system_error`` in its stats
part, many times, on confluent-kafka's ``Consumer`` and on parka's ``ParquetConsumer``: a
consumer of an unresolvable broker with ``statistics.interval.ms`` 100 and a ``stats_cb`` that
raises, ``consume(timeout=0.2)`` (which raises the callback's error), then ``close()``, which the
test expects to return. It raises when a statistics event is queued by then: close serves it.

    python benchmarks/results/2026-12-01-spec-stats-race/race.py --runs 30 --pause 0
"""

from __future__ import annotations

import argparse
import contextlib
import time

from confluent_kafka import Consumer
from parka.consumer import ParquetConsumer


def close_raises(cls: type, pause_s: float) -> bool:
    def stats_cb(stats: str) -> None:
        raise RuntimeError("Test exception from stats_cb")

    consumer = cls(
        {
            "group.id": "test-stats-callback",
            "bootstrap.servers": "nonexistent-broker:9092",
            "socket.timeout.ms": 100,
            "session.timeout.ms": 1000,
            "statistics.interval.ms": 100,
            "stats_cb": stats_cb,
        }
    )
    consumer.subscribe(["test-topic"])
    with contextlib.suppress(RuntimeError):
        consumer.consume(timeout=0.2)
    time.sleep(pause_s)
    try:
        consumer.close()
    except RuntimeError:
        return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between consume() and close()")
    args = parser.parse_args()
    for name, cls in (("confluent_kafka.Consumer", Consumer), ("parka ParquetConsumer", ParquetConsumer)):
        raised = sum(close_raises(cls, args.pause) for _ in range(args.runs))
        print(f"{name:26} close() raised the stats_cb error in {raised} of {args.runs} runs (pause {args.pause} s)")


if __name__ == "__main__":
    main()
