"""AIOParquetProducer against a real broker, columnar: each awaited produce returns a future that
resolves to the delivered record, and the records read back through ParquetConsumer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from parka.consumer import ParquetConsumer
from parka.producer import AIOParquetProducer

from parka.message import RecordMessage

SCHEMA = pa.schema([("id", pa.int64(), False), ("name", pa.string())])

pytestmark = pytest.mark.asyncio


async def test_awaited_records_are_delivered_as_segments(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic(partitions=2)
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.encoding.compression": "zstd"}
    async with AIOParquetProducer(conf, batch_size=50) as producer:
        producer.set_schema(topic, SCHEMA)
        futures = [await producer.produce(topic, value={"id": i, "name": f"n{i}"}, key=f"k{i % 7}") for i in range(120)]
        await producer.flush()
        delivered = await asyncio.wait_for(asyncio.gather(*futures), timeout=60)
        assert producer.producer.stats()["segments"] >= 2
    assert all(isinstance(m, RecordMessage) and m.offset() >= 0 for m in delivered)
    assert sorted(m.value()["id"] for m in delivered) == list(range(120))

    consumer = ParquetConsumer({"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < 120 and time.monotonic() < deadline:
        got.extend(m for m in consumer.consume(500, timeout=0.5) if m.error() is None)
    consumer.close()
    assert sorted((m.value()["id"], m.key()) for m in got) == [(i, f"k{i % 7}".encode()) for i in range(120)]
