"""confluent-kafka's exactly-once pattern, ``send_offsets_to_transaction(consumer.position(...))``,
on segment input: a worker killed with SIGKILL at random (seeded) moments and restarted loses and
repeats nothing (``position()`` names the next record inside a segment, not X+1 once segment X
is fetched, which would make a restart skip the rest of X)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, TopicPartition
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

WORKER = Path(__file__).with_name("_eos_worker.py")
SCHEMA = pa.schema([("id", pa.int64(), False)])
PARTITIONS, PER_PARTITION, PER_SEGMENT, EVERY = 4, 2_500, 1_000, 700
KILLS = 4


def produce_input(bootstrap: str, topic: str) -> None:
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": PER_SEGMENT}
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, SCHEMA)
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(topic, value={"id": p * PER_PARTITION + i}, partition=p)
        assert producer.flush(30) == 0


def committed_inside_segments(bootstrap: str, group: str, topic: str) -> int:
    """How many partitions' committed positions are inside a segment (record-precise metadata)."""
    with ParquetConsumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}) as c:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    return sum(1 for tp in tps if (tp.metadata or "").startswith(f"parka:1:{tp.offset}:"))


def read_committed(bootstrap: str, topic: str, group: str) -> list[int]:
    """Every record of ``topic`` a read_committed consumer sees, up to the end of each partition."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group + "-reader",
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    }
    ids: list[int] = []
    with ParquetConsumer(conf) as reader:
        reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        at_end: set[int] = set()
        while len(at_end) < PARTITIONS:
            for msg in reader.consume(10_000, timeout=1.0):
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                value = msg.value()
                ids.append(value["id"] if isinstance(value, dict) else int(value))
    return ids


@pytest.mark.parametrize("producer_kind", ["parka", "confluent"])
def test_eos_loop_on_position_is_exactly_once_across_kills(
    bootstrap: str, new_topic: Callable[..., str], group_id: str, producer_kind: str
) -> None:
    in_topic, out_topic = new_topic(PARTITIONS), new_topic(PARTITIONS)
    produce_input(bootstrap, in_topic)
    rng = random.Random(18)
    base = [bootstrap, in_topic, str(PARTITIONS), out_topic, group_id, f"{group_id}-txn", producer_kind, str(EVERY)]
    inside = 0
    for _ in range(KILLS):
        kill_at, phase = rng.randrange(300, 2_000), rng.choice(["polled", "produced", "offsets-sent"])
        run = subprocess.run([sys.executable, str(WORKER), *base, str(kill_at), phase], timeout=60, check=False)
        assert run.returncode == -9, f"worker to be killed at record {kill_at} ({phase}) exited {run.returncode}"
        inside += committed_inside_segments(bootstrap, group_id, in_topic)
    last = subprocess.run(
        [sys.executable, str(WORKER), *base, "0", "none"], timeout=60, check=True, capture_output=True, text=True
    )
    assert last.stdout.startswith("done "), last.stdout

    ids = read_committed(bootstrap, out_topic, group_id)
    counts = Counter(ids)
    total = PARTITIONS * PER_PARTITION
    lost = sorted(set(range(total)) - set(counts))
    repeated = sorted(i for i, n in counts.items() if n > 1)
    print(f"{KILLS} kills, {total} records, {len(ids)} read, {len(repeated)} repeated, {len(lost)} lost")
    assert not lost, f"{len(lost)} input records never reached the output, e.g. {lost[:10]}"
    assert not repeated, f"{len(repeated)} input records reached the output more than once, e.g. {repeated[:10]}"
    assert len(ids) == total
    # commits every 700 records land inside 1,000-record segments: resuming there is what is tested
    assert inside > 0
