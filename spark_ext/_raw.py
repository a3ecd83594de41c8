"""Raw mode of the Spark ingestion: segments land in the Delta table as they are, no record decoded.

Spark only carries the work; every decision is the one ``parka ingest`` makes (neither half
imports pyspark; :mod:`._ingest` wires them into a ``foreachBatch`` query):

* :class:`SegmentFileWriter` runs on the executors (``mapInArrow`` over a micro-batch's Kafka
  rows, one row per segment): each segment is read and checked by
  :func:`parka.lake.read_segment` and :func:`~parka.lake.check_segment`,
  and a task's segments are written by :func:`~parka.lake.write_segments` (stitched
  per Kafka partition, schema and table partition, up to the target file size), exactly as
  ``parka ingest`` writes them at a commit. Out comes one small row per segment and file
  (:data:`FILE_ROWS`), or one per message the table cannot take, with its error.
* On the driver, :func:`committer_input` turns those rows back into the committer's input, and
  :class:`parka.lake.Committer` commits them: the one protocol, with the same
  ``txn`` per Kafka partition as ``parka ingest``, through delta-spark (the default) or delta-rs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from parka.lake import (
    DEFAULT_STATS,
    DEFAULT_TARGET_FILE_SIZE,
    CheckedSegment,
    DataFile,
    Debezium,
    LandedSegment,
    Refused,
    SegmentRead,
    StatsConfig,
    Tombstone,
    check_keyed,
    check_segment,
    is_tombstone,
    make_durable,
    read_segment,
    tombstone_refusal,
    unwrap_segment,
    write_segments,
)
from parka.ops.row_values import ROW_RECORD_OVERHEAD, RowFormat, RowValues, row_values

from parka.errors import ParkaError, SchemaMismatchError, SegmentDecodeError, SegmentError
from parka.partitioning import PartitionSpec
from parka.segment import is_segment

__all__ = ["FILE_ROWS", "CommitterInput", "SegmentFileWriter", "committer_input", "row_schema", "segment_schema"]

log = logging.getLogger("parka.spark_ingest")

_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

FILE_ROWS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("records", pa.int64()),  # the segment's, on its first file; 0 on the other parts of a split
        ("path", pa.string()),  # relative to the table root; null for a bad segment
        ("tags", pa.string()),  # JSON: the file's Kafka coordinates
        ("row_group_first", pa.int32()),  # a stitched file: where this segment's row groups start
        ("row_group_count", pa.int32()),
        ("stitch_fallback", pa.bool_()),
        ("size", pa.int64()),
        ("stats", pa.string()),
        ("partition_values", pa.string()),  # JSON
        ("new_fields", pa.binary()),  # Arrow IPC schema of columns the table lacks, or null
        ("split", pa.bool_()),
        ("value_bytes", pa.int64()),
        ("error_class", pa.string()),  # a bad segment: SegmentError, SegmentDecodeError, SchemaMismatchError
        ("error", pa.string()),
        ("error_field", pa.string()),
        ("value", pa.binary()),  # a bad segment's bytes, when a dead-letter table wants them
        ("headers", _HEADERS),
        ("timestamp_ms", pa.int64()),
        ("tombstone_key", pa.binary()),  # an upsert table's tombstone: the key it deletes
        ("offsets", pa.list_(pa.int64())),  # a run of row records' file: each row's offset; else null
    ]
)
"""What the executors return to the driver: one row per segment and data file written (a stitched
file has one row per segment in it, a split segment one per file), one per bad segment, and one
per tombstone of an upsert table."""

_ERRORS: dict[str, type[SegmentError] | type[SchemaMismatchError]] = {
    "SegmentError": SegmentError,
    "SegmentDecodeError": SegmentDecodeError,
    "SchemaMismatchError": SchemaMismatchError,
}


@dataclass(frozen=True)
class SegmentFileWriter:
    """``mapInArrow``'s function in raw mode: Kafka rows in, :data:`FILE_ROWS` out.

    ``table_schema`` is the table's Arrow schema when the micro-batch started, ``partition_by``
    its partitioning (the committer's specs, derived ones included), ``check_columns`` its
    engine's check of new columns (:meth:`parka.lake.LogEngine.check_columns`, a plain function
    that travels to the executors). ``keep_bad_values`` ships bad segments' bytes back (for a
    dead-letter table).
    """

    table_uri: str
    table_schema: pa.Schema
    partition_by: tuple[PartitionSpec | str, ...] = ()
    storage_options: Mapping[str, str] = field(default_factory=dict)
    merge: bool = False
    keep_bad_values: bool = False
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    stats_config: StatsConfig = DEFAULT_STATS
    check_columns: Callable[[pa.Schema], None] = field(kw_only=True)
    # an upsert table's (parka ingest's --upsert, --key-columns, --cdc): the Kafka rows carry "key"
    upsert: bool = field(default=False, kw_only=True)
    key_columns: tuple[str, ...] = field(default=(), kw_only=True)
    cdc: Debezium | None = field(default=None, kw_only=True)
    # --value-format's: a message that is no segment is a row record, decoded here
    row_format: RowFormat | None = field(default=None, kw_only=True)

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[CheckedSegment] = []
        pending_bytes = 0
        wrote = False
        breaks: dict[int, list[int]] = {}  # an upsert table's tombstones: no stitched file spans one
        held: dict[int, list[dict[str, Any]]] = {}  # --value-format: a partition's row records, undecoded
        held_bytes: dict[int, int] = {}  # and what they cost in memory (ROW_RECORD_OVERHEAD)
        other: list[dict[str, Any]] = []

        def take(item: CheckedSegment | dict[str, Any]) -> None:
            nonlocal pending_bytes
            if isinstance(item, dict):
                other.append(item)
            else:
                pending.append(item)
                pending_bytes += len(item.seg.value)

        for batch in batches:
            for row in _rows(batch):
                p = row["partition"]
                if self._is_row(row):
                    held.setdefault(p, []).append(row)
                    held_bytes[p] = held_bytes.get(p, 0) + len(row["value"] or b"") + ROW_RECORD_OVERHEAD
                    continue
                held_bytes.pop(p, None)
                for item in self._decode(held.pop(p, [])):  # the records before it first
                    take(item)
                tombstone = self._tombstone(row) if self.upsert else None
                if tombstone is not None and tombstone.get("tombstone_key") is not None:
                    breaks.setdefault(tombstone["partition"], []).append(tombstone["offset"])
                take(self._check(row) if tombstone is None else tombstone)
            if sum(held_bytes.values()) >= self.target_file_size:  # bounds a task's memory: the runs end here
                for p in sorted(held):
                    for item in self._decode(held.pop(p)):
                        take(item)
                held_bytes.clear()
            if other:
                yield pa.RecordBatch.from_pylist(other, schema=FILE_ROWS)
                other.clear()
            if pending_bytes >= self.target_file_size:  # bounds a task's memory
                yield self._write(pending, breaks)
                wrote, pending, pending_bytes = True, [], 0
        for p in sorted(held):
            for item in self._decode(held.pop(p)):
                take(item)
        if other:
            yield pa.RecordBatch.from_pylist(other, schema=FILE_ROWS)
        if pending:
            yield self._write(pending, breaks)
            wrote = True
        if wrote:
            # Files are not fsynced one by one: flush them once per task, before the task (and
            # so the collect the driver commits after) completes.
            make_durable(self.table_uri, self.storage_options)

    def _is_row(self, row: Mapping[str, Any]) -> bool:
        """Whether a Kafka row is a row record to hold (``--value-format``): not a segment, and
        not an upsert table's tombstone."""
        if self.row_format is None or is_segment(row["headers"]):
            return False
        return not (self.upsert and is_tombstone(row.get("key"), row["value"], row["headers"]))

    def _decode(self, rows: list[dict[str, Any]]) -> list[CheckedSegment | dict[str, Any]]:
        """A partition's run of row records decoded in bulk, as ``parka ingest`` decodes it
        (:meth:`parka.ops.row_values.RowValues.segments`): each run of good records of one schema
        checked as a segment, each record the table cannot take as its error row."""
        if not rows:
            return []
        assert self.row_format is not None
        got = row_values(self.row_format).segments(
            topic=rows[0]["topic"],
            partition=rows[0]["partition"],
            table_schema=self.table_schema if len(self.table_schema) else None,
            values=[r["value"] for r in rows],
            offsets=[r["offset"] for r in rows],
            keys=[r.get("key") for r in rows],
            timestamps=[r["timestamp_ms"] for r in rows],
            headers=[r["headers"] for r in rows],
        )
        out: list[CheckedSegment | dict[str, Any]] = []
        for indexes, seg in got:
            checked = self._checked(seg) if isinstance(seg, SegmentRead) else seg
            if isinstance(checked, CheckedSegment):
                out.append(checked)
            else:
                out += [self._error(rows[i], checked) for i in indexes]  # each message as it came
        return out

    def _tombstone(self, row: Mapping[str, Any]) -> dict[str, Any] | None:
        """An upsert table's Kafka row as its :data:`FILE_ROWS` tombstone row (or the error row of
        one the table refuses: :func:`parka.lake.tombstone_refusal`), ``None`` when it is no
        tombstone (:func:`parka.lake.is_tombstone`)."""
        if row["value"] is not None or "key" not in row:
            return None
        key: bytes | None = row["key"]
        if not is_tombstone(key, None, row["headers"]):
            return None
        refusal = tombstone_refusal(self.key_columns, self.cdc)
        if refusal is not None:
            return self._error(row, SegmentError(refusal))
        return {"topic": row["topic"], "partition": row["partition"], "offset": row["offset"], "records": 0,
                "tombstone_key": key}  # fmt: skip

    def _check(self, row: Mapping[str, Any]) -> CheckedSegment | dict[str, Any]:
        """A Kafka row as a segment the table can take, or its :data:`FILE_ROWS` error row."""
        where = {"topic": row["topic"], "partition": row["partition"], "offset": row["offset"]}
        try:
            seg = read_segment(**where, value=row["value"], headers=row["headers"])
        except SegmentError as exc:
            return self._error(row, exc)
        checked = self._checked(seg)
        return self._error(row, checked) if isinstance(checked, ParkaError) else checked

    def _checked(self, seg: SegmentRead) -> CheckedSegment | SegmentError | SchemaMismatchError:
        """``seg`` (a segment, or a run of row records made one) checked against the table."""
        try:
            if self.cdc is not None:
                seg = unwrap_segment(seg, self.cdc)
            if self.upsert:
                check_keyed(seg, self.key_columns)
            return check_segment(
                seg,
                table_schema=self.table_schema,
                partition_by=self.partition_by,
                merge=self.merge,
                check_columns=self.check_columns,
            )
        except (SegmentError, SchemaMismatchError) as exc:
            return exc

    def _error(self, row: Mapping[str, Any], exc: SegmentError | SchemaMismatchError) -> dict[str, Any]:
        """A Kafka row's :data:`FILE_ROWS` error row: the message as it came (an unwrapped
        segment's original bytes), and why the table refused it."""
        return {
            "topic": row["topic"],
            "partition": row["partition"],
            "offset": row["offset"],
            "records": 0,
            "error_class": type(exc).__name__,
            "error": _reason(exc),
            "error_field": getattr(exc, "field", None),
            "value": row["value"] if self.keep_bad_values else None,
            "headers": [{"key": k, "value": v} for k, v in row["headers"]],
            "timestamp_ms": row["timestamp_ms"],
        }

    def _write(self, pending: list[CheckedSegment], breaks: Mapping[int, list[int]]) -> pa.RecordBatch:
        landed = write_segments(
            pending,
            table_uri=self.table_uri,
            table_schema=self.table_schema,
            partition_by=self.partition_by,
            storage_options=self.storage_options,
            target_file_size=self.target_file_size,
            stats_config=self.stats_config,
            breaks=breaks,
        )
        rows = []
        for s in landed:
            encoded = pa.schema(list(s.new_fields)).serialize().to_pybytes() if s.new_fields else None
            for n, f in enumerate(s.files):
                rows.append(
                    {
                        "topic": s.topic,
                        "partition": s.partition,
                        "offset": s.offset,
                        "records": s.records if n == 0 else 0,
                        "path": f.path,
                        "tags": json.dumps(dict(f.tags)),
                        "row_group_first": s.row_groups[0] if s.row_groups else None,
                        "row_group_count": s.row_groups[1] if s.row_groups else None,
                        "stitch_fallback": s.stitch_fallback,
                        "size": f.size,
                        "stats": f.stats,
                        "partition_values": json.dumps(dict(f.partition_values)),
                        "new_fields": encoded,
                        "split": s.split,
                        "value_bytes": s.value_bytes if n == 0 else 0,
                        "offsets": None if s.offsets is None else s.offsets.tolist(),
                    }
                )
        return pa.RecordBatch.from_pylist(rows, schema=FILE_ROWS)


class CommitterInput(NamedTuple):
    """:meth:`parka.lake.Committer.commit`'s input from a micro-batch."""

    landed: list[LandedSegment]
    refused: list[Refused]
    tombstones: list[Tombstone]


def committer_input(rows: pa.Table) -> CommitterInput:
    """A micro-batch's :data:`FILE_ROWS` as the committer's input: the segments written (their
    files grouped back together), the messages the table could not take and an upsert table's
    tombstones."""
    entries = rows.to_pylist()
    refused = [
        Refused(r["partition"], r["offset"], _rebuild(r), r["timestamp_ms"]) for r in entries if r["error_class"]
    ]
    tombstones = [
        Tombstone(r["partition"], r["offset"], r["tombstone_key"]) for r in entries if r["tombstone_key"] is not None
    ]
    landed = []
    files = sorted((r for r in entries if r["path"] is not None), key=lambda r: (r["partition"], r["offset"]))
    for (partition, offset), group in groupby(files, key=lambda r: (r["partition"], r["offset"])):
        parts = list(group)
        new_fields = parts[0]["new_fields"]
        landed.append(
            LandedSegment(
                topic=parts[0]["topic"],
                partition=partition,
                offset=offset,
                records=sum(r["records"] for r in parts),
                files=tuple(
                    DataFile(
                        path=r["path"],
                        size=r["size"],
                        stats=r["stats"],
                        partition_values=json.loads(r["partition_values"]),
                        tags=json.loads(r["tags"]),
                    )
                    for r in parts
                ),
                split=bool(parts[0]["split"]),
                new_fields=tuple(pa.ipc.read_schema(pa.py_buffer(new_fields))) if new_fields is not None else (),
                value_bytes=sum(r["value_bytes"] or 0 for r in parts),
                row_groups=(
                    (parts[0]["row_group_first"], parts[0]["row_group_count"])
                    if parts[0]["row_group_first"] is not None
                    else None
                ),
                stitch_fallback=bool(parts[0]["stitch_fallback"]),
                offsets=None if parts[0]["offsets"] is None else np.asarray(parts[0]["offsets"], dtype=np.int64),
            )
        )
    return CommitterInput(landed, refused, tombstones)


def _rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    """A micro-batch's Kafka rows as dicts (their columns read once): ``headers`` as (key,
    value) pairs, the timestamp as ``timestamp_ms``."""
    names = [n for n in batch.schema.names if n not in ("headers", "timestamp")]
    columns = [batch.column(n).to_pylist() for n in names]
    headers = [[(h["key"], h["value"]) for h in hs or ()] for hs in batch.column("headers").to_pylist()]
    micros = pc.cast(batch.column("timestamp"), pa.int64()).to_pylist()
    stamps = [None if us is None else us // 1000 for us in micros]
    for i in range(batch.num_rows):
        row = {n: c[i] for n, c in zip(names, columns, strict=True)}
        row["headers"], row["timestamp_ms"] = headers[i], stamps[i]
        yield row


def _reason(exc: ParkaError) -> str:
    """An error's message without the ``field '...': `` prefix and `` at topic[p]@o`` suffix
    its class adds, so that it can be rebuilt on the driver."""
    text = str(exc)
    name = getattr(exc, "field", None)
    if name and text.startswith(f"field '{name}': "):
        text = text[len(f"field '{name}': ") :]
    topic = getattr(exc, "topic", None)
    suffix = f" at {topic}[{getattr(exc, 'partition', None)}]@{getattr(exc, 'offset', None)}"
    return text[: -len(suffix)] if topic is not None and text.endswith(suffix) else text


def _rebuild(row: Mapping[str, Any]) -> SegmentError | SchemaMismatchError:
    """A bad-segment row of :data:`FILE_ROWS` as the parka error the executor raised."""
    cls = _ERRORS.get(row["error_class"], SegmentError)
    headers = [(h["key"], h["value"]) for h in row["headers"] or ()]
    where = {"topic": row["topic"], "partition": row["partition"], "offset": row["offset"]}
    if cls is SchemaMismatchError:
        return SchemaMismatchError(row["error"], field=row["error_field"], value=row["value"], headers=headers, **where)
    return cls(row["error"], value=row["value"], headers=headers, **where)


def segment_schema(
    value: bytes | None, headers: list[Any], *, topic: str, partition: int, offset: int, cdc: Debezium | None = None
) -> pa.Schema:
    """A segment's Arrow schema, from its headers and footer alone (to create the table); with
    ``cdc``, its rows' as the table takes them (an envelope is decoded and unwrapped).

    Raises:
        SegmentError, SegmentDecodeError: not a segment, or an unreadable one; with coordinates.
    """
    seg = read_segment(topic=topic, partition=partition, offset=offset, value=value, headers=headers)
    return (seg if cdc is None else unwrap_segment(seg, cdc)).schema


def row_schema(rows: pa.Table, fmt: RowFormat, *, cdc: Debezium | None = None) -> pa.Schema:
    """The schema a table is made from when a micro-batch holds row records and no segment: the
    first run of ``rows`` (Kafka rows, taken in offset order per partition) that decodes, made a
    segment as the executors make it; with ``cdc``, its rows' as the table takes them. Plain
    JSON without ``--value-schema`` is inferred from these values.

    Raises:
        SegmentError: none of them decodes, naming the first one's error.
    """
    decoder = RowValues(fmt)  # its own: an inferred schema belongs to this table alone
    first_error: SegmentError | None = None
    try:
        ordered = sorted(_rows_of(rows), key=lambda r: (r["partition"], r["offset"]))
        for partition, group in groupby(ordered, key=lambda r: r["partition"]):
            run = list(group)
            got = decoder.segments(
                topic=run[0]["topic"],
                partition=partition,
                table_schema=None,
                values=[r["value"] for r in run],
                offsets=[r["offset"] for r in run],
                keys=[r.get("key") for r in run],
                timestamps=[r["timestamp_ms"] for r in run],
                headers=[r["headers"] for r in run],
            )
            for indexes, seg in got:
                if isinstance(seg, SegmentRead):
                    return (seg if cdc is None else unwrap_segment(seg, cdc)).schema
                if first_error is None:
                    r = run[indexes[0]]
                    first_error = SegmentError(str(seg), topic=r["topic"], partition=r["partition"], offset=r["offset"])
    finally:
        decoder.close()
    assert first_error is not None  # rows holds records, each decoded or refused
    raise SegmentError(
        f"no table yet, and none of the first {rows.num_rows} row records of the micro-batch decodes to make "
        f"it from; the first: {first_error}"
    )


def _rows_of(table: pa.Table) -> Iterator[dict[str, Any]]:
    for batch in table.to_batches():
        yield from _rows(batch)
