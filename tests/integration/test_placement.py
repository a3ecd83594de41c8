"""Placement parity: a key lands on the partition ``confluent_kafka.Producer`` puts it on, for the
default config and every ``partitioner`` librdkafka accepts, through ``produce`` and ``produce_batch``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from parka.producer import ParquetProducer

from parka.partitioner import PARTITIONERS
from parka.segment import decode_segment, split_reserved

from .test_roundtrip import raw_messages

SCHEMA = pa.schema([("id", pa.int64(), False), ("skey", pa.string()), ("bkey", pa.binary()), ("ikey", pa.int64())])
PARTITIONS = 6


def _keys_for(partitioner: str | None) -> list[bytes]:
    keys = [f"device-{i}".encode() for i in range(300)] + ["é-ü".encode(), b"a" * 100, b"0", b"\x00\xff" * 9]
    # under consistent_random (the default) an empty key counts as no key: sticky, so random in both
    if partitioner not in (None, "consistent_random"):
        keys.append(b"")
    return keys


def _plain_partitions(conf: dict[str, Any], topic: str, keys: list[bytes]) -> dict[bytes, int]:
    out: dict[bytes, int] = {}
    plain = Producer(conf)
    for k in keys:
        plain.produce(topic, value=b"x", key=k, on_delivery=lambda e, m: out.__setitem__(m.key(), m.partition()))
    assert plain.flush(30) == 0
    return out


def _read_back(bootstrap: str, topic: str, segments: int) -> dict[bytes, int]:
    """The partition each key's row arrived in, from the segments' reserved key column."""
    out: dict[bytes, int] = {}
    for msg in raw_messages(bootstrap, topic, segments):
        _, meta = split_reserved(decode_segment(msg.value(), msg.headers()))
        assert meta.keys is not None
        for k in meta.keys:
            assert k is not None
            out[k] = msg.partition()
    return out


@pytest.mark.parametrize("partitioner", [None, *[p for p in PARTITIONERS if p != "random"]])
def test_every_key_lands_where_the_plain_client_puts_it(
    bootstrap: str, new_topic: Callable[..., str], partitioner: str | None
) -> None:
    keys = _keys_for(partitioner)
    setting = {} if partitioner is None else {"partitioner": partitioner}
    plain_topic, records_topic, batch_topic = (new_topic(partitions=PARTITIONS) for _ in range(3))
    expected = _plain_partitions({"bootstrap.servers": bootstrap, **setting}, plain_topic, keys)
    assert len(expected) == len(keys)
    assert len(set(expected.values())) == PARTITIONS  # the keys really spread

    produced: dict[bytes, int] = {}
    segments: list[int] = []
    with ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", **setting}) as producer:
        producer.set_schema(records_topic, SCHEMA)
        producer.set_schema(batch_topic, SCHEMA)
        for i, k in enumerate(keys):
            producer.produce(
                records_topic,
                value={"id": i},
                key=k,
                on_delivery=lambda e, m: produced.__setitem__(m.key(), m.partition()),
            )
        table = pa.table({"id": list(range(len(keys))), "bkey": pa.array(keys, pa.binary())})
        producer.produce_batch(batch_topic, table, key_column="bkey", on_delivery=lambda e, m, n: segments.append(n))
        assert producer.flush(30) == 0
    assert produced == expected
    assert sum(segments) == len(keys)
    assert _read_back(bootstrap, batch_topic, len(segments)) == expected


def test_key_columns_of_strings_and_integers_become_the_keys_produce_sends(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A string column keys by its UTF-8 bytes, an integer column by its decimal text: a row lands
    where ``produce(key=str(value))`` puts the record."""
    values = list(range(-50, 250))
    strings = [f"user-{v}-é" for v in values]
    plain_topic, by_string, by_int = (new_topic(partitions=PARTITIONS) for _ in range(3))
    expected_str = _plain_partitions({"bootstrap.servers": bootstrap}, plain_topic, [s.encode() for s in strings])
    expected_int = _plain_partitions({"bootstrap.servers": bootstrap}, plain_topic, [str(v).encode() for v in values])
    table = pa.table({"id": values, "skey": strings, "ikey": values})
    counts: list[int] = []
    with ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet"}) as producer:
        producer.set_schema(by_string, SCHEMA)
        producer.set_schema(by_int, SCHEMA)
        producer.produce_batch(by_string, table, key_column="skey", on_delivery=lambda e, m, n: counts.append(n))
        producer.produce_batch(by_int, table, key_column="ikey", on_delivery=lambda e, m, n: counts.append(n))
        assert producer.flush(30) == 0
    # fewer rows than a segment holds: one segment per partition used
    got_str = _read_back(bootstrap, by_string, len(set(expected_str.values())))
    got_int = _read_back(bootstrap, by_int, len(set(expected_int.values())))
    assert got_str == expected_str
    assert got_int == expected_int
    assert sum(counts) == 2 * len(values)
