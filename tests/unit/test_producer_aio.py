"""AIOParquetProducer without a broker: confluent-kafka's asyncio machinery around a
ParquetProducer. Nothing listens on port 9, so every future fails with the client's timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.aio import AIOProducer
from parka.producer import AIOParquetProducer, ParquetProducer

SCHEMA = pa.schema([("id", pa.int64(), False)])
OFFLINE = {"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 300, "socket.timeout.ms": 100}

pytestmark = pytest.mark.asyncio


async def test_it_is_an_aio_producer_around_a_parquet_producer() -> None:
    conf = {**OFFLINE, "columnar.encoding": "parquet"}
    producer = AIOParquetProducer(conf, buffer_timeout=0)
    assert isinstance(producer, AIOProducer)
    assert isinstance(producer.producer, ParquetProducer)
    assert conf == {**OFFLINE, "columnar.encoding": "parquet"}  # the caller's dict untouched
    await producer.close()
    await producer.close()  # again: a no-op
    assert len(producer) == 0
    with pytest.raises(RuntimeError, match="Producer has been closed"):
        producer.producer.produce("t", {"id": 1})


async def test_a_records_future_fails_with_its_delivery_error() -> None:
    producer = AIOParquetProducer({**OFFLINE, "columnar.encoding": "parquet", "linger.ms": 5}, batch_size=2)
    producer.set_schema("t", SCHEMA)
    futures = [await producer.produce("t", value={"id": i}, partition=0) for i in range(3)]
    await producer.flush()
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(r, KafkaException) for r in results), results
    assert {r.args[0].code() for r in results if isinstance(r, KafkaException)} == {KafkaError._MSG_TIMED_OUT}
    await producer.close()


async def test_a_record_the_schema_refuses_fails_its_own_future_only() -> None:
    producer = AIOParquetProducer({**OFFLINE, "columnar.encoding": "parquet"}, batch_size=2)
    producer.set_schema("t", SCHEMA)
    good = await producer.produce("t", value={"id": 1}, partition=0)
    bad = await producer.produce("t", value={"id": "not a number"}, partition=0)
    await producer.flush()
    results: list[Any] = await asyncio.gather(good, bad, return_exceptions=True)
    assert results[0].args[0].code() == KafkaError._MSG_TIMED_OUT  # no broker
    assert results[1].args[0].code() == KafkaError._VALUE_SERIALIZATION  # parka's RecordError, as a KafkaError
    assert results[1].args[0].field == "id"
    await producer.close()
