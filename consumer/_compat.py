"""What makes :class:`ParquetConsumer` answer as ``confluent_kafka.Consumer`` does where parka adds
nothing of its own: the constructor's forms, the exception types, a consumer that was never built.

* ``Consumer(conf)``, ``Consumer(conf, **more)``, ``Consumer(**conf)``: one dict, keyword arguments
  added to it (``logger=`` among them); anything else is confluent's ``TypeError``
  (:func:`merge_conf`).
* Where confluent raises ``KafkaException`` (``args[0]`` the ``KafkaError``), parka raises
  :class:`KafkaClientException`: parka's :class:`~parka.errors.KafkaClientError` and confluent's
  ``KafkaException`` at once, so ``except`` clauses written for either catch it.
* A consumer whose ``__init__`` never ran (a subclass that skips it, as confluent's own tests do)
  or that is closed raises ``RuntimeError("Consumer closed")``: its client is then
  :data:`UNBUILT`, a ``confluent_kafka.Consumer`` that was never initialised, whose methods
  raise exactly what confluent's raise.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError

from parka.errors import KafkaClientError

__all__ = ["UNBUILT", "KafkaClientException", "closed_error", "kafka_error", "merge_conf", "translated"]

# Never initialised: every method raises RuntimeError("Consumer closed") (list_topics "Handle has
# been closed"), close() does nothing. Bound at import, as _shim's wrapped class is.
UNBUILT: Any = confluent_kafka.Consumer.__new__(confluent_kafka.Consumer)


class KafkaClientException(KafkaClientError, confluent_kafka.KafkaException):
    """A client error that is both parka's :class:`~parka.errors.KafkaClientError` and confluent's
    ``KafkaException``: ``args[0]`` and ``kafka_error`` are the ``KafkaError``, ``str()`` is
    parka's message."""

    def __init__(self, message: str, *, kafka_error: KafkaError) -> None:
        super().__init__(message, kafka_error=kafka_error)
        self.message = message
        self.args = (kafka_error,)

    def __str__(self) -> str:
        return self.message

    @classmethod
    def wrap(cls, exc: confluent_kafka.KafkaException, what: str) -> KafkaClientException:
        """``exc`` (raised by the wrapped client) as parka's, its ``KafkaError`` kept."""
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        err = err or kafka_error(KafkaError._FAIL, str(exc))
        return cls(f"{what}: {err.str()}", kafka_error=err)


def kafka_error(code: int, reason: str) -> KafkaError:
    return KafkaError(code, reason)


def closed_error() -> RuntimeError:
    return RuntimeError("Consumer closed")


def merge_conf(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """One config dict from ``Consumer``'s positional and keyword arguments, as confluent merges
    them (keywords win). Raises ``TypeError`` with confluent's messages."""
    if len(args) > 1:
        raise TypeError("expected tuple containing single dict")
    conf: dict[str, Any] = {}
    if args:
        if not isinstance(args[0], Mapping):
            raise TypeError("expected configuration dict")
        conf.update(args[0])
    conf.update(kwargs)
    return conf


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Raise the client's ``KafkaException`` as :class:`KafkaClientException` (still one)."""
    try:
        yield
    except KafkaClientException:
        raise
    except confluent_kafka.KafkaException as exc:
        raise KafkaClientException.wrap(exc, what) from exc
