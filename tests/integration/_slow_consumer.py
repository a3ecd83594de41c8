"""A slow auto-committing ParquetConsumer, run as a child process by the kill -9 test.

``python _slow_consumer.py BOOTSTRAP TOPIC GROUP OUT_FILE INTERVAL_MS DELAY_US``

Subscribes to TOPIC in GROUP with ``enable.auto.commit`` every INTERVAL_MS and, for each record
``poll()`` hands out, appends ``<id> <time.monotonic()>`` to OUT_FILE (flushed per line), then
busy-waits DELAY_US microseconds, the application's work. Runs until killed.
"""

from __future__ import annotations

import sys
import time

from parka.consumer import ParquetConsumer


def main(bootstrap: str, topic: str, group: str, out_file: str, interval_ms: str, delay_us: str) -> None:
    delay_s = int(delay_us) / 1e6
    consumer = ParquetConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": int(interval_ms),
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    clock = time.monotonic
    busy = time.perf_counter
    with open(out_file, "a", buffering=1) as out:
        while True:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            # Logged before the work, so that a record handed out is logged but for a few µs.
            out.write(f"{msg.value()['id']} {clock()}\n")
            until = busy() + delay_s
            while busy() < until:
                pass


if __name__ == "__main__":
    main(*sys.argv[1:])
