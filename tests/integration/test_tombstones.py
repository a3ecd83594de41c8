"""Tombstones on a columnar topic: ``produce(topic, None, key=k)`` goes out as a plain
Kafka message, after the records its partition had buffered, and ParquetConsumer hands it out as
a plain message with value None, between the records of its partition."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer
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


def test_with_tombstone_order_key_a_tombstone_cuts_only_a_buffer_that_holds_its_key(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    """``columnar.tombstone.order=key``: a tombstone of a key the buffer does not hold goes ahead
    of the buffered records (one segment stays whole); one whose key is buffered cuts the buffer
    first. Each key's records and tombstones keep their order."""
    topic = new_topic(partitions=1)
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "linger.ms": 60_000}
    producer = ParquetProducer({**conf, "columnar.tombstone.order": "key"})
    producer.set_schema(topic, SCHEMA)
    for i in range(3):
        producer.produce(topic, {"id": i}, key=f"k{i}", partition=0)
    producer.produce(topic, None, key="k9", partition=0)  # not buffered: goes ahead
    producer.produce(topic, {"id": 3}, key="k3", partition=0)
    producer.produce(topic, None, key="k1", partition=0)  # buffered: the buffer is cut first
    producer.produce(topic, {"id": 4}, key="k1", partition=0)
    assert producer.flush(30) == 0
    producer.close()

    raw = _read(Consumer(_conf(bootstrap, group_id + "-raw")), topic, expected=4)
    kinds = [("segment" if is_segment(m.headers()) else (m.key(), m.value())) for m in raw]
    assert kinds == [(b"k9", None), "segment", (b"k1", None), "segment"], kinds
    got = _read(ParquetConsumer(_conf(bootstrap, group_id)), topic, expected=7)
    order = [("tombstone", m.key()) if m.value() is None else m.value()["id"] for m in got]
    assert order == [("tombstone", b"k9"), 0, 1, 2, 3, ("tombstone", b"k1"), 4]


def test_tombstones_and_segments_reach_a_compacted_topic(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    """A compacted topic refuses keyless messages: a segment carries a key of its own (unique, so
    the cleaner never drops a segment for another's key), and tombstones stay tombstones."""
    topic = new_topic(partitions=1, **{"cleanup.policy": "compact"})
    reports: list[tuple[Any, Any]] = []

    def delivered(err: Any, msg: Any) -> None:
        reports.append((err, msg.key()))

    producer = ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "linger.ms": 60_000})
    producer.set_schema(topic, SCHEMA)
    producer.produce(topic, {"id": 1}, key="a", on_delivery=delivered)
    producer.produce(topic, {"id": 2}, key="b", on_delivery=delivered)
    producer.produce(topic, None, key="a", on_delivery=delivered)  # cuts the segment of ids 1 and 2 first
    producer.produce(topic, {"id": 3}, key="c", on_delivery=delivered)
    producer.produce(topic, None, key="b", on_delivery=delivered)
    assert producer.flush(30) == 0
    assert [err for err, _ in reports] == [None] * 5
    assert [key for _, key in reports] == [b"a", b"b", b"a", b"c", b"b"]
    producer.close()

    got = _read(ParquetConsumer(_conf(bootstrap, group_id)), topic, expected=5)
    assert [("tombstone", m.key()) if m.value() is None else (m.value()["id"], m.key()) for m in got] == [
        (1, b"a"), (2, b"b"), ("tombstone", b"a"), (3, b"c"), ("tombstone", b"b"),
    ]  # fmt: skip

    raw = _read(Consumer(_conf(bootstrap, group_id + "-raw")), topic, expected=4)
    segment_keys = [m.key() for m in raw if is_segment(m.headers())]
    assert len(segment_keys) == 2 and len(set(segment_keys)) == 2
    assert all(key.startswith(b"parka:") for key in segment_keys)
    assert [(m.key(), m.value(), m.headers()) for m in raw if not is_segment(m.headers())] == [
        (b"a", None, None), (b"b", None, None),
    ]  # fmt: skip
