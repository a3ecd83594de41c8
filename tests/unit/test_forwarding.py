"""parka.swap.forward_missing: the wrapped client's methods that parka's classes do not define
are methods of theirs, not a ``__getattr__`` (which slows every attribute of an instance)."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from parka.swap import forward_missing


@pytest.mark.parametrize(
    ("cls", "client"), [(ParquetProducer, confluent_kafka.Producer), (ParquetConsumer, confluent_kafka.Consumer)]
)
def test_every_public_method_of_the_client_is_a_method_of_the_class_and_none_is_looked_up_late(
    cls: type, client: type
) -> None:
    missing = [n for n in dir(client) if not n.startswith("_") and not callable(getattr(cls, n, None))]
    assert missing == []
    assert not any("__getattr__" in c.__dict__ for c in cls.__mro__)


def test_a_forwarded_method_calls_the_wrapped_client_and_a_defined_one_is_left_alone() -> None:
    class Client:
        def pause(self, *args: Any, **kwargs: Any) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
            return ("pause", args, kwargs)

        def close(self) -> str:
            return "client's close"

        def _private(self) -> None: ...

    class Wrapper:
        def __init__(self) -> None:
            self.inner = Client()

        def close(self) -> str:
            return "wrapper's close"

    forward_missing(Wrapper, Client, "inner")
    wrapper = Wrapper()
    assert wrapper.pause(1, timeout=2) == ("pause", (1,), {"timeout": 2})  # type: ignore[attr-defined]
    assert wrapper.close() == "wrapper's close"
    assert not hasattr(wrapper, "_private")
    assert Wrapper.pause.__qualname__.endswith("Wrapper.pause")  # type: ignore[attr-defined]


def test_a_closed_consumer_raises_from_a_forwarded_method_as_confluent_kafkas_does() -> None:
    consumer = ParquetConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    assert consumer.assignment() == []
    consumer.close()
    with pytest.raises(RuntimeError):
        consumer.assignment()
