"""Which confluent-kafka client class a parka wrapper builds, when a class may have been swapped,
and the wrapped client's methods a wrapper does not define itself."""

from __future__ import annotations

from collections.abc import Callable
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


def forward_missing(cls: type, client: type, attribute: str) -> None:
    """Give ``cls`` every public method of ``client`` (``confluent_kafka.Producer`` or
    ``.Consumer``) that it does not define, each calling the wrapped client it holds in
    ``attribute`` (a closed client's stand-in raises as confluent-kafka's closed client does).
    Methods made once, not a ``__getattr__``: with one, CPython looks up every attribute of an
    instance, its own fields and methods included, through a slower path, on every call of
    ``produce()``, ``poll()`` and ``consume()``."""
    for name in dir(client):
        if not name.startswith("_") and not hasattr(cls, name) and callable(getattr(client, name)):
            setattr(cls, name, _forwarder(cls, name, attribute))


def _forwarder(cls: type, name: str, attribute: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(getattr(self, attribute), name)(*args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    method.__doc__ = f"The wrapped client's ``{name}``, as confluent-kafka's."
    return method
