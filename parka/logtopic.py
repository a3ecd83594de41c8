"""The topic a thread works for, so that the log lines of a process landing several topics
(``parka ingest a,b``) say which one each is about: the lane's thread is given its topic
(:func:`set_topic`), the threads it starts carry it (:func:`carried`, or a pool's
``initializer=set_topic, initargs=(topic(),)``), and ``parka ingest``'s log handler reads
:func:`topic` for each line. A thread given none (one topic's daemon) has ``None``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["carried", "set_topic", "topic"]

T = TypeVar("T")
_local = threading.local()


def set_topic(name: str | None) -> None:
    """This thread's topic from now on."""
    _local.topic = name


def topic() -> str | None:
    """This thread's topic, or ``None``."""
    return getattr(_local, "topic", None)


def carried(target: Callable[..., T]) -> Callable[..., T]:
    """``target`` as a new thread's target that works for the calling thread's topic."""
    name = topic()
    if name is None:
        return target

    def run(*args: Any, **kwargs: Any) -> T:
        set_topic(name)
        return target(*args, **kwargs)

    return run
