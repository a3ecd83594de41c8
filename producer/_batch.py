"""``produce_batch(topic, [dict, ...])`` on a columnar topic: confluent-kafka's list-of-dicts form,
each message taken as ``produce()`` takes it.

confluent-kafka checks every message before it queues any, and marks a message it could not
queue with an ``_error`` entry (a ``KafkaError``) instead of raising; both are kept here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from ._compat import batch_message
from ._inputs import normalize_headers

__all__ = ["produce_messages"]

Produce = Callable[..., None]


def produce_messages(produce: Produce, topic: str, messages: list[Any], partition: int, callback: Any) -> int:
    """Take each message of ``messages`` with ``produce(topic, value, key, partition, callback,
    timestamp, headers)``; returns how many were taken.

    Raises ``TypeError`` (nothing taken) when a message is malformed; a message refused by
    ``produce`` with ``BufferError`` or ``KafkaException`` gets ``msg["_error"]`` and the rest go on.
    """
    parsed = []
    for i, msg in enumerate(messages):
        value, key, part, cb, timestamp, headers = batch_message(i, msg, partition, callback)
        if headers is not None:
            headers = normalize_headers(headers, topic)
        parsed.append((value, key, part, cb, timestamp, headers))
    taken = 0
    for msg, (value, key, part, cb, timestamp, headers) in zip(messages, parsed, strict=True):
        try:
            produce(topic, value, key, part, cb, timestamp, headers)
        except BufferError as exc:
            msg["_error"] = KafkaError(KafkaError._QUEUE_FULL, f"Message failed: {exc}")
        except KafkaException as exc:
            msg["_error"] = exc.args[0] if exc.args else KafkaError(KafkaError._FAIL, str(exc))
        else:
            taken += 1
    return taken
