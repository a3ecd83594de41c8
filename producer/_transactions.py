"""``ParquetProducer``'s transactions, kept as confluent-kafka keeps them.

With ``transactional.id`` records are taken only inside a transaction: ``produce()`` reads one
flag, ``_refuse``, set here whenever the transaction opens or closes (and by the outbox when it
fills or empties); ``commit_transaction`` sends every buffered record into the transaction
first, and ``abort_transaction`` drops them, each reported ``_PURGE_QUEUE``.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from ._outbox import Outbox
from ._pipeline import Pipeline

__all__ = ["Transactions"]


class Transactions:
    """The transaction methods of :class:`~parka.producer.ParquetProducer` (a base class of it),
    over the state it sets up in ``__init__``."""

    _producer: Any
    _pipeline: Pipeline
    _out: Outbox
    _columnar: bool
    _open: bool
    _outside_txn: bool
    _refuse: bool

    def init_transactions(self, *args: Any) -> None:
        self._producer.init_transactions(*args)

    def begin_transaction(self) -> None:
        """Begin a transaction; from now until it ends, records are taken and segments sent."""
        self._producer.begin_transaction()
        self._set_outside_txn(False)

    def send_offsets_to_transaction(self, *args: Any, **kwargs: Any) -> None:
        self._producer.send_offsets_to_transaction(*args, **kwargs)

    def commit_transaction(self, *args: Any) -> None:
        """Send every buffered record into the transaction, then commit it.

        ``produce()`` refuses records (``_STATE``) while the commit runs, as librdkafka does.
        On a failure the transaction stays open (``KafkaException``, as confluent-kafka raises):
        retry, or abort when ``txn_requires_abort()``.
        """
        if not self._columnar or not self._open:
            self._producer.commit_transaction(*args)
            return
        self._set_outside_txn(True)
        try:
            self._pipeline.cut_all()
            self._pipeline.hand_over()
            self._producer.commit_transaction(*args)
        except BaseException:
            self._set_outside_txn(False)
            raise

    def abort_transaction(self, *args: Any) -> None:
        """Drop every buffered record (each reported ``_PURGE_QUEUE`` to its callback, inside this
        call, as confluent-kafka reports the messages an abort purges), then abort."""
        if not self._columnar or not self._open:
            self._producer.abort_transaction(*args)
            return
        self._set_outside_txn(True)
        self._drop_buffered()
        self._out.serve()
        try:
            self._producer.abort_transaction(*args)
        finally:
            self._out.serve()

    def _drop_buffered(self) -> None:
        """Drop every staged, buffered and waiting record, each reported ``_PURGE_QUEUE``."""
        with self._pipeline.lock:
            self._pipeline.drop_all(KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue"))

    def _update_refuse(self) -> None:
        self._refuse = self._outside_txn or self._out.full or not self._open

    def _set_outside_txn(self, outside: bool) -> None:
        with self._pipeline.lock:
            self._outside_txn = outside
            self._update_refuse()
