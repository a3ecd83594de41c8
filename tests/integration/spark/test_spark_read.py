"""Reading parka topics in Spark: batch and streaming, metadata, and bad rows as clear errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from parka.producer import ParquetProducer
from parka.spark_ext import read, read_stream, translate
from pyspark.errors import PythonException

from parka.errors import SchemaError, SegmentDecodeError, SegmentError
from parka.schema import schema_fingerprint
from parka.segment import encode_segment

from .._ingest_util import EVENTS, EVENTS_AVRO, events, produce_events
from ._util import SPARK

pytestmark = SPARK


def user_rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.select(EVENTS.names).to_pylist(), key=lambda r: r["id"])


def test_batch_read_gives_every_record_once_with_metadata(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 400, batch=50)
    meta = ["topic", "partition", "offset", "index", "timestamp"]
    out = read(spark, topic, bootstrap_servers=bootstrap, metadata=meta).toArrow()
    assert user_rows(out) == user_rows(events(0, 400))
    coords = set(zip(*(out.column(f"kafka_{m}").to_pylist() for m in ("partition", "offset", "index")), strict=True))
    assert len(coords) == 400
    assert set(out.column("kafka_topic").to_pylist()) == {topic}
    assert out.column("kafka_timestamp").null_count == 0
    assert out.column("__parka_key").to_pylist()[0] is not None  # produced with key_column="device"


def test_a_batch_read_of_an_evolved_topic_takes_every_segments_columns(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """The topic's schema lost ``day`` (NOT NULL before) and gained ``note``: without a schema,
    read() holds both, each null where a segment lacks it. A column whose type changed is a
    SchemaError naming it."""
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 20, batch=10)
    evolved = pa.schema([*(f for f in EVENTS if f.name != "day"), pa.field("note", pa.string())])
    newer = events(20, 10).drop_columns(["day"]).append_column("note", pa.array([f"n{i}" for i in range(20, 30)]))
    with ParquetProducer(
        {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 10}
    ) as producer:
        producer.set_schema(topic, evolved)
        producer.produce_batch(topic, newer.cast(evolved))
        assert producer.flush(30) == 0
    out = read(spark, topic, bootstrap_servers=bootstrap, reserved="drop").toArrow()
    assert out.schema.names == [*EVENTS.names, "note"]
    rows = sorted(out.to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(30))
    assert [r["day"] is None for r in rows] == [False] * 20 + [True] * 10
    assert [r["note"] for r in rows] == [None] * 20 + [f"n{i}" for i in range(20, 30)]

    changed = pa.schema([pa.field("id", pa.string())])
    with ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet"}) as producer:
        producer.set_schema(topic, changed)
        producer.produce_batch(topic, pa.table({"id": ["x"]}, schema=changed))
        assert producer.flush(30) == 0
    with pytest.raises(SchemaError, match=r"'id' is string in the segment but int64 in an older segment.*give the"):
        read(spark, topic, bootstrap_servers=bootstrap)


def test_streaming_read_with_the_topics_avro_schema(spark: Any, bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1)
    produce_events(bootstrap, topic, 0, 300, batch=100)
    options = {"startingOffsets": "earliest"}  # the Kafka source streams from latest by default
    df = read_stream(
        spark, topic, bootstrap_servers=bootstrap, schema=json.dumps(EVENTS_AVRO), options=options, reserved="drop"
    )
    assert df.isStreaming
    name = f"mem_{topic.replace('-', '_')}"
    query = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    query.awaitTermination(120)
    out = spark.table(name).toArrow()
    assert out.column_names == EVENTS.names
    assert user_rows(out) == user_rows(events(0, 300))


def produce_raw(bootstrap: str, topic: str, messages: list[tuple[bytes, list[tuple[str, bytes]]]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value, headers in messages:
        producer.produce(topic, value=value, headers=headers, partition=0)
    assert producer.flush(30) == 0


def good_segment(start: int, n: int) -> tuple[bytes, list[tuple[str, bytes]]]:
    seg = encode_segment(events(start, n), codec="zstd", fingerprint=schema_fingerprint(EVENTS))
    return seg.value, seg.headers


@pytest.mark.parametrize("bad", ["plain", "corrupt"])
def test_a_bad_row_fails_the_job_naming_topic_partition_offset(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], bad: str
) -> None:
    topic = new_topic(partitions=1)
    value, headers = good_segment(0, 50)
    if bad == "plain":
        wrong, expected = (b'{"id": 1}', []), SegmentError
    else:
        wrong, expected = (value[:50] + bytes(30) + value[80:], headers), SegmentDecodeError
    produce_raw(bootstrap, topic, [(value, headers), wrong, good_segment(50, 50)])  # acknowledged: readable
    df = read(spark, topic, bootstrap_servers=bootstrap, schema=EVENTS)
    with pytest.raises(PythonException) as info:  # Spark's, with ours inside: translate() gets it out
        df.count()
    err = translate(info.value)
    assert type(err) is expected
    assert (err.topic, err.partition, err.offset) == (topic, 0, 1)
    assert ("not a parka segment" if bad == "plain" else "but 'parka.crc32' says") in str(err)
