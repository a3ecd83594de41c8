"""Raw mode of the Spark ingestion: segments land in the Delta table as they are, no record decoded.

Two halves, neither importing pyspark (tested without Spark; :mod:`._ingest` wires them into a
``foreachBatch`` query):

* :class:`SegmentFileWriter` runs on the executors (``mapInArrow`` over the Kafka rows of a
  micro-batch, one row per segment). Per segment: check the headers, read the Parquet footer,
  check its schema against the table's, write the bytes unchanged as a data file named
  ``<topic>-p<partition>-o<offset>-<id>.parquet`` (the same writer as ``parka ingest``, so a
  partitioned table gets the same directories and splits), compute the add action's statistics
  from the footer. Out comes one small row per file (:data:`FILE_ROWS`), or one per bad segment
  with its error.
* :class:`RawCommitter` runs on the driver: it commits a micro-batch's files with one ``txn``
  per Kafka partition, the scheme ``parka ingest`` uses. :meth:`RawCommitter.commit` is the
  protocol. It talks to the Delta log through a :class:`parka.consumer._log.LogEngine`:
  delta-spark in Spark's JVM (:mod:`._delta_spark`, the default) or delta-rs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from parka.consumer import _delta
from parka.consumer._files import append_dead_letters, read_footer, remove_orphans, write_segment_files
from parka.consumer._log import DataFile, LogEngine, TableLog
from parka.consumer._plan import RESERVED_COLUMNS, check_schema
from parka.consumer._storage import delete_files, make_durable

from parka._crash import crash_point
from parka.errors import CommitConflict, CommitError, ParkaError, SchemaMismatchError, SegmentDecodeError, SegmentError
from parka.segment import is_segment, read_segment_info

__all__ = ["FILE_ROWS", "RawCommitter", "RawStats", "SegmentFileWriter", "segment_schema", "table_schema_from_segment"]

log = logging.getLogger("parka.spark_ingest")

_MAX_COMMIT_ATTEMPTS = 20
_CHECKPOINT_INTERVAL = 10  # a Delta checkpoint every this many commits, as parka ingest does
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

FILE_ROWS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("records", pa.int64()),  # the segment's, on its first file; 0 on the other parts of a split
        ("path", pa.string()),  # relative to the table root; null for a bad segment
        ("size", pa.int64()),
        ("stats", pa.string()),
        ("partition_values", pa.string()),  # JSON
        ("new_fields", pa.binary()),  # Arrow IPC schema of columns the table lacks, or null
        ("split", pa.bool_()),
        ("error_class", pa.string()),  # a bad segment: SegmentError, SegmentDecodeError, SchemaMismatchError
        ("error", pa.string()),
        ("error_field", pa.string()),
        ("value", pa.binary()),  # a bad segment's bytes, when a dead-letter table wants them
        ("headers", _HEADERS),
        ("timestamp_ms", pa.int64()),
    ]
)
"""What the executors return to the driver: one row per data file written, or per bad segment."""

_ERRORS: dict[str, type[SegmentError] | type[SchemaMismatchError]] = {
    "SegmentError": SegmentError,
    "SegmentDecodeError": SegmentDecodeError,
    "SchemaMismatchError": SchemaMismatchError,
}


def table_schema_from_segment(schema: pa.Schema) -> pa.Schema:
    """A new table's schema from a segment's: its user columns, then its reserved ones nullable
    (what ``parka ingest`` creates)."""
    return pa.schema(
        [f for f in schema if f.name not in RESERVED_COLUMNS]
        + [f.with_nullable(True) for f in schema if f.name in RESERVED_COLUMNS]
    )


@dataclass(frozen=True)
class SegmentFileWriter:
    """``mapInArrow``'s function in raw mode: Kafka rows in, :data:`FILE_ROWS` out.

    ``table_schema`` is the table's Arrow schema when the micro-batch started; a segment fits
    when :func:`parka.consumer._plan.check_schema` finds no problem, and new columns are
    nullable (user columns only with ``merge``; reserved ones always, as ``parka ingest`` adds
    them). ``keep_bad_values`` ships bad segments' bytes back (for a dead-letter table).
    """

    table_uri: str
    table_schema: pa.Schema
    partition_by: tuple[str, ...] = ()
    storage_options: Mapping[str, str] = field(default_factory=dict)
    merge: bool = False
    keep_bad_values: bool = False

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        wrote = False
        for batch in batches:
            rows = [row for i in range(batch.num_rows) for row in self._one(batch, i)]
            wrote = wrote or any(r.get("path") is not None for r in rows)
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=FILE_ROWS)
        if wrote:
            # Files are not fsynced one by one: flush them once per task, before the task (and
            # so the collect the driver commits after) completes.
            make_durable(self.table_uri, self.storage_options)

    def _one(self, batch: pa.RecordBatch, i: int) -> list[dict[str, Any]]:
        col = batch.column
        names = batch.schema.names
        topic = col(names.index("topic"))[i].as_py()
        partition = col(names.index("partition"))[i].as_py()
        offset = col(names.index("offset"))[i].as_py()
        value: bytes | None = col(names.index("value"))[i].as_py()
        headers = [(h["key"], h["value"]) for h in col(names.index("headers"))[i].as_py() or ()]
        where: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
        base = {**where, "records": 0}
        try:
            if not is_segment(headers):
                raise SegmentError(
                    "not a parka segment (no parka.format header)", value=value, headers=headers, **where
                )
            info = read_segment_info(headers, value=value, **where)
            try:
                meta, schema = read_footer(value or b"", info.num_records)
            except SegmentDecodeError as exc:
                raise SegmentDecodeError(str(exc), value=value, headers=headers, **where) from exc.__cause__
            new_fields = self._fit(schema, value, headers, where)
            stats_schema = pa.schema([*self.table_schema, *new_fields])
            files, split = write_segment_files(
                self.table_uri,
                value or b"",
                meta,
                topic=topic,
                partition=partition,
                offset=offset,
                table_schema=stats_schema,
                partition_by=self.partition_by,
                storage_options=self.storage_options,
            )
        except (SegmentError, SchemaMismatchError) as exc:
            stamp = col(names.index("timestamp"))[i]
            stamp_ms = stamp.cast(pa.int64()).as_py() // 1000 if stamp.is_valid else None
            return [
                {
                    **base,
                    "error_class": type(exc).__name__,
                    "error": _reason(exc),
                    "error_field": getattr(exc, "field", None),
                    "value": value if self.keep_bad_values else None,
                    "headers": [{"key": k, "value": v} for k, v in headers],
                    "timestamp_ms": stamp_ms,
                }
            ]
        encoded = pa.schema(new_fields).serialize().to_pybytes() if new_fields else None
        return [
            {
                **base,
                "records": info.num_records if n == 0 else 0,
                "path": f.path,
                "size": f.size,
                "stats": f.stats,
                "partition_values": json.dumps(dict(f.partition_values)),
                "new_fields": encoded,
                "split": split,
            }
            for n, f in enumerate(files)
        ]

    def _fit(self, schema: pa.Schema, value: bytes | None, headers: list[Any], where: dict[str, Any]) -> list[pa.Field]:
        """The columns this segment adds to the table; raises when the table cannot take it."""

        def mismatch(reason: str, name: str | None) -> SchemaMismatchError:
            message = f"the table cannot take this segment: {reason}"
            return SchemaMismatchError(message, field=name, value=value, headers=headers, **where)

        missing = [c for c in self.partition_by if c not in schema.names]
        if missing:
            raise mismatch(f"partition column '{missing[0]}' is not in the segment", missing[0])
        verdict = check_schema(self.table_schema, schema, partition_by=self.partition_by)
        if verdict.problems:
            raise mismatch("; ".join(verdict.problems), None)
        user_new = [f for f in verdict.new_fields if f.name not in RESERVED_COLUMNS]
        if user_new and not self.merge:
            names = ", ".join(f.name for f in user_new)
            raise mismatch(f"new column(s) {names}: rerun with --schema-evolution merge to add them", user_new[0].name)
        if verdict.new_fields:
            try:
                _delta.check_schema(pa.schema(list(verdict.new_fields)))
            except SchemaMismatchError as exc:
                raise mismatch(_reason(exc), exc.field) from exc
        return list(verdict.new_fields)


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


def _rebuild(row: Mapping[str, Any]) -> ParkaError:
    """A bad-segment row of :data:`FILE_ROWS` as the parka error the executor raised."""
    cls = _ERRORS.get(row["error_class"], SegmentError)
    headers = [(h["key"], h["value"]) for h in row["headers"] or ()]
    where = {"topic": row["topic"], "partition": row["partition"], "offset": row["offset"]}
    if cls is SchemaMismatchError:
        return SchemaMismatchError(row["error"], field=row["error_field"], value=row["value"], headers=headers, **where)
    return cls(row["error"], value=row["value"], headers=headers, **where)


@dataclass
class RawStats:
    """What the raw ingestion did: committed micro-batches, segments, records and files; files
    of replayed segments deleted; dead letters; orphan files removed."""

    batches: int = 0
    segments: int = 0
    records: int = 0
    files: int = 0
    split_segments: int = 0
    replayed_files: int = 0
    dead_letters: int = 0
    conflicts: int = 0
    orphans_removed: int = 0
    schema_evolutions: int = 0


class RawCommitter:
    """The driver's half: holds the table handle across micro-batches and commits each one."""

    def __init__(
        self,
        *,
        engine: LogEngine,
        table_uri: str,
        topic: str,
        app_id: str,
        partition_by: tuple[str, ...] = (),
        merge: bool = False,
        dlq_table_uri: str | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        """Opens the table (if there is one) through ``engine``.

        Raises:
            CommitError: the table cannot be read, or uses a feature raw files would bypass
                (column mapping...): before any query starts.
        """
        self.engine = engine
        self.table_uri = table_uri
        self.topic = topic
        self.app_id = app_id
        self.partition_by = partition_by
        self.merge = merge
        self.dlq_table_uri = dlq_table_uri
        self.storage_options = dict(storage_options or {})
        self.stats = RawStats()
        self.failure: ParkaError | None = None  # what failed the query, for ingest() to raise as is
        self.table: TableLog | None = engine.open(table_uri, self.storage_options)
        if self.table is not None:
            self.partition_by = tuple(self.table.partition_columns())

    def app_txn(self, partition: int) -> str:
        return f"{self.app_id}-{partition}"

    def create_table(self, segment_schema: pa.Schema) -> None:
        """Create the table from a segment's schema (user columns, then nullable reserved ones),
        unless one appeared meanwhile.

        Raises:
            SchemaMismatchError: a column Delta cannot store, or a partition column it lacks.
        """
        if self.table is not None:
            return
        try:
            self.table = self.engine.create(
                self.table_uri,
                table_schema_from_segment(segment_schema),
                partition_by=self.partition_by,
                storage_options=self.storage_options,
            )
            log.info("created Delta table %s from the segment schema (%s)", self.table_uri, self.engine.name)
        except CommitConflict:
            self.table = self.engine.open(self.table_uri, self.storage_options)

    def writer(self) -> SegmentFileWriter:
        """The executors' function for the next micro-batch, with the table's current schema
        (none yet: the batch holds no segment, only bad rows)."""
        if self.table is not None:
            self.table.refresh()
        return SegmentFileWriter(
            self.table_uri,
            pa.schema([]) if self.table is None else self.table.arrow_schema(),
            self.partition_by,
            self.storage_options,
            merge=self.merge,
            keep_bad_values=self.dlq_table_uri is not None,
        )

    def remove_orphans(self) -> int:
        """Delete files of interrupted commits (see :func:`parka.consumer._files.remove_orphans`)."""
        if self.table is None:
            return 0
        removed = remove_orphans(self.table, self.topic, self.app_txn, self.storage_options)
        self.stats.orphans_removed += removed
        return removed

    def commit(self, rows: pa.Table, *, batch_id: int | None = None) -> None:
        """Commit one micro-batch's files (``rows``, :data:`FILE_ROWS` from the executors), exactly
        once. The protocol, in order:

        1. The executors wrote every segment of the batch as data file(s) under fresh names,
           referenced by nothing yet, and flushed them to stable storage before their tasks ended.
        2. Bad segments: without a dead-letter table, delete every file of the batch (best
           effort), commit nothing and raise the first bad segment's error (topic, partition,
           offset; :attr:`failure` keeps it). The query fails and the checkpoint keeps the batch
           planned, so a rerun fails the same way until the topic is fixed or a dead-letter
           table is given.
        3. Re-read the table; for each Kafka partition, the ``txn`` version ``v`` of
           ``<app_id>-<partition>`` (written by this query, an earlier one, or ``parka ingest``).
           A file whose offset is <= ``v`` is already in the table (a replayed batch: Spark ran
           it before but crashed before marking it done; or another writer with this app id
           got there first): delete it, never commit it. The rest is new.
        4. Dead letters above ``v`` go to the dead-letter table first, with its own ``txn``
           (``<app_id>-dlq-<partition>``), so a retry never duplicates them.
        5. Columns the new files bring (reserved ones, or user ones with ``merge``) are added
           (delta-rs: a commit of their own; delta-spark: part of the commit in 6).
        6. One Delta commit through the engine: the new files (Kafka coordinates in their
           tags) plus, per partition with anything new, ``txn`` = the batch's highest offset
           in it. ``CommitConflict`` (delta-rs: any commit since 3; delta-spark: one that moved
           a ``txn`` read in 3, or the metadata): back to 3, a concurrent writer may have moved
           a partition. A ``CommitError`` is raised with the files left in place: the commit
           may have landed, and only the log tells; the orphan rule sorts it out later.
        7. Return: Spark then marks the batch done in its checkpoint. A crash before that makes
           Spark replay the batch (same offsets) and 3 makes the replay a no-op.

        A crash between 1 and 6 leaves the batch's files unreferenced, above the ``txn``: the
        replay commits new copies, after which these are at or below the ``txn`` and the
        orphan cleanup at the next start (:meth:`remove_orphans`) deletes them.

        Raises:
            SegmentError, SegmentDecodeError, SchemaMismatchError: a bad segment (step 2).
            CommitError: the commit failed, or kept conflicting.
        """
        written = [p for p in rows.column("path").to_pylist() if p is not None]
        entries = rows.to_pylist()
        bad = sorted((r for r in entries if r["error_class"] is not None), key=lambda r: (r["partition"], r["offset"]))
        if bad and self.dlq_table_uri is None:
            self._discard(written)
            self.failure = _rebuild(bad[0])
            raise self.failure
        files = [r for r in entries if r["path"] is not None]
        for attempt in range(_MAX_COMMIT_ATTEMPTS):
            table = self.table
            if table is None:  # only bad segments so far, and no table to record progress in
                self._dead_letter(bad, {})
                return
            table.refresh()
            done = {p: table.txn_version(self.app_txn(p)) for p in {r["partition"] for r in entries}}

            def new(r: Mapping[str, Any], done: dict[int, int | None] = done) -> bool:
                v = done[r["partition"]]
                return v is None or r["offset"] > v

            fresh = [r for r in files if new(r)]
            stale = [r["path"] for r in files if not new(r)]
            if stale and fresh:
                log.warning(
                    "batch %s: %d file(s) already in the table under this app id (another writer?): skipped",
                    batch_id,
                    len(stale),
                )
            dead = [r for r in bad if new(r)]
            self._dead_letter(dead, done)
            last: dict[int, int] = {}
            for r in fresh + dead:
                last[r["partition"]] = max(r["offset"], last.get(r["partition"], -1))
            self._evolve(table, fresh)
            data_files = [
                DataFile(
                    path=r["path"],
                    size=r["size"],
                    stats=r["stats"],
                    partition_values=json.loads(r["partition_values"]),
                    tags={
                        "kafka.topic": r["topic"],
                        "kafka.partition": str(r["partition"]),
                        "kafka.offset": str(r["offset"]),
                    },
                )
                for r in fresh
            ]
            try:
                version = table.commit_add_files(
                    data_files,
                    txns={self.app_txn(p): off for p, off in last.items()},
                    commit_info={"parka.app_id": self.app_id, "parka.topic": self.topic, "parka.spark_batch": batch_id},
                )
            except CommitConflict:
                self.stats.conflicts += 1
                log.info("commit conflict (attempt %d): re-reading the table", attempt + 1)
                time.sleep(min(0.05 * 2**attempt, 2.0))
                continue
            crash_point("after-delta-commit")
            self._discard(stale)
            self.stats.replayed_files += len(stale)
            if last:
                self.stats.batches += 1
                if self.stats.batches % _CHECKPOINT_INTERVAL == 0:
                    table.checkpoint()
            self.stats.segments += len({(r["partition"], r["offset"]) for r in fresh})
            self.stats.records += sum(r["records"] for r in fresh)
            self.stats.files += len(fresh)
            self.stats.split_segments += len({(r["partition"], r["offset"]) for r in fresh if r["split"]})
            log.info(
                "batch %s: %d file(s), %d records committed (table version %d)%s",
                batch_id,
                len(fresh),
                sum(r["records"] for r in fresh),
                version,
                f"; {len(stale)} replayed file(s) deleted" if stale else "",
            )
            return
        raise CommitError(f"gave up after {_MAX_COMMIT_ATTEMPTS} conflicting commit attempts")

    def _dead_letter(self, dead: Sequence[Mapping[str, Any]], done: Mapping[int, int | None]) -> None:
        if not dead or self.dlq_table_uri is None:
            return
        now = pa.scalar(time.time_ns() // 1000, pa.timestamp("us", tz="UTC")).as_py()
        letters = [
            (
                r["partition"],
                r["offset"],
                {
                    "topic": r["topic"],
                    "partition": r["partition"],
                    "offset": r["offset"],
                    "error": f"{r['error_class']}: {_rebuild(r)}",
                    "value": r["value"],
                    "headers": r["headers"] or [],
                    "kafka_timestamp_ms": r["timestamp_ms"],
                    "ingested_at": now,
                    "app_id": self.app_id,
                },
            )
            for r in dead
        ]
        self.stats.dead_letters += append_dead_letters(self.dlq_table_uri, self.app_id, letters, self.storage_options)
        for r in dead:
            log.error("dead-lettered: %s: %s", r["error_class"], _rebuild(r))

    def _evolve(self, table: TableLog, fresh: Sequence[Mapping[str, Any]]) -> None:
        """Add the columns the new files bring that the table lacks (idempotent)."""
        wanted: dict[str, pa.Field] = {}
        for r in fresh:
            if r["new_fields"] is not None:
                for f in pa.ipc.read_schema(pa.py_buffer(r["new_fields"])):
                    wanted.setdefault(f.name, f)
        present = set(table.arrow_schema().names)
        missing = [f for name, f in wanted.items() if name not in present]
        if missing:
            table.add_columns(missing)
            self.stats.schema_evolutions += 1
            log.info("table schema evolved: added %s", ", ".join(f.name for f in missing))

    def _discard(self, paths: Sequence[str]) -> None:
        """Delete uncommitted files, best effort: what stays is an orphan the cleanup removes."""
        if not paths:
            return
        try:
            delete_files(self.table_uri, paths, self.storage_options)
        except CommitError as exc:
            log.warning("could not delete %d uncommitted file(s), left to the orphan cleanup: %s", len(paths), exc)


def segment_schema(value: bytes | None, headers: list[Any], *, topic: str, partition: int, offset: int) -> pa.Schema:
    """A segment's Arrow schema, from its headers and footer alone (to create the table).

    Raises:
        SegmentError, SegmentDecodeError: not a segment, or an unreadable one; with coordinates.
    """
    where: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
    if not is_segment(headers):
        raise SegmentError("not a parka segment (no parka.format header)", value=value, headers=headers, **where)
    info = read_segment_info(headers, value=value, **where)
    try:
        return read_footer(value or b"", info.num_records)[1]
    except SegmentDecodeError as exc:
        raise SegmentDecodeError(str(exc), value=value, headers=headers, **where) from exc.__cause__
