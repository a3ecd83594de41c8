"""KIP-1008's compatibility matrix and record-precise commits (placement parity: test_placement.py)."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from .test_roundtrip import consume_records, raw_messages

SCHEMA = pa.schema([("id", pa.int64(), False), ("body", pa.string())])


def test_encoding_none_behaves_as_the_plain_producer(bootstrap: str, new_topic: Callable[..., str]) -> None:
    plain_topic, parka_topic = new_topic(partitions=3), new_topic(partitions=3)
    reports: dict[str, list[tuple[int, bytes]]] = {"plain": [], "parka": []}
    # idempotence: without it a retried first batch on a fresh topic can land after later ones
    common = {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "enable.idempotence": True}
    plain = Producer(common)
    shim = ParquetProducer({**common, "columnar.encoding": "none"})
    for i in range(300):
        key, value = f"key-{i % 23}".encode(), f"value-{i}".encode()
        plain.produce(
            plain_topic,
            value=value,
            key=key,
            headers=[("h", b"1")],
            on_delivery=lambda e, m: reports["plain"].append((m.partition(), m.value())),
        )
        shim.produce(
            parka_topic,
            value=value,
            key=key,
            headers=[("h", b"1")],
            on_delivery=lambda e, m: reports["parka"].append((m.partition(), m.value())),
        )
    assert plain.flush(30) == 0
    assert shim.flush(30) == 0
    assert len(shim) == 0
    assert sorted(reports["plain"]) == sorted(reports["parka"])
    a = raw_messages(bootstrap, plain_topic, 300)
    b = raw_messages(bootstrap, parka_topic, 300)

    def view(msgs: list[Message]) -> list[tuple[Any, ...]]:
        return sorted((m.partition(), m.offset(), m.key(), m.value(), m.headers()) for m in msgs)

    assert view(a) == view(b)


def test_plain_consumer_reads_segments_as_parquet_bytes(bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with ParquetProducer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "columnar.encoding": "parquet",
            "columnar.batch.records": 50,
            "linger.ms": 60_000,  # cut by count alone: a loaded machine must not cut a segment early
        }
    ) as producer:
        producer.set_schema(topic, SCHEMA)
        for i in range(120):
            producer.produce(topic, value={"id": i, "body": f"b{i}"})
    msgs = raw_messages(bootstrap, topic, 3)
    assert len(msgs) == 3
    ids: list[int] = []
    for m in msgs:
        assert m.value()[:4] == b"PAR1" and m.value()[-4:] == b"PAR1"
        ids.extend(pq.read_table(io.BytesIO(m.value()))["id"].to_pylist())
    assert ids == list(range(120))


def test_shim_passes_plain_messages_through(bootstrap: str, new_topic: Callable[..., str], group_id: str) -> None:
    topic = new_topic()
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(20):
        plain.produce(topic, value=f"v{i}".encode(), key=b"k", headers=[("x", b"y")])
    plain.flush(30)
    got = consume_records(bootstrap, topic, group_id, 20)
    assert all(isinstance(m, Message) for m in got)
    assert [(m.value(), m.key(), m.headers(), m.offset()) for m in got] == [
        (f"v{i}".encode(), b"k", [("x", b"y")], i) for i in range(20)
    ]


def test_commit_mid_segment_then_restart_loses_and_repeats_nothing(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    with ParquetProducer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "columnar.encoding": "parquet",
            "columnar.batch.records": 100,
            "linger.ms": 60_000,  # cut by count alone: a loaded machine must not cut a segment early
        }
    ) as producer:
        producer.set_schema(topic, SCHEMA)
        for i in range(250):
            producer.produce(topic, value={"id": i, "body": None})
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    seen: list[int] = []
    first = ParquetConsumer(conf)
    first.subscribe([topic])
    deadline = time.monotonic() + 30
    while len(seen) < 137 and time.monotonic() < deadline:
        msg = first.poll(1.0)
        if msg is not None:
            seen.append(msg.value()["id"])
    assert seen == list(range(137))  # stopped inside the second segment (offset 1, index 37)
    committed = first.commit(asynchronous=False)
    assert committed is not None
    assert [(tp.offset, tp.metadata) for tp in committed] == [(1, "parka:1:1:37")]
    first.close()

    second = ParquetConsumer(conf)
    second.subscribe([topic])
    rest: list[int] = []
    deadline = time.monotonic() + 30
    while len(rest) < 113 and time.monotonic() < deadline:
        msg = second.poll(1.0)
        if msg is not None:
            rest.append(msg.value()["id"])
    assert second.poll(1.0) is None
    # and commit(message=...) of the last record moves past the last segment
    second.commit(message=msg, asynchronous=False)
    second.close()
    assert rest == list(range(137, 250))
    third = ParquetConsumer(conf)
    third.subscribe([topic])
    assert third.poll(3.0) is None
    third.close()


def test_auto_commit_on_close_is_record_precise(bootstrap: str, new_topic: Callable[..., str], group_id: str) -> None:
    topic = new_topic()
    with ParquetProducer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "columnar.encoding": "parquet",
            "columnar.batch.records": 1000,
            "linger.ms": 60_000,  # cut by count alone: a loaded machine must not cut a segment early
        }
    ) as producer:
        producer.set_schema(topic, SCHEMA)
        for i in range(300):
            producer.produce(topic, value={"id": i, "body": "x"})
    conf = {"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest"}
    ids: list[int] = []
    with ParquetConsumer(conf) as first:
        first.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(ids) < 120:
            assert time.monotonic() < deadline, f"stalled after {len(ids)} records"
            msg = first.poll(1.0)
            if msg is not None:
                ids.append(msg.value()["id"])
    with ParquetConsumer(conf) as second:
        second.subscribe([topic])
        while len(ids) < 300:
            msg = second.poll(5.0)
            assert msg is not None, f"stalled after {len(ids)} records"
            ids.append(msg.value()["id"])
        assert second.poll(1.0) is None
    assert ids == list(range(300))


def test_a_client_error_inside_a_rebalance_callback_reaches_polls_caller_as_a_kafka_exception(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    """A client call failing inside the application's ``on_assign`` (here the watermarks of a
    client whose broker is away) is raised by ``poll()`` as the ``KafkaException`` it is.
    confluent-kafka's own Consumer (2.16.1) hands it over as a bare ``KafkaError``, which is no
    exception class: no ``except`` clause catches it (docs/client.md says how parka differs)."""
    topic = new_topic()
    away = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": group_id, "log_level": 0})
    called: list[int] = []

    def on_assign(consumer: Any, partitions: list[TopicPartition]) -> None:
        called.append(len(partitions))
        away.get_watermark_offsets(TopicPartition(topic, 0), timeout=1)

    shim = ParquetConsumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    shim.subscribe([topic], on_assign=on_assign)
    raised: KafkaException | None = None
    try:
        for _ in range(60):  # until the group assigns the partition (each poll waits up to 1 s)
            try:
                shim.poll(1)
            except KafkaException as exc:
                raised = exc
                break
        assert raised is not None and "Failed to get watermark offsets" in str(raised)
        assert called == [1]
    finally:
        shim.close()
        away.close()
