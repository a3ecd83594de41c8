"""``parka optimize --catalog``: compact an Iceberg table's small files and expire its old
snapshots with pyiceberg, safely next to running ``parka ingest`` / ``parka spark-ingest``.

* **Compaction.** The current snapshot's files smaller than the target are packed, per table
  partition and in order, into bins of about the target size; each bin of two or more files (or
  of one whose row groups are small or rows deleted: :func:`parka.lake._compaction.plan_bins`) is
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

* **Deletes.** A file with rows deleted by position-delete files (an upsert table's) is read with
  them applied, so the compacted file holds its live rows only, and the commit removes those
  delete files with the files they named (the snapshot is parka's own, :class:`._deletes.RowDelta`).
  A delete file that also names files outside the rewrite (another writer's, for many) stays.
  Background compaction rewrites a file alone once ``purge_fraction`` of its rows are deleted.
  Rows deleted in a rewrite's inputs after it read them are deleted in the new file by the same
  commit (a delete file of its own), and an input that an upsert commit removed (all its rows
  deleted) counts as all its rows deleted: on a keyed topic whose small files are soon wholly
  superseded, that is most inputs, and dropping those rewrites starved compaction. An input gone
  while a compaction (parka's, or any ``replace`` snapshot) committed may live on in another file:
  that rewrite is dropped and planned again; so is one whose first input, the one its file's name
  carries, is gone, since the orphan cleanup judges a compacted file no snapshot names by that
  input.

Not done: equality deletes and deletion vectors (another engine's) are refused.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import FileScanTask
from pyiceberg.table.snapshots import Operation

from parka.errors import CommitConflict, CommitError, ConfigError, NoTableError

from .._compaction import (
    DEFAULT_ROW_GROUP_ROWS,
    DEFAULT_TARGET_SIZE,
    MAX_ATTEMPTS,
    CommitTurn,
    CompactionPolicy,
    OptimizeResult,
    names_input,
    plan_bins,
    small_row_groups,
    take_turn,
)
from .._log import DataFile
from .._rowgroups import Chunks, write_row_groups
from .._storage import delete_files, make_durable, write_data_file
from ._deletes import NO_ROWS, DeleteState
from ._engine import IcebergEngine
from ._table import IcebergTableLog

__all__ = ["compact_iceberg", "optimize_iceberg"]

log = logging.getLogger("parka.optimize")

COMPACTION_KEY = "parka.optimize"  # in the summary of every compaction's snapshot


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
        CommitError: no such table, a table with deletes parka cannot read, or a failed read,
            write or commit.
    """
    if target_size < 1024 * 1024:
        raise ConfigError("--target-file-size", target_size, "at least 1 MiB")
    _check_limits(row_group_rows, max_attempts)
    if expire_older_than_hours is not None and expire_older_than_hours < 0:
        raise ConfigError("--vacuum-retention-hours", expire_older_than_hours, "hours >= 0")
    options = dict(storage_options or {})
    table = _open(engine, identifier, options)

    def plan() -> list[tuple[list[Any], str | None]]:
        files = sorted(_current_files(table), key=lambda f: f.file_path)
        state = table.delete_state()

        def alone(f: Any) -> bool:  # or deleted rows: a file rewritten alone leaves them out
            return len(_deleted(table, state, f)) > 0 or _small_row_groups(f, row_group_rows)

        bins = plan_bins(files, target_size=target_size, size=_size, partition=_partition, alone=alone)
        return [(group, None) for group in bins]

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
        state = table.delete_state()

        def deleted(f: Any) -> float:
            return len(_deleted(table, state, f)) / f.record_count if f.record_count else 0.0

        planned = policy.plan(
            files,
            target_size=target_size,
            path=lambda f: str(f.file_path),
            size=_size,
            partition=_partition,
            deleted=deleted,
            small_row_groups=lambda f: _small_row_groups(f, row_group_rows),
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
    written: list[Rewrite] = []  # not committed yet
    try:
        for attempts in range(1, max_attempts + 1):
            table.refresh()
            written = _keep_live(table, written, options)  # after a conflict
            if not written:
                for group, name in plan():
                    if cancel is not None and cancel.is_set():
                        break
                    written.append(_rewrite(table, group, row_group_rows, options, name))
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
                    [f for w in written for f in w.live_inputs],
                    [w.new for w in written],
                    partitions=[w.inputs[0].partition for w in written],
                    commit_info={COMPACTION_KEY: "compaction"},
                    late_deletes={w.new.path: w.late for w in written if len(w.late)},
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
            removed, added = sum(len(w.live_inputs) for w in written), len(written)
            written = []
            break
    finally:
        if written:  # not committed: cancelled, out of attempts, or failed before its commit
            _discard(table.uri, [w.new for w in written], options)
    return OptimizeResult(table.identifier, before, table.refresh(), removed, added, 0, None, attempts)


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """Input files rewritten as ``new`` (not committed yet): ``read`` holds the rows of each input
    that were deleted when it was read (left out of ``new``), ``late`` the rows of ``new`` that
    were deleted in its inputs since (the commit deletes them in ``new`` by a delete file)."""

    inputs: list[Any]
    new: DataFile
    read: list[np.ndarray]
    snapshot_id: int | None = None  # the snapshot it read
    late: np.ndarray = dataclasses.field(default_factory=lambda: NO_ROWS)
    gone: frozenset[str] = frozenset()  # inputs an upsert commit removed since (not removed again)

    @property
    def live_inputs(self) -> list[Any]:
        """The inputs the commit removes: those still in the table."""
        return [f for f in self.inputs if f.file_path not in self.gone]

    @property
    def live_rows(self) -> int:
        """The rows of ``new`` not deleted by ``late``."""
        return sum(int(f.record_count) - len(rows) for f, rows in zip(self.inputs, self.read, strict=True)) - len(
            self.late
        )

    def caught_up(self, now: list[np.ndarray]) -> Rewrite | None:
        """This rewrite given its inputs' deleted rows ``now``: ``late`` the rows of ``new`` they
        add; ``None`` when rows deleted at the read are no longer (a restore: rewrite again)."""
        late = []
        base = 0
        for f, then, rows in zip(self.inputs, self.read, now, strict=True):
            if not np.isin(then, rows).all():
                return None
            added = np.setdiff1d(rows, then, assume_unique=True)
            # a live row's place in new: its input's base, plus the live rows before it
            late.append(base + added - np.searchsorted(then, added))
            base += int(f.record_count) - len(then)
        return dataclasses.replace(self, late=np.concatenate(late) if late else NO_ROWS)


def _keep_live(table: IcebergTableLog, written: list[Rewrite], options: Mapping[str, str]) -> list[Rewrite]:
    """The rewrites that may still be committed on the table as last read, caught up with the
    rows deleted in their inputs since they were read (:meth:`Rewrite.caught_up`; an input an
    upsert commit removed has all its rows deleted); the others' files deleted: an input gone
    while a compaction committed (its rows may live on in another file), the input the new
    file's name carries gone (:func:`names_input`: the orphan cleanup may have deleted the file),
    the partition spec changed, rows deleted at the read restored, or no row left."""
    if not written:
        return written
    spec = table.iceberg.spec().spec_id
    live = {f.file_path for f in table.data_files()}
    state = table.delete_state()
    kept: list[Rewrite] = []
    stale: list[DataFile] = []
    for w in written:
        gone = frozenset(str(f.file_path) for f in w.inputs if f.file_path not in live)
        now = None
        named_gone = any(names_input(w.new.path, path) for path in gone)  # the orphan cleanup's to delete
        if (
            all(f.spec_id == spec for f in w.inputs)
            and not named_gone
            and not (gone and _rewritten_since(table, w.snapshot_id))
        ):
            now = w.caught_up(
                [np.arange(int(f.record_count)) if f.file_path in gone else _deleted(table, state, f) for f in w.inputs]
            )
        if now is None or now.live_rows == 0:
            stale.append(w.new)
        else:
            kept.append(dataclasses.replace(now, gone=gone))
    if stale:
        log.info("%d compacted file(s) lost their inputs to another commit: dropped", len(stale))
        _discard(table.uri, stale, options)
    return kept


def _rewritten_since(table: IcebergTableLog, snapshot_id: int | None) -> bool:
    """Whether a snapshot after ``snapshot_id`` (back from the current one) may have moved rows
    to other files: a compaction (parka's, or any writer's ``replace``); ``True`` when
    ``snapshot_id`` is not an ancestor of the current snapshot (expired, or rolled back)."""
    metadata = table.iceberg.metadata
    snapshot = table.iceberg.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != snapshot_id:
        summary = snapshot.summary
        if summary is None or summary.operation == Operation.REPLACE or COMPACTION_KEY in summary.additional_properties:
            return True
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else metadata.snapshot_by_id(parent)
    return snapshot is None


def _deleted(table: IcebergTableLog, state: DeleteState, f: Any) -> np.ndarray:
    """The deleted rows of data file ``f`` (ascending; none: :data:`._deletes.NO_ROWS`)."""
    return state.positions.get(table.relative(f.file_path), NO_ROWS)


def _discard(uri: str, files: list[DataFile], options: Mapping[str, str]) -> None:
    try:
        delete_files(uri, [f.path for f in files], options)
    except CommitError as exc:  # unreferenced either way: the orphan cleanup or expiry takes them
        log.warning("could not delete %d uncommitted compacted file(s): %s", len(files), exc)


def _current_files(table: IcebergTableLog) -> list[Any]:
    """The data files of the current snapshot in the current partition spec (a compacted file
    holds one partition's rows).

    Raises:
        CommitError: the table holds deletes parka cannot read.
    """
    table.delete_state()  # refuses what it cannot read
    spec = table.iceberg.spec().spec_id
    return [f for f in table.data_files() if f.spec_id == spec]


def _size(f: Any) -> int:
    return int(f.file_size_in_bytes)


def _partition(f: Any) -> str:
    return repr(f.partition)


def _small_row_groups(f: Any, row_group_rows: int) -> bool:
    """:func:`parka.lake._compaction.small_row_groups` of a data file, from its manifest entry
    (its ``split_offsets``: one per row group; a file without them is not judged)."""
    return small_row_groups(int(f.record_count), len(f.split_offsets or ()), row_group_rows)


def _rewrite(
    table: IcebergTableLog, group: list[Any], row_group_rows: int, options: Mapping[str, str], name: str | None
) -> Rewrite:
    """The live rows of ``group`` (their position deletes applied), input after input, as one new
    data file under the table's data folder (named ``name`` when given)."""
    t = table.iceberg
    state = table.delete_state()
    try:
        scan = ArrowScan(t.metadata, t.io, t.schema(), AlwaysTrue())

        def live(f: Any) -> pa.Table:
            deletes = {e.data_file for e in state.delete_files.get(table.relative(f.file_path), [])}
            return scan.to_table([FileScanTask(f, deletes)])

        parts = map(live, group)  # one input at a time: the new file's rows in the inputs' order
        first = next(parts)
        sink, schema = Chunks(), first.schema
        written = write_row_groups(itertools.chain([first], parts), schema, row_group_rows, sink, compression="zstd")
    except Exception as exc:
        raise CommitError(f"cannot rewrite {len(group)} file(s) of {table.identifier}: {exc}") from exc
    read = [_deleted(table, state, f) for f in group]
    counts = [int(f.record_count) - len(deleted) for f, deleted in zip(group, read, strict=True)]
    if counts != written.counts:
        raise CommitError(f"{table.identifier}: a rewrite read {written.counts} rows, not {counts}")
    name = name or f"compacted-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}.parquet"
    size = write_data_file(table.uri, name, sink.parts, options)
    snapshot = t.current_snapshot()
    return Rewrite(
        group, DataFile(path=name, size=size, stats="{}"), read, None if snapshot is None else snapshot.snapshot_id
    )
