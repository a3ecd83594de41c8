"""ParquetProducer -> real broker -> ParquetConsumer: records come back equal and in order."""

from __future__ import annotations

import io
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from parka.examples import FLIGHTS_AVRO, flights
from parka.message import TIMESTAMP_CREATE_TIME
from parka.partitioner import partition_for_key
from parka.schema import schema_fingerprint, to_arrow_schema
from parka.segment import is_segment, read_segment_info

from ._everything import EVERYTHING_AVRO, everything_records


def consume_records(bootstrap: str, topic: str, group: str, expected: int, timeout_s: float = 60) -> list[Any]:
    """Everything the shim returns for ``topic`` until ``expected`` records arrived."""
    out: list[Any] = []
    with ParquetConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            batch = consumer.consume(10_000, timeout=1.0)
            for msg in batch:
                assert msg.error() is None, msg.error()
            out.extend(batch)
        # nothing beyond what was produced
        assert consumer.poll(1.0) is None
    return out


def raw_messages(bootstrap: str, topic: str, expected: int, timeout_s: float = 60) -> list[Any]:
    """Plain confluent-kafka consumer: the raw Kafka messages of ``topic``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < expected and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None:
            assert msg.error() is None, msg.error()
            out.append(msg)
    consumer.close()
    return out


def test_every_type_round_trips_in_partition_order(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic(partitions=3)
    records = everything_records(1500)
    delivered: list[tuple[int, int, int, int]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.value()["id"], msg.partition(), msg.offset(), msg.index()))

    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
        "columnar.batch.records": 200,
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, EVERYTHING_AVRO)
        for rec in records:
            producer.produce(
                topic,
                value=rec,
                key=f"k{rec['id'] % 17}",
                timestamp=1_700_000_000_000 + rec["id"],
                headers=[("rid", str(rec["id"]).encode())],
                on_delivery=on_delivery,
            )
        assert producer.flush(30) == 0
    assert errors == []
    assert sorted(d[0] for d in delivered) == list(range(len(records)))

    got = consume_records(bootstrap, topic, group_id, len(records))
    assert len(got) == len(records)
    by_partition: dict[int, list[Any]] = defaultdict(list)
    for msg in got:
        by_partition[msg.partition()].append(msg)
    expected_by_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        expected_by_partition[partition_for_key("consistent_random", f"k{rec['id'] % 17}".encode(), 3)].append(rec)
    assert set(by_partition) == set(expected_by_partition)
    for p, msgs in by_partition.items():
        assert [m.value() for m in msgs] == expected_by_partition[p]
        for m in msgs:
            rid = m.value()["id"]
            assert m.key() == f"k{rid % 17}".encode()
            assert m.timestamp() == (TIMESTAMP_CREATE_TIME, 1_700_000_000_000 + rid)
            assert m.headers() == [("rid", str(rid).encode())]
    # delivery reports carried the same segment offsets and indexes the consumer saw
    seen = {m.value()["id"]: (m.partition(), m.offset(), m.index()) for m in got}
    assert {d[0]: d[1:] for d in delivered} == seen


def test_segments_are_standalone_parquet_files(bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    records = everything_records(600, seed=3)
    declared = to_arrow_schema(EVERYTHING_AVRO)
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "snappy",
        "columnar.batch.records": 250,
        # segments cut by count only: with the default 100 ms, a loaded machine's slow produce
        # loop let linger cut one early ([250, 250, 16, 84] in a full run beside another)
        "linger.ms": 60_000,
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, EVERYTHING_AVRO)
        for rec in records:
            producer.produce(topic, value=rec)
    msgs = raw_messages(bootstrap, topic, expected=3)
    assert [len(read_segment_info(m.headers()).__dict__) for m in msgs]  # headers parse
    total = 0
    for m in msgs:
        assert is_segment(m.headers())
        info = read_segment_info(m.headers())
        table = pq.read_table(io.BytesIO(m.value()))
        assert table.schema.equals(declared, check_metadata=False)
        assert table.num_rows == info.num_records
        assert info.fingerprint == schema_fingerprint(declared)
        assert info.codec == "snappy"
        total += table.num_rows
    assert [read_segment_info(m.headers()).num_records for m in msgs] == [250, 250, 100]
    assert total == len(records)


def test_flights_round_trip(bootstrap: str, new_topic: Callable[..., str], group_id: str) -> None:
    topic = new_topic(partitions=2)
    table = flights()
    assert table.num_rows == 336_776
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
        "columnar.batch.records": 20_000,
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, FLIGHTS_AVRO)
        producer.produce_batch(topic, table, key_column="tailnum")
        assert producer.flush(60) == 0
    got = consume_records(bootstrap, topic, group_id, table.num_rows, timeout_s=120)
    assert len(got) == table.num_rows
    # per partition, records come back in input order
    expected: dict[int, list[int]] = defaultdict(list)
    tails = table["tailnum"].to_pylist()
    for i, tail in enumerate(tails):
        if tail is not None:
            expected[partition_for_key("consistent_random", tail.encode(), 2)].append(i)
    rows = table.to_pylist()
    seen: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in got:
        seen[m.partition()].append(m.value())
    keyed = {p: [r for r in recs if r["tailnum"] is not None] for p, recs in seen.items()}
    for p, idx in expected.items():
        assert keyed[p] == [rows[i] for i in idx]
    # and the multiset of all records is the input's
    back = pa.Table.from_pylist([m.value() for m in got], schema=table.schema)
    key_cols = [(name, "ascending") for name in table.column_names]
    assert back.sort_by(key_cols).equals(table.sort_by(key_cols))


def test_segments_respect_the_byte_limit(bootstrap: str, new_topic: Callable[..., str], group_id: str) -> None:
    topic = new_topic()
    limit = 32_768
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "columnar.encoding": "parquet",
        "columnar.batch.bytes": limit,
    }
    records = everything_records(6000, seed=11)
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, EVERYTHING_AVRO)
        for rec in records:
            producer.produce(topic, value=rec)
        assert producer.flush(30) == 0
        segments = producer.stats()["segments"]
    msgs = raw_messages(bootstrap, topic, segments)
    assert len(msgs) == segments > 10
    assert max(len(m.value()) for m in msgs) <= limit
    # the size model fills segments rather than cutting tiny ones
    assert sum(len(m.value()) for m in msgs) / len(msgs) > limit * 0.4
    got = consume_records(bootstrap, topic, group_id, len(records))
    assert [m.value() for m in got] == records


def test_linger_sends_an_idle_buffer_without_poll(bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    producer = ParquetProducer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "columnar.encoding": "parquet", "linger.ms": 300}
    )
    producer.set_schema(topic, EVERYTHING_AVRO)
    for rec in everything_records(5):
        producer.produce(topic, value=rec)
    # no poll(), no flush(): the linger thread cuts the segment and librdkafka sends it
    msgs = raw_messages(bootstrap, topic, 1, timeout_s=20)
    assert len(msgs) == 1
    assert read_segment_info(msgs[0].headers()).num_records == 5
    assert producer.flush(10) == 0
    producer.close()
