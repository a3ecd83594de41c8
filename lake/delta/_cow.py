"""A copy-on-write upsert commit (``--upsert-mode copy-on-write``): for readers without deletion vectors.

The same plan as a merge-on-read upsert (the rows the new files and the tombstones supersede, by
file and row: :meth:`parka.lake._keys.KeyIndex.plan`), carried out by rewriting instead of by
deletion vector. Each file of the table with rows to delete is written again without them (and
without any its vector deleted), under a name of the same kind and generation; each new file
with rows a later row of the batch supersedes is written again too. One commit at exactly the
read version + 1 then removes the old files and adds the rewritten and the new ones, with the
``txn`` versions, and no deletion vector anywhere: any Delta reader reads the latest row per
key. It returns where each rewritten file's rows went (:class:`parka.lake._keys.Rewritten`), so
the key index follows them as it follows a compaction's.

A crash before the commit leaves the rewritten files unnamed by the log: orphans, cleaned as a
crashed commit's are (a segment file's name keeps its Kafka coordinates, which the orphan rule
reads). The cost is a rewrite of every file a batch touches: with keys spread uniformly over
the table, most of it per commit (what delta-rs' MERGE pays, measured on the upserts page).
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from parka.crash import crash_point
from parka.errors import CommitError

from .. import _storage
from .._compaction import DEFAULT_ROW_GROUP_ROWS, CompactedName
from .._keys import Rewritten
from .._log import FILE_TAGS_KEY, DataFile, UpsertCommit
from .._plan import FileName, base_name
from .._stats import StatsConfig
from ._dv_commit import new_adds, remove_action, write_commit
from ._logscan import live_adds
from ._rewrite import Encrypted, rewrite_files

__all__ = ["commit_rewrites"]


@dataclass(frozen=True)
class _Input:
    """A file to rewrite (:class:`._rewrite.RewriteInput`): a live one's, with its vector, or a
    new one's of this commit."""

    path: str
    size: int
    partition_values: Mapping[str, str | None]
    deletion_vector: Mapping[str, Any] | None


def _renamed(path: str) -> str:
    """A fresh base name of the same kind as ``path``'s: a segment file's Kafka coordinates, a
    compacted file's generation and first input, or another writer's plain part name."""
    name = base_name(path)
    segment = FileName.parse(name)
    if segment is not None:
        return str(FileName.new(segment.topic, segment.partition, segment.offset, segment.split, last=segment.last))
    compacted = CompactedName.parse(name)
    if compacted is not None:
        return str(CompactedName.new(compacted.generation, name))
    return f"part-00000-{uuid.uuid4()}-c000.zstd.parquet"


def commit_rewrites(
    uri: str,
    read_version: int,
    deletions: Mapping[str, Sequence[int]],
    *,
    files: Sequence[DataFile],
    new_file_deletions: Mapping[str, Sequence[int]],
    txns: Mapping[str, int],
    table_schema: pa.Schema,
    partition_columns: Sequence[str],
    stats_config: StatsConfig,
    commit_info: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> UpsertCommit:
    """Commit ``files`` with ``txns``, deleting the rows ``deletions`` (live files of
    ``read_version``) and ``new_file_deletions`` (of ``files``) name by rewriting their files (see
    the module docstring), as version ``read_version`` + 1.

    Raises:
        CommitConflict: another commit took the version (the rewritten files are deleted).
        CommitError: a path in ``deletions`` is not a live file, a file cannot be read or
            written (an encrypted one cannot be rewritten here), or the write of the log failed.
    """
    options = dict(storage_options or {})
    now_ms = int(time.time() * 1000)
    rewrite = functools.partial(
        rewrite_files,
        uri,
        table_schema=table_schema,
        partitions=partition_columns,
        stats_config=stats_config,
        z_order=(),
        target_size=0,
        row_group_rows=DEFAULT_ROW_GROUP_ROWS,
        storage_options=options,
        use_threads=False,
    )
    written: list[DataFile] = []

    def again(f: _Input, rows: Sequence[int]) -> tuple[DataFile | None, Rewritten]:
        layout: list[tuple[str, np.ndarray | None, int]] = []
        try:
            [out] = rewrite([f], name=_renamed(f.path), layout=layout, drop={f.path: np.asarray(rows, np.int64)})
        except Encrypted:
            raise CommitError(f"copy-on-write cannot rewrite {f.path}: its columns are encrypted") from None
        written.append(out)
        kept = _num_rows(out)
        return (out if kept else None), Rewritten(out.path, tuple(layout))

    try:
        live = live_adds(uri, options, version=read_version) if any(deletions.values()) else {}
        removes: list[dict[str, Any]] = []
        rewritten_old: list[tuple[DataFile, Mapping[str, Any]]] = []
        moved: list[Rewritten] = []
        for path, rows in deletions.items():
            if not len(rows):
                continue
            old = live.get(path)
            if old is None:
                raise CommitError(f"cannot rewrite {path}: not a live file of version {read_version}")
            removes.append({"remove": remove_action(old, now_ms, data_change=True)})
            values = old.get("partitionValues") or {}
            found = _Input(path, int(old["size"]), values, old.get("deletionVector"))
            out, where = again(found, rows)
            if out is not None:
                rewritten_old.append((out, old))
                moved.append(where)
        landing: list[DataFile] = []
        replaced: list[str] = []
        for new in files:
            rows = new_file_deletions.get(new.path, ())
            if not len(rows):
                landing.append(new)
                continue
            out, where = again(_Input(new.path, new.size, new.partition_values, None), rows)
            replaced.append(new.path)
            if out is not None:
                landing.append(DataFile(out.path, out.size, out.stats, out.partition_values, new.tags))
                moved.append(where)
        adds, _ = new_adds([*landing, *(out for out, _ in rewritten_old)], {}, now_ms, data_change=True)
        tags = {f.path: dict(f.tags) for f in landing if f.tags}
        for (_, first), action in zip(rewritten_old, adds[len(landing) :], strict=True):
            if first.get("tags"):  # the file's Kafka coordinates, as its first add had them
                action["tags"] = first["tags"]
        info = dict(commit_info or {})
        if tags:
            info[FILE_TAGS_KEY] = tags
        txn_lines = [{"txn": {"appId": app, "version": v, "lastUpdated": now_ms}} for app, v in txns.items()]
        actions = [*txn_lines, *removes, *({"add": a} for a in adds)]
        crash_point("after-rewrites")
        version = write_commit(uri, read_version, actions, "MERGE", info, storage_options=options)
    except BaseException:
        _storage.delete_files(uri, [f.path for f in written], options)
        raise
    empty = [f.path for f in written if not _num_rows(f)]
    if empty:
        _storage.delete_files(uri, empty, options)
    return UpsertCommit(version, moved, replaced)


def _num_rows(f: DataFile) -> int:
    """A written file's rows, from its statistics."""
    return int(json.loads(f.stats or "{}").get("numRecords", 1))
