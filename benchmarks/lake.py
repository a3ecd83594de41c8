"""Into Delta Lake: ``parka ingest`` (raw segments), the row baseline, and what the tables look like.

* ``ingest``: :class:`IngestionConsumer` in this process with ``end_at_latest`` and its default
  commit policy (64 MiB or 1,000 segments per commit), exactly as ``parka ingest
  --end-at-latest`` runs it.
* ``row_baseline``: what kafka-delta-ingest and hand-written consumers do with Confluent Avro:
  a plain confluent-kafka consumer decodes every record with fastavro, builds Arrow record
  batches of 10,000 rows, and appends them with ``deltalake.write_deltalake`` (zstd, like the
  segments) when 64 MiB of Arrow data are buffered or the topic is drained, each commit
  carrying a ``txn`` (app id, last offset) as parka's do. With ``kdi_files=True`` it writes
  the files kafka-delta-ingest writes with its defaults instead: one file is cut at
  ``min_bytes_per_file`` = 128 MiB of compressed Parquet (:data:`KDI_FILE_BYTES`), so the
  commit waits for the drained topic (or :data:`KDI_MAX_BUFFER_BYTES` of Arrow data, a memory
  cap) and delta-rs cuts its files at 128 MiB (``target_file_size``).

Both join a fresh consumer group with ``subscribe`` like the raw fetch they are compared with;
"steady" timings start when the first message is in hand, so the group join is not billed.
"""

from __future__ import annotations

import logging
import statistics
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer
from deltalake import DeltaTable, WriterProperties, write_deltalake
from deltalake.transaction import CommitProperties, Transaction
from parka.consumer import IngestionConsumer, IngestSettings

from .checks import CheckFailed, fingerprint
from .clients import consumer_conf, drain
from .datasets import Dataset
from .encodings import avro_decoder
from .measure import Span, measured
from .scans import scan_pyarrow, scan_pyiceberg

__all__ = [
    "KDI_FILE_BYTES",
    "LakeRun",
    "TableStats",
    "ingest",
    "row_baseline",
    "row_baseline_table",
    "table_shape",
    "table_stats",
]

log = logging.getLogger("parka.bench")

_BASELINE_DECODE_BATCH = 10_000
_BASELINE_COMMIT_BYTES = 64 * 1024 * 1024
# kafka-delta-ingest's IngestOptions default min_bytes_per_file: compressed Parquet per file
KDI_FILE_BYTES = 128 * 1024 * 1024
# Arrow data buffered before a commit in kdi_files mode; 16 x 128 MiB: flights compress about 7:1
KDI_MAX_BUFFER_BYTES = 16 * KDI_FILE_BYTES


@dataclass
class LakeRun:
    """One run into a table: timings, rows and Kafka value bytes consumed."""

    span: Span
    rows: int
    bytes: int
    first_bytes: int
    steady_wall_s: float
    commits: int


def ingest(
    bootstrap: str,
    topic: str,
    table_uri: str,
    *,
    profiler: Callable[[], Any] | None = None,
    warehouse: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    max_segments_per_commit: int | None = None,
    min_bytes_per_commit: int | None = None,
    compaction: bool = True,
    on_progress: Callable[[IngestionConsumer], None] | None = None,
    **settings: Any,
) -> LakeRun:
    """Run ``parka ingest`` in-process until the topic is drained. ``profiler`` (a
    context-manager factory) wraps the run when given. With ``warehouse``, ``table_uri`` is an
    Iceberg identifier in the embedded catalog there (``--catalog bench --catalog-option
    warehouse=...``). ``storage_options``: ``--storage-option``'s, for a table on an object
    store. ``max_segments_per_commit``, ``min_bytes_per_commit``: those settings (default: the
    daemon's); ``compaction``
    False: no background compaction (``--compact-min-files 0``);
    ``on_progress``: called as the daemon's progress callback is; ``settings``: more of
    :class:`IngestSettings`' (``value_format``...). Raises ``CheckFailed`` when it fails."""
    first: dict[str, float] = {}

    def progress(consumer: IngestionConsumer) -> None:
        # The first message in hand starts the steady window, as in the raw fetch: the daemon
        # calls this after every poll. Its stats count committed segments only, so they would
        # start the window at the end of the first commit (the whole topic, for a small one).
        if not first:
            consumed = consumer.progress()[0]
            if consumed:
                first["at"] = time.perf_counter()
                first["messages"] = consumed
        if on_progress is not None:
            on_progress(consumer)

    settings = IngestSettings(
        topic=topic,
        table_uri=table_uri,
        kafka_conf={"bootstrap.servers": bootstrap, "group.id": f"parka-bench-{uuid.uuid4().hex[:10]}"},
        app_id=f"bench-{topic}",
        end_at_latest=True,
        catalog=None if warehouse is None else "bench",
        catalog_options={} if warehouse is None else {"warehouse": warehouse},
        storage_options=dict(storage_options or {}),
        **({} if max_segments_per_commit is None else {"max_segments_per_commit": max_segments_per_commit}),
        **({} if min_bytes_per_commit is None else {"min_bytes_per_commit": min_bytes_per_commit}),
        **({} if compaction else {"compact_min_files": 0}),
        **settings,
    )
    with measured() as span:
        worker = IngestionConsumer(settings, progress=progress)
        if profiler is not None:
            with profiler():
                stats = worker.run()
        else:
            stats = worker.run()
        done = time.perf_counter()
    if stats.dead_letters:
        raise CheckFailed(f"parka ingest of {topic} dead-lettered {stats.dead_letters} segments")
    # the bytes of the messages in hand then: their share of the mean segment (the daemon does
    # not say which bytes it holds; the segments of a topic here differ little in size)
    first_bytes = stats.bytes * first.get("messages", 0) / stats.segments if stats.segments else 0
    return LakeRun(
        span=span,
        rows=stats.records,
        bytes=stats.bytes,
        first_bytes=round(first_bytes),
        steady_wall_s=done - first.get("at", done),
        commits=stats.commits,
    )


class _RowWriter:
    """The row baseline's sink: decoded records -> Arrow batches -> ``write_deltalake`` commits."""

    def __init__(self, table_uri: str, schema: pa.Schema, app_id: str, *, kdi_files: bool = False) -> None:
        self.table_uri = table_uri
        self.commit_bytes = KDI_MAX_BUFFER_BYTES if kdi_files else _BASELINE_COMMIT_BYTES
        self.target_file_size = KDI_FILE_BYTES if kdi_files else None
        self.schema = schema
        self.app_id = app_id
        self.rows: list[dict[str, Any]] = []
        self.batches: list[pa.RecordBatch] = []
        self.buffered_bytes = 0
        self.last_offset = -1
        self.commits = 0
        self._props = WriterProperties(compression="ZSTD")

    def add(self, record: dict[str, Any], offset: int) -> None:
        self.rows.append(record)
        self.last_offset = offset
        if len(self.rows) >= _BASELINE_DECODE_BATCH:
            self._to_batch()
            if self.buffered_bytes >= self.commit_bytes:
                self.commit()

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Buffer a batch of rows already in Arrow form (committed like decoded ones)."""
        self.batches.append(batch)
        self.buffered_bytes += batch.nbytes
        if self.buffered_bytes >= self.commit_bytes:
            self.commit()

    def _to_batch(self) -> None:
        if self.rows:
            batch = pa.RecordBatch.from_pylist(self.rows, schema=self.schema)
            self.batches.append(batch)
            self.buffered_bytes += batch.nbytes
            self.rows = []

    def commit(self) -> None:
        """Append what is buffered as one Delta commit with a ``txn`` (app id, last offset; none
        for rows that came from no offset, :meth:`add_batch`'s)."""
        self._to_batch()
        if not self.batches:
            return
        txn = [] if self.last_offset < 0 else [Transaction(f"{self.app_id}-0", self.last_offset)]
        write_deltalake(
            self.table_uri,
            pa.Table.from_batches(self.batches, schema=self.schema),
            mode="append",
            writer_properties=self._props,
            target_file_size=self.target_file_size,
            commit_properties=CommitProperties(app_transactions=txn) if txn else None,
        )
        self.commits += 1
        self.batches, self.buffered_bytes = [], 0


def row_baseline(
    bootstrap: str, topic: str, table_uri: str, dataset: Dataset, messages: int, *, kdi_files: bool = False
) -> LakeRun:
    """Decode ``messages`` Confluent Avro records of ``topic`` and append them to a Delta table
    (``kdi_files``: in kafka-delta-ingest's 128 MiB files, see the module's docstring)."""
    decode = avro_decoder(dataset)
    writer = _RowWriter(table_uri, dataset.table.schema, f"bench-{topic}", kdi_files=kdi_files)
    fetched = {"bytes": 0, "first_bytes": 0}
    first_at: list[float] = []

    def take(msg: Any) -> None:
        value = msg.value()
        if not first_at:
            first_at.append(time.perf_counter())
            fetched["first_bytes"] = len(value)
        fetched["bytes"] += len(value)
        writer.add(decode(value), msg.offset())

    with measured() as span:
        consumer = Consumer(consumer_conf(bootstrap))
        consumer.subscribe([topic])
        drain(consumer, messages, take, topic)
        writer.commit()
        done = time.perf_counter()
        consumer.close()
    return LakeRun(
        span=span,
        rows=messages,
        bytes=fetched["bytes"],
        first_bytes=fetched["first_bytes"],
        steady_wall_s=done - (first_at[0] if first_at else done),
        commits=writer.commits,
    )


def row_baseline_table(table_uri: str, data: pa.Table, *, kdi_files: bool = False) -> int:
    """Append ``data`` to a Delta table as :func:`row_baseline` appends the same rows once it
    has decoded them (batches of 10,000 rows, the same commits and files); returns the number
    of commits. For benchmarks whose rows are already in Arrow form, where a Kafka topic of
    Avro records would add only the decode."""
    writer = _RowWriter(table_uri, data.schema, "bench-rows", kdi_files=kdi_files)
    for batch in data.to_batches(max_chunksize=_BASELINE_DECODE_BATCH):
        writer.add_batch(batch)
    writer.commit()
    return writer.commits


@dataclass
class TableStats:
    """A Delta table as a reader finds it, and the time of one scan query over it."""

    rows: int
    files: int
    total_bytes: int
    scan_s: float
    fingerprint: str

    @property
    def mean_file_bytes(self) -> float:
        return self.total_bytes / self.files if self.files else 0.0


def table_stats(table_uri: str, dataset: Dataset, *, scans: int = 3, warehouse: str | None = None) -> TableStats:
    """Files, sizes, content fingerprint and the median of ``scans`` timings of the data set's
    group-by query (open the table, scan the columns, aggregate). With ``warehouse``: the
    Iceberg table ``table_uri`` of the embedded catalog there, read with pyiceberg."""
    if warehouse is None:
        table = DeltaTable(table_uri)
        adds = pa.table(table.get_add_actions(flatten=True))
        data = table.to_pyarrow_table()
        files, total_bytes = adds.num_rows, int(sum(adds["size_bytes"].to_pylist()))

        def scan() -> Any:
            return scan_pyarrow(table_uri, dataset.scan)
    else:
        catalog = iceberg_catalog(warehouse)
        listed = catalog.load_table(table_uri).inspect.files()
        data = catalog.load_table(table_uri).scan().to_arrow()
        files, total_bytes = listed.num_rows, int(sum(listed["file_size_in_bytes"].to_pylist()))

        def scan() -> Any:
            return scan_pyiceberg(catalog.load_table(table_uri), dataset.scan)

    extra = [c for c in data.column_names if c not in dataset.table.schema.names]
    if extra:
        raise CheckFailed(f"{table_uri}: unexpected column(s) {extra}")
    timings = []
    for _ in range(scans):
        start = time.perf_counter()
        result = scan()
        timings.append(time.perf_counter() - start)
        if not result and dataset.rows:
            raise CheckFailed(f"{table_uri}: the scan query returned no groups")
    return TableStats(
        rows=data.num_rows,
        files=files,
        total_bytes=total_bytes,
        scan_s=statistics.median(timings),
        fingerprint=fingerprint(data, dataset.table.schema),
    )


def iceberg_catalog(warehouse: str) -> Any:
    """The embedded SQL catalog ``parka ingest --catalog-option warehouse=...`` made there."""
    from pyiceberg.catalog import load_catalog

    return load_catalog("bench", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")


def table_shape(uri: str, *, version: int | None = None) -> dict[str, Any]:
    """Files, bytes and Parquet row groups of the table's current snapshot (or ``version``)."""
    table = DeltaTable(uri, version=version)
    adds = pa.table(table.get_add_actions(flatten=True))
    sizes = adds["size_bytes"].to_pylist()
    row_groups = sum(pq.ParquetFile(path).metadata.num_row_groups for path in table.file_uris())
    files = len(sizes)
    return {
        "version": table.version(),
        "rows": int(sum(adds["num_records"].to_pylist())),
        "files": files,
        "total_bytes": int(sum(sizes)),
        "mean_file_bytes": sum(sizes) / files if files else 0.0,
        "max_file_bytes": max(sizes, default=0),
        "row_groups": row_groups,
    }
