"""confluent-kafka's exactly-once loop (``examples/eos_transactions.py``) on a ParquetConsumer, run
as a child process by the EOS test.

``python _eos_worker.py BOOTSTRAP IN_TOPIC PARTITIONS OUT_TOPIC GROUP TXN_ID PRODUCER EVERY KILL_AT PHASE``

Assigns partitions 0..PARTITIONS-1 of IN_TOPIC, reads records with ``poll()``, produces each id
to OUT_TOPIC with a transactional producer (PRODUCER: ``parka``, a ParquetProducer writing
segments, or ``confluent``, a plain ``confluent_kafka.Producer`` writing the id as text), and
every EVERY records commits the transaction with the consumer's offsets taken from
``consumer.position(consumer.assignment())``, as confluent's example does. Stops, committing the
last transaction, once every partition reported its end, printing ``done <records>``.

KILL_AT > 0: the process sends itself SIGKILL at the KILL_AT-th record it handles, at PHASE:
``polled`` (the record handed out, not produced), ``produced`` (produced, not committed) or
``offsets-sent`` (at the next commit: offsets sent to the transaction, not committed).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Producer, TopicPartition
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

OUT_SCHEMA = pa.schema([("id", pa.int64(), False)])


def _kill() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(
    bootstrap: str,
    in_topic: str,
    partitions: str,
    out_topic: str,
    group: str,
    txn_id: str,
    kind: str,
    every: str,
    kill_at: str,
    phase: str,
) -> None:
    n_every, n_kill = int(every), int(kill_at)
    consumer = ParquetConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(in_topic, p) for p in range(int(partitions))])
    producer_conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id}
    producer: Any
    if kind == "parka":
        producer = ParquetProducer({**producer_conf, "columnar.encoding": "parquet"})
        producer.set_schema(out_topic, OUT_SCHEMA)
    else:
        producer = Producer(producer_conf)
    producer.init_transactions()
    producer.begin_transaction()

    def commit() -> None:
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
        )
        if phase == "offsets-sent" and 0 < n_kill <= handled:
            _kill()
        producer.commit_transaction()
        producer.begin_transaction()

    eof: set[tuple[str, int]] = set()
    handled = pending = 0
    while True:
        producer.poll(0)
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        key = (msg.topic(), msg.partition())
        if msg.error() is not None:
            if msg.error().code() != KafkaError._PARTITION_EOF:
                raise SystemExit(f"consume error: {msg.error()}")
            eof.add(key)
            if len(eof) == len(consumer.assignment()):
                break
            continue
        eof.discard(key)
        handled += 1
        if phase == "polled" and handled == n_kill:
            _kill()
        record_id = msg.value()["id"]
        if kind == "parka":
            producer.produce(out_topic, value={"id": record_id})
        else:
            producer.produce(out_topic, value=str(record_id).encode())
        if phase == "produced" and handled == n_kill:
            _kill()
        pending += 1
        if pending >= n_every:
            commit()
            pending = 0
    commit()
    consumer.close()
    print(f"done {handled}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
