"""Producer behaviour that needs no broker: cutting rules with an injected clock, bad input."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError
from parka.producer import ParquetProducer

from parka.errors import RecordError, SchemaError

SCHEMA = pa.schema([("id", pa.int64(), False), ("s", pa.string())])


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def producer(clock: FakeClock) -> Iterator[ParquetProducer]:
    # Nothing listens on port 9: segments queue in the client and never leave.
    p = ParquetProducer(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "columnar.encoding": "parquet",
            "columnar.batch.records": 5,
            "linger.ms": 1000,
            "message.timeout.ms": 200,
        },
        clock=clock,
    )
    p.set_schema("t", SCHEMA)
    yield p
    p.purge()
    p.close(timeout=2)


def test_records_wait_for_linger(producer: ParquetProducer, clock: FakeClock) -> None:
    for i in range(3):
        producer.produce("t", value={"id": i, "s": None}, partition=0)
    producer.poll(0)
    assert producer.stats()["segments"] == 0
    assert len(producer) == 3
    clock.now += 0.999
    producer.poll(0)
    assert producer.stats()["segments"] == 0
    clock.now += 0.002
    producer.poll(0)
    assert producer.stats() | {"segment_bytes": 0} == {
        "segments": 1,
        "records": 3,
        "segment_bytes": 0,
        "splits": 0,
    }
    assert len(producer) == 3  # in flight, not delivered


def test_count_limit_cuts_immediately(producer: ParquetProducer) -> None:
    for i in range(12):
        producer.produce("t", value={"id": i, "s": "x"}, partition=1)
    stats = producer.stats()
    assert (stats["segments"], stats["records"]) == (2, 10)
    assert len(producer) == 12


def test_partitions_have_separate_buffers(producer: ParquetProducer) -> None:
    for i in range(4):
        producer.produce("t", value={"id": i, "s": None}, partition=i % 2)
    assert producer.stats()["segments"] == 0
    producer.produce("t", value={"id": 9, "s": None}, partition=0)
    producer.produce("t", value={"id": 10, "s": None}, partition=0)
    assert producer.stats()["records"] == 0  # partition 0 holds 4, partition 1 holds 2
    producer.produce("t", value={"id": 11, "s": None}, partition=0)
    assert producer.stats()["records"] == 5


def test_rejected_record_leaves_the_buffer_alone(producer: ParquetProducer) -> None:
    producer.produce("t", value={"id": 1, "s": None}, partition=0)
    with pytest.raises(RecordError, match="topic 't', field 's'"):
        producer.produce("t", value={"id": 2, "s": 3}, partition=0)
    with pytest.raises(RecordError, match="topic 't', field 'key'"):
        producer.produce("t", value={"id": 2, "s": None}, key=42, partition=0)
    with pytest.raises(RecordError, match="topic 't', field 'headers'"):
        producer.produce("t", value={"id": 2, "s": None}, headers=[("h", 1)], partition=0)
    with pytest.raises(RecordError, match="topic 't': value must be a dict"):
        producer.produce("t", value=b"raw", partition=0)
    assert len(producer) == 1


def test_produce_batch_rejects_columns_that_do_not_fit(producer: ParquetProducer) -> None:
    with pytest.raises(RecordError, match="field 'extra'"):
        producer.produce_batch("t", pa.table({"id": [1], "extra": [2]}), partition=0)
    with pytest.raises(RecordError, match=r"field 'id'.*missing"):
        producer.produce_batch("t", pa.table({"s": ["a"]}), partition=0)
    with pytest.raises(RecordError, match=r"field 'id'.*nulls"):
        producer.produce_batch("t", pa.table({"id": pa.array([1, None], pa.int64())}), partition=0)
    with pytest.raises(RecordError, match=r"field 'id'.*cast"):
        producer.produce_batch("t", pa.table({"id": ["one"]}), partition=0)
    assert producer.produce_batch("t", pa.table({"id": list(range(12))}), partition=0) == 3


def test_partition_by_column_must_exist() -> None:
    p = ParquetProducer({"columnar.encoding": "parquet", "columnar.partition.by": "day"})
    with pytest.raises(SchemaError, match="field 'day'"):
        p.set_schema("t", SCHEMA)


def test_encoding_none_passes_values_through_unchanged() -> None:
    p = ParquetProducer({"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 200})
    reports: list[tuple[object, bytes]] = []
    p.produce(
        "t", value=b"bytes as usual", key=b"k", partition=0, on_delivery=lambda e, m: reports.append((e, m.value()))
    )
    p.purge()
    assert p.flush(5) == 0
    # the purged message is reported as confluent-kafka reports it, with its bytes untouched
    assert len(reports) == 1
    assert reports[0][1] == b"bytes as usual"
    assert reports[0][0].code() == KafkaError._PURGE_QUEUE
