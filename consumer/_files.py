"""Segments to data files, shared by ``parka ingest`` and ``parka spark-ingest --mode raw``: read a
segment (headers, footer), check it against the table, write its bytes as data file(s) of the
table (:func:`land_segment`), append dead letters, and remove the orphans of interrupted commits.
Nothing here imports confluent_kafka or pyspark: Spark runs :func:`read_segment` and
:func:`land_segment` on its executors, ``parka ingest`` in its loop.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parka._crash import crash_point
from parka.errors import SchemaMismatchError, SegmentDecodeError, SegmentError
from parka.segment import SegmentInfo, is_segment, read_segment_info

from . import _delta
from ._log import DataFile, TableLog
from ._plan import FileName, Fit, LandedSegment, fit_segment, partition_path, partition_value_string
from ._stats import DEFAULT_STATS, RecentCache, StatsConfig, data_file_stats
from ._storage import delete_files, list_files, write_data_file

__all__ = [
    "DLQ_SCHEMA",
    "SegmentRead",
    "append_dead_letters",
    "land_segment",
    "read_footer",
    "read_segment",
    "remove_orphans",
    "write_segment_files",
]

log = logging.getLogger("parka.ingest")

DLQ_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("error", pa.string()),
        ("value", pa.binary()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ("kafka_timestamp_ms", pa.int64()),
        ("ingested_at", pa.timestamp("us", tz="UTC")),
        ("app_id", pa.string()),
    ]
)


@dataclass(frozen=True)
class SegmentRead:
    """A Kafka message read as a segment: its coordinates, bytes, headers, what the headers say
    and its Parquet footer with the Arrow schema in it. No data page has been read."""

    topic: str
    partition: int
    offset: int
    value: bytes
    headers: list[tuple[str, bytes | None]]
    info: SegmentInfo
    meta: pq.FileMetaData
    schema: pa.Schema


def read_segment(
    *,
    topic: str,
    partition: int,
    offset: int,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None,
    info: SegmentInfo | None = None,
) -> SegmentRead:
    """Read one Kafka message as a segment (headers and footer only). ``info``: the headers as
    ``poll_buffer`` already read them (and checked the value's CRC against), not read again.

    Raises:
        SegmentError: not a parka segment (no ``parka.format`` header).
        SegmentDecodeError: garbled headers, no value, an unreadable footer, or a row count that
            differs from ``parka.records``. Both keep the raw message and its coordinates.
    """
    hdrs = list(headers or [])
    where: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
    if not is_segment(hdrs):
        raise SegmentError("not a parka segment (no parka.format header)", value=value, headers=hdrs, **where)
    if info is None:
        info = read_segment_info(hdrs, value=value, **where)
    if value is None:
        raise SegmentDecodeError("segment has no value (a tombstone?)", value=value, headers=hdrs, **where)
    try:
        meta, schema = read_footer(value, info.num_records)
    except SegmentDecodeError as exc:
        raise SegmentDecodeError(str(exc), value=value, headers=hdrs, **where) from exc.__cause__
    return SegmentRead(topic, partition, offset, value, hdrs, info, meta, schema)


_fits: RecentCache[Fit] = RecentCache()


def _fit(table_schema: pa.Schema, segment_schema: pa.Schema, partition_by: tuple[str, ...], merge: bool) -> Fit:
    """:func:`fit_segment`, and Delta's own rules for the columns the segment would add; worked
    out once per (table schema, segment schema): a stream's segments share theirs."""
    fit = fit_segment(table_schema, segment_schema, partition_by=partition_by, merge=merge)
    if fit.problem is None and fit.new_fields:
        try:
            _delta.check_schema(pa.schema(list(fit.new_fields)))
        except SchemaMismatchError as exc:
            return Fit(problem=str(exc).removeprefix(f"field '{exc.field}': "), field=exc.field)
    return fit


def land_segment(
    seg: SegmentRead,
    *,
    table_uri: str,
    table_schema: pa.Schema,
    partition_by: tuple[str, ...],
    merge: bool,
    storage_options: Mapping[str, str] | None = None,
    stats_config: StatsConfig = DEFAULT_STATS,
) -> LandedSegment:
    """Check ``seg`` against the table (:func:`parka.consumer._plan.fit_segment`) and write it as
    data file(s) of the table (:func:`write_segment_files`); nothing is committed.

    Raises:
        SchemaMismatchError: the table cannot take the segment (keeps the raw message).
        CommitError: a write failed.
    """
    fit = _fits.get(
        (partition_by, merge, seg.schema, table_schema), lambda: _fit(table_schema, seg.schema, partition_by, merge)
    )
    if fit.problem is not None:
        raise SchemaMismatchError(
            f"the table cannot take this segment: {fit.problem}",
            field=fit.field,
            value=seg.value,
            headers=seg.headers,
            topic=seg.topic,
            partition=seg.partition,
            offset=seg.offset,
        )
    crash_point("before-write")
    files, split = write_segment_files(
        table_uri,
        seg.value,
        seg.meta,
        topic=seg.topic,
        partition=seg.partition,
        offset=seg.offset,
        table_schema=pa.schema([*table_schema, *fit.new_fields]),
        partition_by=partition_by,
        storage_options=storage_options,
        stats_config=stats_config,
    )
    crash_point("after-write")
    return LandedSegment(
        seg.topic,
        seg.partition,
        seg.offset,
        seg.info.num_records,
        tuple(files),
        split,
        fit.new_fields,
        len(seg.value),
    )


def read_footer(value: bytes, num_records: int) -> tuple[pq.FileMetaData, pa.Schema]:
    """A segment's Parquet footer and Arrow schema; no data page is read.

    Raises:
        SegmentDecodeError: no readable footer, or its row count differs from ``num_records``
            (the ``parka.records`` header). Without coordinates: the caller adds them.
    """
    try:
        meta = pq.read_metadata(pa.BufferReader(value))
        schema = _arrow_schema(meta)
    except Exception as exc:
        raise SegmentDecodeError(f"segment is not a readable Parquet file: {exc}") from exc
    if meta.num_rows != num_records:
        raise SegmentDecodeError(
            f"Parquet footer holds {meta.num_rows} rows but the parka.records header says {num_records}"
        )
    return meta, schema


_schemas: RecentCache[pa.Schema] = RecentCache()


def _arrow_schema(meta: pq.FileMetaData) -> pa.Schema:
    """The file's Arrow schema, converted once per distinct footer schema: a stream's segments
    share it. Keyed on what decides it: the key-value metadata (which holds the stored Arrow
    schema) and the Parquet schema."""
    file_schema = meta.schema
    return _schemas.get((meta.metadata, file_schema), file_schema.to_arrow_schema)


def write_segment_files(
    table_uri: str,
    value: bytes,
    meta: pq.FileMetaData,
    *,
    topic: str,
    partition: int,
    offset: int,
    table_schema: pa.Schema,
    partition_by: Sequence[str] = (),
    storage_options: Mapping[str, str] | None = None,
    stats_config: StatsConfig = DEFAULT_STATS,
) -> tuple[list[DataFile], bool]:
    """Write one segment as data file(s) of the table; returns them and whether it was split.

    Unpartitioned table: the bytes unchanged, one file, nothing decoded. Partitioned: the
    partition columns are read; a segment holding one value combination goes unchanged under
    its directory, one spanning several is decoded and split (one file per combination, same
    codec). File names are :class:`FileName`s (fresh random part, so a retry never collides);
    statistics come from the footer, described against ``table_schema`` as ``stats_config`` says.

    Raises:
        CommitError: a write failed.
    """
    tags = {"kafka.topic": topic, "kafka.partition": str(partition), "kafka.offset": str(offset)}

    def put(name: str, data: bytes, md: pq.FileMetaData | None, values: dict[str, str | None]) -> DataFile:
        size = write_data_file(table_uri, name, data, storage_options)
        stats = data_file_stats(
            md if md is not None else data, table_schema, partition_by=partition_by, stats_config=stats_config
        )
        return DataFile(path=name, size=size, partition_values=values, stats=stats, tags=tags)

    if not partition_by:
        return [put(str(FileName.new(topic, partition, offset)), value, meta, {})], False
    keys = pq.read_table(io.BytesIO(value), columns=list(partition_by))
    groups = keys.group_by(list(partition_by)).aggregate([])
    if groups.num_rows <= 1:
        values = {c: partition_value_string(keys[c][0].as_py()) if keys.num_rows else None for c in partition_by}
        name = f"{partition_path(values)}/{FileName.new(topic, partition, offset)}"
        return [put(name, value, meta, values)], False
    # A segment spanning several table partitions: decode this one and split it.
    data = pq.read_table(io.BytesIO(value))
    codec = meta.row_group(0).column(0).compression.lower() if meta.num_row_groups else "none"
    out = []
    for i, group in enumerate(groups.to_pylist()):
        mask = None
        for c in partition_by:
            cond = pc.is_null(data[c]) if group[c] is None else pc.equal(data[c], pa.scalar(group[c], data[c].type))
            mask = cond if mask is None else pc.and_(mask, cond)
        part = data.filter(mask)
        buf = io.BytesIO()
        pq.write_table(part, buf, compression=codec if codec != "uncompressed" else "none", store_schema=True)
        values = {c: partition_value_string(group[c]) for c in partition_by}
        name = f"{partition_path(values)}/{FileName.new(topic, partition, offset, split=i)}"
        out.append(put(name, buf.getvalue(), None, values))
    return out, True


def append_dead_letters(
    dlq_table_uri: str,
    app_id: str,
    dead: Sequence[tuple[int, int, dict[str, Any]]],
    storage_options: dict[str, str] | None = None,
) -> int:
    """Append ``(partition, offset, row)`` dead letters not yet in the dead-letter table (its
    ``txn``, ``<app_id>-dlq-<partition>``, says which are); returns how many were appended.

    Raises:
        CommitConflict: a concurrent append won (re-read and retry).
        SchemaMismatchError, CommitError: the append failed.
    """
    dlq = _delta.open_table(dlq_table_uri, storage_options)
    txns: dict[str, int] = {}
    rows = []
    for partition, offset, row in dead:
        app = f"{app_id}-dlq-{partition}"
        done = _delta.txn_version(dlq, app) if dlq is not None else None
        if done is not None and offset <= done:
            continue  # an earlier attempt wrote it before crashing
        rows.append(row)
        txns[app] = max(offset, txns.get(app, -1))
    if not rows:
        return 0
    # Passing the handle we read the txn versions from makes a concurrent append conflict.
    target = dlq if dlq is not None else dlq_table_uri
    _delta.append_rows(
        target, pa.Table.from_pylist(rows, schema=DLQ_SCHEMA), txns=txns, storage_options=storage_options
    )
    return len(rows)


def remove_orphans(
    table: TableLog,
    topic: str,
    app_txn: Callable[[int], str],
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """Delete data files this topic's ingestion wrote but never committed; returns how many.

    A parka-named file that the table does not reference is an orphan once the table's
    ``txn`` for its partition (``app_txn(partition)``) has reached its offset: that offset's
    data was committed in another file (or dead-lettered), so nobody will ever commit this one.
    The same holds for the temporary file of a write a crash interrupted (``.<name>.<id>.tmp``,
    which no reader, VACUUM included, ever looks at). Files above the ``txn`` version may still
    belong to a live worker's open commit and are left alone.

    Raises:
        CommitError: listing or deleting failed.
    """
    table.refresh()
    referenced = table.referenced_files()
    versions: dict[int, int | None] = {}
    doomed = []
    for info in list_files(table.uri, storage_options):
        name = FileName.parse(info.path, temporary=True)
        if name is None or name.topic != topic or info.path in referenced:
            continue
        if name.partition not in versions:
            versions[name.partition] = table.txn_version(app_txn(name.partition))
        version = versions[name.partition]
        if version is not None and name.offset <= version:
            doomed.append(info.path)
    if doomed:
        delete_files(table.uri, doomed, storage_options)
        log.info("removed %d orphan data file(s) left by interrupted commits", len(doomed))
    return len(doomed)
