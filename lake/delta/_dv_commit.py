"""The Delta commits parka writes itself: new files and ``txn`` versions, with rows deleted by
deletion vector or none.

delta-rs' commit API (``create_write_transaction``) takes ``add`` and ``remove`` actions without
deletion vectors, and its own DELETE and MERGE rewrite whole files; it also builds the snapshot
of the version it commits, at a cost in proportion to the table's live files. A commit that marks
rows of existing files deleted, adds new files (some of whose rows it may delete at once) and
moves ``txn`` versions, all in one version, is written here as the log's JSON and put at exactly
the read version + 1 only if no other commit took that version
(:func:`parka.lake._storage.create_log_file`), as every other commit of parka's; an append is that
commit with no rows deleted (``_rs.commit_add_files``). What the protocol asks of it:

* A file whose deletion vector changes is removed and added again in the same commit, the
  ``remove`` carrying the old vector (the log tells files apart by path and vector) and the
  ``add`` the new one: the old vector's rows plus the new ones.
* Statistics stay those of the file's physical rows, with ``tightBounds: false`` once rows are
  deleted (``numRecords`` stays the physical count).
* A file all of whose rows are deleted is only removed.
* The table must have the ``deletionVectors`` reader and writer feature and
  ``delta.enableDeletionVectors=true``.

The vectors' files, and the new data files, are durable before the commit names them. No
deltalake here: the delta-rs engine (``_rs.py``) reads the handle's version, partition columns
and protocol, calls :func:`commit_row_deletions` and loads the committed version.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import numpy as np

from parka.errors import CommitConflict, CommitError
from parka.segment import KEY_COLUMN

from .. import _key_reads as key_reads
from .. import _storage
from .._key_reads import LiveFile
from .._keys import KeyIndex
from .._log import FILE_TAGS_KEY, DataFile
from . import _dv
from . import _rules as rules
from ._logscan import live_adds

__all__ = [
    "ENABLE_PROPERTY",
    "attach_vectors",
    "check_deletion_vectors",
    "commit_row_deletions",
    "encode_path",
    "catch_up_keys",
    "index_keys",
    "new_adds",
    "remove_action",
    "write_commit",
]

ENABLE_PROPERTY = "delta.enableDeletionVectors"


def check_deletion_vectors(
    uri: str, configuration: Mapping[str, str], reader_features: Iterable[str], writer_features: Iterable[str]
) -> None:
    """Whether rows of the table at ``uri`` may be deleted by deletion vector: its properties and
    its protocol's features.

    Raises:
        CommitError: the protocol lacks the feature, or the table property is not true; the
            message names the property.
    """
    enabled = configuration.get(ENABLE_PROPERTY, "false").lower() == "true"
    if not enabled or "deletionVectors" not in set(reader_features) or "deletionVectors" not in set(writer_features):
        raise CommitError(
            f"the table at {uri} has no deletion vectors ({ENABLE_PROPERTY} is not true, or its "
            f"protocol lacks the deletionVectors feature): create it with {ENABLE_PROPERTY}=true"
        )


def index_keys(
    uri: str,
    version: int,
    *,
    key_columns: Sequence[str] = (KEY_COLUMN,),
    sequence_by: str | None = None,
    kafka_partitions: Collection[int] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> KeyIndex:
    """The key index of the table at ``version`` (:func:`parka.lake._key_reads.index_keys`), a
    file's deletion vector's rows left out.

    Raises:
        CommitError: the log, a vector or a file cannot be read, or a file lacks a key column or
            has a null in one in a live row (the message names the file).
    """
    return key_reads.index_keys(
        uri,
        _live_files(uri, version, storage_options),
        key_columns=key_columns,
        sequence_by=sequence_by,
        kafka_partitions=kafka_partitions,
        storage_options=storage_options,
    )


def catch_up_keys(
    index: KeyIndex,
    uri: str,
    from_version: int,
    to_version: int,
    *,
    key_columns: Sequence[str] = (KEY_COLUMN,),
    sequence_by: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Bring ``index``, of the table at ``from_version``, to ``to_version`` from what the commits
    in between changed (:func:`parka.lake._key_reads.catch_up_keys`): costs the two versions'
    log replays and a read of the key columns of the files added or given more deleted rows.

    Raises:
        CommitError: as :func:`index_keys`, or a file's vector lost rows in between (a restore:
            read the index again).
    """
    key_reads.catch_up_keys(
        index,
        uri,
        _live_files(uri, from_version, storage_options),
        _live_files(uri, to_version, storage_options),
        key_columns=key_columns,
        sequence_by=sequence_by,
        storage_options=storage_options,
    )


def _live_files(uri: str, version: int, storage_options: Mapping[str, str] | None) -> dict[str, LiveFile]:
    """The live files at ``version`` and their deletion vectors (told apart by descriptor)."""

    def state(path: str, add: Mapping[str, Any]) -> LiveFile:
        vector = add.get("deletionVector")
        if not vector:
            return LiveFile()
        token = json.dumps(vector, sort_keys=True)
        return LiveFile(token, lambda: _dv.load(uri, _descriptor(add, path), storage_options))

    return {path: state(path, add) for path, add in live_adds(uri, storage_options, version=version).items()}


def commit_row_deletions(
    uri: str,
    read_version: int,
    deletions: Mapping[str, Iterable[int]],
    *,
    partition_columns: Sequence[str],
    files: Sequence[DataFile] = (),
    new_file_deletions: Mapping[str, Iterable[int]] | None = None,
    txns: Mapping[str, int] | None = None,
    commit_info: Mapping[str, Any] | None = None,
    operation: str = "MERGE",
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """Commit, as one version at exactly ``read_version`` + 1 of the table at ``uri`` (partitioned
    by ``partition_columns``, its deletion vectors checked by :func:`check_deletion_vectors`):
    the rows ``deletions`` names (path relative to the table root -> row positions, added to
    those the file's vector deletes already) deleted, ``files`` (written under the table root)
    added with the rows of each that ``new_file_deletions`` names deleted at once, and one
    ``txn`` per entry of ``txns``. Returns the new version; nothing to commit: ``read_version``.

    Raises:
        CommitConflict: another commit took the version.
        CommitError: a path in ``deletions`` is not a live file of ``read_version``, a row
            position is past the file's rows, or the write failed (then only the log, read
            back, tells whether the commit landed).
        ValueError: a path that is not relative, partition values for other columns, a txn
            version that is not a non-negative int.
    """
    txns = dict(txns or {})
    new_file_deletions = dict(new_file_deletions or {})
    arrays = {path: np.fromiter(rows, dtype=np.int64) for path, rows in deletions.items()}
    to_delete = {path: rows for path, rows in arrays.items() if rows.size}
    if not to_delete and not files and not txns:
        return read_version
    rules.check_commit(files, txns, partition_columns)
    unknown = set(new_file_deletions) - {f.path for f in files}
    if unknown:
        raise ValueError(f"rows to delete of files not in this commit: {sorted(unknown)}")
    now_ms = int(time.time() * 1000)
    removes: list[dict[str, Any]] = []
    adds: list[dict[str, Any]] = []
    vectors: dict[str, np.ndarray] = {}  # the adds' paths (as in the log) -> rows deleted
    if to_delete:
        live = live_adds(uri, storage_options, version=read_version)
        for path, rows in to_delete.items():
            add = live.get(path)
            if add is None:
                raise CommitError(f"cannot delete rows of {path}: not a live file of version {read_version}")
            removes.append({"remove": remove_action(add, now_ms, data_change=True)})
            deleted = _deleted_after(uri, storage_options, path, add, rows)
            if deleted is not None:  # some row is left: the file is added again, with its vector
                again = {key: value for key, value in add.items() if value is not None}
                again["dataChange"] = True
                again["stats"] = _loose_stats(add.get("stats"))
                adds.append(again)
                vectors[again["path"]] = deleted
    new, new_vectors = new_adds(files, new_file_deletions, now_ms, data_change=True)
    adds += new
    attach_vectors(uri, adds, {**vectors, **new_vectors}, storage_options)
    actions = [*removes, *({"add": add} for add in adds)]
    info = dict(commit_info or {})
    if any(f.tags for f in files):
        info[FILE_TAGS_KEY] = {f.path: dict(f.tags) for f in files if f.tags}
    txn_lines = [{"txn": {"appId": app, "version": v, "lastUpdated": now_ms}} for app, v in txns.items()]
    return write_commit(uri, read_version, [*txn_lines, *actions], operation, info, storage_options=storage_options)


def new_adds(
    files: Sequence[DataFile], deletions: Mapping[str, Iterable[int]], now_ms: int, *, data_change: bool
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """The ``add`` actions of new data files, and the rows of each that ``deletions`` (path ->
    positions) deletes at once (by the add's path as in the log: :func:`attach_vectors` stores
    them); a file all of whose rows are deleted is not added (an orphan for the cleanup).

    Raises:
        CommitError: a position past a file's rows, or a file without ``numRecords``.
    """
    adds: list[dict[str, Any]] = []
    vectors: dict[str, np.ndarray] = {}
    for f in files:
        add: dict[str, Any] = {
            "path": encode_path(f.path),
            "partitionValues": dict(f.partition_values),
            "size": f.size,
            "modificationTime": now_ms,
            "dataChange": data_change,
            "stats": f.stats,
        }
        rows = np.unique(np.fromiter(deletions.get(f.path, ()), dtype=np.int64))
        if rows.size:
            physical = _num_records(f.stats)
            _check_rows(f.path, rows, physical)
            if rows.size >= physical:
                continue
            add["stats"] = _loose_stats(f.stats)
            vectors[encode_path(f.path)] = rows
        adds.append(add)
    return adds, vectors


def attach_vectors(
    uri: str,
    adds: Sequence[dict[str, Any]],
    vectors: Mapping[str, np.ndarray],
    storage_options: Mapping[str, str] | None,
) -> None:
    """Store ``vectors`` (an add's path as in the log -> its rows deleted; inline, or one file for
    all) and give each of those ``adds`` its descriptor."""
    stored = _dv.store_all(uri, vectors, storage_options)
    for add in adds:
        if add["path"] in vectors:
            add["deletionVector"] = stored[add["path"]].to_json()


def write_commit(
    uri: str,
    read_version: int,
    actions: Sequence[Mapping[str, Any]],
    operation: str,
    commit_info: Mapping[str, Any] | None = None,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """Write ``actions`` (the log's JSON objects: ``add``, ``remove``, ``txn``...) after a
    ``commitInfo`` as version ``read_version`` + 1, only if no other commit took it; returns it.
    The files the actions name are made durable first; a lost race deletes the vector files only
    this attempt's ``add`` actions name (no log entry will: the next attempt writes its own).

    Raises:
        CommitConflict: another commit took the version.
        CommitError: the write failed (only the log, read back, tells whether it landed).
    """
    now_ms = int(time.time() * 1000)
    info: dict[str, Any] = {
        "timestamp": now_ms,
        "operation": operation,
        "operationParameters": {},
        "readVersion": read_version,
        "isBlindAppend": False,
        "engineInfo": "parka",
        **dict(commit_info or {}),
    }
    lines = [{"commitInfo": info}, *actions]
    body = "\n".join(json.dumps(line, separators=(",", ":")) for line in lines).encode() + b"\n"
    version = read_version + 1
    _storage.make_durable(uri, storage_options)
    try:
        _storage.create_log_file(uri, f"{version:020d}.json", body, storage_options)
    except _storage.FileExists:
        _storage.delete_files(uri, _vector_files(actions), storage_options)
        raise CommitConflict(f"version {version} was committed by another writer", read_version=read_version) from None
    return version


def remove_action(add: Mapping[str, Any], now_ms: int, *, data_change: bool) -> dict[str, Any]:
    """The ``remove`` of a live file's ``add`` (as the log holds it): its path, size, partition
    values and, for the log to tell which file it removes, its deletion vector."""
    remove: dict[str, Any] = {
        "path": add["path"],
        "deletionTimestamp": now_ms,
        "dataChange": data_change,
        "extendedFileMetadata": True,
        "partitionValues": add.get("partitionValues", {}),
        "size": add["size"],
    }
    for key in ("tags", "deletionVector", "baseRowId", "defaultRowCommitVersion"):
        if add.get(key) is not None:
            remove[key] = add[key]
    return remove


def _vector_files(actions: Sequence[Mapping[str, Any]]) -> list[str]:
    """The vector files the ``add`` actions of ``actions`` name (storage type ``u``)."""
    out: set[str] = set()
    for action in actions:
        vector = action.get("add", {}).get("deletionVector")
        if vector and vector.get("storageType") == "u":
            path = _dv.Descriptor.from_json(vector).relative_path()
            if path is not None:
                out.add(path)
    return sorted(out)


def _deleted_after(
    uri: str, options: Mapping[str, str] | None, path: str, add: Mapping[str, Any], rows: np.ndarray
) -> np.ndarray | None:
    """The rows of the live file ``add`` deleted once ``rows`` are too (its vector's and
    ``rows``); ``None`` when that is every row (the file is only removed)."""
    physical = _num_records(add.get("stats"))
    _check_rows(path, rows, physical)
    deleted = np.unique(rows)
    if add.get("deletionVector"):
        deleted = sorted_union(_dv.load(uri, _descriptor(add, path), options), deleted)
    return None if deleted.size >= physical else deleted


def sorted_union(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The union of two sorted arrays of distinct rows, ``old`` large (a vector's rows) and
    ``new`` small (a commit's): the new rows inserted where they go, in time linear in ``old``
    (``np.union1d`` sorts both again: with vectors that grow commit after commit, that sort
    was a fifth of an upsert daemon's CPU)."""
    at = np.searchsorted(old, new)
    there = at < old.size
    there[there] = old[at[there]] == new[there]
    return np.insert(old, at[~there], new[~there])


def _descriptor(add: Mapping[str, Any], path: str) -> _dv.Descriptor:
    try:
        return _dv.Descriptor.from_json(add["deletionVector"])
    except ValueError as exc:
        raise CommitError(f"{path}: {exc}") from exc


def _num_records(stats: str | None) -> int:
    """The physical row count of a file's statistics JSON.

    Raises:
        CommitError: no statistics, or no ``numRecords`` in them (a vector cannot be bounded).
    """
    try:
        return int(json.loads(stats or "{}")["numRecords"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CommitError(f"a file without numRecords in its statistics ({exc}): its rows cannot be deleted") from exc


def _check_rows(path: str, rows: np.ndarray, physical: int) -> None:
    if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= physical):
        raise CommitError(f"cannot delete rows of {path}: positions {int(rows.min())}-{int(rows.max())} of {physical}")


def _loose_stats(stats: str | None) -> str:
    """``stats`` with ``tightBounds: false``: minimum and maximum may be of deleted rows."""
    parsed = json.loads(stats or "{}")
    parsed["tightBounds"] = False
    return json.dumps(parsed, separators=(",", ":"))


def encode_path(path: str) -> str:
    """A path as the log holds it: URL-encoded, ``/`` and ``=`` kept (as delta-rs writes them)."""
    return quote(path, safe="/=")
