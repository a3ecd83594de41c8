"""Producer behaviour that needs no broker: cutting rules with an injected clock, bad input."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from parka.producer import ParquetProducer

from parka.errors import ConfigError, RecordError, SchemaError

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
        "bad_records": 0,
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
    for i in range(6):  # the 5th record converts the staging: partition 0 holds 3, partition 1 holds 2
        producer.produce("t", value={"id": 10 + i, "s": None}, partition=i % 2)
    # ten records converted in two steps: each partition reached 5 and was cut
    assert (producer.stats()["segments"], producer.stats()["records"]) == (2, 10)
    assert len(producer) == 10


def test_produce_rejects_what_is_cheap_to_check(producer: ParquetProducer) -> None:
    producer.produce("t", value={"id": 1, "s": None}, partition=0)
    with pytest.raises(RecordError, match="topic 't', field 'key'"):
        producer.produce("t", value={"id": 2, "s": None}, key=42, partition=0)
    with pytest.raises(RecordError, match="topic 't', field 'headers'"):
        producer.produce("t", value={"id": 2, "s": None}, headers=[("h", 1)], partition=0)
    with pytest.raises(RecordError, match="topic 't': value must be a dict"):
        producer.produce("t", value=b"raw", partition=0)
    with pytest.raises(RecordError, match="topic 'u': no schema set"):
        producer.produce("u", value={"id": 1}, partition=0)
    assert len(producer) == 1


def test_a_bad_record_is_reported_through_its_callback_and_its_neighbours_go_on(
    producer: ParquetProducer, clock: FakeClock
) -> None:
    seen: list[tuple[object, object]] = []
    values = [{"id": 0, "s": "a"}, {"id": 1, "s": 3}, {"id": 2}, {"id": "x", "s": None}, {"id": 4, "t": 1}]
    for v in values:
        producer.produce("t", value=v, partition=0, on_delivery=lambda e, m: seen.append((e, m.value())))
    # the staging converted (5 records): three are bad, two wait in the partition's buffer
    assert producer.stats()["bad_records"] == 3
    assert seen == []  # reported in poll(), not before
    assert producer.poll(0) == 3
    errors = {m["id"]: e for e, m in seen}  # type: ignore[index]
    assert set(errors) == {1, "x", 4}
    assert isinstance(errors[1], RecordError)
    assert errors[1].field == "s" and "expected str" in str(errors[1])
    assert isinstance(errors["x"], RecordError)
    assert errors["x"].field == "id" and errors["x"].topic == "t"
    assert isinstance(errors[4], RecordError)
    assert errors[4].field == "t" and "unknown field" in str(errors[4])
    assert errors[1].code() == KafkaError._VALUE_SERIALIZATION  # answers like a KafkaError
    assert len(producer) == 2
    clock.now += 2
    producer.poll(0)
    assert producer.stats()["records"] == 2


def test_purge_drops_buffered_records_and_reports_each(producer: ParquetProducer) -> None:
    seen: list[object] = []
    for i in range(3):
        producer.produce("t", value={"id": i, "s": None}, partition=0, on_delivery=lambda e, m: seen.append(e))
    producer.purge()
    assert seen == []  # reports wait for poll, as confluent-kafka's do
    assert len(producer) == 3
    assert producer.poll(0) == 3
    assert [e.code() for e in seen] == [KafkaError._PURGE_QUEUE] * 3  # type: ignore[attr-defined]
    assert len(producer) == 0


def test_a_transactional_producer_refuses_records_outside_a_transaction() -> None:
    p = ParquetProducer(
        {"bootstrap.servers": "127.0.0.1:9", "columnar.encoding": "parquet", "transactional.id": "tx-offline"}
    )
    p.set_schema("t", SCHEMA)
    with pytest.raises(KafkaException) as info:
        p.produce("t", value={"id": 1, "s": None}, partition=0)
    assert info.value.args[0].code() == KafkaError._STATE
    with pytest.raises(KafkaException):
        p.produce_batch("t", pa.table({"id": [1]}), partition=0)
    assert len(p) == 0


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


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        (SCHEMA, "field 'day': columnar.sort.by names a column"),
        (pa.schema([("day", pa.list_(pa.int32()))]), "field 'day': columnar.sort.by names a list<item: int32> column"),
    ],
)
def test_sort_by_columns_must_exist_and_hold_plain_values(schema: pa.Schema, match: str) -> None:
    p = ParquetProducer({"columnar.encoding": "parquet", "columnar.sort.by": "day"})
    with pytest.raises(SchemaError, match=match):
        p.set_schema("t", schema)


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


def test_a_derived_partition_needs_a_source_of_the_right_type() -> None:
    p = ParquetProducer({"columnar.encoding": "parquet", "columnar.partition.by": "day=date(s)"})
    with pytest.raises(SchemaError, match=r"field 's'.*date\(s\) needs a timestamp or a date, not string"):
        p.set_schema("t", SCHEMA)
    with pytest.raises(ConfigError) as info:
        ParquetProducer({"columnar.encoding": "parquet", "columnar.partition.by": "day=day(ts)"})
    assert (info.value.key, info.value.value) == ("columnar.partition.by", "day=day(ts)")


def test_segments_are_cut_where_the_derived_value_changes_keeping_record_order(clock: FakeClock) -> None:
    schema = pa.schema([("id", pa.int64(), False), ("ts", pa.timestamp("us", tz="UTC"))])
    p = ParquetProducer(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "columnar.encoding": "parquet",
            "columnar.partition.by": "day=date(ts)",
            "linger.ms": 1000,
            "message.timeout.ms": 200,
        },
        clock=clock,
    )
    p.set_schema("t", schema)
    day = 86_400_000_000
    # day 0, day 0, day 1, then day 0 again (a late record): three segments, in that order,
    # not two (one per day), which would move the late record before the day 1 one
    for i, ts in enumerate([day - 2, day - 1, day, day - 3]):
        p.produce("t", value={"id": i, "ts": ts}, partition=0)
    clock.now += 1.001
    p.poll(0)
    assert (p.stats()["segments"], p.stats()["records"]) == (3, 4)
    p.purge()
    p.close(timeout=2)


@pytest.mark.parametrize("partition", [0, -1], ids=["own partition", "partitioner"])
def test_close_with_a_timeout_purges_what_a_broker_out_of_reach_holds_and_returns(partition: int) -> None:
    """``close(timeout)`` reports what it could not send as purged instead of waiting for the
    client's ``message.timeout.ms`` (300 s by default), a record placed by the partitioner too,
    whose partition count never came."""
    import time

    reports: list[KafkaError] = []
    p = ParquetProducer({"bootstrap.servers": "127.0.0.1:9", "columnar.encoding": "parquet", "linger.ms": 5})
    p.set_schema("t", SCHEMA)
    p.produce("t", {"id": 1}, partition=partition, on_delivery=lambda err, msg: reports.append(err))
    started = time.monotonic()
    assert p.close(timeout=0.5) is True
    assert time.monotonic() - started < 8  # the metadata lookup's own bound is 10 s, the messages' 300 s
    assert [e.code() for e in reports] == [KafkaError._PURGE_QUEUE]
