"""ParquetProducer keeps confluent_kafka.Producer's contract: constructor forms, close,
the closed state, produce_batch's list-of-dicts form, exception types, raising callbacks and
tombstones on a columnar topic. No broker: nothing listens on port 9, so messages time out."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from parka.producer import ParquetProducer

from parka.errors import ConfigError, RecordError

SCHEMA = pa.schema([("id", pa.int64(), False), ("s", pa.string())])
OFFLINE = {"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 200, "socket.timeout.ms": 100}
COLUMNAR = {**OFFLINE, "columnar.encoding": "parquet", "linger.ms": 10_000}


@pytest.fixture(params=["none", "parquet"])
def producer(request: pytest.FixtureRequest) -> Iterator[ParquetProducer]:
    p = ParquetProducer({**OFFLINE, "columnar.encoding": request.param})
    if request.param == "parquet":
        p.set_schema("t", SCHEMA)
    yield p
    p.close(timeout=1)


@pytest.fixture
def columnar() -> Iterator[ParquetProducer]:
    p = ParquetProducer(COLUMNAR)
    p.set_schema("t", SCHEMA)
    yield p
    p.close(timeout=1)


def test_constructor_forms_are_confluents() -> None:
    with pytest.raises(TypeError, match="expected configuration dict"):
        ParquetProducer()
    with pytest.raises(TypeError, match="expected configuration dict"):
        ParquetProducer("bootstrap.servers=x")  # type: ignore[arg-type]
    logger = logging.getLogger("parka.test.compat")
    for p in (
        ParquetProducer(OFFLINE, logger=logger),
        ParquetProducer(**OFFLINE),
        ParquetProducer({**OFFLINE, "logger": logger}),
    ):
        assert p.close() is True


def test_a_bad_kafka_setting_raises_kafka_exception_even_where_parka_reads_it() -> None:
    with pytest.raises(KafkaException) as plain:
        ParquetProducer({"partitioner": "murmur"})
    assert plain.value.args[0].code() == KafkaError._INVALID_ARG
    with pytest.raises(KafkaException) as columnar:
        ParquetProducer({"columnar.encoding": "parquet", "partitioner": "murmur"})
    assert columnar.value.args[0].code() == KafkaError._INVALID_ARG
    assert isinstance(columnar.value, ConfigError) and columnar.value.key == "partitioner"
    with pytest.raises(KafkaException):
        ParquetProducer({"columnar.encoding": "parquet", "linger.ms": "soon"})
    with pytest.raises(ConfigError):  # parka's own keys stay ConfigError (a ValueError)
        ParquetProducer({"columnar.encoding": "parquet", "columnar.batch.records": 0})


def test_a_small_message_max_bytes_is_librdkafkas_to_judge_with_encoding_none() -> None:
    assert ParquetProducer({**OFFLINE, "message.max.bytes": 1000}).close()
    with pytest.raises(ConfigError, match=r"columnar\.batch\.bytes"):
        ParquetProducer({**OFFLINE, "columnar.encoding": "parquet", "message.max.bytes": 1000})


def test_close_returns_true_serves_callbacks_and_closes(producer: ParquetProducer) -> None:
    reports: list[Any] = []
    value: Any = {"id": 1, "s": "a"} if producer.settings.columnar else b"a"
    producer.produce("t", value, partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert bool(producer)
    assert producer.close() is True
    assert [e.code() for e in reports] == [KafkaError._MSG_TIMED_OUT]
    assert producer.close() is True  # again: a no-op
    assert len(producer) == 0
    for call in (
        lambda: producer.produce("t", value, partition=0),
        lambda: producer.poll(0),
        lambda: producer.flush(0),
        lambda: producer.purge(),
        lambda: producer.produce_batch("t", [{"value": value}]),
        lambda: producer.list_topics(timeout=0.1),
        lambda: producer.begin_transaction(),
        lambda: producer.commit_transaction(),
    ):
        with pytest.raises(RuntimeError, match="Producer has been closed"):
            call()


def test_the_context_manager_closes_and_propagates() -> None:
    p = ParquetProducer(COLUMNAR)
    p.set_schema("t", SCHEMA)

    def inside() -> None:
        with p:
            p.produce("t", {"id": 1, "s": None}, partition=0)
            raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        inside()
    with pytest.raises(RuntimeError, match="Producer has been closed"):
        p.produce("t", {"id": 2, "s": None}, partition=0)
    assert p.__exit__(None, None, None) is None


def test_a_subclass_that_skips_init_is_closed() -> None:
    class Uninitialized(ParquetProducer):
        def __init__(self) -> None:
            pass

    p = Uninitialized()
    assert len(p) == 0 and bool(p)
    for call in (
        lambda: p.produce("t", b"x"),
        lambda: p.poll(0),
        lambda: p.flush(),
        lambda: p.produce_batch("t", [{"value": b"x"}]),
        lambda: p.init_transactions(),
        lambda: p.abort_transaction(),
        lambda: p.cluster_id(),
    ):
        with pytest.raises(RuntimeError, match="Producer has been closed"):
            call()


def test_produce_batch_of_dicts_is_confluents_with_encoding_none() -> None:
    p = ParquetProducer(OFFLINE)
    delivered: list[Any] = []
    messages: list[dict[str, Any]] = [
        {"value": b"a", "key": "k"},
        {"value": "b", "callback": lambda err, msg: delivered.append(msg)},
        {},
    ]
    assert p.produce_batch("t", messages, partition=0, on_delivery=lambda err, msg: delivered.append(msg)) == 3
    with pytest.raises(TypeError, match="messages must be a list"):
        p.produce_batch("t", "not a list")
    with pytest.raises(TypeError, match="Message value at index 0 must be bytes or str"):
        p.produce_batch("t", [{"value": 123}])
    with pytest.raises(NotImplementedError):
        p.produce_batch("t", [{"value": b"x", "timestamp": 1}])
    assert p.close()
    assert len(delivered) == 3


def test_produce_batch_of_dicts_takes_records_on_a_columnar_topic(columnar: ParquetProducer) -> None:
    errs: list[Any] = []
    messages: list[dict[str, Any]] = [
        {"value": {"id": 1, "s": "a"}, "key": "k1"},
        {"value": {"id": 2, "s": None}, "key": b"k2", "timestamp": 1_700_000_000_000, "headers": {"h": b"v"}},
        {"value": {"id": 3, "s": "c"}, "callback": lambda err, msg: errs.append(("own", msg.value()))},
    ]
    assert columnar.produce_batch("t", messages, partition=0, callback=lambda err, msg: errs.append(msg.value())) == 3
    assert len(columnar) == 3
    assert columnar.flush(5) == 0
    assert errs == [{"id": 1, "s": "a"}, {"id": 2, "s": None}, ("own", {"id": 3, "s": "c"})]
    assert columnar.stats()["segments"] == 1


def test_produce_batch_of_dicts_refuses_what_confluent_refuses(columnar: ParquetProducer) -> None:
    for bad, words in [
        ("not a list", "messages must be a list"),
        ([{"value": {"id": 1}}, "x"], "Message at index 1 must be a dict"),
        ([{"value": b"bytes"}], "Message value at index 0 must be a dict"),
        ([{"value": {"id": 1}, "key": ["k"]}], "Message key at index 0 must be bytes or str"),
        ([{"value": {"id": 1}, "partition": "0"}], "Message partition at index 0 must be int"),
    ]:
        with pytest.raises(TypeError, match=words):
            columnar.produce_batch("t", bad, partition=0)
    with pytest.raises(TypeError):
        columnar.produce_batch(None, [{"value": {"id": 1}}])  # type: ignore[arg-type]
    assert len(columnar) == 0  # nothing of a refused call was taken
    assert columnar.produce_batch("t", []) == 0
    with pytest.raises(RecordError, match="no schema set"):  # as produce() to that topic
        columnar.produce_batch("other", [{"value": {"id": 1}}])


def test_produce_batch_of_a_table_still_works(columnar: ParquetProducer) -> None:
    table = pa.table({"id": [1, 2, 3], "s": ["a", "b", None]})
    segments: list[int] = []
    assert columnar.produce_batch("t", table, partition=0, on_delivery=lambda err, msg, n: segments.append(n)) == 1
    columnar.flush(5)
    assert segments == [3]


def test_wrong_types_raise_type_error_on_a_columnar_topic(columnar: ParquetProducer) -> None:
    for kwargs in (
        {"value": b"bytes"},
        {"value": {"id": 1}, "key": 12},
        {"value": {"id": 1}, "headers": {"h": 1}},
        {"value": {"id": 1}, "headers": ("a", "b")},
    ):
        with pytest.raises(TypeError) as exc:
            columnar.produce("t", partition=0, **kwargs)
        assert isinstance(exc.value, RecordError)  # parka's own tree, with its context
        assert exc.value.topic == "t"


def test_a_raising_delivery_callback_propagates_and_the_rest_are_served_later(columnar: ParquetProducer) -> None:
    seen: list[int] = []

    def cb(err: Any, msg: Any) -> None:
        seen.append(msg.value()["id"])
        if msg.value()["id"] == 1:
            raise RuntimeError("from the callback")

    for i in range(3):
        columnar.produce("t", {"id": i, "s": None}, partition=0, on_delivery=cb)
    with pytest.raises(RuntimeError, match="from the callback"):
        columnar.flush(5)
    assert seen == [0, 1]
    assert columnar.flush(5) == 0
    assert seen == [0, 1, 2]


def test_a_tombstone_on_a_columnar_topic_follows_its_partitions_buffered_records(columnar: ParquetProducer) -> None:
    order: list[Any] = []
    for i in range(3):
        columnar.produce("t", {"id": i, "s": None}, partition=0, on_delivery=lambda err, msg: order.append(msg.value()))
    columnar.produce("t", {"id": 9, "s": None}, partition=1, on_delivery=lambda err, msg: order.append(msg.value()))
    columnar.produce("t", None, key="k", partition=0, on_delivery=lambda err, msg: order.append(("tomb", msg.value())))
    stats = columnar.stats()
    assert (stats["segments"], stats["records"]) == (1, 3)  # partition 0 cut before its tombstone; 1 still buffered
    assert columnar.flush(5) == 0
    assert order[:4] == [{"id": 0, "s": None}, {"id": 1, "s": None}, {"id": 2, "s": None}, ("tomb", None)]
    assert order[4:] == [{"id": 9, "s": None}]


def test_the_wrapped_client_is_confluent_kafka_producer_as_it_is_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test double patched over ``confluent_kafka.Producer`` is what parka wraps, and answers for
    it with encoding ``none``; parka's own class swapped in there does not build itself again."""
    from unittest import mock

    import confluent_kafka

    double = mock.MagicMock(name="Producer")
    double.return_value.produce_batch.return_value = None  # whatever the client answers
    monkeypatch.setattr(confluent_kafka, "Producer", double)
    p = ParquetProducer({"bootstrap.servers": "127.0.0.1:9"})
    assert p.produce_batch("t", [{"value": b"v"}]) is None
    double.return_value.produce_batch.assert_called_once()

    monkeypatch.setattr(confluent_kafka, "Producer", ParquetProducer)
    swapped = ParquetProducer({"bootstrap.servers": "127.0.0.1:9"})
    assert not isinstance(swapped._producer, ParquetProducer)
    swapped.close()
