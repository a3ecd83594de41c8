"""AIOParquetConsumer against a real broker: segment records, async rebalance and commit
callbacks, record-precise position() and a resume inside a segment."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from parka.consumer import AIOParquetConsumer, SegmentTable

from ._ingest_util import produce_ids


async def take(c: AIOParquetConsumer, n: int, timeout_s: float = 30) -> list[int]:
    ids: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(ids) < n:
        assert time.monotonic() < deadline, f"only {len(ids)} of {n} records arrived"
        for msg in await c.consume(n - len(ids), 1.0):
            assert msg.error() is None, msg.error()
            ids.append(msg.value()["id"])
    return ids


@pytest.mark.asyncio
async def test_aio_consumer_hands_out_records_and_resumes_inside_a_segment(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    produce_ids(bootstrap, topic, 600, per_segment=400)
    assigned: list[Any] = []
    commits: list[Any] = []

    async def on_assign(consumer: Any, partitions: list[TopicPartition]) -> None:
        assigned.append((consumer, [(tp.topic, tp.partition) for tp in partitions]))

    async def on_commit(err: Any, partitions: list[TopicPartition]) -> None:
        commits.append((err, [(tp.offset, tp.metadata) for tp in partitions]))

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "on_commit": on_commit,
    }
    c = AIOParquetConsumer(conf, max_workers=2)
    await c.subscribe([topic], on_assign=on_assign)
    assert await take(c, 150) == list(range(150))
    assert assigned == [(c, [(topic, 0)])]  # the callback got the asyncio consumer
    [tp] = await c.position(await c.assignment())
    assert (tp.offset, tp.metadata) == (0, "parka:1:0:150")
    await c.commit(offsets=[tp], asynchronous=True)
    deadline = time.monotonic() + 15
    while not commits:
        assert time.monotonic() < deadline, "on_commit was not called"
        await c.poll(0.1)  # serves the callback (and hands out a record, after the commit)
    assert commits[0] == (None, [(0, "parka:1:0:150")])
    [committed] = await c.committed([TopicPartition(topic, 0)], timeout=10)
    assert (committed.offset, committed.metadata) == (0, "parka:1:0:150")
    await c.close()

    async with AIOParquetConsumer(conf) as again:
        await again.assign([TopicPartition(topic, 0)])
        table = None
        deadline = time.monotonic() + 30
        while table is None:
            assert time.monotonic() < deadline
            table = await again.poll_table(1.0)
        assert isinstance(table, SegmentTable)
        assert (table.offset(), table.index(), len(table)) == (0, 150, 250)
        assert table.value().column("id").to_pylist() == list(range(150, 400))
