"""Bad input gets a clear error naming topic and field (at produce() where cheap, else through the
record's delivery callback); the records around it are still delivered."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, Producer
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from parka.errors import RecordError, RecordTooLargeError, SegmentDecodeError
from parka.segment import encode_segment

from .test_roundtrip import consume_records

SCHEMA = pa.schema([("id", pa.int64(), False), ("name", pa.string(), False), ("note", pa.string())])


def test_bad_records_are_reported_and_neighbours_are_delivered(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "columnar.encoding": "parquet",
        "columnar.batch.bytes": 4096,
        "columnar.batch.records": 7,
    }
    delivered: list[int] = []
    failed: dict[int, Exception] = {}

    def report(err: Any, msg: Any) -> None:
        if err is None:
            delivered.append(msg.value()["id"])
        else:
            failed[msg.value()["id"]] = err

    with ParquetProducer(conf) as producer:
        with pytest.raises(RecordError, match=rf"topic '{topic}'.*set_schema"):
            producer.produce(topic, value={"id": 0, "name": "a"})
        producer.set_schema(topic, SCHEMA)
        for i in range(40):
            if i % 10 == 3:
                value: dict[str, Any] = {"id": i}  # missing non-null field
            elif i % 10 == 5:
                value = {"id": i, "name": 5}  # wrong type
            elif i % 10 == 7:
                value = {"id": i, "name": "n", "note": "z" * 200_000}  # alone larger than a segment
            else:
                value = {"id": i, "name": f"n{i}"}
            producer.produce(topic, value=value, on_delivery=report)
        assert producer.flush(30) == 0
    expected = [i for i in range(40) if i % 10 not in (3, 5, 7)]
    assert sorted(delivered) == expected
    assert sorted(failed) == [i for i in range(40) if i % 10 in (3, 5, 7)]
    for i, err in failed.items():
        assert isinstance(err, RecordError)
        assert err.topic == topic
        if i % 10 == 3:
            assert err.field == "name" and "required field is missing" in str(err)
        elif i % 10 == 5:
            assert err.field == "name" and "expected str" in str(err)
        else:
            assert isinstance(err, RecordTooLargeError) and "columnar.batch.bytes" in str(err)
    got = consume_records(bootstrap, topic, group_id, len(expected))
    assert [m.value()["id"] for m in got] == expected


def test_one_bad_record_among_ten_thousand_costs_only_itself(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    records = [{"id": i, "name": f"name-{i}", "note": None if i % 3 else "x"} for i in range(10_000)]
    records[5_123] = {"id": 5_123, "name": "fine", "note": 3.5}  # a float where a string belongs
    errors: list[Any] = []
    delivered = 0

    def report(err: Any, msg: Any) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            errors.append((err, msg.value()))

    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, SCHEMA)
        for rec in records:
            producer.produce(topic, value=rec, on_delivery=report)
        assert producer.flush(30) == 0
    assert delivered == 9_999
    [(err, value)] = errors
    assert isinstance(err, RecordError)
    assert (err.topic, err.field) == (topic, "note")
    assert "expected str, got float" in str(err)
    assert value == records[5_123]
    got = consume_records(bootstrap, topic, group_id, 9_999)
    assert [m.value() for m in got] == records[:5_123] + records[5_124:]


def test_delivery_errors_reach_every_record_callback() -> None:
    # Nothing listens on port 9 on loopback: delivery must fail and say so per record.
    conf = {
        "bootstrap.servers": "127.0.0.1:9",
        "columnar.encoding": "parquet",
        "message.timeout.ms": 500,
        "linger.ms": 0,
    }
    results: list[tuple[Any, int]] = []
    producer = ParquetProducer(conf)
    producer.set_schema("nowhere", SCHEMA)
    for i in range(5):
        producer.produce(
            "nowhere",
            value={"id": i, "name": "x"},
            partition=0,
            on_delivery=lambda e, m: results.append((e, m.value()["id"])),
        )
    assert producer.flush(10) == 0
    assert [r[1] for r in results] == [0, 1, 2, 3, 4]
    assert all(e is not None and e.code() == KafkaError._MSG_TIMED_OUT for e, _ in results)


def test_corrupt_segment_is_reported_with_its_bytes_and_consuming_continues(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    good = encode_segment(pa.table({"id": [1, 2]}), codec="zstd", fingerprint="0" * 16)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    plain.produce(topic, value=good.value, headers=good.headers)
    plain.produce(topic, value=b"PAR1 not really parquet", headers=good.headers)
    plain.produce(topic, value=good.value, headers=good.headers)
    plain.flush(30)
    consumer = ParquetConsumer({"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    ids: list[int] = []
    errors: list[SegmentDecodeError] = []
    deadline = time.monotonic() + 30
    while len(ids) + len(errors) < 5 and time.monotonic() < deadline:
        try:
            msg = consumer.poll(1.0)
        except SegmentDecodeError as exc:
            errors.append(exc)
            continue
        if msg is not None:
            ids.append(msg.value()["id"])
    consumer.close()
    assert ids == [1, 2, 1, 2]
    assert len(errors) == 1
    assert errors[0].value == b"PAR1 not really parquet"
    assert (errors[0].topic, errors[0].partition, errors[0].offset) == (topic, 0, 1)
