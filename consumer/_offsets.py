"""Record-precise offsets wherever an offset leaves the consumer.

librdkafka's ``position()`` is the offset after the last Kafka *message* handed to parka: once
segment X is fetched it says X+1, however many of X's records the application has yet to see.
confluent-kafka's exactly-once loop commits exactly that::

    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata())

and a restart would skip the rest of X. So parka answers ``position()`` from its cursors: after
the last record handed out, as a commit would store it (``_segments.Cursor.position``): inside a
segment the segment's offset with the metadata ``parka:1:<offset>:<index>``, else the next
offset. Handed to any producer's ``send_offsets_to_transaction`` or to ``commit(offsets=...)``,
the metadata travels with the offset, and a ``ParquetConsumer`` that is assigned the partition
later resumes at that record.

Offsets an application builds itself, the idiom ``TopicPartition(t, p, msg.offset() + 1)``, mean
"after this message"; for a record, ``msg.offset()`` is its segment's, so the literal offset
would skip the rest of the segment. ``commit(offsets=...)`` and ``store_offsets(offsets=...)``
therefore read an offset that is one past the segment being handed out, without metadata, as the
partition's record-precise position (:func:`precise`). Any other offset is taken literally.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from parka.message import RecordMessage

from ._compat import KafkaClientException
from ._segments import Cursor, Key, Position, SegmentTable, position_after

__all__ = ["as_offset", "commit_request", "positions", "precise", "store_request"]


def as_offset(topic: str, partition: int, position: Position, *, bare: bool = False) -> TopicPartition:
    """The ``TopicPartition`` that carries ``position``, its leader epoch when known. Its
    metadata is the position's, ``""`` for a plain position (as a commit sends it); with
    ``bare`` a plain position has none at all (``None``, as the client's ``position()``)."""
    offset, metadata, epoch = position
    epoch = -1 if epoch is None else epoch  # -1: none, as confluent's TopicPartition reads it
    if bare and not metadata:
        return TopicPartition(topic, partition, offset, leader_epoch=epoch)
    return TopicPartition(topic, partition, offset, metadata, epoch)


def _at(tp: TopicPartition, cursor: Cursor) -> TopicPartition:
    return as_offset(tp.topic, tp.partition, cursor.position(), bare=True)


def positions(reported: Iterable[TopicPartition], cursors: Mapping[Key, Cursor]) -> list[TopicPartition]:
    """``reported`` (the wrapped client's ``position()``) with each partition that has a cursor
    replaced by the position after its last record handed out."""
    out = []
    for tp in reported:
        cursor = cursors.get((tp.topic, tp.partition))
        out.append(tp if cursor is None or tp.error is not None else _at(tp, cursor))
    return out


def precise(offsets: Iterable[TopicPartition], cursors: Mapping[Key, Cursor]) -> list[TopicPartition]:
    """``offsets`` as given, but for an offset without metadata that is one past the segment
    whose records are being handed out: the position after the last record handed out."""
    out = []
    for tp in offsets:
        cursor = cursors.get((tp.topic, tp.partition))
        inside = cursor is not None and cursor.next < cursor.stop
        if inside and cursor is not None and not tp.metadata and tp.offset == cursor.offset + 1:
            out.append(_at(tp, cursor))
        else:
            out.append(tp)
    return out


def commit_request(
    message: Any, offsets: list[TopicPartition] | None, cursors: Mapping[Key, Cursor], stored: Mapping[Key, Position]
) -> dict[str, Any]:
    """The client's ``commit()`` arguments for ``ParquetConsumer.commit(message, offsets)``.

    ``offsets`` as :func:`precise` reads them; a record or :class:`SegmentTable`: the position
    after it; a plain message: the client's own commit of it; neither: the ``stored`` positions,
    or, with none, the client's argument-less commit, which fails with ``_NO_OFFSET`` as
    confluent's does. Raises ``ValueError`` for both ``message`` and ``offsets``.
    """
    if message is not None and offsets is not None:
        raise ValueError("message and offsets are mutually exclusive")
    if offsets is not None:
        return {"offsets": precise(offsets, cursors)}
    if isinstance(message, (RecordMessage, SegmentTable)):
        return {"offsets": [as_offset(message.topic(), message.partition(), position_after(message))]}
    if message is not None:
        return {"message": message}
    tps = [as_offset(key[0], key[1], pos) for key, pos in stored.items()]
    return {"offsets": tps} if tps else {}


def store_request(
    message: Any,
    offsets: list[TopicPartition] | None,
    cursors: Mapping[Key, Cursor],
    assigned: Collection[Key],
    *,
    auto_store: bool,
) -> dict[Key, Position]:
    """The positions ``ParquetConsumer.store_offsets(message, offsets)`` stores.

    Raises:
        ValueError: both or neither of ``message`` and ``offsets`` (confluent's messages).
        KafkaClientException: ``enable.auto.offset.store`` is true (``_INVALID_ARG``, as
            librdkafka) or a partition is not assigned (``_UNKNOWN_PARTITION``).
    """
    if message is not None and offsets is not None:
        raise ValueError("message and offsets are mutually exclusive")
    if message is None and offsets is None:
        raise ValueError("expected either message or offsets")
    if auto_store:
        raise KafkaClientException(
            "store_offsets needs 'enable.auto.offset.store' set to false",
            kafka_error=KafkaError(KafkaError._INVALID_ARG, "StoreOffsets failed"),
        )
    given: dict[Key, Position]
    if offsets is not None:
        given = {
            (tp.topic, tp.partition): (tp.offset, tp.metadata or "", tp.leader_epoch)
            for tp in precise(offsets, cursors)
        }
    elif message.offset() is None:  # a Message built in Python: no position to store
        given = {}
    else:
        given = {(message.topic(), message.partition()): position_after(message)}
    for topic, partition in given:
        if (topic, partition) not in assigned:
            raise KafkaClientException(
                f"cannot store an offset for {topic}[{partition}]: partition not assigned",
                kafka_error=KafkaError(KafkaError._UNKNOWN_PARTITION, "partition not assigned"),
            )
    return given
