"""The producer's placement: partition counts looked up off the producer's lock, rows to partitions.

No broker: the lookups are test doubles that answer (or block) when the test says so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ClusterMetadata, PartitionMetadata, TopicMetadata
from parka.producer import ParquetProducer
from parka.producer._placement import Placement, needs_metadata

from parka.errors import KafkaClientError
from parka.partitioner import partitions_for_keys

SCHEMA = pa.schema([("id", pa.int64(), False)])


def metadata(topic: str, partitions: int) -> ClusterMetadata:
    md = ClusterMetadata()
    tmd = TopicMetadata()
    tmd.topic = topic
    tmd.partitions = {i: PartitionMetadata() for i in range(partitions)}
    md.topics = {topic: tmd}
    return md


class GatedLookup:
    """A ``list_topics`` that blocks until the test opens the gate, then answers ``partitions``."""

    def __init__(self, partitions: int = 3) -> None:
        self.partitions = partitions
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.calls = 0

    def __call__(self, topic: str, timeout: float = 0) -> ClusterMetadata:
        self.calls += 1
        self.entered.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return metadata(topic, self.partitions)


def test_a_count_is_looked_up_on_a_thread_of_its_own() -> None:
    lookup = GatedLookup(partitions=4)
    placement = Placement(lookup, "consistent_random")
    assert not placement.resolved("t")
    placement.request("t")
    assert lookup.entered.wait(10)
    assert not placement.resolved("t")  # request() returned while the lookup is blocked
    assert not placement.wait("t", timeout=0)
    lookup.gate.set()
    assert placement.wait("t")
    assert placement.known("t") == 4
    assert placement.count("t") == 4
    assert lookup.calls == 1


def test_a_failed_lookup_is_reported_once_then_looked_up_again() -> None:
    answers: list[Any] = [KafkaException(KafkaError(KafkaError._TRANSPORT, "down"))]

    def lookup(topic: str, timeout: float = 0) -> ClusterMetadata:
        answer = answers[0]
        if isinstance(answer, Exception):
            raise answer
        return metadata(topic, answer)

    placement = Placement(lookup, "consistent_random", timeout_s=0)  # one attempt per lookup
    assert placement.wait("t")
    with pytest.raises(KafkaClientError, match=r"no partition metadata for topic 't'.*down") as failed:
        placement.count("t")
    assert isinstance(failed.value.kafka_error, KafkaException)
    answers[0] = 2
    with pytest.raises(KafkaClientError, match="yet"):
        placement.count("t")  # the failure was reported: this asks again
    assert placement.wait("t")
    assert placement.count("t") == 2


def test_explicit_partitions_need_no_count_and_unknown_ones_are_set_apart() -> None:
    placement = Placement(GatedLookup(), "consistent_random")  # the gate never opens
    parts, unknown, n = placement.assign("t", 3, None, [0, 2, 0])
    assert [(p, rows.tolist()) for p, rows in parts] == [(0, [0, 2]), (2, [1])]
    assert unknown is None and n == 3
    placement.learn("t", 2)
    parts, unknown, n = placement.assign("t", 3, None, [0, 2, 5])
    assert [(p, rows.tolist()) for p, rows in parts] == [(0, [0])]
    assert unknown is not None and unknown[0] == 2 and unknown[1].tolist() == [1, 2]


def test_keys_go_where_the_partitioner_puts_them_and_the_rest_stick_until_a_cut() -> None:
    placement = Placement(GatedLookup(), "murmur2_random")
    placement.learn("t", 3)
    keys = pa.array([b"a", None, b"b", None], pa.binary())
    parts, _, _ = placement.assign("t", 4, keys, None)
    where = {int(r): p for p, rows in parts for r in rows}
    expected = partitions_for_keys("murmur2_random", keys, 3)
    assert where[0] == expected[0] and where[2] == expected[2]
    sticky = where[1]
    assert where[3] == sticky
    placement.advance("t", sticky)
    parts, _, _ = placement.assign("t", 1, None, None)
    assert parts[0][0] == (sticky + 1) % 3


def test_needs_metadata_only_for_records_without_a_partition() -> None:
    side = ({"id": 1}, None, 0, None, None, None)
    assert not needs_metadata([side, side])
    assert needs_metadata([side, {"id": 2}])
    assert needs_metadata([({"id": 1}, b"k", -1, None, None, None)])


class _Gated(confluent_kafka.Producer):
    """The real client, with a ``list_topics`` that blocks on the class's gate."""

    lookup = GatedLookup(partitions=2)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        assert topic is not None
        return self.lookup(topic, timeout)


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedLookup]:
    lookup = _Gated.lookup = GatedLookup(partitions=2)
    monkeypatch.setattr(confluent_kafka, "Producer", _Gated)
    yield lookup
    lookup.gate.set()


def test_poll_flush_len_and_metrics_do_not_wait_for_a_metadata_lookup(gated: GatedLookup) -> None:
    producer = ParquetProducer(
        {
            "bootstrap.servers": "127.0.0.1:9",  # nothing listens: segments stay in the client
            "columnar.encoding": "parquet",
            "columnar.batch.records": 1000,
            "linger.ms": 0,
            "message.timeout.ms": 200,
        }
    )
    producer.set_schema("t", SCHEMA)
    # 16 records fill the first drain: produce() waits for the partition count, lock released
    producing = threading.Thread(target=lambda: [producer.produce("t", {"id": i}) for i in range(16)])
    producing.start()
    assert gated.entered.wait(10)
    assert producing.is_alive()
    assert producer.poll(0) == 0
    assert producer.flush(0) == 16  # returns: the records wait for their partition count
    assert len(producer) == 16
    assert producer.stats()["segments"] == 0
    assert producer._pipeline.buffered() == 16  # what the metrics scrape reads
    assert producing.is_alive()
    gated.gate.set()
    producing.join(10)
    assert not producing.is_alive()
    producer.flush(0)
    assert producer.stats()["records"] == 16
    assert gated.calls == 1
    producer.purge()
    producer.close(timeout=2)


def test_flush_waits_for_the_count_with_no_lock_held(gated: GatedLookup) -> None:
    producer = ParquetProducer(
        {"bootstrap.servers": "127.0.0.1:9", "columnar.encoding": "parquet", "message.timeout.ms": 200}
    )
    producer.set_schema("t", SCHEMA)
    producer.produce("t", {"id": 1})
    flushed: list[int] = []
    flushing = threading.Thread(target=lambda: flushed.append(producer.flush(5)))
    flushing.start()
    assert gated.entered.wait(10)
    assert producer.poll(0) == 0  # another thread's flush waits for metadata, not this poll
    assert len(producer) == 1
    gated.gate.set()
    flushing.join(10)
    assert not flushing.is_alive()
    assert producer.stats()["records"] == 1  # the record went out once the count came
    assert flushed == [0]  # its segment reported (timed out in the client: nothing listens)
    producer.purge()
    producer.close(timeout=2)
