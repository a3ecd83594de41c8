"""``parka optimize --catalog``: compact an Iceberg table's small files and expire its old
snapshots with pyiceberg, safely next to running ``parka ingest`` / ``parka spark-ingest``.

* **Compaction.** The current snapshot's files smaller than the target are packed, per table
  partition and in order, into bins of about the target size; each bin of two or more files is
  read through pyiceberg's reader (the table's schema: older files get the columns added since
  as nulls) and written as one Parquet file with large row groups under the table's data folder.
  One commit (an ``overwrite`` snapshot) removes the small files and adds the large ones. It
  carries the table's ``txn`` state (``parka.txns``) forward, so the current snapshot still says
  which offsets are in, and it asserts that the snapshot it read is still current: a commit of a
  running ingest in between is a conflict, after which the compaction's files are deleted and it
  plans again (up to ``max_attempts``). Nothing is lost either way: the removed files stay on
  disk until expiry.
* **Expiry** (``expire_older_than_hours``): snapshots older than that are expired, except the
  current one and the latest one whose summary holds the ``txn`` state (the offsets every parka
  worker resumes from); then the data files no remaining snapshot names are deleted (pyiceberg's
  expiry removes only the metadata).

Not done: tables with delete files (row-level deletes by another engine) are refused; the
manifests of expired snapshots are left in the metadata folder.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import ManifestContent
from pyiceberg.table import FileScanTask

from parka.errors import CommitConflict, CommitError, ConfigError

from ._iceberg import IcebergEngine, IcebergTableLog
from ._log import DataFile
from ._optimize import DEFAULT_ROW_GROUP_ROWS, DEFAULT_TARGET_SIZE, MAX_ATTEMPTS, OptimizeResult
from ._storage import delete_files, make_durable, write_data_file

__all__ = ["optimize_iceberg"]

log = logging.getLogger("parka.optimize")


def optimize_iceberg(
    engine: IcebergEngine,
    identifier: str,
    *,
    target_size: int = DEFAULT_TARGET_SIZE,
    expire_older_than_hours: float | None = None,
    storage_options: Mapping[str, str] | None = None,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    max_attempts: int = MAX_ATTEMPTS,
    before_commit: Callable[[], None] | None = None,
) -> OptimizeResult:
    """Compact, then expire (see the module docstring). ``before_commit`` is called between
    writing the compacted files and committing them (tests make a concurrent commit there).

    Raises:
        ConfigError: a bad ``target_size``, ``row_group_rows``, ``max_attempts`` or retention.
        CommitConflict: the compaction kept conflicting with concurrent commits (nothing lost).
        CommitError: no such table, a table with delete files, or a failed read, write or commit.
    """
    if target_size < 1024 * 1024:
        raise ConfigError("--target-file-size", target_size, "at least 1 MiB")
    if row_group_rows < 1 or max_attempts < 1:
        raise ConfigError("row_group_rows/max_attempts", (row_group_rows, max_attempts), "at least 1")
    if expire_older_than_hours is not None and expire_older_than_hours < 0:
        raise ConfigError("--vacuum-retention-hours", expire_older_than_hours, "hours >= 0")
    options = dict(storage_options or {})
    table = engine.open(identifier, options)
    if table is None:
        raise CommitError(f"no Iceberg table {identifier} in catalog {engine.catalog_name!r}")
    before = table.version()
    removed = added = attempts = 0
    for attempts in range(1, max_attempts + 1):
        table.refresh()
        bins = _plan(table, target_size)
        if not bins:
            break
        files = [_rewrite(table, group, row_group_rows, options) for group in bins]
        make_durable(table.uri, options)
        if before_commit is not None:
            before_commit()
        try:
            table.replace_files(
                [f for group in bins for f in group],
                files,
                partitions=[group[0].partition for group in bins],
                commit_info={"parka.optimize": "compaction"},
            )
        except CommitConflict as exc:
            delete_files(table.uri, [f.path for f in files], options)
            log.info("compaction conflicted with another commit (attempt %d): planning again (%s)", attempts, exc)
            if attempts == max_attempts:
                raise
            continue
        removed, added = sum(len(g) for g in bins), len(files)
        break
    vacuumed = (
        0
        if expire_older_than_hours is None
        else table.expire_snapshots(time.time() * 1000 - expire_older_than_hours * 3_600_000)
    )
    return OptimizeResult(identifier, before, table.refresh(), removed, added, vacuumed, None, attempts)


def _plan(table: IcebergTableLog, target_size: int) -> list[list[Any]]:
    """Bins of small files (two or more each) to rewrite as one file of about ``target_size``."""
    snapshot = table.iceberg.current_snapshot()
    if snapshot is not None and any(m.content == ManifestContent.DELETES for m in snapshot.manifests(table.iceberg.io)):
        raise CommitError(f"{table.identifier} has delete files: compact it with an engine that applies them")
    by_partition: dict[Any, list[Any]] = {}
    for f in table.data_files():
        if f.file_size_in_bytes < target_size and f.spec_id == table.iceberg.spec().spec_id:
            by_partition.setdefault(repr(f.partition), []).append(f)
    bins: list[list[Any]] = []
    for files in by_partition.values():  # a compacted file holds one partition's rows
        current: list[Any] = []
        size = 0
        for f in sorted(files, key=lambda f: f.file_path):
            if current and size + f.file_size_in_bytes > target_size:
                bins.append(current)
                current, size = [], 0
            current.append(f)
            size += f.file_size_in_bytes
        bins.append(current)
    return [b for b in bins if len(b) >= 2]


def _rewrite(table: IcebergTableLog, group: list[Any], row_group_rows: int, options: Mapping[str, str]) -> DataFile:
    """The rows of ``group`` as one new data file under the table's data folder."""
    t = table.iceberg
    try:
        rows = ArrowScan(t.metadata, t.io, t.schema(), AlwaysTrue()).to_table([FileScanTask(f) for f in group])
        sink = pa.BufferOutputStream()
        pq.write_table(rows, sink, compression="zstd", row_group_size=row_group_rows)
        data = sink.getvalue().to_pybytes()
    except Exception as exc:
        raise CommitError(f"cannot rewrite {len(group)} file(s) of {table.identifier}: {exc}") from exc
    name = f"compacted-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}.parquet"
    size = write_data_file(table.uri, name, data, options)
    return DataFile(path=name, size=size, stats="{}")
