"""``parka optimize``: table maintenance next to running ingestion. Compaction of the small files
raw ingestion leaves (one per segment) into large files with large row groups, optional
Z-order, a checkpoint, and VACUUM with a retention period.

Why it is safe while ``parka ingest`` and ``parka spark-ingest`` commit to the same table:

* A rewrite is one commit of ``remove`` + ``add`` actions with ``dataChange: false`` and no
  ``txn``: it changes no Kafka progress and adds no rows. It goes to exactly the version after
  the one it read (:func:`parka.lake.delta._rs_maintenance.commit_rewrite`). When anything committed in
  between, the table is re-read: a rewrite whose input files are all still live is committed
  on the new version (a concurrent append cannot touch them); one whose inputs another rewrite
  removed is dropped, and its new files deleted. Rows deleted in an input meanwhile (an upsert,
  a DELETE) are deleted in the new file by the same commit, every row of an input that left the
  table included, while no rewrite committed in between (:meth:`_Written.catch_up`).
  :data:`~parka.lake._compaction.MAX_ATTEMPTS` conflicts in a row raise
  :class:`~parka.errors.CommitConflict`: nothing is lost, the small files stay.
* Not delta-rs' own OPTIMIZE: delta-rs 1.6.6 rebases an OPTIMIZE over another that removed the
  same files (its conflict check lets ``dataChange: false`` removals pass), so two optimizers
  racing (``parka optimize`` in a loop, ``--optimize-every`` in each worker) would leave both
  compacted copies live and every row twice; the unit tests show it.
* Ingestion's commits never rebase (:func:`parka.lake.delta._rs.commit_add_files`): one that
  lost to a rewrite re-reads its ``txn`` versions and commits again (the committer's step 3).
  delta-spark rebases an append over a rewrite by itself.
* The files a rewrite removes stay on disk for readers of older versions: the orphan cleanup
  leaves any file a log entry names to VACUUM (:func:`parka.lake._orphans.remove_orphans`).
* A table with deletion vectors: a rewrite leaves out the rows a file's vector deletes, and its
  ``remove`` names the vector (parka writes that commit: delta-rs' carries none); a file with
  deleted rows is rewritten even alone. After a conflict, rows deleted in an input since the
  read are deleted in the new file by the same commit, and an input an upsert commit removed
  counts as all its rows deleted, unless it is the one the new file's name carries
  (:meth:`_Written.catch_up`). Row tracking is refused.
* VACUUM is delta-rs' "lite" one: it deletes only files of expired ``remove`` actions, never a
  file no log entry names (such as a live worker's file, written but not committed yet).

Files are read and written through the table's storage (:mod:`parka.lake._storage`); each rewrite holds
one row group (compaction) or one table partition (Z-order) in memory.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from parka.config import storage_options_for
from parka.errors import CommitConflict, CommitError, ConfigError, NoTableError

from .._compaction import (
    DEFAULT_ROW_GROUP_ROWS,
    DEFAULT_TARGET_SIZE,
    MAX_ATTEMPTS,
    CommitTurn,
    CompactionPolicy,
    OnRewrite,
    OptimizeResult,
    names_input,
    small_row_groups,
    take_turn,
)
from .._compaction import plan_bins as compaction_bins
from .._keys import Rewritten
from .._log import DataFile
from .._stats import StatsConfig
from .._storage import delete_files, make_durable, read_parquet_footer
from .._zorder import z_order_indices
from . import _rs, _rs_maintenance
from ._dv import Descriptor
from ._dv import load as load_vector
from ._logscan import rewritten_between
from ._rewrite import Encrypted as _Encrypted
from ._rewrite import rewrite_files as _rewrite
from ._rs_maintenance import LiveFile

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = [
    "compact_table",
    "optimize_table",
    "plan_bins",
    "z_order_indices",
]

log = logging.getLogger("parka.optimize")


def optimize_table(
    uri: str,
    *,
    target_size: int = DEFAULT_TARGET_SIZE,
    z_order: Sequence[str] = (),
    vacuum_retention_hours: int | None = None,
    allow_short_retention: bool = False,
    checkpoint: bool = True,
    storage_options: Mapping[str, str] | None = None,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    max_attempts: int = MAX_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> OptimizeResult:
    """Compact the table at ``uri`` (or Z-order it by ``z_order``), then VACUUM files removed more
    than ``vacuum_retention_hours`` ago (``None``: no VACUUM; below the table's
    ``delta.deletedFileRetentionDuration`` only with ``allow_short_retention``), then write a
    checkpoint (``checkpoint``). Safe next to running ingestion (see the module docstring).

    Raises:
        ConfigError: a bad ``target_size``, ``row_group_rows``, ``max_attempts`` or retention, a
            ``z_order`` column the table lacks or partitions by, a retention below the table's, a
            data-skipping table property delta-spark would refuse.
        CommitConflict: the rewrite kept conflicting with concurrent commits (nothing lost, its
            new files deleted).
        CommitError: no table at ``uri``, a table with deletion vectors or row tracking, a
            file that cannot be read as the table schema or written, or a failed commit (which
            may have landed: its files are kept).
    """
    if target_size < 1024 * 1024:
        raise ConfigError("--target-file-size", target_size, "at least 1 MiB")
    _check_limits(row_group_rows, max_attempts)
    if vacuum_retention_hours is not None and vacuum_retention_hours < 0:
        raise ConfigError("--vacuum-retention-hours", vacuum_retention_hours, "hours >= 0")
    options = storage_options_for(uri, storage_options)
    table = _open(uri, options)
    _check_z_order(table, z_order)

    def alone(f: LiveFile) -> bool:  # or deleted rows: a file rewritten alone leaves them out
        return f.deletion_vector is not None or _small_row_groups(uri, f.path, options, row_group_rows)

    live = _rs_maintenance.live_files(table, options)
    planned = plan_bins(live, target_size=target_size, z_order=bool(z_order), small_row_groups=alone)
    rewrite = _Rewrite(uri, options, z_order, target_size, row_group_rows, max_attempts, sleep)
    result = rewrite.run(table, [(group, None) for group in planned])
    vacuumed: list[str] = []
    if vacuum_retention_hours is not None:
        vacuumed = _rs_maintenance.vacuum(
            table, retention_hours=vacuum_retention_hours, enforce_retention=not allow_short_retention
        )
    checkpoint_version = None
    if checkpoint:
        _rs.checkpoint(table)
        checkpoint_version = int(table.version())
    result = dataclasses.replace(
        result, version_after=int(table.version()), vacuumed=len(vacuumed), checkpoint_version=checkpoint_version
    )
    _log_result(result, logging.INFO)
    return result


def compact_table(
    uri: str,
    policy: CompactionPolicy,
    *,
    target_size: int = DEFAULT_TARGET_SIZE,
    storage_options: Mapping[str, str] | None = None,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    max_attempts: int = MAX_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    cancel: threading.Event | None = None,
    commit_turn: CommitTurn | None = None,
    on_commit: OnRewrite | None = None,
) -> OptimizeResult:
    """Background compaction (:mod:`parka.lake._compaction`): the small files ``policy`` picks, below
    ``target_size`` (ingestion's), rewritten into files named by generation and committed as
    :func:`optimize_table` commits; read on the caller's (niced) thread alone. ``cancel`` set
    between two rewrites or before the commit ends it: its new files deleted, nothing committed.

    ``commit_turn`` (an upsert table's committer's, :attr:`parka.lake.Committer.commit_turn`):
    the commit, its conflicts' re-reads and ``on_commit`` hold it, so no commit of the caller's
    ingestion comes between; ``on_commit(read_version, version, rewritten)`` hears where the
    committed rewrites put their inputs' rows (:class:`parka.lake._keys.Rewritten`, the key
    index's :meth:`~parka.lake._keys.KeyIndex.move`).

    Raises:
        ConfigError: a bad ``row_group_rows`` or ``max_attempts``.
        CommitConflict, CommitError: as :func:`optimize_table`.
    """
    _check_limits(row_group_rows, max_attempts)
    options = storage_options_for(uri, storage_options)
    table = _open(uri, options)
    planned = policy.plan(
        _rs_maintenance.live_files(table, options),
        target_size=target_size,
        path=_path,
        size=_size,
        partition=_partition_key,
        deleted=_deleted_fraction,
        small_row_groups=lambda f: _small_row_groups(uri, f.path, options, row_group_rows),
    )
    rewrite = _Rewrite(uri, options, (), target_size, row_group_rows, max_attempts, sleep, background=True)
    result = rewrite.run(table, [(b.files, b.new_name(_path)) for b in planned], cancel, commit_turn, on_commit)
    _log_result(result, logging.INFO if result.files_removed else logging.DEBUG)  # most checks find nothing
    return result


def _check_limits(row_group_rows: int, max_attempts: int) -> None:
    if row_group_rows < 1:
        raise ConfigError("row_group_rows", row_group_rows, "an integer >= 1")
    if max_attempts < 1:
        raise ConfigError("max_attempts", max_attempts, "an integer >= 1")


def _log_result(r: OptimizeResult, level: int) -> None:
    log.log(level, "optimized %s: version %d -> %d, %d file(s) into %d, %d vacuumed", *dataclasses.astuple(r)[:6])


@dataclass(frozen=True)
class _Rewrite:
    """The one rewrite both callers run: bins of files rewritten (:func:`_rewrite`), made durable
    and committed in one commit (:func:`_commit`). ``background``: a compaction policy's, which
    reads on its own thread and says once per run (the compactor) that encrypted files stay."""

    uri: str
    options: dict[str, str]
    z_order: Sequence[str]
    target_size: int
    row_group_rows: int
    max_attempts: int
    sleep: Callable[[float], None]
    background: bool = False

    def run(
        self,
        table: DeltaTable,
        bins: Sequence[tuple[Sequence[LiveFile], str | None]],
        cancel: threading.Event | None = None,
        commit_turn: CommitTurn | None = None,
        on_commit: OnRewrite | None = None,
    ) -> OptimizeResult:
        """Rewrite ``bins`` (files, the new file's name or ``None``) and commit them; no VACUUM, no
        checkpoint. ``commit_turn``, ``on_commit``: :func:`compact_table`'s.

        Raises:
            CommitConflict, CommitError: as :func:`optimize_table`.
        """
        uri, options = self.uri, self.options
        before = int(table.version())
        rewrite = self._rewriter(table)
        written: list[_Written] = []
        encrypted = 0
        committing = False
        try:
            for group, name in bins:
                if cancel is not None and cancel.is_set():
                    raise _Cancelled
                layout: list[tuple[str, np.ndarray | None, int]] = []
                try:
                    new = rewrite(group, name=name, layout=None if self.z_order else layout)
                except _Encrypted as exc:
                    encrypted += len(group)
                    level = logging.DEBUG if self.background else logging.WARNING
                    log.log(
                        level, "%d file(s) left as they are: %s is encrypted; optimize has no keys", len(group), exc
                    )
                    continue
                moved = Rewritten(new[0].path, tuple(layout)) if layout else None
                written.append(_Written(list(group), new, moved))
            if written:
                make_durable(uri, options)
            if cancel is not None and cancel.is_set():
                raise _Cancelled
            if commit_turn is not None and not take_turn(commit_turn, cancel):
                raise _Cancelled  # while the ingest committed
            committing = True
            try:
                committed, attempt = self._commit(table, written)
                version = int(table.version())
                if committed and on_commit is not None:
                    moves = [w.moved for w in committed]
                    on_commit(version - 1, version, [m for m in moves if m is not None] if all(moves) else None)
            finally:
                if commit_turn is not None:
                    commit_turn.release()
        except CommitConflict:
            raise  # _commit deleted what it did not commit
        except _Cancelled:
            _discard(uri, [f for w in written for f in w.new], options)
            log.info("compaction of %s cancelled: %d rewritten file(s) deleted, nothing committed", uri, len(written))
            return OptimizeResult(uri, before, before, 0, 0, 0, None, 0)
        except BaseException:
            if not committing:  # nothing names them: a failed rewrite leaves no files behind
                _discard(uri, [f for w in written for f in w.new], options)
            raise  # a commit that failed otherwise may have landed: its files stay (VACUUM FULL)
        removed, added = sum(len(w.group) for w in committed), sum(len(w.new) for w in committed)
        return OptimizeResult(uri, before, int(table.version()), removed, added, 0, None, attempt, encrypted)

    def _commit(self, table: DeltaTable, written: list[_Written]) -> tuple[list[_Written], int]:
        """Commit the rewrites at exactly the next version; after a conflict, re-read the table
        and keep the rewrites whose inputs are all still live (deleting the others' files): as
        read, or, for a compaction's, with rows deleted since (a deletion vector that grew), which
        the commit then deletes in the new file too (:meth:`_Written.catch_up`). Returns what was
        committed and the attempts it took.

        Raises:
            CommitConflict: ``max_attempts`` conflicts in a row (all new files deleted).
            CommitError: the commit failed otherwise (it may have landed: files kept).
        """
        uri, options, z_order = self.uri, self.options, self.z_order
        info = {"parka.operation": "optimize", **({"parka.zOrderBy": list(z_order)} if z_order else {})}
        attempt = 1
        while written:
            try:
                _rs_maintenance.commit_rewrite(
                    table,
                    [f for w in written for f in w.group],
                    [f for w in written for f in w.new],
                    commit_info=info,
                    storage_options=options,
                    new_file_deletions={w.new[0].path: w.late for w in written if w.late is not None},
                )
                return written, attempt
            except CommitConflict as exc:
                if attempt >= self.max_attempts:
                    _discard(uri, [f for w in written for f in w.new], options)
                    raise CommitConflict(
                        f"optimize of {uri} gave up after {attempt} conflicting commit attempts (nothing is lost; "
                        f"the small files stay; run it again): {exc}"
                    ) from exc
                log.info("optimize commit conflict (attempt %d): re-reading the table (%s)", attempt, exc)
                self.sleep(min(0.02 * 2**attempt, 1.0))
                attempt += 1
                read_version = int(table.version())
                _rs.refresh(table)
                live = {f.path: f for f in _rs_maintenance.live_files(table, options)}
                # an input gone since holds no live row, unless a rewrite in between moved its rows
                gone_deleted = not rewritten_between(uri, read_version, int(table.version()), options)
                kept = [w for w in written if w.catch_up(live, uri, options, gone_deleted=gone_deleted)]
                stale = [w for w in written if w not in kept]
                if stale:
                    log.info("%d rewrite(s) lost their input files to another commit: dropped", len(stale))
                    _discard(uri, [f for w in stale for f in w.new], options)
                written = kept
        return [], attempt

    def _rewriter(self, table: DeltaTable) -> Callable[..., list[DataFile]]:
        """:func:`_rewrite` of a bin of ``table`` as read (its schema, partitioning, statistics)."""
        return functools.partial(
            _rewrite,
            self.uri,
            table_schema=_rs.arrow_schema(table),
            partitions=_rs.partition_columns(table),
            stats_config=StatsConfig.from_properties(_rs.configuration(table)),
            z_order=self.z_order,
            target_size=self.target_size,
            row_group_rows=self.row_group_rows,
            storage_options=self.options,
            use_threads=not self.background,
        )


@dataclass(eq=False)
class _Written:
    """One rewrite, written: its input files (as its commit removes them), its new files, where
    the inputs' rows went (a compaction's one file; ``None``: Z-order's, sorted) and the rows
    of its new file deleted since the inputs were read (``None``: none)."""

    group: list[LiveFile]
    new: list[DataFile]
    moved: Rewritten | None
    late: np.ndarray | None = None
    read: list[LiveFile] = field(init=False)  # the inputs as the rewrite read them

    def __post_init__(self) -> None:
        self.read = list(self.group)

    def catch_up(
        self, live: Mapping[str, LiveFile], uri: str, options: Mapping[str, str], *, gone_deleted: bool = False
    ) -> bool:
        """After a conflict: whether the rewrite can still commit over ``live`` (the table's live
        files by path, re-read). An input that is live as it was read can; one whose deletion
        vector grew (rows deleted since: an upsert's commit, a DELETE) can too when the rewrite
        knows where its rows went (a compaction's), its remove then naming the vector as it is and
        those rows deleted in the new file in the same commit. So can, with ``gone_deleted`` (no
        rewrite committed since the read), a compaction's input that is gone: an upsert commit
        removed it with every row deleted, and all its rows are deleted in the new file (on a
        keyed topic most small files soon are; dropping those rewrites starved compaction),
        unless it is the input the new file's name carries (:func:`names_input`: the orphan
        cleanup may have deleted the new file since). A file another rewrite took, or whose
        vector lost rows, cannot: the rewrite would bring back rows, or duplicate them; nor can
        one left with no live row. Each call compares with the inputs as read, so rows deleted
        across several conflicts all count."""
        late: list[np.ndarray] = []
        group: list[LiveFile] = []
        for i, f in enumerate(self.read):
            now = live.get(f.path)
            if now is None:
                if not gone_deleted or self.moved is None or names_input(self.new[0].path, f.path):
                    return False
                _, deleted, rows = self.moved.inputs[i]
                then = np.empty(0, np.int64) if deleted is None else deleted
                late.append(self.moved.new_rows(i, np.setdiff1d(np.arange(rows, dtype=np.int64), then)))
                continue
            if now.identity != f.identity:
                if self.moved is None or now.deletion_vector is None:
                    return False
                deleted = self.moved.inputs[i][1]
                then = np.empty(0, np.int64) if deleted is None else deleted
                current = load_vector(uri, Descriptor.from_json(now.deletion_vector), options).astype(np.int64)
                if not np.isin(then, current).all():
                    return False
                late.append(self.moved.new_rows(i, np.setdiff1d(current, then)))
            group.append(now)
        late_rows = np.concatenate(late) if late else None
        if self.moved is not None and late_rows is not None:
            kept = sum(rows - (0 if deleted is None else deleted.size) for _, deleted, rows in self.moved.inputs)
            if not group or np.unique(late_rows).size >= kept:
                return False  # no live row left in it
        self.group = group
        self.late = late_rows
        return True


def _discard(uri: str, files: Sequence[DataFile], storage_options: Mapping[str, str]) -> None:
    if not files:
        return
    try:
        delete_files(uri, [f.path for f in files], storage_options)
    except CommitError as exc:  # unreferenced either way; VACUUM FULL removes what stays
        log.warning("could not delete %d uncommitted rewritten file(s): %s", len(files), exc)


def plan_bins(
    files: Sequence[LiveFile],
    *,
    target_size: int,
    z_order: bool = False,
    small_row_groups: Callable[[LiveFile], bool] = lambda f: False,
) -> list[list[LiveFile]]:
    """Which files each rewrite takes, per table partition, in commit order: compaction's bins
    (:func:`parka.lake._compaction.plan_bins`, ``small_row_groups`` saying which file is
    rewritten even alone); with ``z_order``, every file of a partition."""
    if z_order:
        partitions: dict[tuple[tuple[str, str | None], ...], list[LiveFile]] = {}
        for f in files:
            partitions.setdefault(_partition_key(f), []).append(f)
        return list(partitions.values())
    return compaction_bins(files, target_size=target_size, size=_size, partition=_partition_key, alone=small_row_groups)


_SHAPES: dict[tuple[str, str], tuple[int, int]] = {}  # (table, file) -> (rows, row groups): files never change
_SHAPES_KEPT = 16_384


def _small_row_groups(uri: str, path: str, options: Mapping[str, str], row_group_rows: int) -> bool:
    """:func:`parka.lake._compaction.small_row_groups` of a data file, from its footer (read once
    per process: background compaction asks after every commit)."""
    shape = _SHAPES.get((uri, path))
    if shape is None:
        md = read_parquet_footer(uri, path, options)
        if len(_SHAPES) >= _SHAPES_KEPT:
            _SHAPES.clear()
        shape = _SHAPES[(uri, path)] = (md.num_rows, md.num_row_groups)
    return small_row_groups(*shape, row_group_rows)


class _Cancelled(Exception):
    """``cancel`` was set: the compaction stops before its commit."""


def _path(f: LiveFile) -> str:
    return f.path


def _deleted_fraction(f: LiveFile) -> float:
    """The fraction of a file's rows its deletion vector deletes (from the log: no file read)."""
    vector = f.deletion_vector
    if vector is None or f.add is None:
        return 0.0
    try:
        rows = int(json.loads(f.add.get("stats") or "{}")["numRecords"])
        return int(vector["cardinality"]) / rows if rows else 0.0
    except (ValueError, KeyError, TypeError):
        return 0.0  # no statistics: left to parka optimize, which rewrites every file with deleted rows


def _size(f: LiveFile) -> int:
    return f.size


def _partition_key(f: LiveFile) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(f.partition_values.items()))


def _open(uri: str, storage_options: dict[str, str]) -> DeltaTable:
    table = _rs.open_table(uri, storage_options)
    if table is None:
        raise NoTableError(f"no Delta table at {uri}")
    return table


def _check_z_order(table: DeltaTable, columns: Sequence[str]) -> None:
    """Each Z-order column must be a top-level, non-nested column the table is not partitioned by."""
    if not columns:
        return
    schema = _rs.arrow_schema(table)
    partitions = set(_rs.partition_columns(table))
    allowed = [f.name for f in schema if f.name not in partitions and not pa.types.is_nested(f.type)]
    for column in columns:
        if column not in allowed:
            raise ConfigError(
                "--z-order",
                ",".join(columns),
                f"columns of the table that it is not partitioned by: {', '.join(allowed)}",
                reason=f"'{column}' is {'a partition column' if column in partitions else 'not one of them'}",
            )
