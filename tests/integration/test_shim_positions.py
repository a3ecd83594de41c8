"""position(), commit(offsets=...) and seek() of ParquetConsumer against a real broker: each is
record-precise inside a segment."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from parka.consumer import ParquetConsumer

from ._ingest_util import produce_ids


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
