"""The race in confluent-kafka's ``test_Consumer::test_callback_exception_no_system_error``:
a consumer whose ``stats_cb`` raises (``statistics.interval.ms`` 100) runs ``consume(timeout=0.2)``
against a broker name that does not resolve, then ``close()``, which must not raise. The 200 ms
statistics tick lands within a millisecond of the consume's end; when it is queued before the
client's close, the close serves it and raises the callback's exception.

    python benchmarks/results/2026-12-02-spec-stats-close/close_race.py [--rounds 20]

Counts, per arm, the closes that raised: confluent-kafka's ``Consumer`` closed at once, the same
closed 150 ms later (the tick always queued first), parka's ``ParquetConsumer``, and parka's
wrapped client closed directly (without parka's ``close()``, which first stops its auto-commit
thread). Run from a checkout: parka is imported from the repository this file lies in.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from confluent_kafka import Consumer

from consumer import ParquetConsumer


def stats(_: str) -> None:
    raise RuntimeError("from stats_cb")


CONF = {
    "group.id": "g",
    "bootstrap.servers": "nonexistent-broker:9092",
    "socket.timeout.ms": 100,
    "session.timeout.ms": 1000,
    "statistics.interval.ms": 100,
    "stats_cb": stats,
}


def close_raises(make: Callable[[], Any], close: Callable[[Any], None], pause_s: float = 0.0) -> bool:
    c = make()
    c.subscribe(["t"])
    with contextlib.suppress(RuntimeError):  # the 100 ms tick's, as the test expects
        c.consume(timeout=0.2)
    if pause_s:
        time.sleep(pause_s)
    try:
        close(c)
    except RuntimeError:
        return True
    return False


ARMS: dict[str, tuple[Callable[[], Any], Callable[[Any], None], float]] = {
    "confluent-kafka Consumer": (lambda: Consumer(dict(CONF)), lambda c: c.close(), 0.0),
    "confluent-kafka Consumer, closed 150 ms later": (lambda: Consumer(dict(CONF)), lambda c: c.close(), 0.15),
    "ParquetConsumer": (lambda: ParquetConsumer(dict(CONF)), lambda c: c.close(), 0.0),
    "ParquetConsumer's client closed directly": (
        lambda: ParquetConsumer(dict(CONF)),
        lambda c: c._consumer.close(),
        0.0,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    raised = dict.fromkeys(ARMS, 0)
    for _ in range(args.rounds):
        for name, (make, close, pause) in ARMS.items():
            raised[name] += close_raises(make, close, pause)
    for name, count in raised.items():
        print(f"{name}: close() raised in {count} of {args.rounds}")


if __name__ == "__main__":
    main()
