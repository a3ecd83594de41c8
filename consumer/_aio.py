"""``AIOParquetConsumer``: parka's counterpart of ``confluent_kafka.aio.AIOConsumer``.

confluent's ``AIOConsumer`` is an asyncio wrapper around a sync ``Consumer``: each method runs the
sync call on a thread pool (``_call``, which also carries confluent's re-entry identity, so a
rebalance callback may call back into the consumer), and the configured callbacks (``error_cb``,
``stats_cb``, ``throttle_cb``, ``logger``, ``on_commit``) and the rebalance callbacks become
coroutines run on the event loop. ``AIOParquetConsumer`` is that same class with a
:class:`ParquetConsumer` as its sync client: it subclasses ``AIOConsumer`` and replaces only the
constructor, so every method, its locking and its callback handling stay confluent's, and an
``isinstance(c, AIOConsumer)`` check holds. It adds the shim's own calls, :meth:`poll_table` and
:meth:`poll_buffer`.

Relies on ``AIOConsumer`` keeping its sync client in ``self._consumer`` and its executor in
``self.executor`` (confluent-kafka 2.12 to 2.16).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Mapping
from typing import Any

from confluent_kafka.aio import AIOConsumer
from confluent_kafka.aio import _common as aio_common

from ._segments import RawSegment
from ._shim import ParquetConsumer

__all__ = ["AIOParquetConsumer"]


class AIOParquetConsumer(AIOConsumer):
    """``confluent_kafka.aio.AIOConsumer`` over a :class:`ParquetConsumer`: ``await
    consumer.poll()`` returns a record of a segment, ``consume()`` a list of them.

    ``consumer_conf`` is the :class:`ParquetConsumer` config (copied, never modified); must be
    built inside a running event loop, as ``AIOConsumer``.

    Raises:
        ValueError: ``max_workers`` below 1 (confluent's message).
        ConfigError, TypeError: what :class:`ParquetConsumer` raises for ``consumer_conf``.
    """

    def __init__(
        self,
        consumer_conf: Mapping[str, Any],
        max_workers: int = 100,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        # AIOConsumer.__init__ would build a confluent_kafka.Consumer; this is its body with
        # parka's client instead (and the caller's dict left alone).
        self._closed = False
        self._owns_executor = False
        if executor is not None:
            self.executor = executor
        else:
            if max_workers < 1:
                raise ValueError("max_workers must be at least 1")
            self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers)
            self._owns_executor = True
        if not isinstance(consumer_conf, Mapping):
            raise TypeError("expected configuration dict")
        conf = dict(consumer_conf)
        loop = asyncio.get_running_loop()
        aio_common.wrap_common_callbacks(loop, conf)
        aio_common.wrap_conf_callback(loop, conf, "on_commit")
        try:
            self._parquet = ParquetConsumer(conf)
            # a drop-in for confluent_kafka.Consumer, not a subclass of it
            self._consumer = self._parquet  # type: ignore[assignment]
        except BaseException:
            if self._owns_executor:
                self.executor.shutdown(wait=False)
            raise

    def set_reader_schema(self, topic: str, schema: Any) -> None:
        """:meth:`ParquetConsumer.set_reader_schema`; synchronous, as the producer's
        ``set_schema`` (it makes no request and applies to segments decoded from then on)."""
        self._parquet.set_reader_schema(topic, schema)

    async def poll_table(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`ParquetConsumer.poll_table`: the next segment's records as one ``pyarrow.Table``."""
        return await self._call(self._parquet.poll_table, *args, **kwargs)

    async def poll_buffer(self, *args: Any, **kwargs: Any) -> RawSegment | None:
        """:meth:`ParquetConsumer.poll_buffer`: the next message's raw bytes, undecoded."""
        result: RawSegment | None = await self._call(self._parquet.poll_buffer, *args, **kwargs)
        return result

    async def poll_buffers(self, *args: Any, **kwargs: Any) -> list[RawSegment]:
        """:meth:`ParquetConsumer.poll_buffers`: the messages the client holds, raw, undecoded."""
        result: list[RawSegment] = await self._call(self._parquet.poll_buffers, *args, **kwargs)
        return result
