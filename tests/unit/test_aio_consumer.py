"""AIOParquetConsumer is confluent's AIOConsumer with a ParquetConsumer as its sync client."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.aio import AIOConsumer
from parka.consumer import AIOParquetConsumer, ParquetConsumer

NO_BROKER = {"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "session.timeout.ms": 1000}


@pytest.mark.asyncio
async def test_it_is_an_aio_consumer_over_a_parquet_consumer() -> None:
    async def on_error(err: Any) -> None:
        pass

    conf = {**NO_BROKER, "error_cb": on_error}
    c = AIOParquetConsumer(conf, max_workers=2)
    assert isinstance(c, AIOConsumer)
    assert isinstance(c._consumer, ParquetConsumer)
    assert conf["error_cb"] is on_error  # the caller's dict is left alone
    assert await c.poll(0.01) is None
    assert await c.poll_table(0.01) is None
    assert await c.consume(5, 0.01) == []
    assert await c.assignment() == []
    c.set_reader_schema("t", pa.schema([("id", pa.int64())]))  # the sync client's, as set_schema is
    assert c._parquet._readers["t"] == pa.schema([("id", pa.int64())])
    await c.close()
    with pytest.raises(RuntimeError, match="Consumer closed"):
        await c.poll(0.01)


@pytest.mark.asyncio
async def test_constructor_checks_as_confluents() -> None:
    with pytest.raises(ValueError, match="max_workers must be at least 1"):
        AIOParquetConsumer(NO_BROKER, max_workers=0)
    with pytest.raises(TypeError, match="expected configuration dict"):
        AIOParquetConsumer(None)  # type: ignore[arg-type]
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=3)
    try:
        async with AIOParquetConsumer(NO_BROKER, executor=executor) as c:
            assert c.executor is executor
    finally:
        executor.shutdown(wait=True)
