"""A ParquetProducer dropped after flush() is freed quietly with its linger thread, as one dropped
after close() is (the unit test: one dropped with records it had not sent)."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable

import pytest
from parka.producer import ParquetProducer

from ..unit.test_producer_freed import SCHEMA, gone, lingering


@pytest.mark.parametrize("ending", ["flush", "close"])
def test_a_producer_that_sent_everything_is_freed_without_a_warning(
    bootstrap: str, new_topic: Callable[..., str], caplog: pytest.LogCaptureFixture, ending: str
) -> None:
    topic = new_topic()
    before = lingering()
    producer = ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "linger.ms": 5})
    producer.set_schema(topic, SCHEMA)
    for a in range(10):
        producer.produce(topic, {"a": a})
    if ending == "flush":
        assert producer.flush(30) == 0
    else:
        assert producer.close() is True
    ref = weakref.ref(producer)
    with caplog.at_level(logging.WARNING, logger="parka.producer"):
        del producer
        assert gone(ref, before)
    assert not [r for r in caplog.records if "freed without close()" in r.getMessage()]
