"""The producer's pipeline parts without a broker: a topic's state and conversion (``_topics``),
segmenting (``_segmenter``) and the drain that waits for a partition count (``_pipeline``).

The Kafka client is a recorder of ``produce`` calls; clocks are injected.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.admin import ClusterMetadata, PartitionMetadata, TopicMetadata
from parka.producer._buffer import CutPolicy, PartitionBuffer, RowBatch, Staging
from parka.producer._outbox import Outbox
from parka.producer._pipeline import Pipeline
from parka.producer._segmenter import Segmenter
from parka.producer._topics import TopicState, convert, resolve_schema, topic_state

from parka.config import parse_producer_config
from parka.errors import ConfigError, RecordTooLargeError, SchemaError

SCHEMA = pa.schema([("id", pa.int64(), False), ("day", pa.string())])


class Recorder:
    """A Kafka client that takes every message and remembers (topic, partition, records)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, int]] = []

    def produce(self, topic: str, *, value: Any, partition: int, headers: Any, **_: Any) -> None:
        records = dict(headers or ()).get("parka.records")
        self.sent.append((topic, partition, int(records) if records else 0))

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        raise AssertionError("no lookup expected")


def settings(**conf: Any) -> Any:
    return parse_producer_config({"bootstrap.servers": "x", "columnar.encoding": "parquet", **conf})[0]


def batch(ids: range, day: str = "d") -> RowBatch:
    return RowBatch(pa.table({"id": pa.array(list(ids), pa.int64()), "day": [day] * len(ids)}, schema=SCHEMA))


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def segmenter(
    client: Recorder, clock: Clock, cuts: list[tuple[str, int]], **conf: Any
) -> tuple[Segmenter, TopicState, Outbox]:
    s = settings(**conf)
    state = topic_state("t", SCHEMA, None, s)
    out = Outbox(client, threading.Lock())  # type: ignore[arg-type]
    policy = CutPolicy(max_records=s.batch_records, max_bytes=s.batch_bytes, linger_s=s.linger_ms / 1000)
    counters = {"splits": 0, "bad_records": 0}
    seg = Segmenter(s, policy, {"t": state}, out, clock, lambda t, p: cuts.append((t, p)), counters)
    return seg, state, out


def test_a_full_buffer_is_cut_at_once_keeping_a_short_tail() -> None:
    client, clock, cuts = Recorder(), Clock(), []
    seg, state, _ = segmenter(client, clock, cuts, **{"columnar.batch.records": 4, "linger.ms": 100})
    seg.add("t", 0, state, batch(range(3)), 0.0)
    assert client.sent == [] and seg.buffered() == 3
    seg.add("t", 0, state, batch(range(3, 9)), 0.0)  # 9 rows: two full segments, one row kept
    assert client.sent == [("t", 0, 4), ("t", 0, 4)]
    assert seg.buffered() == 1
    assert cuts == [("t", 0)]
    clock.now = 0.05
    seg.cut_due(clock.now)
    assert seg.buffered() == 1  # its linger has not expired
    seg.cut_due(0.2)
    assert client.sent[-1] == ("t", 0, 1) and seg.buffered() == 0


def test_a_kept_tail_lingers_from_when_its_own_rows_were_staged() -> None:
    """The rows left after a full segment came with the latest drain: their linger.ms runs from
    that drain's staging, not from the first row of the buffer the segment was cut from (whose
    linger had nearly run out: the tail would go out at the next tick as a segment of a row)."""
    client, clock, cuts = Recorder(), Clock(), []
    seg, state, _ = segmenter(client, clock, cuts, **{"columnar.batch.records": 4, "linger.ms": 100})
    seg.add("t", 0, state, batch(range(3)), 0.0)
    clock.now = 0.09
    seg.add("t", 0, state, batch(range(3, 9)), 0.09)  # 9 rows: two full segments, row 8 kept
    assert client.sent == [("t", 0, 4), ("t", 0, 4)] and seg.buffered() == 1
    seg.cut_due(0.15)  # 0.15 s after the buffer's first row, 0.06 s after the kept row's
    assert seg.buffered() == 1
    seg.cut_due(0.19)
    assert client.sent[-1] == ("t", 0, 1) and seg.buffered() == 0


def test_a_tail_reaching_into_an_earlier_piece_lingers_from_that_piece() -> None:
    buf = PartitionBuffer("t", 0, 0.0)
    buf.append(batch(range(3)), 0.0)
    buf.append(batch(range(3, 5)), 0.04)
    buf.append(batch(range(5, 7)), 0.08)
    assert buf.staged_at_of_last(2) == 0.08
    assert buf.staged_at_of_last(3) == 0.04
    assert buf.staged_at_of_last(5) == 0.0


def test_one_buffer_per_kafka_partition_so_segments_keep_the_records_order() -> None:
    client, clock, cuts = Recorder(), Clock(), []
    seg, state, _ = segmenter(client, clock, cuts, **{"columnar.partition.by": "day"})
    seg.add("t", 0, state, batch(range(2), "a"), 0.0)
    seg.add("t", 1, state, batch(range(5), "a"), 0.0)
    seg.add("t", 0, state, batch(range(3), "b"), 0.0)  # partition 0's "a" rows go out first
    assert client.sent == [("t", 0, 2)]
    seg.cut_all()
    assert sorted(client.sent) == [("t", 0, 2), ("t", 0, 3), ("t", 1, 5)]


def test_a_row_too_large_for_a_segment_is_reported_or_raised() -> None:
    client, clock, cuts = Recorder(), Clock(), []
    seg, state, out = segmenter(client, clock, cuts, **{"columnar.batch.bytes": 1024})
    big = RowBatch(pa.table({"id": [1], "day": ["x" * 50_000]}, schema=SCHEMA))
    with pytest.raises(RecordTooLargeError, match=r"columnar\.batch\.bytes=1024"):
        seg.send_now("t", 0, state, big, lambda err, msg, n: None)
    seg.add("t", 0, state, big, 0.0)
    seg.cut_all()
    assert client.sent == []
    assert out.unreported() == 1  # its failure report waits for poll()


def test_topic_state_names_what_the_settings_need_of_the_schema() -> None:
    with pytest.raises(SchemaError, match=r"columnar\.partition\.by") as exc:
        topic_state("t", SCHEMA, None, settings(**{"columnar.partition.by": "hour"}))
    assert exc.value.field == "hour"
    with pytest.raises(SchemaError, match=r"columnar\.sort\.by"):
        topic_state("t", SCHEMA, None, settings(**{"columnar.sort.by": "nope"}))
    with pytest.raises(ConfigError, match=r"schema\.registry\.url"):
        resolve_schema(None, None, "subject", False)
    with pytest.raises(ValueError, match="needs subject="):
        resolve_schema(None, SCHEMA, None, True)


def test_convert_sets_bad_records_apart_and_keeps_what_travels_beside_the_rest() -> None:
    s = settings()
    state = topic_state("t", SCHEMA, None, s)
    cb = object()
    stg = Staging.unpack(
        [({"id": 1}, b"k", 2, cb, None, None), {"id": "not an int"}, ({"id": 3}, None, -1, None, None, None)], None
    )
    converted = convert("t", state, stg, s)
    assert [err.field for _, err in converted.bad] == ["id"]
    assert converted.bad[0][1].topic == "t"
    assert converted.batch is not None
    assert converted.batch.table.column("id").to_pylist() == [1, 3]
    assert converted.batch.keys is not None and converted.batch.keys.to_pylist() == [b"k", None]
    assert converted.partitions == [2, -1]
    assert state.row_bytes is not None


def metadata(topic: str, n: int) -> ClusterMetadata:
    md, tmd = ClusterMetadata(), TopicMetadata()
    tmd.partitions = {i: PartitionMetadata() for i in range(n)}
    md.topics = {topic: tmd}
    return md


class GatedClient(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        assert self.gate.wait(30)
        return metadata(topic, 3)


def test_a_drain_that_needs_a_count_leaves_its_records_staged_until_it_comes() -> None:
    client, clock = GatedClient(), Clock()
    s = settings(**{"linger.ms": 0})
    pipe = Pipeline(client, s, clock, None, paused=lambda: False, on_full=lambda: None)  # type: ignore[arg-type]
    state = topic_state("t", SCHEMA, None, s)
    pipe.set_topic("t", state)
    state.items += [({"id": 1, "day": None}, None, 1, None, None, None)]  # an explicit partition
    with pipe.lock:
        assert pipe.drain("t", state)  # needs no count
    state.items += [{"id": 2, "day": None}]
    with pipe.lock:
        assert not pipe.drain("t", state)  # needs one: staged still, a lookup started
    assert len(state.items) == 1 and pipe.buffered() == 2
    client.gate.set()
    assert pipe.cut_all()
    assert pipe.buffered() == 0
    assert sum(n for _, _, n in client.sent) == 2
    assert 1 in {p for _, p, _ in client.sent}  # the explicit partition kept
    pipe.stop()
