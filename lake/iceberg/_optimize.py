"""``parka optimize --catalog``: compact an Iceberg table's small files and expire its old
snapshots with pyiceberg, safely next to running ``parka ingest`` / ``parka spark-ingest``.

* **Compaction.** The current snapshot's files smaller than the target are packed, per table
  partition and in order, into bins of about the target size; each bin of two or more files is
  read through pyiceberg's reader (the table's schema: older files get the columns added since
  as nulls) and written as one Parquet file with large row groups under the table's data folder.
  One commit (an ``overwrite`` snapshot) removes the small files and adds the large ones. It
  carries the table's ``txn`` state (``parka.txns``) forward, so the current snapshot still says
  which offsets are in, and it asserts that the snapshot it read is still current: a commit of a
  running ingest in between is a conflict, after which the table is read again and the rewrites
  whose input files are all still live are committed on the new snapshot (an append cannot touch
  them), while those whose inputs another compaction removed are dropped with their files (and
  the compaction plans again when none is left), up to ``max_attempts``, as Delta's does
  (:mod:`parka.lake.delta._optimize`). Nothing is lost either way: the removed files stay on disk until expiry.
  ``parka ingest``'s background compaction commits in the daemon's own commit turn
  (:func:`compact_iceberg`'s ``commit_turn``), so that its own ingest commits cannot win those races.
* **Expiry** (``expire_older_than_hours``): snapshots older than that are expired, except the
  current one and the latest one whose summary holds the ``txn`` state (the offsets every parka
  worker resumes from); then the data files no remaining snapshot names are deleted (pyiceberg's
  expiry removes only the metadata).

Not done: tables with delete files (row-level deletes by another engine) are refused; the
manifests of expired snapshots are left in the metadata folder.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
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

from parka.errors import CommitConflict, CommitError, ConfigError, NoTableError

from .._compaction import (
    DEFAULT_ROW_GROUP_ROWS,
    DEFAULT_TARGET_SIZE,
    MAX_ATTEMPTS,
    CommitTurn,
    CompactionPolicy,
    OptimizeResult,
    take_turn,
)
from .._log import DataFile
from .._storage import delete_files, make_durable, write_data_file
from ._engine import IcebergEngine
from ._table import IcebergTableLog

__all__ = ["compact_iceberg", "optimize_iceberg"]

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
    _check_limits(row_group_rows, max_attempts)
    if expire_older_than_hours is not None and expire_older_than_hours < 0:
        raise ConfigError("--vacuum-retention-hours", expire_older_than_hours, "hours >= 0")
    options = dict(storage_options or {})
    table = _open(engine, identifier, options)

    def plan() -> list[tuple[list[Any], str | None]]:
        return [(group, None) for group in _plan_bins(_current_files(table), target_size)]

    result = _compact(table, plan, row_group_rows, max_attempts, options, before_commit=before_commit)
    if expire_older_than_hours is not None:
        vacuumed = table.expire_snapshots(time.time() * 1000 - expire_older_than_hours * 3_600_000)
        result = dataclasses.replace(result, vacuumed=vacuumed, version_after=table.refresh())
    return result


def compact_iceberg(
    engine: IcebergEngine,
    identifier: str,
    policy: CompactionPolicy,
    *,
    target_size: int = DEFAULT_TARGET_SIZE,
    storage_options: Mapping[str, str] | None = None,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    max_attempts: int = MAX_ATTEMPTS,
    before_commit: Callable[[], None] | None = None,
    cancel: threading.Event | None = None,
    commit_turn: CommitTurn | None = None,
) -> OptimizeResult:
    """Background compaction (:mod:`parka.lake._compaction`): the small files ``policy`` picks, below
    ``target_size`` (ingestion's file size), rewritten into files named by generation and
    committed as :func:`optimize_iceberg` commits them; no expiry. ``cancel`` set between two
    rewrites or before a commit attempt ends it, its new files deleted and nothing committed.

    ``commit_turn``: the lock the same process's ingest commits hold
    (:attr:`parka.lake.Committer.commit_turn`). The commit then takes it: the table is read again
    and the rewrite committed while no ingest commit of this process can come in between. Without
    it, a daemon committing every 100 ms won every race against a commit that writes the manifests
    of hundreds of files, and the compaction never landed.

    Raises:
        ConfigError: a bad ``row_group_rows`` or ``max_attempts``.
        CommitConflict, CommitError: as :func:`optimize_iceberg`.
    """
    _check_limits(row_group_rows, max_attempts)
    options = dict(storage_options or {})
    table = _open(engine, identifier, options)

    def plan() -> list[tuple[list[Any], str | None]]:
        files = sorted(_current_files(table), key=lambda f: f.file_path)
        planned = policy.plan(
            files,
            target_size=target_size,
            path=lambda f: str(f.file_path),
            size=lambda f: int(f.file_size_in_bytes),
            partition=lambda f: repr(f.partition),
        )
        return [(b.files, b.new_name(lambda f: str(f.file_path))) for b in planned]

    return _compact(
        table,
        plan,
        row_group_rows,
        max_attempts,
        options,
        before_commit=before_commit,
        cancel=cancel,
        commit_turn=commit_turn,
    )


def _check_limits(row_group_rows: int, max_attempts: int) -> None:
    if row_group_rows < 1 or max_attempts < 1:
        raise ConfigError("row_group_rows/max_attempts", (row_group_rows, max_attempts), "at least 1")


def _open(engine: IcebergEngine, identifier: str, options: Mapping[str, str]) -> IcebergTableLog:
    table = engine.open(identifier, options)
    if table is None:
        raise NoTableError(f"no Iceberg table {identifier} in catalog {engine.catalog_name!r}")
    return table


def _compact(
    table: IcebergTableLog,
    plan: Callable[[], list[tuple[list[Any], str | None]]],
    row_group_rows: int,
    max_attempts: int,
    options: Mapping[str, str],
    *,
    before_commit: Callable[[], None] | None = None,
    cancel: threading.Event | None = None,
    commit_turn: CommitTurn | None = None,
) -> OptimizeResult:
    """The one compaction both callers run: the bins ``plan`` gives (input files, the new file's
    name or ``None``) rewritten and committed in one snapshot, re-read after a conflict (see the
    module docstring), holding ``commit_turn`` while it reads the table again and commits
    (:func:`compact_iceberg`); no expiry.

    Raises:
        CommitConflict: ``max_attempts`` conflicts (nothing lost, the new files deleted).
        CommitError: a failed read, write or commit.
    """
    before = table.version()
    removed = added = attempts = 0
    written: list[tuple[list[Any], DataFile]] = []  # (input files, their rewrite), not committed yet
    try:
        for attempts in range(1, max_attempts + 1):
            table.refresh()
            written = _keep_live(table, written, options)  # after a conflict
            if not written:
                for group, name in plan():
                    if cancel is not None and cancel.is_set():
                        break
                    written.append((group, _rewrite(table, group, row_group_rows, options, name)))
                if not written:
                    break
                make_durable(table.uri, options)
            if commit_turn is not None and not take_turn(commit_turn, cancel):
                break  # cancelled while the ingest committed
            try:
                if commit_turn is not None:  # the ingest may have committed since the read above
                    table.refresh()
                    written = _keep_live(table, written, options)
                    if not written:
                        continue
                if cancel is not None and cancel.is_set():
                    break
                if before_commit is not None:
                    before_commit()
                table.replace_files(
                    [f for group, _ in written for f in group],
                    [new for _, new in written],
                    partitions=[group[0].partition for group, _ in written],
                    commit_info={"parka.optimize": "compaction"},
                )
            except CommitConflict as exc:
                log.info("compaction conflicted with another commit (attempt %d): reading again (%s)", attempts, exc)
                if attempts == max_attempts:
                    raise
                continue
            except BaseException:
                written = []  # a commit that failed otherwise may have landed: its files stay
                raise
            finally:
                if commit_turn is not None:
                    commit_turn.release()
            removed, added = sum(len(g) for g, _ in written), len(written)
            written = []
            break
    finally:
        if written:  # not committed: cancelled, out of attempts, or failed before its commit
            _discard(table.uri, [new for _, new in written], options)
    return OptimizeResult(table.identifier, before, table.refresh(), removed, added, 0, None, attempts)


def _keep_live(
    table: IcebergTableLog, written: list[tuple[list[Any], DataFile]], options: Mapping[str, str]
) -> list[tuple[list[Any], DataFile]]:
    """The rewrites whose inputs are all still live in the table as last read; the others'
    files deleted (another compaction took their inputs)."""
    if not written:
        return written
    spec = table.iceberg.spec().spec_id
    live = {f.file_path for f in table.data_files()}
    stale = [new for group, new in written if not _still_live(group, live, spec)]
    if stale:
        log.info("%d compacted file(s) lost their inputs to another commit: dropped", len(stale))
        _discard(table.uri, stale, options)
    return [(group, new) for group, new in written if _still_live(group, live, spec)]


def _still_live(group: list[Any], live: set[str], spec: int) -> bool:
    """A rewrite may still be committed: all its inputs are live, in the current partition spec."""
    return all(f.spec_id == spec and f.file_path in live for f in group)


def _discard(uri: str, files: list[DataFile], options: Mapping[str, str]) -> None:
    try:
        delete_files(uri, [f.path for f in files], options)
    except CommitError as exc:  # unreferenced either way: the orphan cleanup or expiry takes them
        log.warning("could not delete %d uncommitted compacted file(s): %s", len(files), exc)


def _current_files(table: IcebergTableLog) -> list[Any]:
    """The data files of the current snapshot in the current partition spec (a compacted file
    holds one partition's rows).

    Raises:
        CommitError: the table has delete files.
    """
    snapshot = table.iceberg.current_snapshot()
    if snapshot is not None and any(m.content == ManifestContent.DELETES for m in snapshot.manifests(table.iceberg.io)):
        raise CommitError(f"{table.identifier} has delete files: compact it with an engine that applies them")
    spec = table.iceberg.spec().spec_id
    return [f for f in table.data_files() if f.spec_id == spec]


def _plan_bins(current: list[Any], target_size: int) -> list[list[Any]]:
    """Bins of small files (two or more each), per table partition and in path order, to
    rewrite as one file of about ``target_size``."""
    by_partition: dict[Any, list[Any]] = {}
    for f in current:
        if f.file_size_in_bytes < target_size:
            by_partition.setdefault(repr(f.partition), []).append(f)
    bins: list[list[Any]] = []
    for files in by_partition.values():
        group: list[Any] = []
        size = 0
        for f in sorted(files, key=lambda f: f.file_path):
            if group and size + f.file_size_in_bytes > target_size:
                bins.append(group)
                group, size = [], 0
            group.append(f)
            size += f.file_size_in_bytes
        bins.append(group)
    return [b for b in bins if len(b) >= 2]


def _rewrite(
    table: IcebergTableLog, group: list[Any], row_group_rows: int, options: Mapping[str, str], name: str | None
) -> DataFile:
    """The rows of ``group`` as one new data file under the table's data folder (named ``name``
    when given)."""
    t = table.iceberg
    try:
        rows = ArrowScan(t.metadata, t.io, t.schema(), AlwaysTrue()).to_table([FileScanTask(f) for f in group])
        sink = pa.BufferOutputStream()
        pq.write_table(rows, sink, compression="zstd", row_group_size=row_group_rows)
        data = sink.getvalue().to_pybytes()
    except Exception as exc:
        raise CommitError(f"cannot rewrite {len(group)} file(s) of {table.identifier}: {exc}") from exc
    name = name or f"compacted-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}.parquet"
    size = write_data_file(table.uri, name, data, options)
    return DataFile(path=name, size=size, stats="{}")
