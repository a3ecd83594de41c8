"""confluent-kafka's documented behaviour, kept by ParquetProducer: transactions cover parka's own
buffers, delivery callbacks run only on the caller's thread inside poll/flush, and concurrent
producer threads lose or mix up nothing."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from reliability.procs import wait_for

SCHEMA = pa.schema([("id", pa.int64(), False), ("txn", pa.string(), False)])


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    wait_for(condition, what, timeout_s, poll_s=0.01)


def _read_committed(bootstrap: str, topic: str, group: str, expected: int, timeout_s: float = 60) -> list[Any]:
    """Every record a read_committed shim consumer sees, until ``expected`` arrived and the
    partitions' ends were reached (so nothing beyond them hides)."""
    out: list[Any] = []
    ends = 0
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    }
    with ParquetConsumer(conf) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while (len(out) < expected or ends == 0) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    ends += 1
                    continue
                assert err is None, err
                out.append(msg)
    return out


def test_aborted_records_never_appear_and_committed_ones_appear_once(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic(partitions=2)
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
        "columnar.encoding": "parquet",
        "columnar.batch.records": 100,
        "linger.ms": 60_000,  # what is not cut by count stays in parka's buffers until commit/abort
    }
    outcome: dict[int, Any] = {}

    def report(err: Any, msg: Any) -> None:
        assert msg.value()["id"] not in outcome
        outcome[msg.value()["id"]] = err

    producer = ParquetProducer(conf)
    producer.set_schema(topic, SCHEMA)
    with pytest.raises(KafkaException) as outside:
        producer.produce(topic, value={"id": -1, "txn": "none"})  # before any transaction
    assert outside.value.args[0].code() == KafkaError._STATE
    producer.init_transactions(30)
    plan = [("a", 250, False), ("b", 230, True), ("c", 90, False), ("d", 310, True)]
    next_id = 0
    for name, count, commit in plan:
        producer.begin_transaction()
        for _ in range(count):
            producer.produce(topic, value={"id": next_id, "txn": name}, key=str(next_id % 7), on_delivery=report)
            next_id += 1
        # some segments already left for the broker, the rest wait in parka's buffers
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        assert len(producer) == 0  # every record of this transaction has been reported
    producer.flush(10)
    ids_by_txn: dict[str, list[int]] = {}
    start = 0
    for name, count, _ in plan:
        ids_by_txn[name] = list(range(start, start + count))
        start += count
    want = sorted(ids_by_txn["b"] + ids_by_txn["d"])
    aborted = ids_by_txn["a"] + ids_by_txn["c"]
    assert sorted(outcome) == list(range(next_id))  # every record reported once
    assert all(outcome[i] is None for i in want)
    # Records still in parka's buffers at the abort are reported purged. A segment the broker
    # acknowledged before the abort is reported delivered, as confluent-kafka reports it: the
    # read_committed consumer below shows it never appears.
    purged = [i for i in aborted if outcome[i] is not None]
    assert purged
    assert {outcome[i].code() for i in purged} <= {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}

    got = _read_committed(bootstrap, topic, group_id, len(want))
    ids = [m.value()["id"] for m in got]
    assert Counter(ids) == Counter(want)  # each committed record exactly once, nothing aborted
    assert {m.value()["txn"] for m in got} == {"b", "d"}


def test_the_linger_thread_sends_only_inside_a_transaction(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic()
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
        "columnar.encoding": "parquet",
        "linger.ms": 20,
    }
    producer = ParquetProducer(conf)
    producer.set_schema(topic, SCHEMA)
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(50):
        producer.produce(topic, value={"id": i, "txn": "x"})
    # the linger thread cuts and sends while the transaction is open ...
    _wait_for(lambda: producer.stats()["segments"] >= 1, "the linger thread to send a segment")
    producer.commit_transaction(30)
    sent = producer.stats()["segments"]
    # ... and, once it is committed, refuses records and sends nothing more
    with pytest.raises(KafkaException):
        producer.produce(topic, value={"id": 99, "txn": "late"})
    assert producer.flush(1) == 0
    assert producer.stats()["segments"] == sent
    got = _read_committed(bootstrap, topic, group_id, 50)
    assert sorted(m.value()["id"] for m in got) == list(range(50))


def test_callbacks_run_only_on_the_callers_thread_inside_poll_and_flush(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "columnar.encoding": "parquet", "linger.ms": 20}
    calls: list[tuple[int, bool, Any]] = []
    inside = threading.local()

    def report(err: Any, msg: Any) -> None:
        calls.append((threading.get_ident(), getattr(inside, "polling", False), err))

    producer = ParquetProducer(conf)
    producer.set_schema(topic, SCHEMA)
    for i in range(20):
        value = {"id": i, "txn": "x"} if i != 7 else {"id": i, "txn": 7}  # one bad record
        producer.produce(topic, value=value, on_delivery=report)
    # the linger thread converts the records (finding the bad one) and sends the good ones, in one
    # segment or more (this thread descheduled past linger.ms between two produce calls) ...
    _wait_for(lambda: producer.stats()["records"] == 19, "the linger thread to send the good records")
    _wait_for(lambda: producer.stats()["bad_records"] == 1, "the bad record to be found")
    assert calls == []  # ... but reports nothing itself
    inside.polling = True
    assert producer.flush(30) == 0
    inside.polling = False
    me = threading.get_ident()
    assert len(calls) == 20
    assert all(ident == me and polling for ident, polling, _ in calls)
    assert sum(err is not None for _, _, err in calls) == 1


def test_concurrent_producer_threads_lose_and_mix_up_nothing(
    bootstrap: str, new_topic: Callable[..., str], group_id: str
) -> None:
    topic = new_topic(partitions=3)
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "columnar.encoding": "parquet", "linger.ms": 5}
    producer = ParquetProducer(conf)
    producer.set_schema(topic, SCHEMA)
    threads, per_thread = 4, 5_000

    def work(t: int) -> None:
        for i in range(per_thread):
            n = t * per_thread + i
            if i % 3:  # keyed records (staged as tuples) among plain ones (staged as values)
                producer.produce(topic, value={"id": n, "txn": f"t{t}"}, key=f"k{n}")
            else:
                producer.produce(topic, value={"id": n, "txn": f"t{t}"})

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert producer.flush(60) == 0
    total = threads * per_thread
    got: list[Any] = []
    with ParquetConsumer({"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest"}) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < total and time.monotonic() < deadline:
            got.extend(m for m in c.consume(5000, timeout=0.5) if m.error() is None)
    assert sorted(m.value()["id"] for m in got) == list(range(total))
    for m in got:
        n = m.value()["id"]
        assert m.key() == (f"k{n}".encode() if (n % per_thread) % 3 else None)
    # per thread and partition, records keep the order they were produced in
    last: dict[tuple[str, int], int] = {}
    for m in got:
        where = (m.value()["txn"], m.partition())
        assert m.value()["id"] > last.get(where, -1)
        last[where] = m.value()["id"]
