"""The memory a row record costs while ``parka ingest`` holds it as the client's message (the
``ROW_RECORD_OVERHEAD`` counted per held record in ``consumer/_ingest.py``): 100,000 messages of an
11-byte value, a key and one header, consumed and held as the loop holds them (their value,
headers and key read), measured with tracemalloc. With a broker on 127.0.0.1:19300, from the
repository's root::

    python benchmarks/results/2026-11-30-row-ingest/held_message_bytes.py

Its output of 2026-11-30 is ``held_message_bytes.txt`` beside it.
"""

from __future__ import annotations

import tracemalloc
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = "127.0.0.1:19300"
N = 100_000


def main() -> None:
    topic = f"held-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 50})
    for i in range(N):
        producer.produce(topic, value=b"x" * 11, key=b"d%d" % (i % 7), headers=[("source", b"json")])
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush()
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    tracemalloc.start()
    held: list[object] = []
    while len(held) < N:
        got = [m for m in consumer.consume(500, 1.0) if m.error() is None]
        for m in got:
            m.value(), m.headers(), m.key(), m.partition(), m.offset()
        held += got
    current, _ = tracemalloc.get_traced_memory()
    print(f"{current / len(held):.0f} bytes per held message (an 11-byte value, a key, one header), {len(held)} held")
    consumer.close()


if __name__ == "__main__":
    main()
