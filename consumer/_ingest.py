"""``IngestionConsumer``: raw Parquet segments from Kafka into a Delta table, exactly once.

Each segment's bytes become one data file of the table, unchanged (no decode, no re-encode);
its statistics come from the Parquet footer. Many segments go into one Delta commit, which
also carries one ``txn`` action per partition (``appId=<app_id>-<partition>``, ``version`` =
last Kafka offset in the table). The Delta log is the source of truth for progress: every
assignment seeks each partition to its ``txn`` version + 1. Kafka offsets are committed
afterwards for lag tools only. The protocol is :meth:`IngestionConsumer.commit`.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition

from parka._crash import crash_point
from parka.errors import (
    CommitConflict,
    KafkaClientError,
    ParkaError,
    SchemaMismatchError,
    SegmentDecodeError,
    SegmentError,
)

from . import _delta
from ._files import DLQ_SCHEMA, append_dead_letters, read_footer, remove_orphans, write_segment_files
from ._log import DataFile
from ._plan import RESERVED_COLUMNS, CommitPolicy, check_schema
from ._shim import ParquetConsumer, RawSegment
from ._storage import delete_files, make_durable

__all__ = ["DLQ_SCHEMA", "IngestSettings", "IngestStats", "IngestionConsumer"]

log = logging.getLogger("parka.ingest")

_MAX_COMMIT_ATTEMPTS = 20


@dataclass(frozen=True)
class IngestSettings:
    """Everything ``parka ingest`` can be told; see the CLI for each flag's meaning."""

    topic: str
    table_uri: str
    kafka_conf: dict[str, Any]
    app_id: str
    allowed_latency_s: float = 30.0
    min_bytes_per_commit: int = 64 * 1024 * 1024
    max_segments_per_commit: int = 1000
    auto_offset_reset: str = "earliest"
    seek_offsets: dict[int, int] = field(default_factory=dict)
    end_at_latest: bool = False
    checkpoint_interval: int = 10
    partition_by: tuple[str, ...] = ()
    schema_evolution: str = "none"
    dlq_table_uri: str | None = None
    storage_options: dict[str, str] = field(default_factory=dict)

    def app_txn(self, partition: int) -> str:
        return f"{self.app_id}-{partition}"


@dataclass
class IngestStats:
    """Counters, also printed by the progress line and returned by :meth:`IngestionConsumer.run`."""

    segments: int = 0
    records: int = 0
    bytes: int = 0
    files: int = 0
    commits: int = 0
    split_segments: int = 0
    dead_letters: int = 0
    conflicts: int = 0
    dropped_partitions: int = 0
    orphans_removed: int = 0
    schema_evolutions: int = 0


@dataclass
class _Buffered:
    file: DataFile
    partition: int
    offset: int
    records: int


@dataclass
class _DeadLetter:
    partition: int
    offset: int
    row: dict[str, Any]


def _decode_error(raw: RawSegment, message: str, *, cls: type[SegmentError] = SegmentDecodeError) -> SegmentError:
    """An error about one message that keeps the raw message, for the dead-letter table."""
    return cls(
        message, value=raw.value, headers=raw.headers, topic=raw.topic, partition=raw.partition, offset=raw.offset
    )


class IngestionConsumer:
    """Consume one topic's segments into one Delta table; :meth:`run` until stopped."""

    def __init__(
        self,
        settings: IngestSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        progress: Callable[[IngestionConsumer], None] | None = None,
    ) -> None:
        self.settings = settings
        self.stats = IngestStats()
        self._clock = clock
        self._progress = progress
        self._policy = CommitPolicy(
            settings.allowed_latency_s, settings.min_bytes_per_commit, settings.max_segments_per_commit
        )
        self._consumer: ParquetConsumer | None = None
        self._table: Any = None
        self._buffer: list[_Buffered] = []
        self._dead: list[_DeadLetter] = []
        self._buffered_bytes = 0
        self._oldest_at: float | None = None
        # partition -> txn version as this worker last saw it in the table (None: no txn yet)
        self._expected: dict[int, int | None] = {}
        # partition -> highest offset consumed (buffered, dead-lettered or committed)
        self._consumed: dict[int, int] = {}
        self._assigned: set[int] = set()
        self._start: dict[int, int] = {}
        self._high: dict[int, int] = {}
        self._stop = threading.Event()
        self._last_kafka_warning = float("-inf")
        self._schema_cache: tuple[int, pa.Schema] | None = None
        # (table version, segment schema) last found to fit the table as it is
        self._fits: tuple[int, pa.Schema] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to commit what is buffered and return (signal-handler safe)."""
        self._stop.set()

    def install_signal_handlers(self) -> None:
        """SIGINT and SIGTERM flush, commit and exit instead of killing the process."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop())

    def run(self) -> IngestStats:
        """Ingest until :meth:`stop` (or, with ``end_at_latest``, until everything present at
        start is in the table). Raises :class:`~parka.errors.ParkaError` subclasses for input
        the table cannot take when no dead-letter table is configured, after committing all
        progress before the bad message."""
        s = self.settings
        conf = dict(s.kafka_conf)
        conf.update(
            {
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": s.auto_offset_reset,
            }
        )
        self._table = _delta.open_table(s.table_uri, s.storage_options)
        self._remove_orphans()
        self._consumer = ParquetConsumer(conf)
        self._consumer.subscribe([s.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        try:
            while not self._stop.is_set():
                raw = self._poll()
                if raw is not None:
                    self._handle(raw)
                if self._policy.due(
                    segments=len(self._buffer) + len(self._dead),
                    buffered_bytes=self._buffered_bytes,
                    oldest_at=self._oldest_at,
                    now=self._clock(),
                ):
                    self.commit()
                if self._progress is not None:
                    self._progress(self)
                if s.end_at_latest and self._caught_up():
                    break
            self.commit()
            self._remove_orphans()
        finally:
            self._consumer.close()
        return self.stats

    def _poll(self) -> RawSegment | None:
        """The next raw message; transient client errors (a broker away) are logged and retried.

        librdkafka reconnects by itself, and everything buffered stays buffered until a commit
        succeeds, so waiting loses nothing. A fatal error stops ingestion.
        """
        assert self._consumer is not None
        try:
            return self._consumer.poll_buffer(timeout=0.5)
        except KafkaClientError as exc:
            err = exc.kafka_error
            if err is not None and not err.fatal():
                now = self._clock()
                if now - self._last_kafka_warning >= 10.0:
                    log.warning("Kafka client: %s (retrying; buffered segments are kept)", err)
                    self._last_kafka_warning = now
                return None
            raise

    # -- rebalance -----------------------------------------------------------------------------

    def _on_assign(self, consumer: ParquetConsumer, partitions: list[TopicPartition]) -> None:
        """Seek every assigned partition from the Delta log (the source of truth)."""
        s = self.settings
        self._refresh_table()
        for tp in partitions:
            version = None if self._table is None else _delta.txn_version(self._table, s.app_txn(tp.partition))
            self._expected[tp.partition] = version
            if version is not None:
                tp.offset = version + 1
            elif tp.partition in s.seek_offsets:
                tp.offset = s.seek_offsets[tp.partition]
            else:
                tp.offset = OFFSET_BEGINNING if s.auto_offset_reset == "earliest" else OFFSET_END
            self._assigned.add(tp.partition)
            low, high = consumer.get_watermark_offsets(TopicPartition(s.topic, tp.partition), timeout=10)
            self._high[tp.partition] = high
            self._start[tp.partition] = (
                low if tp.offset == OFFSET_BEGINNING else high if tp.offset == OFFSET_END else tp.offset
            )
            log.info("partition %d assigned; starting at offset %s (txn version %s)", tp.partition, tp.offset, version)
        consumer.assign(partitions)

    def _on_revoke(self, consumer: ParquetConsumer, partitions: list[TopicPartition]) -> None:
        """Commit what is buffered before another worker takes the partitions."""
        self.commit()
        for tp in partitions:
            self._assigned.discard(tp.partition)
            self._expected.pop(tp.partition, None)
            self._consumed.pop(tp.partition, None)
            log.info("partition %d revoked", tp.partition)
        consumer.unassign()

    def _caught_up(self) -> bool:
        if not self._assigned or self._consumer is None:
            return False
        for p in self._assigned:
            position = max(self._start.get(p, 0), self._consumed.get(p, -1) + 1)
            [tp] = self._consumer.position([TopicPartition(self.settings.topic, p)])
            if tp.offset >= 0:
                position = max(position, tp.offset)
            if position < self._high.get(p, 0):
                return False
        return True

    # -- one message ---------------------------------------------------------------------------

    def _handle(self, raw: RawSegment) -> None:
        try:
            if raw.info is None:
                raise _decode_error(raw, "not a parka segment (no parka.format header)", cls=SegmentError)
            meta, schema = self._read_footer(raw)
            self._fit_schema(raw, schema)
            crash_point("before-write")
            files = self._write(raw, meta)
            crash_point("after-write")
        except (SegmentError, SchemaMismatchError) as exc:  # bad input, not a failure of ours
            self._dead_letter(raw, exc)
            return
        for f in files:
            self._buffer.append(_Buffered(f, raw.partition, raw.offset, raw.info.num_records))
            self._buffered_bytes += f.size
            self.stats.files += 1
        self.stats.segments += 1
        self.stats.records += raw.info.num_records
        self.stats.bytes += len(raw.value or b"")
        self._consumed[raw.partition] = raw.offset
        if self._oldest_at is None:
            self._oldest_at = self._clock()

    def _read_footer(self, raw: RawSegment) -> tuple[pq.FileMetaData, pa.Schema]:
        assert raw.info is not None
        try:
            return read_footer(raw.value or b"", raw.info.num_records)
        except SegmentDecodeError as exc:
            raise _decode_error(raw, str(exc)) from exc.__cause__

    def _fit_schema(self, raw: RawSegment, schema: pa.Schema) -> None:
        """Create the table from the first segment, evolve it for additive changes, or refuse."""
        s = self.settings
        missing = [c for c in s.partition_by if c not in schema.names]
        if missing:
            raise self._mismatch(raw, f"partition column '{missing[0]}' is not in the segment", missing[0])
        if self._table is None:
            table_schema = pa.schema(
                [f for f in schema if f.name not in RESERVED_COLUMNS]
                + [f.with_nullable(True) for f in schema if f.name in RESERVED_COLUMNS]
            )
            try:
                self._table = _delta.create_table(
                    s.table_uri, table_schema, partition_by=list(s.partition_by), storage_options=s.storage_options
                )
            except SchemaMismatchError as exc:
                raise self._mismatch(raw, str(exc), exc.field) from exc
            log.info("created Delta table %s from the segment schema", s.table_uri)
            return
        version = self._table.version()
        if self._fits is not None and self._fits[0] == version:
            fitted = self._fits[1]
            if fitted is schema or fitted.equals(schema, check_metadata=True):
                return  # the verdict for this schema and table version stands
        verdict = check_schema(self._table_schema(), schema, partition_by=s.partition_by)
        if not verdict.problems and not verdict.new_fields:
            self._fits = (version, schema)
        if verdict.problems:
            raise self._mismatch(raw, "; ".join(verdict.problems), None)
        if verdict.new_fields:
            user_new = [f for f in verdict.new_fields if f.name not in RESERVED_COLUMNS]
            if user_new and s.schema_evolution != "merge":
                names = ", ".join(f.name for f in user_new)
                raise self._mismatch(
                    raw, f"new column(s) {names}: rerun with --schema-evolution merge to add them", user_new[0].name
                )
            # Files already buffered were checked against the old schema, which stays valid
            # (new columns are nullable), so the columns can be added before they commit.
            _delta.add_columns(self._table, list(verdict.new_fields))
            self.stats.schema_evolutions += 1
            log.info("table schema evolved: added %s", ", ".join(f.name for f in verdict.new_fields))

    def _table_schema(self) -> pa.Schema:
        """The table's Arrow schema, converted once per table version (it is read per segment)."""
        version = self._table.version()
        if self._schema_cache is None or self._schema_cache[0] != version:
            self._schema_cache = (version, _delta.arrow_schema(self._table))
        return self._schema_cache[1]

    def _mismatch(self, raw: RawSegment, reason: str, field_name: str | None) -> SchemaMismatchError:
        err = SchemaMismatchError(f"the table cannot take this segment: {reason}", field=field_name)
        err.value, err.headers = raw.value, raw.headers
        err.topic, err.partition, err.offset = raw.topic, raw.partition, raw.offset
        return err

    def _write(self, raw: RawSegment, meta: pq.FileMetaData) -> list[DataFile]:
        """Write the segment as data file(s): raw bytes, or split by table partition values."""
        s = self.settings
        files, split = write_segment_files(
            s.table_uri,
            raw.value or b"",
            meta,
            topic=raw.topic,
            partition=raw.partition,
            offset=raw.offset,
            table_schema=self._table_schema(),
            partition_by=s.partition_by,
            storage_options=s.storage_options,
        )
        if split:
            self.stats.split_segments += 1
        return files

    def _dead_letter(self, raw: RawSegment, exc: ParkaError) -> None:
        s = self.settings
        log.error("%s: %s", type(exc).__name__, exc)
        if s.dlq_table_uri is None:
            # No dead-letter table: keep everything before the bad message, then stop loudly.
            self.commit()
            raise exc
        headers = [{"key": k, "value": v} for k, v in (raw.headers or [])]
        row = {
            "topic": raw.topic,
            "partition": raw.partition,
            "offset": raw.offset,
            "error": f"{type(exc).__name__}: {exc}",
            "value": raw.value,
            "headers": headers,
            "kafka_timestamp_ms": raw.timestamp[1] if raw.timestamp else None,
            "ingested_at": pa.scalar(time.time_ns() // 1000, pa.timestamp("us", tz="UTC")).as_py(),
            "app_id": s.app_id,
        }
        self._dead.append(_DeadLetter(raw.partition, raw.offset, row))
        self._consumed[raw.partition] = raw.offset
        self.stats.dead_letters += 1
        if self._oldest_at is None:
            self._oldest_at = self._clock()

    # -- the commit protocol -----------------------------------------------------------------

    def commit(self) -> None:
        """Commit what is buffered, exactly once. The protocol, in order:

        1. Data files are already written (``_handle``), under names no other attempt uses;
           one flush of the table's file system makes them durable before any log entry
           can name them.
        2. Dead letters first: append them to the dead-letter table with their own ``txn``
           (``<app_id>-dlq-<partition>``); rows at or below that version were written by an
           earlier attempt and are skipped, so a crash between 2 and 4 duplicates nothing.
        3. Re-read the table. For each partition in this commit, compare the table's ``txn``
           version with the one this worker expects. A partition whose version moved was
           committed by another worker: drop its buffered files (delete them) and seek it to
           the table's version + 1. Never commit it twice.
        4. One Delta commit: the add actions plus one ``txn`` per partition (version = last
           offset), with no automatic retries. A concurrent commit raises ``CommitConflict``:
           go back to 3 (another worker may have taken a partition meanwhile).
        5. Only then commit Kafka offsets (last offset + 1), asynchronously: advisory, for lag
           tools; the Delta log stays the source of truth.
        6. Every ``checkpoint_interval`` commits, write a Delta checkpoint.

        A crash before 4 leaves unreferenced files: :meth:`_remove_orphans` deletes them once
        the table's ``txn`` shows their offsets are covered. A crash after 4 loses nothing:
        the next assignment seeks from the Delta log.
        """
        if not self._buffer and not self._dead:
            return
        s = self.settings
        if self._dead:
            self._write_dead_letters()
        if self._buffer:
            make_durable(s.table_uri, s.storage_options)
        for attempt in range(_MAX_COMMIT_ATTEMPTS):
            self._refresh_table()
            self._drop_moved_partitions()
            partitions = sorted({b.partition for b in self._buffer} | {d.partition for d in self._dead})
            if not partitions:
                break
            last = {
                p: max(
                    [b.offset for b in self._buffer if b.partition == p]
                    + [d.offset for d in self._dead if d.partition == p]
                )
                for p in partitions
            }
            txns = {s.app_txn(p): off for p, off in last.items()}
            files = [b.file for b in self._buffer]
            if self._table is None:
                # Only dead letters so far and no table to record progress in: nothing to commit.
                break
            try:
                _delta.commit_add_files(
                    self._table,
                    files,
                    txns=txns,
                    partition_by=list(s.partition_by),
                    commit_info={"parka.app_id": s.app_id, "parka.topic": s.topic},
                )
            except CommitConflict:
                self.stats.conflicts += 1
                log.info("commit conflict (attempt %d): re-reading the table", attempt + 1)
                time.sleep(min(0.05 * 2**attempt, 2.0))
                continue
            crash_point("after-delta-commit")
            for p, off in last.items():
                self._expected[p] = off
            self.stats.commits += 1
            self._buffer.clear()
            self._dead.clear()
            self._buffered_bytes = 0
            self._oldest_at = None
            self._commit_kafka(last)
            if s.checkpoint_interval > 0 and self.stats.commits % s.checkpoint_interval == 0:
                _delta.checkpoint(self._table)
            return
        else:
            raise CommitConflict(f"gave up after {_MAX_COMMIT_ATTEMPTS} conflicting commit attempts")
        self._buffer.clear()
        self._dead.clear()
        self._buffered_bytes = 0
        self._oldest_at = None

    def _write_dead_letters(self) -> None:
        """Append dead letters not yet in the dead-letter table (its txn says which are)."""
        s = self.settings
        assert s.dlq_table_uri is not None
        dead = [(d.partition, d.offset, d.row) for d in self._dead]
        append_dead_letters(s.dlq_table_uri, s.app_id, dead, s.storage_options)

    def _drop_moved_partitions(self) -> None:
        if self._table is None:
            return
        s = self.settings
        for p in sorted({b.partition for b in self._buffer} | {d.partition for d in self._dead}):
            current = _delta.txn_version(self._table, s.app_txn(p))
            if current == self._expected.get(p):
                continue
            # Another worker committed this partition since we read it: its data wins.
            dropped = [b for b in self._buffer if b.partition == p]
            log.warning(
                "partition %d moved to txn version %s (expected %s): dropping %d buffered file(s)",
                p,
                current,
                self._expected.get(p),
                len(dropped),
            )
            delete_files(s.table_uri, [b.file.path for b in dropped], s.storage_options)
            self._buffer = [b for b in self._buffer if b.partition != p]
            self._dead = [d for d in self._dead if d.partition != p]
            self._buffered_bytes = sum(b.file.size for b in self._buffer)
            self._expected[p] = current
            self.stats.dropped_partitions += 1
            if current is not None:
                # The table now covers everything up to ``current``: continue after it.
                self._consumed[p] = current
                self._start[p] = current + 1
                if p in self._assigned and self._consumer is not None:
                    try:
                        self._consumer.seek(TopicPartition(s.topic, p, current + 1))
                    except KafkaException as exc:  # being revoked: the next owner seeks from the log
                        log.info("could not seek partition %d: %s", p, exc)

    def _commit_kafka(self, last: dict[int, int]) -> None:
        if self._consumer is None:
            return
        offsets = [TopicPartition(self.settings.topic, p, off + 1) for p, off in last.items() if p in self._assigned]
        if not offsets:
            return
        try:
            self._consumer.commit(offsets=offsets, asynchronous=True)
        except Exception as exc:  # advisory only: the Delta log already holds the truth
            log.warning("Kafka offset commit failed (progress is safe in the Delta log): %s", exc)

    def _refresh_table(self) -> None:
        s = self.settings
        if self._table is None:
            self._table = _delta.open_table(s.table_uri, s.storage_options)
        else:
            _delta.refresh(self._table)

    def _remove_orphans(self) -> None:
        """Delete data files this topic's ingestion wrote but never committed.

        A parka-named file that the table does not reference is an orphan once the table's
        ``txn`` for its partition has reached its offset: that offset's data was committed in
        another file (or dead-lettered), so nobody will ever commit this one. Files above the
        ``txn`` version may still belong to a live worker's open commit and are left alone.
        """
        s = self.settings
        if self._table is None:
            return
        handle = _delta.RsTableLog(s.table_uri, self._table)
        self.stats.orphans_removed += remove_orphans(handle, s.topic, s.app_txn, s.storage_options)

    # -- introspection for the progress line ----------------------------------------------------

    def lag(self) -> dict[int, int]:
        """Messages behind the high watermark, per assigned partition (from the client's cache)."""
        out: dict[int, int] = {}
        if self._consumer is None:
            return out
        for p in sorted(self._assigned):
            try:
                _, high = self._consumer.get_watermark_offsets(TopicPartition(self.settings.topic, p), cached=True)
            except Exception as exc:  # the progress line must never stop ingestion
                log.debug("no watermark for partition %d: %s", p, exc)
                continue
            pos = self._consumed.get(p, self._start.get(p, 0) - 1) + 1
            if high >= 0:
                out[p] = max(0, high - pos)
        return out
