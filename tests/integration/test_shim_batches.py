"""ParquetConsumer's columnar paths on a real broker: consume(n) in slices, poll_table(), and the
two mixed with poll(), across segment boundaries and plain messages."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from confluent_kafka import Message, Producer, TopicPartition
from parka.consumer import ParquetConsumer, SegmentTable
from parka.producer import ParquetProducer

from parka.message import RecordMessage
from parka.segment import HEADERS_COLUMN, KEY_COLUMN, TIMESTAMP_COLUMN

SCHEMA = pa.schema([("id", pa.int64(), False), ("body", pa.string())])


def produce(bootstrap: str, topic: str, ids: range, *, per_segment: int, meta: bool = False) -> None:
    """Records ``{"id": i, "body": "b<i>"}`` in segments of ``per_segment`` (whole segments
    when ``len(ids)`` is a multiple); with ``meta``, a key, timestamp and header per record."""
    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.batch.records": per_segment,
        "linger.ms": 60_000,
    }  # segments cut by count alone: a loaded machine must not cut one early
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, SCHEMA)
        for i in ids:
            extra: dict[str, Any] = {}
            if meta:
                extra = {"key": f"k{i}", "timestamp": 1_700_000_000_000 + i, "headers": [("rid", str(i).encode())]}
            producer.produce(topic, value={"id": i, "body": f"b{i}"}, partition=0, **extra)
        assert producer.flush(30) == 0


def consumer(bootstrap: str, group: str, **extra: Any) -> ParquetConsumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **extra,
    }
    return ParquetConsumer(conf)


def poll_table(c: ParquetConsumer, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = c.poll_table(1.0)
        if got is not None:
            return got
    raise AssertionError("no segment arrived")


def poll_records(c: ParquetConsumer, n: int, timeout_s: float = 30) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n:
        assert time.monotonic() < deadline, f"only {len(out)} of {n} records arrived"
        msg = c.poll(1.0)
        if msg is not None:
            assert msg.error() is None, msg.error()
            out.append(msg)
    return out


def test_consume_hands_out_slices_in_order_across_segments(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, range(2350), per_segment=500)  # segments 0-3 of 500, segment 4 of 350
    c = consumer(bootstrap, group_id)
    c.subscribe([topic])
    got: list[RecordMessage] = []
    sizes: list[int] = []
    deadline = time.monotonic() + 60
    while len(got) < 2350:
        assert time.monotonic() < deadline, f"stalled after {len(got)} records"
        batch = c.consume(333, timeout=5.0)
        assert all(isinstance(m, RecordMessage) for m in batch)
        sizes.append(len(batch))
        got.extend(batch)
    # every call but the last returned exactly num_messages, crossing segment boundaries
    assert sizes[:-1] == [333] * (len(sizes) - 1)
    assert sum(sizes) == 2350
    assert [m.value() for m in got] == [{"id": i, "body": f"b{i}"} for i in range(2350)]
    assert [(m.offset(), m.index(), m.segment_records()) for m in got] == [
        (i // 500, i % 500, 500 if i < 2000 else 350) for i in range(2350)
    ]
    # num_messages=0 returns at once; nothing is left, so a bounded wait returns empty after it
    assert c.consume(0, timeout=10) == []
    started = time.monotonic()
    assert c.consume(10, timeout=1.0) == []
    assert 0.9 <= time.monotonic() - started < 10
    c.close()


def test_consume_returns_what_it_has_when_the_timeout_expires(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, range(150), per_segment=100)
    c = consumer(bootstrap, group_id)
    c.subscribe([topic])
    first: list[Any] = []
    deadline = time.monotonic() + 30
    while not first:  # the group join takes a moment
        assert time.monotonic() < deadline
        first = c.consume(120, timeout=1.0)
    assert len(first) <= 120
    # more than the topic holds: what there is comes back when the timeout expires
    started = time.monotonic()
    rest = c.consume(1000, timeout=2.0)
    assert 1.9 <= time.monotonic() - started < 10
    assert [m.value()["id"] for m in first + rest] == list(range(150))
    c.close()


def test_poll_table_round_trip_with_coordinates_and_reserved_columns(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, range(1000), per_segment=400, meta=True)  # 400, 400, 200
    c = consumer(bootstrap, group_id)
    c.subscribe([topic])
    tables = [poll_table(c) for _ in range(3)]
    c.close()
    assert all(isinstance(t, SegmentTable) for t in tables)
    assert [(t.topic(), t.partition(), t.offset(), t.index(), len(t), t.segment_records()) for t in tables] == [
        (topic, 0, 0, 0, 400, 400),
        (topic, 0, 1, 0, 400, 400),
        (topic, 0, 2, 0, 200, 200),
    ]
    whole = pa.concat_tables([t.value() for t in tables])
    assert whole.column_names == ["id", "body", KEY_COLUMN, TIMESTAMP_COLUMN, HEADERS_COLUMN]
    assert whole.schema.field("id").type == pa.int64()
    assert whole.select(["id", "body"]).to_pylist() == [{"id": i, "body": f"b{i}"} for i in range(1000)]
    assert whole.column(KEY_COLUMN).to_pylist() == [f"k{i}".encode() for i in range(1000)]
    assert whole.column(TIMESTAMP_COLUMN).to_pylist() == [1_700_000_000_000 + i for i in range(1000)]
    assert whole.column(HEADERS_COLUMN).to_pylist()[7] == [{"key": "rid", "value": b"7"}]
    assert all(t.error() is None for t in tables)


def test_commit_after_a_table_resumes_exactly_after_it(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, range(1500), per_segment=500)

    # poll() part of segment 0, poll_table() the rest, commit after the table
    first = consumer(bootstrap, group_id)
    first.subscribe([topic])
    head = poll_records(first, 120)
    rest = poll_table(first)
    assert (rest.offset(), rest.index(), len(rest), rest.segment_records()) == (0, 120, 380, 500)
    assert [r.value()["id"] for r in head] + rest.value().column("id").to_pylist() == list(range(500))
    committed = first.commit(message=rest, asynchronous=False)
    assert [(tp.offset, tp.metadata) for tp in committed or []] == [(1, "")]
    poll_records(first, 37)  # handed out, never committed
    first.close()

    # a restarted consumer starts exactly after the table; then a commit mid-segment
    second = consumer(bootstrap, group_id)
    second.subscribe([topic])
    records = poll_records(second, 37)
    assert [r.value()["id"] for r in records] == list(range(500, 537))
    committed = second.commit(message=records[-1], asynchronous=False)
    assert [(tp.offset, tp.metadata) for tp in committed or []] == [(1, "parka:1:1:37")]
    second.close()

    # the next one gets the rest of that segment as a table, starting at index 37
    third = consumer(bootstrap, group_id)
    third.subscribe([topic])
    table = poll_table(third)
    assert (table.offset(), table.index(), len(table)) == (1, 37, 463)
    assert table.value().column("id").to_pylist() == list(range(537, 1000))
    third.commit(message=table, asynchronous=False)
    third.close()

    fourth = consumer(bootstrap, group_id)
    fourth.subscribe([topic])
    [record] = poll_records(fourth, 1)
    assert (record.value()["id"], record.offset(), record.index()) == (1000, 2, 0)
    fourth.close()


def test_poll_consume_and_poll_table_mix_around_a_plain_message(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, range(200), per_segment=100)  # offsets 0, 1
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"plain", partition=0)  # offset 2
    assert plain.flush(30) == 0
    produce(bootstrap, topic, range(200, 400), per_segment=100)  # offsets 3, 4

    c = consumer(bootstrap, group_id)
    c.subscribe([topic])
    ids: list[int] = []
    [one] = poll_records(c, 1)
    ids.append(one.value()["id"])
    ten = c.consume(10, timeout=10)
    ids += [m.value()["id"] for m in ten]
    table = c.poll_table(10)
    assert (table.offset(), table.index(), len(table)) == (0, 11, 89)
    ids += table.value().column("id").to_pylist()
    # across segment 1, the plain message and into segment 3
    batch = c.consume(150, timeout=10)
    assert len(batch) == 150
    assert isinstance(batch[100], Message)
    assert batch[100].value() == b"plain"
    assert batch[100].offset() == 2
    ids += [m.value()["id"] for i, m in enumerate(batch) if i != 100]
    table = c.poll_table(10)
    assert (table.offset(), table.index(), len(table)) == (3, 49, 51)
    ids += table.value().column("id").to_pylist()
    ids += [m.value()["id"] for m in poll_records(c, 100)]
    assert ids == list(range(400))
    assert c.poll_table(1.0) is None
    # commit() with no argument: after the last record handed out
    committed = c.commit(asynchronous=False)
    assert [(tp.offset, tp.metadata) for tp in committed or []] == [(5, "")]
    c.close()


def produce_plain(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(n):
        producer.produce(topic, value=b"m%d" % i, partition=0)
    assert producer.flush(30) == 0


def consume_some(c: ParquetConsumer, n: int, timeout_s: float = 30) -> list[Any]:
    deadline = time.monotonic() + timeout_s
    got: list[Any] = []
    while len(got) < n and time.monotonic() < deadline:
        got += c.consume(n - len(got), 1.0)
    assert len(got) == n, f"{len(got)} of {n} messages"
    return got


def test_consume_of_plain_messages_asks_the_client_for_a_batch_and_hands_out_all_in_order(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    """confluent's consume(n) is one call of the client for up to n messages: parka's, on plain
    messages, asks for a batch too (one message per call cost ~4x the CPU per message), and
    the messages it holds from a batch come next, in order."""
    topic = new_topic()
    produce_plain(bootstrap, topic, 200)
    c = consumer(bootstrap, group_id)
    asked: list[int] = []
    client_consume = c._consumer.consume

    def counting(num_messages: int = 1, *args: Any) -> Any:
        asked.append(num_messages)
        return client_consume(num_messages, *args)

    c._consumer = _Proxy(c._consumer, consume=counting)
    c._fetcher._client = c._consumer
    try:
        c.subscribe([topic])
        got = consume_some(c, 150) + consume_some(c, 50)
    finally:
        c.close()
    assert [m.value() for m in got] == [b"m%d" % i for i in range(200)]
    assert max(asked) > 1, asked


def test_a_seek_or_a_new_assignment_drops_the_messages_held_from_a_batch(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    """A batch the client returned can hold messages after a segment whose records filled the
    call: they come next, unless the partition is sought or assigned anew, and positions and
    commits follow what was handed out, not what is held."""
    topic = new_topic()
    produce_plain(bootstrap, topic, 2)  # offsets 0, 1
    produce(bootstrap, topic, range(5), per_segment=5)  # offset 2: a segment of 5 records
    produce_plain(bootstrap, topic, 10)  # offsets 3-12
    c = consumer(bootstrap, group_id)
    client_consume = c._consumer.consume

    def full_batches(num_messages: int = 1, timeout: float = -1) -> list[Any]:
        """The client's consume, waiting until the batch is full (as a busy topic's is)."""
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < num_messages and time.monotonic() < deadline:
            got += client_consume(num_messages - len(got), 1.0)
        return got

    c._consumer = _Proxy(c._consumer, consume=full_batches)
    c._fetcher._client = c._consumer
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        first = consume_some(c, 4)  # 0, 1 and two records of offset 2; offset 3 came in the batch
        assert [m.offset() for m in first] == [0, 1, 2, 2]
        assert [m.offset() for m in c._fetcher._held] == [3]  # the case this test is about
        c.seek(TopicPartition(topic, 0, 0))
        assert [m.offset() for m in consume_some(c, 4)] == [0, 1, 2, 2]
        assert [m.offset() for m in c._fetcher._held] == [3]  # held again
        c.assign([TopicPartition(topic, 0, 5)])
        assert [m.offset() for m in consume_some(c, 2)] == [5, 6]
        assert c.position([TopicPartition(topic, 0)])[0].offset == 7
        c.commit(asynchronous=False)
    finally:
        c.close()
    again = consumer(bootstrap, group_id)
    try:
        again.subscribe([topic])
        assert consume_some(again, 1)[0].offset() == 7
    finally:
        again.close()


def test_consume_does_not_wait_for_more_messages_when_a_segment_fills_the_call(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    """After a plain message consume() takes only what the client has fetched already: asking the
    client's consume() for a batch would wait for that many messages or the whole timeout, though
    the one segment that came holds the records the call still wants."""
    topic = new_topic()
    produce_plain(bootstrap, topic, 1)
    produce(bootstrap, topic, range(5), per_segment=5)
    c = consumer(bootstrap, group_id)
    try:
        c.subscribe([topic])
        first = consume_some(c, 1)
        started = time.monotonic()
        rest = c.consume(3, 60.0)
        waited = time.monotonic() - started
    finally:
        c.close()
    assert [m.offset() for m in first + rest] == [0, 1, 1, 1]
    assert waited < 30, f"consume(3, 60) took {waited:.1f} s"


class _Proxy:
    """The client with some methods replaced."""

    def __init__(self, client: Any, **methods: Any) -> None:
        self._client = client
        self.__dict__.update(methods)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
