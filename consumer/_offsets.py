"""Record-precise offsets wherever an offset leaves the consumer (issue 18).

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

from collections.abc import Iterable, Mapping

from confluent_kafka import TopicPartition

from ._segments import Cursor, Key

__all__ = ["positions", "precise"]


def _at(tp: TopicPartition, cursor: Cursor) -> TopicPartition:
    offset, metadata = cursor.position()
    if metadata:
        return TopicPartition(tp.topic, tp.partition, offset, metadata)
    return TopicPartition(tp.topic, tp.partition, offset)


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
