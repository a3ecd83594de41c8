"""A ParquetProducer the application drops without close() is freed with its client and its
linger thread, as confluent-kafka's producer is, and says how many records it had not sent
(with a broker: tests/integration/test_producer_freed.py)."""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref

import pytest
from parka.producer import ParquetProducer

SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}
# nothing listens there: records stay staged and buffered, never sent
CONF = {"bootstrap.servers": "127.0.0.1:1", "columnar.encoding": "parquet", "client.id": "dropped", "linger.ms": 5}


def lingering() -> int:
    return sum(t.name == "parka-linger" for t in threading.enumerate())


def gone(ref: weakref.ref[ParquetProducer], threads_before: int) -> bool:
    """Whether the producer behind ``ref`` is freed and the linger threads are back to
    ``threads_before`` (other tests' producers may hold theirs), within 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        gc.collect()
        if ref() is None and lingering() <= threads_before:
            return True
        time.sleep(0.01)  # between reads of the condition
    return False


def test_a_dropped_producer_is_freed_with_its_linger_thread_and_logs_the_records_it_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = lingering()
    producer = ParquetProducer(CONF)
    producer.set_schema("t", SCHEMA)
    for a in range(3):
        producer.produce("t", {"a": a})
    assert lingering() == before + 1
    ref = weakref.ref(producer)
    with caplog.at_level(logging.WARNING, logger="parka.producer"):
        del producer
        assert gone(ref, before)
    [record] = [r for r in caplog.records if "freed without close()" in r.getMessage()]
    assert "dropped" in record.getMessage() and "3 record(s)" in record.getMessage()
