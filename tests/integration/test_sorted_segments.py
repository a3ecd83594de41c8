"""columnar.sort.by through a real broker: sorted segments, each key's records still in order."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from parka.producer import ParquetProducer

from .test_roundtrip import consume_records

SCHEMA = {
    "type": "record",
    "name": "Gps",
    "fields": [
        {"name": "device", "type": "long"},
        {"name": "seq", "type": "long"},
        {"name": "speed", "type": "double"},
    ],
}


def produce(bootstrap: str, topic: str, sort_by: str, records: list[dict[str, Any]]) -> dict[int, tuple[int, int]]:
    """Produce ``records`` keyed by device; returns seq -> (offset, index) from the delivery reports."""
    delivered: dict[int, tuple[int, int]] = {}
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[msg.value()["seq"]] = (msg.offset(), msg.index())

    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
        "columnar.batch.records": 200,
        "linger.ms": 5000,  # segments cut at 200 records
        "columnar.sort.by": sort_by,
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, SCHEMA)
        for rec in records:
            producer.produce(topic, value=rec, key=str(rec["device"]), on_delivery=on_delivery)
        assert producer.flush(30) == 0
    assert errors == []
    return delivered


def fleet(n: int) -> list[dict[str, Any]]:
    rng = random.Random(5)
    return [{"device": rng.randrange(10), "seq": i, "speed": rng.uniform(0, 100)} for i in range(n)]


def test_segments_sorted_by_the_key_column_keep_each_keys_order(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    records = fleet(600)
    delivered = produce(bootstrap, topic, "device", records)
    got = consume_records(bootstrap, topic, group_id, len(records))
    assert sorted(m.value()["seq"] for m in got) == list(range(600))
    segments: dict[int, list[Any]] = defaultdict(list)
    for m in got:
        segments[m.offset()].append(m)
    assert len(segments) == 3
    for msgs in segments.values():
        devices = [m.value()["device"] for m in msgs]
        assert devices == sorted(devices)
        assert [m.index() for m in msgs] == list(range(len(msgs)))
    for device in range(10):
        assert [m.value()["seq"] for m in got if m.key() == str(device).encode()] == [
            r["seq"] for r in records if r["device"] == device
        ]
    # each record's delivery report names the place the consumer found it at
    assert delivered == {m.value()["seq"]: (m.offset(), m.index()) for m in got}


def test_a_sort_that_would_reorder_a_keys_records_is_not_applied(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    records = fleet(400)
    delivered = produce(bootstrap, topic, "speed", records)
    got = consume_records(bootstrap, topic, group_id, len(records))
    # sorting by speed would swap records of one device in every segment: produce order stays
    assert [m.value()["seq"] for m in got] == list(range(400))
    assert delivered == {m.value()["seq"]: (m.offset(), m.index()) for m in got}
