"""How :class:`~parka.consumer.ParquetConsumer` auto-commits (its state and the thread's work,
``_auto_commit_tick`` and ``_send``, live in ``_shim.py``; here the config and the commit
callback; the thread's loop is :func:`parka.background.every`).

Auto-commit
-----------
The wrapped client runs with ``enable.auto.commit=false`` and ``enable.auto.offset.store=false``,
and parka commits by itself. librdkafka's auto-commit compares offsets only: a stored position
with the same segment offset and new metadata (a later record of the same segment) is not
committed while that offset is already committed (librdkafka 2.x). A crash would then
re-deliver up to a whole segment. So, with ``enable.auto.commit`` (the default):

1. A partition's position is its cursor when ``enable.auto.offset.store`` is true (the default:
   every record handed out counts as stored, as librdkafka stores every message ``poll``
   returns), else the last position the application passed to ``store_offsets``.
2. A daemon thread wakes every ``auto.commit.interval.ms`` and commits, asynchronously, the
   positions that changed since it last sent them. A commit reported failed to the commit
   callback is sent again at the next tick. The application's ``on_commit`` sees these
   commits as it would see librdkafka's automatic ones.
3. Revocation, ``unassign`` and ``close()`` commit synchronously, as librdkafka does with
   auto-commit (``close()`` stops the thread first). Lost partitions are not committed.
4. The thread and the release of partitions share one lock, so no commit for a partition is
   sent once it is released. Nothing is locked per record: the thread reads a cursor's index,
   which the consuming thread only ever increases, and a new segment gets a new cursor.

A crash (kill -9) therefore re-delivers at most the records handed out during the last
``auto.commit.interval.ms``, plus what the last commit's round trip takes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from parka.errors import ConfigError

__all__ = ["MAX_INTERVAL_MS", "flag", "interval_s", "weak_on_commit"]

MAX_INTERVAL_MS = 86_400_000  # librdkafka's bound on auto.commit.interval.ms


def flag(conf: dict[str, Any], key: str) -> bool:
    """Pop a librdkafka boolean (default true) from ``conf``. Raises ConfigError for other values."""
    value = conf.pop(key, True)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "t", "1"):
        return True
    if text in ("false", "f", "0"):
        return False
    raise ConfigError(key, value, "true, false")


def interval_s(conf: dict[str, Any]) -> float:
    """Pop ``auto.commit.interval.ms`` (default 5000) from ``conf``, in seconds. Raises ConfigError."""
    value = conf.pop("auto.commit.interval.ms", 5000)
    try:
        ms = int(value)
    except (TypeError, ValueError):
        ms = -1
    if isinstance(value, (bool, float)) or not 0 <= ms <= MAX_INTERVAL_MS:
        raise ConfigError("auto.commit.interval.ms", value, f"an integer from 0 to {MAX_INTERVAL_MS}")
    return ms / 1000


def weak_on_commit(ref: weakref.ref[Any]) -> Callable[[Any, Any], None]:
    """The client's ``on_commit``: ``ref()._on_commit``, without keeping the consumer alive."""

    def on_commit(err: Any, partitions: Any) -> None:
        consumer = ref()
        if consumer is not None:
            consumer._on_commit(err, partitions)

    return on_commit
