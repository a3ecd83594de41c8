"""Table maintenance through delta-rs (``parka optimize``, :mod:`._optimize`): the snapshot's
live files, a rewrite committed as one version of ``remove`` + ``add`` actions with
``dataChange: false`` and no rebase, delta-rs' lite VACUUM, and the table's retentions (those
``parka ingest`` gives the tables it creates, reads on others and VACUUMs by). Errors leave as
parka's, as in :mod:`._rs`."""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from parka.crash import crash_during
from parka.errors import CommitError, ConfigError

from .._log import DataFile
from .._plan import partition_value_string
from . import _dv_commit as dv_commit
from ._dv import Descriptor
from ._logscan import live_adds
from ._rs import NO_POST_COMMIT, configuration, open_table, partition_columns, translating

__all__ = [
    "DEFAULT_TABLE_RETENTION_S",
    "DELETED_FILE_RETENTION",
    "LOG_RETENTION",
    "LiveFile",
    "Retention",
    "commit_rewrite",
    "commits_per_s",
    "live_files",
    "retention_properties",
    "table_retention",
    "vacuum",
    "vacuum_by_table_retention",
]

DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
LOG_RETENTION = "delta.logRetentionDuration"
DELTA_DEFAULTS_S = {DELETED_FILE_RETENTION: 7 * 86_400, LOG_RETENTION: 30 * 86_400}  # Delta's: a week, 30 days
DEFAULT_TABLE_RETENTION_S = 3_600
"""The deleted-file and log retention ``parka ingest`` gives the Delta tables it creates: one
hour, the snapshot history its Iceberg tables get (``history.expire.max-snapshot-age-ms``). A
daemon committing every second writes some 3,600 versions an hour and compaction removes about
as many files; a week's retention keeps millions of tombstones in every checkpoint and every
reader's table open. An hour still lets a reader pinned to a version, a streaming reader that
fell behind or a time-travel query go back an hour; who needs longer sets it (``--table-retention``)."""

_UNITS_S = {
    "nanosecond": 1e-9,
    "microsecond": 1e-6,
    "millisecond": 1e-3,
    "second": 1,
    "minute": 60,
    "hour": 3_600,
    "day": 86_400,
    "week": 604_800,
}
_INTERVAL = re.compile(r"^\s*interval\s+(\d+)\s+([a-z]+?)s?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Retention:
    """A Delta table's retentions in seconds: of removed files (``delta.deletedFileRetentionDuration``)
    and of log entries (``delta.logRetentionDuration``), Delta's defaults when unset."""

    deleted_file_s: float
    log_s: float

    @classmethod
    def of(cls, config: Mapping[str, str]) -> Retention:
        """Read from a table's properties; an interval delta-rs would not parse counts as the default."""
        return cls(
            *(_interval_s(config.get(key)) or DELTA_DEFAULTS_S[key] for key in (DELETED_FILE_RETENTION, LOG_RETENTION))
        )


def _interval_s(text: str | None) -> float | None:
    match = _INTERVAL.match(text or "")
    if match is None or match.group(2).lower() not in _UNITS_S:
        return None
    return int(match.group(1)) * _UNITS_S[match.group(2).lower()]


def retention_properties(seconds: int) -> dict[str, str]:
    """The table properties of a deleted-file and log retention of ``seconds``."""
    return {DELETED_FILE_RETENTION: f"interval {seconds} seconds", LOG_RETENTION: f"interval {seconds} seconds"}


def table_retention(
    uri: str, storage_options: Mapping[str, str] | None = None, *, set_to_s: int | None = None
) -> Retention | None:
    """The retentions of the Delta table at ``uri`` (``None``: no table yet); with ``set_to_s``,
    first set both to that many seconds (a commit of the table's properties, as ``ALTER TABLE
    SET TBLPROPERTIES`` makes) unless they already are.

    Raises:
        CommitError: the table cannot be read, or its properties not set.
    """
    table = open_table(uri, dict(storage_options or {}), raw_files=False)
    if table is None:
        return None
    if set_to_s is not None and Retention.of(configuration(table)) != Retention(set_to_s, set_to_s):
        with translating(f"cannot set the retention of {uri}"):
            table.alter.set_table_properties(retention_properties(set_to_s))
    return Retention.of(configuration(table))


def commits_per_s(uri: str, storage_options: Mapping[str, str] | None = None, *, last: int = 100) -> float | None:
    """The table's recent commit rate: its ``last`` commits (at most) over the time they span,
    from the log's commit infos; ``None`` when there is no table or fewer than two commits, or
    the log cannot be read (a rate for a message, never a reason to fail)."""
    try:
        table = open_table(uri, dict(storage_options or {}), raw_files=False)
        if table is None:
            return None
        times = [int(h["timestamp"]) for h in table.history(last) if "timestamp" in h]
    except Exception:
        return None
    if len(times) < 2 or max(times) <= min(times):
        return None
    return (len(times) - 1) / ((max(times) - min(times)) / 1000)


def vacuum_by_table_retention(uri: str, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Delta-rs' full VACUUM of the table at ``uri`` by the table's own
    ``delta.deletedFileRetentionDuration`` (no retention of parka's own is passed, so never a
    shorter one): it lists the table's files (not ``_``-folders) and deletes those older than
    the retention that no version inside it names. A version inside the retention keeps its
    files (the snapshot's tombstones name them), and so does a file written less than the
    retention ago that no log entry names yet (a commit in flight's). Full, not lite: lite
    reads only the tombstones the latest checkpoint still holds, and a checkpoint drops them
    once the retention is over, so with a checkpoint every few commits lite VACUUM would almost
    never see a file as due. Then the log's commits older than ``delta.logRetentionDuration``
    that a checkpoint covers are deleted (delta-rs' ``cleanup_metadata``; a checkpoint alone
    keeps them). Returns the deleted data files' paths (none when there is no table).

    Raises:
        CommitError: the table cannot be read, or the VACUUM or the log cleanup failed.
    """
    table = open_table(uri, dict(storage_options or {}), raw_files=False)
    if table is None:
        return []
    with translating(f"vacuum of {uri} failed"), crash_during("during-vacuum"):
        deleted = table.vacuum(retention_hours=None, dry_run=False, enforce_retention_duration=True, full=True)
    with translating(f"the log cleanup of {uri} failed"):
        table.cleanup_metadata()
    return list(deleted)


@dataclass(frozen=True)
class LiveFile:
    """A data file of a snapshot: path (relative, decoded), size, partition values as the log
    serialises them, and its add action's modification time (ms). ``add``: its ``add`` action
    as the log holds it, read for a table with the deletion vector feature (whose files a
    rewrite must remove by path and vector, and whose deleted rows it leaves out)."""

    path: str
    size: int
    partition_values: Mapping[str, str | None]
    modification_time: int
    add: Mapping[str, Any] | None = None

    @property
    def deletion_vector(self) -> Mapping[str, Any] | None:
        """The file's deletion vector descriptor (the log's JSON); ``None`` when no row is deleted."""
        return None if self.add is None else self.add.get("deletionVector")

    @property
    def identity(self) -> tuple[str, str]:
        """What the log tells live files apart by: the path and the deletion vector."""
        dv = self.deletion_vector
        return self.path, "" if dv is None else Descriptor.from_json(dv).unique_id()


def live_files(table: DeltaTable, storage_options: Mapping[str, str] | None = None) -> list[LiveFile]:
    """The handle's snapshot's data files, in commit order (modification time, then path); on a
    table with the deletion vector feature, with their ``add`` actions (read from the log with
    ``storage_options``).

    Raises:
        CommitError: the table has row tracking (a rewrite from the Parquet files alone would
            lose row ids), or cannot be read.
    """
    with translating("cannot read the table protocol"):
        protocol = table.protocol()
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    if "rowTracking" in features:
        raise CommitError(
            "parka optimize rewrites files from their Parquet alone; the table uses rowTracking: "
            "use delta-spark's OPTIMIZE"
        )
    partitions = partition_columns(table)
    with translating("cannot list the table's add actions"):
        rows = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    adds: Mapping[str, Mapping[str, Any]] = {}
    if "deletionVectors" in features:
        adds = live_adds(table.table_uri, storage_options, version=table.version())
    files = [
        LiveFile(
            unquote(r["path"]),
            int(r["size_bytes"]),
            {c: partition_value_string(r[f"partition.{c}"]) for c in partitions},
            int(r["modification_time"]),
            adds.get(unquote(r["path"])),
        )
        for r in rows
    ]
    return sorted(files, key=lambda f: (f.modification_time, f.path))


def commit_rewrite(
    table: DeltaTable,
    removed: Collection[LiveFile],
    added: Collection[DataFile],
    *,
    commit_info: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
    new_file_deletions: Mapping[str, np.ndarray] | None = None,
) -> int:
    """Commit a rewrite: ``remove`` actions for ``removed`` and ``add`` actions for ``added``
    (already written and durable), all with ``dataChange: false`` (the same rows in other
    files: streaming readers skip the commit), as one version at exactly the handle's
    version + 1, without retries, like :func:`commit_add_files`. Returns the new version; the
    handle is loaded at it. ``new_file_deletions``: rows of added files (path -> positions)
    deleted by the same commit, by deletion vector (rows of the inputs deleted after the
    rewrite read them).

    No rebase on purpose: delta-rs 1.6 rebases a ``dataChange: false`` removal over another
    commit that removed the same files (its own OPTIMIZE does), which leaves both rewrites'
    files live and every row twice. The caller re-reads and decides (its files still live?).

    A removed file with a deletion vector: the commit is written by parka
    (:func:`._dv_commit.write_commit`), since delta-rs' ``RemoveAction`` carries no vector and
    the log tells files apart by path and vector (``storage_options``: the table's).

    Raises:
        CommitConflict: any commit landed after the handle's version.
        CommitError: any other failure.
    """
    read_version = table.version()
    now_ms = int(time.time() * 1000)
    if new_file_deletions or any(f.deletion_vector is not None for f in removed):
        # delta-rs' RemoveAction has no deletion vector: the log would keep the file live
        return _commit_rewrite_of_vectors(
            table, removed, added, commit_info, storage_options, now_ms, dict(new_file_deletions or {})
        )
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(f.path, False, now_ms, f.size, dict(f.partition_values)) for f in removed
    ]
    actions += [AddAction(f.path, f.size, dict(f.partition_values), now_ms, False, f.stats) for f in added]
    properties = CommitProperties(custom_metadata=dict(commit_info or {}) or None, max_commit_retries=0)
    with translating(f"rewrite on version {read_version} failed", read_version=read_version):
        table.create_write_transaction(
            actions, mode="append", schema=table.schema(), partition_by=partition_columns(table),
            commit_properties=properties, post_commithook_properties=NO_POST_COMMIT,
        )  # fmt: skip
    with translating(f"committed version {read_version + 1} but cannot load it"):
        table.load_as_version(read_version + 1)
    return read_version + 1


def _commit_rewrite_of_vectors(
    table: DeltaTable,
    removed: Collection[LiveFile],
    added: Collection[DataFile],
    commit_info: Mapping[str, Any] | None,
    storage_options: Mapping[str, str] | None,
    now_ms: int,
    new_file_deletions: Mapping[str, np.ndarray],
) -> int:
    """:func:`commit_rewrite` written by parka (``_dv_commit.py``): each ``remove`` names the
    file's deletion vector, so the log removes the very file a snapshot holds."""
    read_version = table.version()
    actions: list[dict[str, Any]] = []
    for old in removed:
        assert old.add is not None, "a rewrite of a table with deletion vectors reads every file's add action"
        actions.append({"remove": dv_commit.remove_action(old.add, now_ms, data_change=False)})
    adds, vectors = dv_commit.new_adds(list(added), new_file_deletions, now_ms, data_change=False)
    dv_commit.attach_vectors(table.table_uri, adds, vectors, storage_options)
    actions += [{"add": add} for add in adds]
    version = dv_commit.write_commit(
        table.table_uri, read_version, actions, "OPTIMIZE", commit_info, storage_options=storage_options
    )
    with translating(f"committed version {version} but cannot load it"):
        table.load_as_version(version)
    return version


def vacuum(table: DeltaTable, *, retention_hours: int, enforce_retention: bool = True) -> list[str]:
    """Delete the files of ``remove`` actions older than ``retention_hours`` (delta-rs' "lite"
    VACUUM: files no log entry names, such as a live writer's files not yet committed, are
    never touched); returns the deleted paths. ``enforce_retention`` refuses a retention below
    the table's ``delta.deletedFileRetentionDuration``.

    Raises:
        ConfigError: the retention is below the table's (with ``enforce_retention``).
        CommitError: any other failure.
    """
    try:
        with translating("vacuum failed"):
            return list(
                table.vacuum(
                    retention_hours=retention_hours,
                    dry_run=False,
                    enforce_retention_duration=enforce_retention,
                    full=False,
                )
            )
    except CommitError as exc:
        if "Invalid retention period" not in str(exc):
            raise
        raise ConfigError(
            "--vacuum-retention-hours",
            retention_hours,
            "at least the table's delta.deletedFileRetentionDuration (default 168 hours), or --allow-short-retention",
            reason=str(exc.__cause__),
        ) from exc
