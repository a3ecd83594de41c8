"""``ParquetConsumer``'s offsets API and its own commits: what leaves it as a Kafka offset.

:class:`OffsetsAPI` is a base class of :class:`~._shim.ParquetConsumer` holding ``position``,
``commit``, ``store_offsets``, ``committed`` and ``seek`` (the decisions they take are in
``_offsets.py``), and auto-commit's side of the shim: the committer thread's tick, the commit
of a set of positions, and the client's commit callback (``_autocommit.py`` runs the thread).
The fetch path is ``_fetch.py``; the state read here is set up by ``ParquetConsumer.__init__``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import confluent_kafka
from confluent_kafka import TopicPartition

from parka.background import every

from ._compat import closed_error, translated
from ._offsets import as_offset, commit_request, positions, store_request
from ._segments import Cursor, Key, Position

if TYPE_CHECKING:
    from ._fetch import Fetcher

__all__ = ["OffsetsAPI"]

log = logging.getLogger("parka.consumer")


class OffsetsAPI:
    """Offsets and commits of a :class:`~._shim.ParquetConsumer` (its base class)."""

    # set up by ParquetConsumer.__init__ (class defaults there for a consumer never built)
    _consumer: Any
    _shut: bool
    _closed: bool
    _current: Cursor | None
    _fetcher: Fetcher
    _cursors: dict[Key, Cursor]
    _stored: dict[Key, Position]
    _assigned: set[Key]
    _resume_checked: set[Key]
    _auto_store: bool
    _auto_commit: bool
    _interval_s: float
    _user_on_commit: Callable[..., None] | None
    _lock: threading.RLock
    _sent: dict[Key, Position]
    _failed: list[Key]
    _committer: threading.Thread | None
    _stop_committer: threading.Event

    def _check_open(self) -> None:
        if self._shut:
            raise closed_error()

    # -- offsets (the decisions: _offsets.py) ------------------------------------------------

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """After the last record handed out: inside a segment, its offset with the metadata
        ``parka:1:<offset>:<index>``, so that ``send_offsets_to_transaction(consumer.position(..))``
        resumes at the next record; a partition nothing was fetched from: the client's answer.
        Raises :class:`KafkaClientException` (a ``KafkaException``) as confluent's."""
        self._check_open()
        with translated("position failed"):
            return positions(self._consumer.position(partitions), self._cursors)

    def commit(
        self,
        message: Any = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit record-precise positions: with no argument the stored ones (every record handed
        out, or with ``enable.auto.offset.store=false`` what :meth:`store_offsets` was given);
        with ``message`` (a record, a :class:`SegmentTable`, a plain message) the position after
        it; ``offsets`` as given, the ``msg.offset() + 1`` idiom read as the record position
        (:func:`._offsets.commit_request`). Returns the committed partitions when synchronous.

        Raises ``ValueError`` (both ``message`` and ``offsets``), :class:`KafkaClientException`
        (a ``KafkaException``; ``_NO_OFFSET`` when synchronous with nothing stored, as
        confluent's, which tells ``on_commit`` when asynchronous), ``RuntimeError`` when closed.
        """
        self._check_open()
        kwargs = commit_request(message, offsets, self._cursors, self._positions())
        with translated("commit failed"):
            if asynchronous:
                self._consumer.commit(asynchronous=True, **kwargs)
                return None
            return list(self._consumer.commit(asynchronous=False, **kwargs))

    def store_offsets(self, message: Any = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store the position after ``message`` (record-precise) or ``offsets`` (read as
        :meth:`commit` reads them) for the next auto-commit or argument-less :meth:`commit`.
        Raises what :func:`._offsets.store_request` raises, ``RuntimeError`` when closed."""
        self._check_open()
        self._stored.update(store_request(message, offsets, self._cursors, self._assigned, auto_store=self._auto_store))

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The committed positions, metadata included (inside a segment: the segment's offset
        and ``parka:1:<offset>:<index>``). Raises :class:`KafkaClientException` as confluent's."""
        self._check_open()
        with translated("committed failed"):
            return list(self._consumer.committed(partitions, *(() if timeout is None else (timeout,))))

    def seek(self, partition: TopicPartition) -> None:
        """Seek like the client; that partition's records in hand are dropped and the offset is
        taken literally, as :meth:`assign` takes one. Raises :class:`KafkaClientException`."""
        self._check_open()
        with translated("seek failed"):
            self._consumer.seek(partition)
        key = (partition.topic, partition.partition)
        self._fetcher.forget({key})
        self._cursors.pop(key, None)
        self._resume_checked.add(key)
        current = self._current
        if current is not None and (current.topic, current.partition) == key:
            self._current = None

    # -- internals: positions and auto-commit ------------------------------------------------

    def _positions(self) -> dict[Key, Position]:
        """The stored position of every partition that has one (a snapshot; any thread)."""
        if self._auto_store:
            return {key: cursor.position() for key, cursor in self._cursors.copy().items()}
        return self._stored.copy()

    def _start_committer(self) -> None:
        if not self._auto_commit or self._interval_s <= 0 or self._committer is not None or self._closed:
            return
        self._committer = threading.Thread(
            target=every,  # holds the consumer weakly: one dropped without close() is freed
            args=(weakref.ref(self), self._stop_committer, self._interval_s, OffsetsAPI._auto_commit_tick),
            name="parka-auto-commit",
            daemon=True,
        )
        self._committer.start()

    def _auto_commit_tick(self) -> None:
        """One auto-commit (the committer thread): send the positions that changed."""
        with self._lock:
            if self._closed:
                return
            while self._failed:
                self._sent.pop(self._failed.pop(), None)
            due = {
                key: pos
                for key, pos in self._positions().items()
                if key in self._assigned and self._sent.get(key) != pos
            }
            if due:
                self._send(due, asynchronous=True)

    def _send(self, positions: dict[Key, Position], *, asynchronous: bool) -> None:
        """Commit ``positions`` (holding ``_lock``); failures are logged, not raised."""
        offsets = [as_offset(key[0], key[1], pos) for key, pos in positions.items()]
        try:
            if asynchronous:
                self._consumer.commit(offsets=offsets, asynchronous=True)
                result = []
            else:
                result = self._consumer.commit(offsets=offsets, asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            # E.g. a rebalance in progress: the next tick (or the new owner) carries on.
            log.info("auto-commit of %d partition(s) failed: %s", len(positions), exc)
            return
        failed = set()
        for tp in result:
            if tp.error is not None:
                failed.add((tp.topic, tp.partition))
                log.info("auto-commit of %s[%d] failed: %s", tp.topic, tp.partition, tp.error)
        self._sent.update((key, pos) for key, pos in positions.items() if key not in failed)

    def _on_commit(self, err: Any, partitions: list[TopicPartition] | None) -> None:
        """The client's commit callback: remember failed auto-commits, then the application's."""
        failed = [(tp.topic, tp.partition) for tp in partitions or () if err is not None or tp.error is not None]
        self._failed.extend(failed)  # the committer thread resends them at its next tick
        if self._user_on_commit is not None:
            self._user_on_commit(err, partitions)
