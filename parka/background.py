"""A client wrapper's background thread that holds its owner weakly: :func:`every`."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

__all__ = ["every"]

T = TypeVar("T")


def every(owner: weakref.ref[T], stop: threading.Event, interval_s: float, turn: Callable[[T], object]) -> None:
    """A thread's loop: ``turn(owner)`` every ``interval_s`` seconds until ``stop`` is set or the
    owner is gone (the producer's linger thread, the consumer's auto-commit thread). The owner is
    held weakly, and not at all while waiting, so that one the application drops without closing
    it is freed, as confluent-kafka's clients are."""
    while not stop.wait(interval_s):
        current = owner()
        if current is None:
            return
        turn(current)
        del current  # hold no reference while waiting
