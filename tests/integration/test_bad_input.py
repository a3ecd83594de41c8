"""Bad input gets a clear error at produce(); the records around it are still delivered."""

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


def test_bad_records_raise_and_neighbours_are_delivered(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.batch.bytes": 4096,
        "columnar.batch.records": 7,
    }
    delivered: list[int] = []
    with ParquetProducer(conf) as producer:
        with pytest.raises(RecordError, match=rf"topic '{topic}'.*set_schema"):
            producer.produce(topic, value={"id": 0, "name": "a"})
        producer.set_schema(topic, SCHEMA)
        ok = 0
        for i in range(40):
            if i % 10 == 3:
                with pytest.raises(RecordError, match=rf"topic '{topic}', field 'name'"):
                    producer.produce(topic, value={"id": i})  # missing non-null field
            elif i % 10 == 5:
                with pytest.raises(RecordError, match=rf"topic '{topic}', field 'id'"):
                    producer.produce(topic, value={"id": "five", "name": "x"})  # wrong type
            elif i % 10 == 7:
                with pytest.raises(RecordTooLargeError, match=rf"topic '{topic}'.*columnar.batch.bytes"):
                    producer.produce(topic, value={"id": i, "name": "n", "note": "z" * 200_000})
            else:
                producer.produce(
                    topic,
                    value={"id": i, "name": f"n{i}"},
                    on_delivery=lambda e, m: delivered.append(m.value()["id"]) if e is None else None,
                )
                ok += 1
        assert producer.flush(30) == 0
    expected = [i for i in range(40) if i % 10 not in (3, 5, 7)]
    assert sorted(delivered) == expected
    got = consume_records(bootstrap, topic, group_id, ok)
    assert [m.value()["id"] for m in got] == expected


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
    plain = Producer({"bootstrap.servers": bootstrap})
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
