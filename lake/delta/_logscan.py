"""Which data files a Delta table's log still names, read from the ``_delta_log`` files
themselves: the orphan cleanup's question "did any commit ever add this file?".

delta-rs' Python API lists a snapshot's files but not its tombstones (the ``remove`` actions of
compacted, overwritten or deleted files), and a file an OPTIMIZE removed must stay for readers
of older versions until VACUUM's retention is over. So this module reads, through the table's
storage (:mod:`parka.lake._storage`), the latest complete checkpoint and every commit after it, and
collects the path of each ``add`` and ``remove`` action. It lists the log from the checkpoint
``_last_checkpoint`` names (a LIST from that key on an object store), so its cost does not grow
with the versions the log still keeps before it. That is enough: a checkpoint keeps the
tombstones younger than the table's ``delta.deletedFileRetentionDuration`` (delta-rs and
delta-spark both drop only expired ones), and log cleanup deletes only commits a checkpoint
already covers. A tombstone no longer in the log is older than that retention: VACUUM no longer
protects its file either.

Read: classic, multi-part and UUID-named (v2) checkpoints, in Parquet or JSON, with their
sidecar files, and JSON commits. Anything else (a gap in the commits, an unreadable file)
raises, so that a caller deletes nothing on a log it did not understand.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parka.errors import CommitError

from .._storage import list_log, read_file

__all__ = ["live_adds", "logged_files", "rewritten_between"]

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10})|\.[0-9a-fA-F-]{36})?\.(parquet|json)$")
_ACTIONS = ("add", "remove")


def logged_files(table_uri: str, storage_options: Mapping[str, str] | None = None) -> set[str]:
    """Every data file an ``add`` or ``remove`` action still in the log names (the latest
    complete checkpoint, its sidecars, and each commit after it), relative to the table root
    and decoded (as on disk).

    Raises:
        CommitError: the log cannot be listed or read, has no checkpoint and no first commit,
            or has a gap between the checkpoint and the latest commit.
    """
    found: set[str] = set()
    _walk(table_uri, storage_options, None, partial(_parquet_paths, found=found), partial(_json_paths, found=found))
    return found


def live_adds(
    table_uri: str, storage_options: Mapping[str, str] | None = None, *, version: int | None = None
) -> dict[str, dict[str, Any]]:
    """The ``add`` action of each live data file of ``version`` (default: the latest), as the log's JSON
    (``partitionValues`` and ``tags`` as objects, ``deletionVector`` when the file has one),
    keyed by its path (relative to the table root, decoded): what a commit that changes a
    file's deletion vector must repeat in its ``remove`` and ``add``. delta-rs' Python API gives
    neither a file's deletion vector descriptor nor its tags.

    Raises:
        CommitError: as :func:`logged_files`; also when the log has not reached ``version``.
    """
    live: dict[str, dict[str, Any]] = {}
    _walk(table_uri, storage_options, version, partial(_parquet_adds, live=live), partial(_json_changes, live=live))
    return live


_Read = Callable[[bytes, str], list[str]]  # (a log file's bytes, its name) -> the sidecars it lists


def rewritten_between(table_uri: str, after: int, upto: int, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether a commit after version ``after`` up to ``upto`` moved rows to other files (a
    ``remove`` with ``dataChange: false``: a compaction, an OPTIMIZE); ``True`` when a commit
    file cannot be read (a log cleaned up meanwhile: the caller assumes the worst)."""
    for version in range(after + 1, upto + 1):
        try:
            data = read_file(table_uri, f"_delta_log/{version:020d}.json", storage_options, raise_missing=True)
            for line in data.decode().splitlines():
                if line.strip() and '"remove"' in line:
                    remove = json.loads(line).get("remove")
                    if remove is not None and remove.get("dataChange") is False:
                        return True
        except (FileNotFoundError, CommitError, ValueError, AttributeError):
            return True
    return False


def _walk(
    table_uri: str, storage_options: Mapping[str, str] | None, version: int | None, parquet: _Read, json_file: _Read
) -> None:
    """Read the log in order (:func:`_log_files`): the checkpoint's files, then their sidecars,
    with ``parquet`` or ``json_file`` by format, then each commit after it with ``json_file``."""
    checkpoint_files, commits = _log_files(table_uri, storage_options, version)
    for name in checkpoint_files:
        data = read_file(table_uri, f"_delta_log/{name}", storage_options)
        sidecars = parquet(data, name) if name.endswith(".parquet") else json_file(data, name)
        for sidecar in sidecars:
            parquet(read_file(table_uri, f"_delta_log/_sidecars/{sidecar}", storage_options), sidecar)
    for name in commits:
        json_file(read_file(table_uri, f"_delta_log/{name}", storage_options), name)


def _log_files(
    table_uri: str, storage_options: Mapping[str, str] | None, version: int | None = None
) -> tuple[list[str], list[str]]:
    """The latest complete checkpoint's files and the names of the commits after it, in order;
    with ``version``, the latest checkpoint at or before it and the commits up to it.

    Raises:
        CommitError: no checkpoint and no first commit, a gap in the commits, or no commit ``version``.
    """
    names = _log_names(table_uri, storage_options)
    if version is not None and _latest_checkpoint(names, version)[0] < 0 and f"{0:020d}.json" not in names:
        names = list_log(table_uri, storage_options)  # the listing began after ``version``
    commits = {int(m.group(1)): name for name in names if (m := _COMMIT.match(name))}
    if version is not None:
        if version not in commits and _latest_checkpoint(names, version)[0] != version:
            raise CommitError(f"the Delta log of {table_uri} has no version {version}")
        commits = {v: name for v, name in commits.items() if v <= version}
    checkpoint_version, checkpoint_files = _latest_checkpoint(names, version)
    later = sorted(v for v in commits if v > checkpoint_version)
    expected = list(range(checkpoint_version + 1, checkpoint_version + 1 + len(later)))
    if later != expected:
        first = "a checkpoint" if checkpoint_version >= 0 else "commit 0"
        raise CommitError(f"the Delta log of {table_uri} has no {first} or a gap in its commits: cannot tell its files")
    return checkpoint_files, [commits[v] for v in later]


def _log_names(table_uri: str, storage_options: Mapping[str, str] | None) -> list[str]:
    """The log's file names from the checkpoint ``_last_checkpoint`` names on, when that
    checkpoint is there and complete (a bounded listing); else every name in the log."""
    try:
        last = json.loads(read_file(table_uri, "_delta_log/_last_checkpoint", storage_options, raise_missing=True))
        version = int(last["version"])
    except (FileNotFoundError, CommitError, ValueError, KeyError, TypeError):
        return list_log(table_uri, storage_options)
    names = list_log(table_uri, storage_options, from_version=version)
    if _latest_checkpoint(names)[0] < version:  # not there (yet), or parts missing: look at all
        return list_log(table_uri, storage_options)
    return names


def _latest_checkpoint(names: Iterable[str], version: int | None = None) -> tuple[int, list[str]]:
    """The version and file names of the newest complete checkpoint (at or before ``version``
    when given); ``(-1, [])`` when none."""
    parts: dict[tuple[int, int], set[int]] = {}  # (version, number of parts) -> parts present
    single: dict[int, str] = {}
    multi: dict[tuple[int, int], list[str]] = {}
    for name in names:
        m = _CHECKPOINT.match(name)
        if m is None:
            continue
        at = int(m.group(1))
        if version is not None and at > version:
            continue
        if m.group(2) is None:
            single[at] = name
        else:
            key = (at, int(m.group(3)))
            parts.setdefault(key, set()).add(int(m.group(2)))
            multi.setdefault(key, []).append(name)
    complete = {at: [name] for at, name in single.items()}
    for (at, count), present in parts.items():
        if present == set(range(1, count + 1)):
            complete.setdefault(at, sorted(multi[(at, count)]))
    if not complete:
        return -1, []
    newest = max(complete)
    return newest, complete[newest]


def _add_path(path: object, found: set[str]) -> None:
    if isinstance(path, str) and path:
        found.add(unquote(path))


def _json_paths(data: bytes, name: str, found: set[str]) -> list[str]:
    """Add the paths of a JSON file's ``add``/``remove`` actions to ``found``; returns the sidecar
    file names it lists (a JSON v2 checkpoint)."""
    sidecars: list[str] = []
    try:
        for line in data.decode().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            for kind in _ACTIONS:
                if kind in action:
                    _add_path(action[kind].get("path"), found)
            if "sidecar" in action:
                sidecars.append(unquote(action["sidecar"]["path"]))
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise CommitError(f"cannot read the Delta log file {name}: {exc}") from exc
    return sidecars


def _parquet_paths(data: bytes, name: str, found: set[str]) -> list[str]:
    """Add the paths of a Parquet checkpoint's (or sidecar's) ``add``/``remove`` actions to
    ``found``; returns the sidecar file names it lists. Reads only those columns."""

    def take(source: pq.ParquetFile, present: set[str]) -> None:
        for kind in _ACTIONS:
            if kind in present:
                for path in _column(source, kind):
                    _add_path(path, found)

    return _read_parquet(data, name, take)


def _read_parquet(data: bytes, name: str, take: Callable[[pq.ParquetFile, set[str]], None]) -> list[str]:
    """Open a Parquet checkpoint (or sidecar), ``take`` what it wants of it (given its top-level
    columns), and return the sidecar file names it lists.

    Raises:
        CommitError: the file is not a readable checkpoint.
    """
    try:
        source = pq.ParquetFile(pa.BufferReader(data))
        present = set(source.schema_arrow.names)
        take(source, present)
        if "sidecar" not in present:
            return []
        column = _column(source, "sidecar")
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CommitError(f"cannot read the Delta checkpoint {name}: {exc}") from exc
    return [unquote(p) for p in column if isinstance(p, str) and p]


def _column(source: pq.ParquetFile, action: str) -> list[object]:
    """The ``path`` of each row's ``action`` struct (``None`` where the row is another action)."""
    structs = source.read(columns=[f"{action}.path"]).column(0).combine_chunks()
    paths: list[object] = pc.struct_field(structs, "path").to_pylist()
    return paths


def _json_changes(data: bytes, name: str, live: dict[str, dict[str, Any]]) -> list[str]:
    """Apply a JSON file's ``remove`` actions, then its ``add`` actions, to ``live`` (a commit
    that changes a file's deletion vector removes and adds the same path); returns the sidecar
    file names it lists (a JSON v2 checkpoint)."""
    sidecars: list[str] = []
    adds: list[dict[str, Any]] = []
    try:
        for line in data.decode().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "remove" in action:
                live.pop(unquote(action["remove"]["path"]), None)
            elif "add" in action:
                adds.append(action["add"])
            elif "sidecar" in action:
                sidecars.append(unquote(action["sidecar"]["path"]))
        for add in adds:
            live[unquote(add["path"])] = add
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise CommitError(f"cannot read the Delta log file {name}: {exc}") from exc
    return sidecars


def _parquet_adds(data: bytes, name: str, live: dict[str, dict[str, Any]]) -> list[str]:
    """Add a Parquet checkpoint's (or sidecar's) ``add`` actions to ``live``, as the log's JSON
    (its maps as objects, its nulls and parsed statistics left out); returns the sidecar file
    names it lists."""

    def take(source: pq.ParquetFile, present: set[str]) -> None:
        if "add" in present:
            for add in source.read(columns=["add"]).column(0).to_pylist():
                if add is not None and add.get("path"):
                    action = _as_json(add)
                    live[unquote(action["path"])] = action

    return _read_parquet(data, name, take)


_MAPS = ("partitionValues", "tags")


def _as_json(add: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``add`` struct as the log's JSON action."""
    out: dict[str, Any] = {}
    for key, value in add.items():
        if value is None or key.endswith("_parsed"):
            continue
        if key in _MAPS and isinstance(value, list):
            value = dict(value)
        elif isinstance(value, dict):
            value = {k: v for k, v in value.items() if v is not None}
        out[key] = value
    out.setdefault("partitionValues", {})
    return out
