"""The key index read from a table (:class:`~._keys.KeyIndex`), whatever its format: from every
live file, or caught up from what changed between two versions. A format says which data files
are live at a version and which of their rows are deleted (:class:`LiveFile`: Delta's deletion
vectors, Iceberg's position-delete files); reading the key columns and keeping the index is here,
once for both."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from parka.errors import CommitError

from . import _storage
from ._keys import KeyIndex, key_columns_read, keys_of, sequences_of
from ._plan import FileName

__all__ = ["LiveFile", "catch_up_keys", "file_keys", "index_keys"]


def _none() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class LiveFile:
    """A data file live at some version, as the key index sees it: ``deletes`` stands for its
    deleted rows (equal between versions exactly when they are the same rows; ``None``: none
    deleted) and ``deleted`` reads them (row positions, ascending)."""

    deletes: Hashable = None
    deleted: Callable[[], np.ndarray] = _none


def index_keys(
    uri: str,
    live: Mapping[str, LiveFile],
    *,
    key_columns: Sequence[str],
    sequence_by: str | None = None,
    kafka_partitions: Collection[int] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> KeyIndex:
    """The key index of a table version whose ``live`` files (path under ``uri`` -> its
    deletes) are given: the keys (:func:`parka.lake._keys.keys_of`) of ``key_columns`` in each
    live file's live rows. With ``kafka_partitions``, the files ingestion wrote from other Kafka
    partitions (their name says which) are left out; every other file (a compaction's, another
    writer's) is read. With ``sequence_by``, a sequenced index (each live row's sequence too).

    Raises:
        CommitError: a file or its deletes cannot be read, or a file lacks a key column or has a
            null in one in a live row (the message names the file).
    """
    index = KeyIndex(sequenced=sequence_by is not None)
    for path, state in live.items():
        name = FileName.parse(path)
        if kafka_partitions is not None and name is not None and name.partition not in kafka_partitions:
            continue
        deleted = state.deleted() if state.deletes is not None else None
        index.add_file(path, *file_keys(uri, path, deleted, key_columns, sequence_by, storage_options))
    return index


def catch_up_keys(
    index: KeyIndex,
    uri: str,
    before: Mapping[str, LiveFile],
    after: Mapping[str, LiveFile],
    *,
    key_columns: Sequence[str],
    sequence_by: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Bring ``index``, of the version whose live files are ``before``, to the version of
    ``after`` from what changed in between, not from every file: a file gone leaves the index,
    the rows newly deleted in a file take their keys out (read from those rows), and a file
    added is indexed (its live rows). An upsert table holds one live row per key, so a key found
    in an added file is the key's row whatever it was before. Costs a read of the key columns
    of the files added or given more deleted rows, where :func:`index_keys` reads every live
    file. ``index`` is left unusable when this raises.

    Raises:
        CommitError: as :func:`index_keys`, or a file's deleted rows shrank in between (a
            restore: read the index again).
    """
    gone: list[bytes] = []
    for path, now_state in after.items():
        old = before.get(path)
        if old is None or old.deletes == now_state.deletes:
            continue
        then = old.deleted() if old.deletes is not None else None
        now = now_state.deleted()
        if then is not None and not np.isin(then, now).all():
            raise CommitError(f"{path}: its deleted rows shrank between the two versions")
        rows = now if then is None else np.setdiff1d(now, then, assume_unique=True)
        columns = _storage.read_columns(uri, path, list(key_columns), storage_options)
        if columns is None:
            raise CommitError(f"{path} lacks a column of {', '.join(key_columns)}: its rows have no key to upsert by")
        gone += keys_of(columns.take(pa.array(rows)))
    index.forget(gone)
    index.drop_files([path for path in before if path not in after])
    for path, state in after.items():
        if path not in before:
            deleted = state.deleted() if state.deletes is not None else None
            index.add_file(path, *file_keys(uri, path, deleted, key_columns, sequence_by, storage_options))


def file_keys(
    uri: str,
    path: str,
    deleted: np.ndarray | None,
    key_columns: Sequence[str],
    sequence_by: str | None,
    storage_options: Mapping[str, str] | None,
) -> tuple[list[bytes], np.ndarray | None, np.ndarray | None]:
    """A live file's keys by row, which rows are live (``None``: all; ``deleted`` are the rows
    its deletes name) and their sequences (``None`` without ``sequence_by``): what
    :meth:`KeyIndex.add_file` takes.

    Raises:
        CommitError: as :func:`index_keys`.
    """
    wanted = key_columns_read(key_columns, sequence_by)
    columns = _storage.read_columns(uri, path, wanted, storage_options)
    if columns is None:
        raise CommitError(f"{path} lacks a column of {', '.join(wanted)}: its rows have no key to upsert by")
    live = None
    if deleted is not None:
        live = np.ones(columns.num_rows, dtype=bool)
        live[deleted] = False
    nulls = np.zeros(columns.num_rows, dtype=bool)
    for column in columns.columns:
        nulls |= np.asarray(column.is_null())
    if nulls.any() and (live is None or nulls[live].any()):
        raise CommitError(f"{path} has live rows without a key ({', '.join(wanted)}): they cannot be upserted")
    keys = [b""] * columns.num_rows  # the deleted rows' (never indexed: not live)
    seqs = np.zeros(columns.num_rows, dtype=np.int64)
    present = columns.filter(pa.array(~nulls)) if nulls.any() else columns
    at = np.flatnonzero(~nulls)
    for row, key in zip(at.tolist(), keys_of(present.select(list(key_columns))), strict=True):
        keys[row] = key
    if sequence_by is not None:
        seqs[at] = sequences_of(present.column(sequence_by))
    return keys, live, seqs if sequence_by is not None else None
