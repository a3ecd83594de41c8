"""position(), commit(offsets=...) and seek() of ParquetConsumer against a real broker: each is
record-precise inside a segment."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import closing
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from parka.consumer import ParquetConsumer

from ._ingest_util import produce_ids
from .test_roundtrip import raw_messages


def shim(bootstrap: str, group: str) -> ParquetConsumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    return ParquetConsumer({**conf, "enable.auto.commit": False})


def next_record(c: ParquetConsumer, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        assert time.monotonic() < deadline, "no record arrived"
        msg = c.poll(1.0)
        if msg is not None:
            assert msg.error() is None, msg.error()
            return msg


def test_position_commit_offsets_and_seek_are_record_precise(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    produce_ids(bootstrap, topic, 1000, per_segment=500)
    tp0 = TopicPartition(topic, 0)
    with shim(bootstrap, group_id) as c:
        c.assign([tp0])
        for _ in range(120):
            msg = next_record(c)
        [pos] = c.position([tp0])
        assert (pos.offset, pos.metadata) == (0, "parka:1:0:120")  # the client's would say 1
        # the confluent idiom, msg.offset() + 1, commits the record position, not the next segment
        committed = c.commit(offsets=[TopicPartition(topic, 0, msg.offset() + 1)], asynchronous=False)
        assert [(tp.offset, tp.metadata) for tp in committed or []] == [(0, "parka:1:0:120")]
        [got] = c.committed([tp0], timeout=10)
        assert (got.offset, got.metadata) == (0, "parka:1:0:120")
        # seek drops the segment in hand: the next record is the one sought
        c.seek(TopicPartition(topic, 0, 1))
        assert next_record(c).value() == {"id": 500}
        [pos] = c.position([tp0])
        assert (pos.offset, pos.metadata) == (1, "parka:1:1:1")
    # a new consumer of the group resumes at the committed record
    with shim(bootstrap, group_id) as again:
        again.subscribe([topic])
        assert next_record(again).value() == {"id": 120}


def test_a_revoke_callback_run_by_close_may_call_the_consumer(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    # close() serves the revocation; the callback still has an open consumer, as with confluent's
    topic = new_topic()
    produce_ids(bootstrap, topic, 10, per_segment=10)
    revoked: list[Any] = []

    def on_revoke(consumer: ParquetConsumer, partitions: list[TopicPartition]) -> None:
        revoked.append(consumer.assignment())
        consumer.unassign()

    c = shim(bootstrap, group_id)
    c.subscribe([topic], on_revoke=on_revoke)
    assert next_record(c).value() == {"id": 0}
    c.close()
    assert revoked == [[TopicPartition(topic, 0)]]
    with pytest.raises(RuntimeError, match="Consumer closed"):
        c.assignment()


def epochs(tps: list[TopicPartition] | None) -> list[tuple[int, int | None]]:
    return [(tp.offset, tp.leader_epoch) for tp in tps or []]


def test_the_leader_epoch_travels_with_positions_and_commits_as_a_plain_consumers_does(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    """confluent's consumer keeps the fetched message's leader epoch in ``position()``, in
    ``commit()`` without arguments and in auto-commits (librdkafka checks a committed offset
    against it after a leader change: KIP-320). parka's does the same, in pass-through and inside
    segments."""
    plain_topic, segment_topic = new_topic(), new_topic()
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(plain_topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    produce_ids(bootstrap, segment_topic, 1000, per_segment=500)
    plain_tp, segment_tp = TopicPartition(plain_topic, 0), TopicPartition(segment_topic, 0)
    conf = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "enable.auto.commit": False}

    # pass-through: the same answers as confluent's own consumer, epoch included
    answers = []
    for make, group in ((Consumer, f"{group_id}-plain"), (ParquetConsumer, f"{group_id}-parka")):
        with closing(make({**conf, "group.id": group})) as c:
            c.assign([plain_tp])
            msgs = [next_record(c) for _ in range(3)]
            answers.append(
                (
                    [m.leader_epoch() for m in msgs],
                    epochs(c.position([plain_tp])),
                    epochs(c.commit(asynchronous=False)),
                    epochs(c.committed([plain_tp], timeout=10)),
                )
            )
    plain, parka = answers
    assert plain[0][0] is not None  # the broker reports one: the comparison below has content
    assert parka == plain

    # inside a segment: the epoch of the message that carries the records
    [raw] = raw_messages(bootstrap, segment_topic, 1)[:1]
    epoch = raw.leader_epoch()
    assert epoch is not None
    with ParquetConsumer({**conf, "group.id": f"{group_id}-segment"}) as c:
        c.assign([segment_tp])
        records = [next_record(c) for _ in range(120)]
        assert {r.leader_epoch() for r in records} == {epoch}
        [pos] = c.position([segment_tp])
        assert (pos.offset, pos.metadata, pos.leader_epoch) == (0, "parka:1:0:120", epoch)
        assert epochs(c.commit(asynchronous=False)) == [(0, epoch)]
        [got] = c.committed([segment_tp], timeout=10)
        assert (got.offset, got.metadata, got.leader_epoch) == (0, "parka:1:0:120", epoch)

    # auto-commit (its final commit at close): the same epoch
    auto = {**conf, "enable.auto.commit": True, "auto.commit.interval.ms": 60_000, "group.id": f"{group_id}-auto"}
    with ParquetConsumer(auto) as c:
        c.assign([segment_tp])
        for _ in range(700):
            next_record(c)
    with closing(Consumer({**conf, "group.id": f"{group_id}-auto"})) as reader:
        [got] = reader.committed([segment_tp], timeout=10)
    assert (got.offset, got.metadata, got.leader_epoch) == (1, "parka:1:1:200", epoch)
