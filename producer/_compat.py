"""Where ``ParquetProducer`` meets confluent-kafka's ``Producer`` contract: its constructor forms,
its closed state, the exception types it raises for a bad setting, and the list-of-dicts form of
``produce_batch`` checked as confluent-kafka checks it. Pure helpers; no Kafka I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from confluent_kafka import KafkaError, KafkaException

from parka.errors import ConfigError

__all__ = [
    "CLOSED",
    "ClosedClient",
    "ProducerConfigError",
    "batch_message",
    "check_topic",
    "client_config",
    "pass_through",
    "raise_closed",
]

# confluent-kafka's message, word for word: applications and its tests match on it.
CLOSED = "Producer has been closed"


def raise_closed() -> NoReturn:
    raise RuntimeError(CLOSED)


class ClosedClient:
    """Stands in for the wrapped client before ``__init__`` ran (a subclass that skipped it) and
    after ``close()``: every method raises ``RuntimeError``, as confluent-kafka's closed client does."""

    def __getattr__(self, name: str) -> Any:
        raise_closed()

    def __len__(self) -> int:
        return 0


class ProducerConfigError(ConfigError, KafkaException):
    """A Kafka setting parka reads itself (``partitioner``, ``linger.ms``, ``message.max.bytes``)
    has a bad value. confluent-kafka raises ``KafkaException`` (``_INVALID_ARG``) for those, so this
    is one too: ``args[0]`` is that ``KafkaError``, and it keeps :class:`ConfigError`'s ``key``,
    ``value`` and ``allowed``."""

    def __init__(self, cause: ConfigError) -> None:
        super().__init__(cause.key, cause.value, cause.allowed)
        self._message = str(cause)
        self.args = (KafkaError(KafkaError._INVALID_ARG, self._message),)

    def __str__(self) -> str:
        return self._message


def client_config(conf: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """One config dict from confluent-kafka's constructor forms: ``Producer(conf)``,
    ``Producer(conf, logger=...)``, ``Producer(**conf)``; keyword arguments win, as there.

    Raises ``TypeError`` ("expected configuration dict") when there is no config or it is not a dict.
    """
    if conf is None:
        if not kwargs:
            raise TypeError("expected configuration dict")
        return dict(kwargs)
    if not isinstance(conf, Mapping):
        raise TypeError("expected configuration dict")
    return {**conf, **kwargs}


def check_topic(topic: Any) -> None:
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str, not {type(topic).__name__}")


def batch_message(index: int, msg: Any, partition: int, callback: Any) -> tuple[Any, Any, int, Any, int, Any]:
    """One message of a ``produce_batch(topic, [dict, ...])`` call on a columnar topic, as
    ``produce()``'s arguments ``(value, key, partition, callback, timestamp, headers)``.

    As confluent-kafka: ``key`` is bytes or str, ``partition`` an int (the call's ``partition``
    when absent), ``callback`` the message's own or the call's; other entries are ignored. Unlike
    there, ``value`` is a record mapping (or ``None``: a tombstone), and ``timestamp`` and
    ``headers`` are kept (they travel inside the segment).

    Raises ``TypeError`` naming the index, with confluent-kafka's words where it has them.
    """
    if not isinstance(msg, dict):
        raise TypeError(f"Message at index {index} must be a dict")
    value = msg.get("value")
    if value is not None and not isinstance(value, Mapping):
        raise TypeError(
            f"Message value at index {index} must be a dict of the topic's fields (a columnar topic), "
            f"not {type(value).__name__}"
        )
    key = msg.get("key")
    if key is not None and not isinstance(key, (bytes, str)):
        raise TypeError(f"Message key at index {index} must be bytes or str")
    part = msg.get("partition")
    if part is None:
        part = partition
    elif type(part) is not int:
        raise TypeError(f"Message partition at index {index} must be int")
    timestamp = msg.get("timestamp") or 0
    if type(timestamp) is not int:
        raise TypeError(f"Message timestamp at index {index} must be int")
    cb = msg.get("callback") or callback
    return value, key, part, cb, timestamp, msg.get("headers")


def pass_through(
    client: Any, topic: str, value: Any, key: Any, partition: int | None, cb: Any, timestamp: int, headers: Any
) -> None:
    """``produce()`` with ``columnar.encoding=none``: the wrapped client's, given only what the
    caller gave (a partition of -1 and no callback are left out, as its defaults)."""
    kwargs: dict[str, Any] = {"value": value, "key": key, "headers": headers, "timestamp": timestamp}
    if partition is not None and partition >= 0:
        kwargs["partition"] = partition
    if cb is not None:
        kwargs["on_delivery"] = cb
    client.produce(topic, **kwargs)
