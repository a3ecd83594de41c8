"""Which confluent-kafka client class a parka wrapper builds, when a class may have been swapped."""

from __future__ import annotations

from typing import Any


def client_class(current: Any, bound: type, own: type) -> Any:
    """``current`` (``confluent_kafka.Producer`` or ``.Consumer`` as it is now), so that a test
    double patched in its place (``unittest.mock.patch("confluent_kafka.Producer")``) is what parka
    wraps, as confluent's own asyncio classes would wrap it; but ``bound`` (the class as it was
    when parka was imported) when parka's own class ``own`` was swapped in (confluent-kafka's
    tests run on parka's classes), which would otherwise build itself without end."""
    if isinstance(current, type) and issubclass(current, own):
        return bound
    return current
