"""``AIOParquetProducer``: parka's counterpart of ``confluent_kafka.aio.AIOProducer``.

confluent-kafka's asyncio producer is a wrapper around a synchronous ``Producer``: ``produce``
buffers the message with an ``asyncio.Future``, and batches go to the sync client through
``produce_batch(topic, [dict, ...])`` on a thread pool, each message's callback resolving its
future; ``poll``/``flush``/transactions run on the pool. All of that machinery is confluent's and
is kept: this class only makes the sync client a :class:`ParquetProducer`, which takes the same
list of dicts (record mappings as values on a columnar topic) and reports each record through
its callback. So ``await producer.produce(topic, value={...})`` returns a future that resolves
to the delivered record (a :class:`~parka.message.RecordMessage`) or fails with
``KafkaException``, exactly as with confluent-kafka's class.

confluent-kafka's ``AIOProducer`` builds its client in ``__init__`` (``confluent_kafka.Producer``,
looked up at call time), with no hook to give it another class; ``__init__`` is therefore
parka's own: the same parameters and the same parts, assembled around a ``ParquetProducer``.
The parts are confluent-kafka's private modules (``confluent_kafka.aio.producer._*``): a
confluent-kafka release that reorganises them breaks this class, which the tests catch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Mapping
from typing import Any, cast

from confluent_kafka.aio import _common
from confluent_kafka.aio.producer._AIOProducer import AIOProducer
from confluent_kafka.aio.producer._buffer_timeout_manager import BufferTimeoutManager
from confluent_kafka.aio.producer._kafka_batch_executor import ProducerBatchExecutor
from confluent_kafka.aio.producer._producer_batch_processor import ProducerBatchManager

from ._producer import ParquetProducer

__all__ = ["AIOParquetProducer"]


class AIOParquetProducer(AIOProducer):
    """An asyncio producer whose sync client is a :class:`ParquetProducer`.

    Same constructor and methods as ``confluent_kafka.aio.AIOProducer``: ``producer_conf`` is a
    ``ParquetProducer`` config (``columnar.*`` keys included; copied, never modified), and must be
    built inside a running event loop. Call ``set_schema`` (synchronous: no I/O unless a schema
    registry is configured) before producing records to a columnar topic.

    Raises what ``ParquetProducer`` raises for a bad config.
    """

    def __init__(
        self,
        producer_conf: Mapping[str, Any],
        max_workers: int = 4,
        executor: concurrent.futures.Executor | None = None,
        batch_size: int = 1000,
        buffer_timeout: float = 1.0,
    ) -> None:
        self.executor = executor if executor is not None else concurrent.futures.ThreadPoolExecutor(max_workers)
        self._loop = asyncio.get_running_loop()
        conf = dict(producer_conf)
        _common.wrap_common_callbacks(self._loop, conf)  # error_cb, stats_cb, logger: on the loop
        self._client = ParquetProducer(conf)
        # confluent's parts type it as confluent_kafka.Producer; they call only what both have
        self._producer = cast(Any, self._client)
        self._batch_size = batch_size
        self._is_closed = False
        self._kafka_executor = ProducerBatchExecutor(self._producer, self.executor)
        self._batch_processor = ProducerBatchManager(self._kafka_executor)
        self._buffer_timeout_manager = BufferTimeoutManager(self._batch_processor, self._kafka_executor, buffer_timeout)
        if buffer_timeout > 0:
            self._buffer_timeout_manager.start_timeout_monitoring()

    @property
    def producer(self) -> ParquetProducer:
        """The synchronous client (for ``stats()``, ``schema()``, ...)."""
        return self._client

    def set_schema(self, topic: str, schema: Any = None, **kwargs: Any) -> None:
        """:meth:`ParquetProducer.set_schema`; synchronous (it buffers nothing and, without a
        schema registry, makes no request)."""
        self._client.set_schema(topic, schema, **kwargs)

    async def close(self) -> None:
        """As ``AIOProducer.close`` (flush, stop the pool), then close the sync client: parka's
        linger thread stops and the wrapped Kafka client is closed. Closing again is a no-op."""
        if self._is_closed:
            return
        try:
            await super().close()
        finally:
            await asyncio.get_running_loop().run_in_executor(None, self._client.close)
