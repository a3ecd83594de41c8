"""Tombstones on a columnar topic (issue 18): ``produce(topic, None, key=k)`` goes out as a plain
Kafka message, after the records its partition had buffered, and ParquetConsumer hands it out as
a plain message with value None, between the records of its partition."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from parka.segment import is_segment

SCHEMA = pa.schema([("id", pa.int64(), False)])


def _read(consumer: Any, topic: str, expected: int, timeout_s: float = 60) -> list[Any]:
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            out.append(msg)
    consumer.close()
    return out


def _conf(bootstrap: str, group: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}


def test_tombstones_keep_their_place_among_their_partitions_records(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic(partitions=2)
    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "linger.ms": 60_000})
    producer.set_schema(topic, SCHEMA)
    for part in (0, 1):
        for i in range(3):
            producer.produce(topic, {"id": part * 100 + i}, key=f"k{i}", partition=part, on_delivery=delivered)
    producer.produce(topic, None, key="k1", partition=0, on_delivery=delivered)  # cuts partition 0 only
    for i in range(3, 5):
        producer.produce(topic, {"id": i}, key=f"k{i}", partition=0, on_delivery=delivered)
    producer.produce(topic, None, key="k2", partition=1, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert errors == []
    producer.close()

    got = _read(ParquetConsumer(_conf(bootstrap, group_id)), topic, expected=10)
    by_partition: dict[int, list[Any]] = {0: [], 1: []}
    for msg in got:
        value = msg.value()
        by_partition[msg.partition()].append(("tombstone", msg.key()) if value is None else value["id"])
    assert by_partition == {
        0: [0, 1, 2, ("tombstone", b"k1"), 3, 4],
        1: [100, 101, 102, ("tombstone", b"k2")],
    }

    # on the wire: segment, plain tombstone, segment (partition 0); segment, tombstone (partition 1)
    raw = _read(Consumer(_conf(bootstrap, group_id + "-raw")), topic, expected=5)
    kinds = {
        p: [("segment" if is_segment(m.headers()) else (m.key(), m.value())) for m in raw if m.partition() == p]
        for p in (0, 1)
    }
    assert kinds == {0: ["segment", (b"k1", None), "segment"], 1: ["segment", (b"k2", None)]}


def test_tombstones_reach_a_compacted_topic_as_tombstones(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic(partitions=1, **{"cleanup.policy": "compact"})
    reports: list[tuple[Any, Any]] = []
    producer = ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet"})
    producer.set_schema(topic, SCHEMA)
    for key in ("a", "b"):
        producer.produce(topic, None, key=key, on_delivery=lambda err, msg: reports.append((err, msg.key())))
    assert producer.flush(30) == 0
    assert reports == [(None, b"a"), (None, b"b")]

    # Kept on record: a segment carries no Kafka key (its records' keys are inside it), and a
    # compacted topic refuses keyless messages, so segments cannot go to one.
    seg_errors: list[Any] = []
    producer.produce(topic, {"id": 1}, key="a", on_delivery=lambda err, msg: seg_errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() for e in seg_errors] == [KafkaError.INVALID_RECORD]
    producer.close()

    raw = _read(Consumer(_conf(bootstrap, group_id)), topic, expected=2)
    assert [(m.key(), m.value(), m.headers()) for m in raw] == [(b"a", None, None), (b"b", None, None)]
