"""Segments to data files, shared by ``parka ingest`` and ``parka spark-ingest --mode raw``: read a
segment (headers, footer), check it against the table (:func:`check_segment`), write segments as
data files of the table, several stitched into one where they share a Kafka partition, a schema
and a table partition (:func:`write_segments`), append dead letters, and remove the orphans of
interrupted commits. Nothing here imports confluent_kafka or pyspark: Spark runs
:func:`read_segment`, :func:`check_segment` and :func:`write_segments` in its executors' tasks,
``parka ingest`` in its loop and at each commit.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import functools
import io
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from parka.collector import gc_paused
from parka.crash import crash_point
from parka.errors import CommitConflict, SchemaMismatchError, SegmentDecodeError, SegmentError
from parka.evolution import merge_schemas, widening_enabled
from parka.partitioning import PartitionSpec, parse_partition_by
from parka.schema import RESERVED_PREFIX, schema_fingerprint
from parka.segment import (
    KEY_COLUMN,
    Segment,
    SegmentInfo,
    build_segment_table,
    encode_segment,
    is_segment,
    read_segment_info,
)

from ._cdc import Debezium
from ._log import DataFile
from ._partitions import segment_partition_values, split_by_partition
from ._plan import FileName, Fit, LandedSegment, fit_segment, partition_path
from ._stats import DEFAULT_STATS, RecentCache, StatsConfig, data_file_stats
from ._stitch import NotStitchable, Source, encrypted_columns, parts_metadata, stitch, stitch_parts
from ._stitch import read_footer as read_stitch_footer
from ._storage import read_file, write_data_file

__all__ = [
    "DEFAULT_TARGET_FILE_SIZE",
    "DLQ_SCHEMA",
    "CheckedSegment",
    "SegmentRead",
    "check_segment",
    "read_footer",
    "read_segment",
    "segment_of_rows",
    "trim_stitched",
    "write_segments",
]

DEFAULT_TARGET_FILE_SIZE = 128 * 2**20
"""The size a data file aims at when no target is given: up to 128 MiB (``--target-file-size``' default)."""
_OFFSET_COLUMN = "__parka_split_offset"  # a run's offsets through a split, never written

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
    # footer indexes of encrypted columns (a plaintext footer): their statistics are not read
    encrypted: frozenset[int] = frozenset()
    # a run of row records made a segment (:func:`segment_of_rows`): each row's Kafka offset, in
    # row order (increasing); ``offset`` is the last. None for a segment a producer wrote.
    offsets: Any = field(default=None, compare=False)

    @property
    def first_offset(self) -> int:
        return self.offset if self.offsets is None else int(self.offsets[0])


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
    encrypted = encrypted_columns(value, meta.serialized_size)
    return SegmentRead(topic, partition, offset, value, hdrs, info, meta, schema, encrypted)


def unwrap_segment(seg: SegmentRead, cdc: Debezium) -> SegmentRead:
    """``--cdc``: ``seg`` as the table's rows (:meth:`parka.lake._cdc.Debezium.unwrap`: an
    envelope decoded and encoded again, with the segment's codec and parka's encodings), or
    ``seg`` itself when its rows are the table's already (flattened events).

    Raises:
        SegmentError: what :meth:`~parka.lake._cdc.Debezium.unwrap` refuses, or an encrypted
            envelope (no keys here to read it). SegmentDecodeError: pages that do not decode.
            Both keep the raw message and its coordinates.
    """
    where: dict[str, Any] = {"value": seg.value, "headers": seg.headers, "topic": seg.topic}
    where.update(partition=seg.partition, offset=seg.offset)
    envelope = cdc.shape(seg.schema) == "envelope"
    if envelope and seg.encrypted:
        raise SegmentError("--cdc debezium: an envelope with encrypted columns cannot be unwrapped here", **where)
    if not envelope:  # its schema is all there is to check
        table = seg.schema.empty_table()
    else:
        try:
            table = pq.read_table(pa.BufferReader(seg.value))
        except (pa.ArrowException, OSError) as exc:
            raise SegmentDecodeError(f"--cdc debezium: the segment's pages do not decode: {exc}", **where) from exc
    try:
        rows = cdc.unwrap(table)
    except SegmentError as exc:
        raise SegmentError(str(exc), **where) from None
    if rows is None:
        return seg
    encoded = _encoded(rows, seg.info.codec)
    headers: list[tuple[str, bytes | None]] = list(encoded.headers)
    unwrapped = read_segment(
        topic=seg.topic, partition=seg.partition, offset=seg.offset, value=encoded.value, headers=headers
    )
    return unwrapped if seg.offsets is None else replace(unwrapped, offsets=seg.offsets)


def segment_of_rows(
    *,
    topic: str,
    partition: int,
    offsets: Sequence[int],
    table: pa.Table,
    keys: Sequence[bytes | None],
    timestamps: Sequence[int | None],
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None],
    codec: str = "zstd",
) -> SegmentRead:
    """A run of row records of one Kafka partition made one segment, so that the rest of the
    protocol takes it as it takes a producer's: ``table`` holds their values decoded (one row
    per record, in offset order), and each record's key, timestamp and headers become the
    reserved columns (:func:`parka.segment.build_segment_table`); encoded with parka's
    encodings and ``codec``. Its ``offset`` is the last record's, its ``offsets`` each row's.

    Raises:
        SegmentError: Arrow could not write the rows.
        RecordError: a key, timestamp or header Arrow cannot hold.
    """
    if not len(offsets) == table.num_rows > 0:
        raise ValueError(f"{len(offsets)} offsets for {table.num_rows} rows")
    at = np.asarray(offsets, dtype=np.int64)
    if len(at) > 1 and not bool((at[1:] > at[:-1]).all()):  # a cut at a txn needs them in order
        raise ValueError(f"{topic}[{partition}]: the run's offsets do not increase: {at[:10].tolist()}...")
    encoded = _encoded(build_segment_table(table, keys, timestamps, headers), codec)
    seg = read_segment(
        topic=topic, partition=partition, offset=int(offsets[-1]), value=encoded.value, headers=list(encoded.headers)
    )
    return replace(seg, offsets=at)


def check_keyed(seg: SegmentRead, key_columns: Sequence[str]) -> None:
    """An upsert table's segment gives each record a key: the record key, or every
    ``key_columns`` column (both daemons; a ``--cdc`` segment unwrapped first).

    Raises:
        SegmentError: naming the flag and what the segment lacks, with the message's coordinates.
    """
    names = seg.schema.names
    if not key_columns and KEY_COLUMN not in names:
        why = "--upsert: a segment whose records have no keys (produce them with key=...)"
    elif key_columns and not set(key_columns) <= set(names):
        missing = [c for c in key_columns if c not in names]
        why = f"--key-columns: a segment without the key column(s) {', '.join(missing)}"
    else:
        return
    raise SegmentError(
        why, value=seg.value, headers=seg.headers, topic=seg.topic, partition=seg.partition, offset=seg.offset
    )


def is_tombstone(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None) -> bool:
    """Whether a Kafka message is a tombstone to an upsert table (both daemons): a key, no value,
    and no segment's headers."""
    return key is not None and value is None and not is_segment(headers)


def tombstone_refusal(key_columns: Sequence[str], cdc: Debezium | None) -> str | None:
    """Why an upsert table refuses a tombstone (a key and no value), ``None`` when it takes it:
    under ``--key-columns`` it cannot name a row, except in a change stream (``--cdc``), where
    the delete event before it deleted the row and the commit only moves past it."""
    if key_columns and cdc is None:
        return (
            "--key-columns: a tombstone (a key and no value) cannot name a row by its key columns; "
            "delete rows by the record key (no --key-columns)"
        )
    return None


_fits: RecentCache[Fit] = RecentCache()


def _fit(
    table_schema: pa.Schema,
    segment_schema: pa.Schema,
    partition_by: tuple[PartitionSpec, ...],
    merge: bool,
    check_columns: Callable[[pa.Schema], None],
) -> Fit:
    """:func:`fit_segment`, and the table format's own rules for the columns the segment would
    add (``check_columns``); worked out once per (table schema, segment schema, format): a
    stream's segments share theirs."""
    fit = fit_segment(table_schema, segment_schema, partition_by=partition_by, merge=merge)
    if fit.problem is None and fit.new_fields:
        try:
            check_columns(pa.schema(list(fit.new_fields)))
        except SchemaMismatchError as exc:
            return Fit(problem=str(exc).removeprefix(f"field '{exc.field}': "), field=exc.field)
    return fit


@dataclass(frozen=True)
class CheckedSegment:
    """A segment the table can take, waiting to be written (:func:`write_segments`).

    ``new_fields``: columns the table lacks that it brings; ``partition_values``: the table
    partition all its rows belong to (``{}`` for an unpartitioned table), ``None`` when its rows
    span several (it will be decoded and split).
    """

    seg: SegmentRead
    new_fields: tuple[pa.Field, ...]
    partition_values: dict[str, str | None] | None


def check_segment(
    seg: SegmentRead,
    *,
    table_schema: pa.Schema,
    partition_by: Sequence[PartitionSpec | str],
    merge: bool,
    check_columns: Callable[[pa.Schema], None],
) -> CheckedSegment:
    """Check ``seg`` against the table (:func:`parka.lake._plan.fit_segment`, then the columns
    it would add by the table format's rules) and find the table partition it belongs to
    (:func:`segment_partition_values`: from the footer's min/max when they tell, else from the
    partition source columns). Nothing is written. ``partition_by``: the table's partitioning
    (plain names are identity specs); ``check_columns``: the table's engine's
    (:meth:`parka.lake.LogEngine.check_columns`), so an Iceberg table judges a new column by
    Iceberg's types and a Delta table by Delta's.

    Raises:
        SchemaMismatchError: the table cannot take the segment (keeps the raw message).
    """
    specs = parse_partition_by(partition_by)
    # == ignores schema metadata
    key = (specs, merge, widening_enabled(table_schema), seg.schema, table_schema, check_columns)
    fit = _fits.get(key, lambda: _fit(table_schema, seg.schema, specs, merge, check_columns))
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
    values = segment_partition_values(seg.meta, seg.value, specs, seg.schema, seg.encrypted) if specs else {}
    if values is None and seg.encrypted:
        # Splitting decodes and re-encodes: without the keys it cannot, and with them it would
        # land the encrypted columns in plaintext.
        raise SchemaMismatchError(
            "the table cannot take this segment: its rows span several table partitions and it is "
            "encrypted, so it cannot be split (produce with columnar.partition.by matching the table's)",
            value=seg.value,
            headers=seg.headers,
            topic=seg.topic,
            partition=seg.partition,
            offset=seg.offset,
        )
    return CheckedSegment(seg, fit.new_fields, values)


def write_segments(
    checked: Sequence[CheckedSegment],
    *,
    table_uri: str,
    table_schema: pa.Schema,
    partition_by: Sequence[PartitionSpec | str] = (),
    storage_options: Mapping[str, str] | None = None,
    stats_config: StatsConfig = DEFAULT_STATS,
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
    executor: Executor | None = None,
    breaks: Mapping[int, Collection[int]] | None = None,
) -> list[LandedSegment]:
    """Write checked segments as data files of the table; nothing is committed.

    Segments of one Kafka partition that share a schema and a table partition are stitched
    (:func:`parka.lake._stitch.stitch`: row groups copied byte for byte under one new
    footer) into files of up to ``target_file_size`` bytes, in offset order. A group of one
    segment is written as its bytes, unchanged. Where stitching is not safe, each segment is
    written alone (``stitch_fallback`` on its :class:`LandedSegment`). A segment whose rows span
    several table partitions is decoded and split (one file per partition, same codec; derived
    partition columns such as ``day=date(ts)`` are not added to the files). File
    names are :class:`FileName`s; no stitched file spans an offset of ``breaks`` (Kafka partition ->
    offsets: an upsert's tombstones, which must fall between files); statistics come from the footers, described against
    ``table_schema`` plus the columns the segments bring. With an ``executor`` the files are
    written (uploaded) several at once, each on one of its threads; it returns once all are.

    Raises:
        CommitError: a write failed (after the other writes ended: their files are orphans).
    """
    if not checked:
        return []
    target = table_schema
    for c in checked:
        if c.new_fields:  # each segment's changed columns, merged at any depth
            target = merge_schemas(target, pa.schema(list(c.new_fields)), widening=True, absent_ok=target.names).schema
    specs = parse_partition_by(partition_by)
    writer = _Writer(table_uri, target, specs, storage_options or {}, stats_config)
    crash_point("before-write")
    jobs: list[Callable[[], list[LandedSegment]]] = []  # one per data file (a split: per segment)
    groups: dict[tuple[Any, ...], list[CheckedSegment]] = {}
    for c in checked:
        if c.partition_values is None:
            jobs.append(functools.partial(writer.split, c))
            continue
        key = (c.seg.topic, c.seg.partition, tuple(c.partition_values.items()), c.seg.schema)
        groups.setdefault(key, []).append(c)
    for group in groups.values():
        group.sort(key=lambda c: c.seg.offset)
        run: list[CheckedSegment] = []
        size = 0
        cuts = sorted((breaks or {}).get(group[0].seg.partition, ()))
        for c in group:
            spans = bool(run) and _between(cuts, run[-1].seg.offset, c.seg.offset)
            if run and (size + len(c.seg.value) > target_file_size or spans):
                jobs.append(functools.partial(writer.run, run))
                run, size = [], 0
            run.append(c)
            size += len(c.seg.value)
        jobs.append(functools.partial(writer.run, run))
    if executor is None:
        landed = [s for job in jobs for s in job()]
    else:
        futures = [executor.submit(job) for job in jobs]
        concurrent.futures.wait(futures)  # none still writing when one failed
        landed = [s for f in futures for s in f.result()]
    crash_point("after-write")
    landed.sort(key=lambda s: (s.partition, s.offset))
    return landed


def _between(cuts: Sequence[int], low: int, high: int) -> bool:
    """Whether a sorted offset of ``cuts`` lies strictly between ``low`` and ``high``."""
    i = bisect.bisect_right(cuts, low)
    return i < len(cuts) and cuts[i] < high


@dataclass(frozen=True)
class _Writer:
    """Writes data files of one table: names, bytes, statistics and tags."""

    table_uri: str
    schema: pa.Schema  # the table's, with the columns the new files bring
    partition_by: tuple[PartitionSpec, ...]
    storage_options: Mapping[str, str]
    stats_config: StatsConfig = DEFAULT_STATS

    def put(
        self,
        name: str,
        data: bytes | list[bytes],
        md: pq.FileMetaData | None,
        values: Mapping[str, str | None],
        tags: dict[str, str],
        encrypted: frozenset[int] = frozenset(),
    ) -> DataFile:
        size = write_data_file(self.table_uri, name, data, self.storage_options)
        names = [spec.name for spec in self.partition_by]
        stats = data_file_stats(
            md if md is not None else data if isinstance(data, bytes) else parts_metadata(data),
            self.schema,
            partition_by=names,
            stats_config=self.stats_config,
            encrypted=encrypted,
        )
        return DataFile(path=name, size=size, partition_values=dict(values), stats=stats, tags=tags)

    def alone(self, c: CheckedSegment, *, fallback: bool = False) -> LandedSegment:
        seg, values = c.seg, c.partition_values or {}
        first, last = seg.first_offset, seg.offset if seg.offsets is not None else None
        name = _in_partition(values, FileName.new(seg.topic, seg.partition, first, last=last))
        f = self.put(name, seg.value, seg.meta, values, _tags(seg.topic, seg.partition, first, last), seg.encrypted)
        return _landed(c, (f,), stitch_fallback=fallback)

    def run(self, run: Sequence[CheckedSegment]) -> list[LandedSegment]:
        """One file for ``run`` (segments of one Kafka partition, schema and table partition)."""
        if len(run) == 1:
            return [self.alone(run[0])]
        try:
            with gc_paused():
                footers = [read_stitch_footer(c.seg.value) for c in run]
                data = stitch_parts([Source(f) for f in footers])  # written part by part, not joined
        except NotStitchable as exc:
            log.warning(
                "%d segment(s) of %s[%d] written one file each: %s",
                len(run),
                run[0].seg.topic,
                run[0].seg.partition,
                exc,
            )
            return [self.alone(c, fallback=True) for c in run]
        first, last = run[0].seg, run[-1].seg
        values = run[0].partition_values or {}
        name = _in_partition(values, FileName.new(first.topic, first.partition, first.first_offset, last=last.offset))
        tags = _tags(first.topic, first.partition, first.first_offset, last.offset)
        f = self.put(name, data, None, values, tags)
        out, at = [], 0
        for c, footer in zip(run, footers, strict=True):
            out.append(_landed(c, (f,), row_groups=(at, footer.num_row_groups)))
            at += footer.num_row_groups
        return out

    def split(self, c: CheckedSegment) -> list[LandedSegment]:
        """A segment spanning several table partitions: decoded, one file per partition. A run
        of row records is one :class:`LandedSegment` per file, each with its rows' offsets, so
        that a part the table's ``txn`` covers can be told from the rest in each file."""
        seg = c.seg
        data = pq.read_table(pa.BufferReader(seg.value))
        codec = _codec(seg.meta)
        if seg.offsets is not None:
            data = data.append_column(_OFFSET_COLUMN, pa.array(seg.offsets, pa.int64()))
        files, parts = [], []
        for i, (values, part) in enumerate(split_by_partition(data, self.partition_by)):
            offsets = None
            if seg.offsets is not None:
                offsets = part.column(_OFFSET_COLUMN).to_numpy()
                part = part.drop_columns([_OFFSET_COLUMN])
            first, last = (seg.offset, None) if offsets is None else (int(offsets[0]), int(offsets[-1]))
            buf = io.BytesIO()
            pq.write_table(part, buf, compression=codec, store_schema=True)
            name = _in_partition(values, FileName.new(seg.topic, seg.partition, first, split=i, last=last))
            f = self.put(name, buf.getvalue(), None, values, _tags(seg.topic, seg.partition, first, last))
            files.append(f)
            if offsets is not None:
                parts.append(_landed(c, (f,), split=True, offsets=offsets, records=part.num_rows))
        return parts or [_landed(c, tuple(files), split=True)]

    def trim(self, file: DataFile, keep: Sequence[LandedSegment]) -> DataFile:
        """A new file holding only ``keep``'s row groups of stitched ``file``.

        Raises:
            CommitConflict: ``file`` is gone. Found by the fault suite: between this commit's read
                of the ``txn`` versions and the trim, another worker with the app id committed
                the rest of the file's offsets, and its orphan cleanup deleted the file. Re-read
                (step 3): the whole file is covered now, and nothing is to be trimmed.
        """
        try:
            data = read_file(self.table_uri, file.path, self.storage_options, raise_missing=True)
        except FileNotFoundError as exc:
            raise CommitConflict(f"stitched file {file.path} was deleted meanwhile: {exc}") from exc
        footer = read_stitch_footer(data)
        keep = sorted(keep, key=lambda s: s.offset)
        out: bytes | list[bytes]
        if any(s.rows is not None for s in keep):
            out = _some_rows(data, keep)
        else:
            rows: list[int] = []
            for s in keep:
                assert s.row_groups is not None
                rows += range(s.row_groups[0], s.row_groups[0] + s.row_groups[1])
            out = stitch([Source(footer, rows)])
        first, last = min(s.first_offset for s in keep), max(s.offset for s in keep)
        s0 = keep[0]
        name = FileName.new(s0.topic, s0.partition, first, last=last if last != first else None)
        return self.put(
            _in_partition(file.partition_values, name),
            out,
            None,
            file.partition_values,
            _tags(s0.topic, s0.partition, first, last if last != first else None),
        )


def trim_stitched(
    file: DataFile,
    keep: Sequence[LandedSegment],
    *,
    table_uri: str,
    table_schema: pa.Schema,
    partition_by: Sequence[PartitionSpec | str] = (),
    storage_options: Mapping[str, str] | None = None,
    stats_config: StatsConfig = DEFAULT_STATS,
) -> DataFile:
    """Write a new data file holding only the row groups of ``keep``, segments stitched into
    ``file``, so a commit can take them without the others (already in the table, or after a
    refused message). ``file`` is left as it is.

    Raises:
        CommitError: reading ``file`` or writing the new one failed.
    """
    writer = _Writer(table_uri, table_schema, parse_partition_by(partition_by), storage_options or {}, stats_config)
    return writer.trim(file, keep)


def _some_rows(data: bytes, keep: Sequence[LandedSegment]) -> bytes:
    """A data file of ``keep``'s rows of the file ``data``: each segment's row groups (all of
    the file when it holds that segment alone), and of a part of a run of row records its
    ``rows`` only; decoded and encoded again (with parka's encodings, the file's codec)."""
    file = pq.ParquetFile(pa.BufferReader(data))
    meta = file.metadata
    tables = []
    for s in keep:
        groups = range(meta.num_row_groups) if s.row_groups is None else range(s.row_groups[0], sum(s.row_groups))
        table = file.read_row_groups(list(groups))
        if s.rows is not None:
            table = table.slice(s.rows[0], s.rows[1])
        tables.append(table)
    return _encoded(pa.concat_tables(tables), _codec(meta)).value


def _encoded(rows: pa.Table, codec: str) -> Segment:
    """``rows`` (user columns, then any reserved ones) encoded as a segment with parka's encodings."""
    user = pa.schema([f for f in rows.schema if not f.name.startswith(RESERVED_PREFIX)])
    return encode_segment(rows, codec=codec, fingerprint=schema_fingerprint(user))


def _codec(meta: pq.FileMetaData) -> str:
    """The codec of a Parquet file's first column chunk, as parka names codecs (``none`` for none)."""
    codec = meta.row_group(0).column(0).compression.lower() if meta.num_row_groups else "none"
    return {"uncompressed": "none", "lz4_raw": "lz4"}.get(codec, codec)


def _in_partition(values: Mapping[str, str | None], name: FileName) -> str:
    return f"{partition_path(dict(values))}/{name}" if values else str(name)


def _tags(topic: str, partition: int, offset: int, last: int | None = None) -> dict[str, str]:
    tags = {"kafka.topic": topic, "kafka.partition": str(partition), "kafka.offset": str(offset)}
    if last is not None:
        tags["kafka.lastOffset"] = str(last)
    return tags


def _landed(
    c: CheckedSegment,
    files: tuple[DataFile, ...],
    *,
    split: bool = False,
    row_groups: tuple[int, int] | None = None,
    stitch_fallback: bool = False,
    offsets: Any = None,
    records: int | None = None,
) -> LandedSegment:
    seg = c.seg
    if offsets is None:
        offsets = seg.offsets
    return LandedSegment(
        seg.topic,
        seg.partition,
        seg.offset if offsets is None else int(offsets[-1]),
        seg.info.num_records if records is None else records,
        files,
        split,
        c.new_fields,
        len(seg.value),
        row_groups=row_groups,
        stitch_fallback=stitch_fallback,
        offsets=offsets,
    )


def read_footer(value: bytes, num_records: int) -> tuple[pq.FileMetaData, pa.Schema]:
    """A segment's Parquet footer and Arrow schema; no data page is read.

    Raises:
        SegmentDecodeError: no readable footer, or its row count differs from ``num_records``
            (the ``parka.records`` header). Without coordinates: the caller adds them.
    """
    if value[-4:] == b"PARE":
        raise SegmentDecodeError(
            "segment has an encrypted footer: ingestion reads the footer (schema, row count, "
            "statistics) without keys, so produce with columnar.encryption.plaintext.footer=true "
            "(the default; the encrypted columns stay encrypted)"
        )
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
