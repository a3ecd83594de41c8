"""ParquetConsumer answers as confluent_kafka.Consumer does (constructor forms, errors after
close, exception types, callbacks), and its positions are record-precise; no broker needed."""

from __future__ import annotations

import logging
from io import StringIO
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from parka.consumer import KafkaClientException, ParquetConsumer
from parka.consumer._offsets import positions, precise
from parka.consumer._segments import Cursor

from parka.errors import KafkaClientError

NO_BROKER = {"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "session.timeout.ms": 1000}


def cursor(offset: int, handed_out: int, records: int = 10) -> Cursor:
    c = Cursor("t", 0, offset, table=pa.table({"id": list(range(records))}))
    c.next = handed_out
    return c


def test_constructor_takes_confluents_forms() -> None:
    with pytest.raises(TypeError, match="expected configuration dict"):
        ParquetConsumer(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected tuple containing single dict"):
        ParquetConsumer(NO_BROKER, NO_BROKER)
    ParquetConsumer(**NO_BROKER).close()
    ParquetConsumer({"bootstrap.servers": "127.0.0.1:9"}, **{"group.id": "g"}).close()

    out = StringIO()
    logger = logging.getLogger("parka-test-consumer-logger")
    logger.setLevel(logging.DEBUG)
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    try:
        c = ParquetConsumer({**NO_BROKER, "debug": "generic"}, logger=logger)
        c.poll(0)
        c.close()
    finally:
        logger.removeHandler(handler)
    assert "INIT" in out.getvalue()


def test_every_method_after_close_raises_consumer_closed() -> None:
    c = ParquetConsumer(NO_BROKER)
    c.subscribe(["t"])
    assert c.close() is None
    assert c.close() is None  # again: nothing
    tp = TopicPartition("t", 0, 1)
    calls: list[Any] = [
        lambda: c.poll(0),
        lambda: c.consume(1, 0),
        lambda: c.poll_table(0),
        lambda: c.subscribe(["t"]),
        lambda: c.unsubscribe(),
        lambda: c.assign([tp]),
        lambda: c.unassign(),
        lambda: c.incremental_assign([tp]),
        lambda: c.assignment(),
        lambda: c.commit(),
        lambda: c.store_offsets(offsets=[tp]),
        lambda: c.committed([tp]),
        lambda: c.position([tp]),
        lambda: c.seek(tp),
        lambda: c.consumer_group_metadata(),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="Consumer closed"):
            call()


def test_a_consumer_never_initialised_raises_as_confluents() -> None:
    class Unbuilt(ParquetConsumer):
        def __init__(self) -> None:
            pass

    c = Unbuilt()
    for call in (c.poll, c.consume, c.assignment, c.unsubscribe, c.commit, c.consumer_group_metadata):
        with pytest.raises(RuntimeError, match="Consumer closed"):
            call()
    with pytest.raises(RuntimeError, match="Consumer closed"):
        c.position([TopicPartition("t", 0)])
    with pytest.raises(RuntimeError, match="Handle has been closed"):
        c.list_topics()
    c.close()


def test_commit_and_store_offsets_raise_confluents_types() -> None:
    seen: list[tuple[Any, list[TopicPartition]]] = []
    c = ParquetConsumer(
        {**NO_BROKER, "enable.auto.commit": False, "on_commit": lambda err, tps: seen.append((err, tps))}
    )
    c.assign([TopicPartition("t", 2)])
    with pytest.raises(ValueError, match="mutually exclusive"):
        c.commit(message=object(), offsets=[])
    # nothing stored: a synchronous commit raises _NO_OFFSET, an asynchronous one tells on_commit
    with pytest.raises(KafkaException) as info:
        c.commit(asynchronous=False)
    assert info.value.args[0].code() == KafkaError._NO_OFFSET
    assert isinstance(info.value, KafkaClientError)
    c.commit(asynchronous=True)
    for _ in range(20):
        if seen:
            break
        c.poll(0.1)
    assert seen and seen[0][0].code() == KafkaError._NO_OFFSET
    assert [(tp.topic, tp.partition) for tp in seen[0][1]] == [("t", 2)]

    # auto.offset.store left true: librdkafka's _INVALID_ARG
    with pytest.raises(KafkaClientException) as stored:
        c.store_offsets(offsets=[TopicPartition("t", 2, 5)])
    assert stored.value.args[0].code() == KafkaError._INVALID_ARG
    with pytest.raises(ValueError, match="expected either message or offsets"):
        c.store_offsets()
    c.close()

    c = ParquetConsumer({**NO_BROKER, "enable.auto.commit": False, "enable.auto.offset.store": False})
    c.assign([TopicPartition("t", 2)])
    with pytest.raises(KafkaException) as unknown:
        c.store_offsets(offsets=[TopicPartition("t", 7, 5)])
    assert unknown.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    with pytest.raises(ValueError, match="mutually exclusive"):
        c.store_offsets(message=object(), offsets=[])
    c.close()


@pytest.mark.parametrize("make", [Consumer, ParquetConsumer], ids=["confluent", "parka"])
def test_consume_serves_the_queued_callbacks_and_raises_the_last_ones_exception(make: Any) -> None:
    """The client's ``consume()`` serves every callback queued while it runs and raises what the
    last one it served raised, on confluent's class as on parka's. (The failed lookups go on
    after it returns, every ~50 ms, so the callback stops raising before ``close()``.)"""
    calls: list[Any] = []
    raising = [True]

    def error_cb(err: Any) -> None:
        calls.append(err)
        if raising[0]:
            raise RuntimeError(f"from error_cb #{len(calls)}")

    conf = {"bootstrap.servers": "nonexistent-broker.invalid:9092", "group.id": "g", "error_cb": error_cb}
    c = make({**conf, "session.timeout.ms": 1000, "socket.timeout.ms": 100})
    c.subscribe(["t"])
    with pytest.raises(RuntimeError) as raised:
        c.consume(timeout=0.5)
    raising[0] = False
    assert calls and str(raised.value) == f"from error_cb #{len(calls)}"
    c.close()


def test_position_is_after_the_last_record_handed_out() -> None:
    reported = [TopicPartition("t", 0, 6), TopicPartition("t", 1, 40), TopicPartition("t", 2, 9)]
    cursors = {("t", 0): cursor(5, 3), ("t", 2): cursor(8, 10)}
    got = [(tp.partition, tp.offset, tp.metadata) for tp in positions(reported, cursors)]
    # inside segment 5 after 3 records; partition 1 has no cursor: the client's; segment 8 done
    assert got == [(0, 5, "parka:1:5:3"), (1, 40, None), (2, 9, None)]


def test_offset_one_past_the_segment_in_hand_is_read_as_the_record_position() -> None:
    cursors = {("t", 0): cursor(5, 3)}
    given = [
        TopicPartition("t", 0, 6),  # msg.offset() + 1 of a record of segment 5
        TopicPartition("t", 1, 6),  # no cursor: literal
    ]
    got = [(tp.partition, tp.offset, tp.metadata) for tp in precise(given, cursors)]
    assert got == [(0, 5, "parka:1:5:3"), (1, 6, None)]
    # other offsets, and offsets with metadata, are literal
    for tp in (TopicPartition("t", 0, 4), TopicPartition("t", 0, 6, "app")):
        assert precise([tp], cursors) == [tp] and precise([tp], cursors)[0].offset == tp.offset
    # a segment handed out whole: X + 1 is already exact
    assert precise([TopicPartition("t", 0, 6)], {("t", 0): cursor(5, 10)})[0].metadata is None


def test_position_of_the_shim_uses_its_cursors() -> None:
    c = ParquetConsumer({**NO_BROKER, "enable.auto.commit": False})
    c.assign([TopicPartition("t", 0)])
    c._cursors[("t", 0)] = cursor(5, 3)
    [tp] = c.position([TopicPartition("t", 0)])
    assert (tp.offset, tp.metadata) == (5, "parka:1:5:3")
    c.close()
