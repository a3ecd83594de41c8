"""``consume(500)`` of plain (non-segment) messages: CPU per message of confluent-kafka's
``Consumer`` and of parka's ``ParquetConsumer`` (encoding ``none``, a drop-in), on one topic.

    python benchmarks/results/2026-12-02-plain-consume/plain_consume.py --bootstrap HOST:PORT

Produces ``--messages`` messages of 100 bytes into a one-partition topic, then, ``--rounds``
times, reads all of them with each consumer in turn (a fresh group each, from the earliest
offset), ``consume(500, 1.0)`` in a loop. CPU (``time.process_time``, every thread) from the first
non-empty batch to the last message, per message. Run from a checkout: parka is imported from
the repository this file lies in.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from consumer import ParquetConsumer


def read_all(cls: Any, bootstrap: str, topic: str, n: int) -> float:
    c = cls({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, started = 0, None
    while got < n:
        batch = c.consume(500, 1.0)
        if batch and started is None:
            started = time.process_time()
        got += len(batch)
    cpu = time.process_time() - (started or 0.0)
    c.close()
    return cpu / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    topic = f"plain-consume-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20})
    for i in range(args.messages):
        producer.produce(topic, b"x" * 100)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush()
    print("round  confluent-kafka µs/msg  parka µs/msg  parka / confluent")
    for r in range(1, args.rounds + 1):
        plain = read_all(Consumer, args.bootstrap, topic, args.messages)
        parka = read_all(ParquetConsumer, args.bootstrap, topic, args.messages)
        print(f"{r:5}  {plain:22.2f}  {parka:12.2f}  {parka / plain:17.2f}", flush=True)
    admin.delete_topics([topic])


if __name__ == "__main__":
    main()
