"""The one module that talks to deltalake (delta-rs).

:class:`RsTableLog` is delta-rs' implementation of the Delta-log interface the raw commit
protocol uses (:class:`parka.lake.TableLog`; delta-spark's is in
``spark_ext/_delta_spark.py``), with :class:`RsEngine` opening and creating tables. The rules
both Delta engines share (which tables raw files may join, the schema JSON a new table gets, how a
schema evolves) are pure, in :mod:`._rules`; this module applies them to delta-rs.

Whatever deltalake or the filesystem raises leaves as a parka error::

    ParkaError
    ├── SchemaMismatchError  a type Delta cannot store, or files the table cannot take
    └── CommitError          any other Delta failure
        └── CommitConflict     another commit landed after the handle's version: refresh, re-read
                               txn versions, decide again

parka writes its appends itself (:func:`commit_add_files`, through ``_dv_commit.py``), and an
:class:`RsTableLog` does not load its handle again after its own (``RsTableLog``'s docstring):
delta-rs' commit and load each cost time in proportion to the table's live files. Schema changes,
maintenance and checkpoints go through delta-rs.

What delta-rs 1.6 does, as ``tests/unit/test_delta.py`` checks: ``create_write_transaction`` with
``max_commit_retries=0`` commits at exactly the handle's version + 1 or fails ("Failed to commit
transaction: 0"); it neither updates the handle nor checks, in append mode, its ``schema``. With
retries it rebases onto newer versions unless one carries a ``txn`` of the same app id. A commit
of ``txn`` actions alone is accepted. ``AddAction`` has no ``tags``. Paths go in decoded, and the
log (and ``get_add_actions``) holds them URL-encoded. Readers take partition values from the add
action, not from a copy of the column inside the file.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Field as DeltaField
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.exceptions import SchemaMismatchError as DeltaSchemaMismatchError
from deltalake.transaction import PostCommitHookProperties

from parka.crash import crash_during
from parka.errors import CommitConflict, CommitError, ParkaError, SchemaMismatchError
from parka.evolution import merge_schemas
from parka.schema import RESERVED_PREFIX

from .. import _storage
from .._keys import KeyIndex
from .._log import DataFile, UpsertCommit
from .._stats import StatsConfig
from . import _dv_commit as dv_commit
from . import _rules as rules
from ._cow import commit_rewrites
from ._logscan import logged_files

__all__ = [
    "MAX_APPENDS_AHEAD",
    "NO_POST_COMMIT",
    "RsEngine",
    "RsTableLog",
    "add_columns",
    "arrow_schema",
    "check_schema",
    "checkpoint",
    "commit_add_files",
    "commit_row_deletions",
    "configuration",
    "create_table",
    "open_table",
    "partition_columns",
    "read_version",
    "referenced_files",
    "refresh",
    "schema_json_of",
    "txn_version",
]

log = logging.getLogger("parka.commit")

_CONFLICT = re.compile(r"Failed to commit transaction: \d+\s*$|existing table version|[Cc]oncurrent|changed since last")


@contextmanager
def translating(what: str, *, read_version: int | None = None) -> Iterator[None]:
    try:
        yield
    except ParkaError:
        raise
    except CommitFailedError as exc:
        if _CONFLICT.search(str(exc)):
            raise CommitConflict(f"{what}: a concurrent commit won ({exc})", read_version=read_version) from exc
        raise CommitError(f"{what}: {exc}") from exc
    except DeltaSchemaMismatchError as exc:
        raise SchemaMismatchError(f"{what}: {exc}") from exc
    except Exception as exc:  # deltalake raises bare Exception for its "External error"s
        raise CommitError(f"{what}: {type(exc).__name__}: {exc}") from exc


# --- schemas ----------------------------------------------------------------------------------


def check_schema(schema: pa.Schema) -> None:
    """:func:`._rules.check_schema`, then delta-rs' own conversion (a rule of delta-rs
    that the pure rules do not know).

    Raises:
        SchemaMismatchError: a column Delta or delta-rs cannot store.
    """
    rules.check_schema(schema)
    try:
        DeltaSchema.from_arrow(schema)
    except Exception as exc:  # a rule of delta-rs that _type_problem does not know
        raise SchemaMismatchError(f"delta-rs rejects the schema: {str(exc).splitlines()[0]}") from exc


def arrow_schema(table: DeltaTable) -> pa.Schema:
    """The table's schema in Arrow (timestamp -> timestamp[us, UTC], timestamp_ntz -> timestamp[us])."""
    with translating("cannot read the table schema"):
        return pa.schema(table.schema().to_arrow())


def _delta_type(f: DeltaField) -> Any:
    """A field's Delta type as JSON without nullability and metadata, for comparisons."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            drop = ("nullable", "containsNull", "valueContainsNull", "metadata")
            return {k: strip(v) for k, v in node.items() if k not in drop}
        return [strip(v) for v in node] if isinstance(node, list) else node

    return strip(json.loads(f.to_json())["type"])


def _check_files_schema(table: DeltaTable, schema: pa.Schema) -> None:
    """Each column of ``schema`` must be a table column of the same Delta type."""
    check_schema(pa.schema([f for f in schema if not f.name.startswith(RESERVED_PREFIX)]))
    columns = {f.name: f for f in table.schema().fields}
    for f in schema:
        existing = columns.get(f.name)
        if existing is None and f.name.startswith(RESERVED_PREFIX):
            continue  # readers ignore file columns outside the table schema
        if existing is None:
            raise SchemaMismatchError("column is not in the Delta table; add it first", field=f.name)
        if _delta_type(existing) != _delta_type(DeltaField.from_arrow(f)):
            raise SchemaMismatchError(f"the table has type {existing.type}, the file {f.type}", field=f.name)
        if f.nullable and not existing.nullable:
            raise SchemaMismatchError("the table column is NOT NULL, the file's is nullable", field=f.name)


# --- tables -----------------------------------------------------------------------------------


def open_table(uri: str, storage_options: dict[str, str] | None = None, *, raw_files: bool = True) -> DeltaTable | None:
    """The latest version of the Delta table at ``uri``; ``None`` when there is none.
    ``raw_files=False``: for maintenance (OPTIMIZE, VACUUM), which adds no raw files, so the
    table's features are not checked.

    Raises:
        CommitError: the location cannot be read, or (``raw_files``) the table uses a feature
            raw files would bypass (column mapping, CHECK constraints, generated columns).
    """
    try:
        table = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None
    except Exception as exc:
        raise CommitError(f"cannot open the Delta table at {uri}: {exc}") from exc
    _check_writable(table)
    return table


def read_version(uri: str, version: int, storage_options: Mapping[str, str] | None = None) -> DeltaTable | None:
    """The Delta table at ``uri`` as of ``version``, to read (``txn`` versions, add actions), or
    ``None`` when delta-rs cannot read it (a reader feature it lacks, storage it cannot reach):
    the caller then reads through its own engine. Never raises."""
    try:
        return DeltaTable(uri, version=version, storage_options=dict(storage_options or {}))
    except Exception:  # deltalake raises bare Exception for many reasons; None says "ask someone else"
        return None


def _check_writable(table: DeltaTable) -> None:
    with translating("cannot read the table metadata"):
        config = table.metadata().configuration
        fields = table.schema().fields
        features = set(table.protocol().reader_features or [])
    rules.check_writable(config, [f.metadata for f in fields])
    if "typeWidening" in features:
        raise CommitError(
            "delta-rs 1.6 can neither read nor write a table with type widening (the typeWidening table feature, "
            "delta.enableTypeWidening): use parka spark-ingest --mode raw"
        )


def configuration(table: DeltaTable) -> dict[str, str]:
    """The table's properties (its metadata's ``configuration``).

    Raises:
        CommitError: the metadata cannot be read.
    """
    with translating("cannot read the table metadata"):
        return {k: v for k, v in table.metadata().configuration.items() if v is not None}


def create_table(
    uri: str,
    schema: pa.Schema,
    *,
    partition_by: list[str],
    storage_options: dict[str, str] | None = None,
    name: str | None = None,
    configuration: Mapping[str, str | None] | None = None,
) -> DeltaTable:
    """Create an empty Delta table (version 0, no data) at ``uri``.

    Raises:
        SchemaMismatchError: a column Delta cannot store, or a bad partition column.
        CommitConflict: a table appeared at ``uri`` meanwhile: open it instead.
        CommitError: any other failure.
    """
    check_schema(schema)
    rules.check_partition_columns(schema, partition_by)
    try:
        return DeltaTable.create(
            uri,
            schema,
            mode="error",
            partition_by=partition_by,
            name=name,
            configuration=configuration,
            storage_options=storage_options,
        )
    except Exception as exc:
        if DeltaTable.is_deltatable(uri, storage_options):
            raise CommitConflict(f"a Delta table was created at {uri} concurrently") from exc
        raise CommitError(f"cannot create a Delta table at {uri}: {exc}") from exc


def partition_columns(table: DeltaTable) -> list[str]:
    """The table's partition columns."""
    with translating("cannot read the table metadata"):
        return list(table.metadata().partition_columns)


def refresh(table: DeltaTable) -> int:
    """Move the handle to the table's latest version and return it."""
    with translating("cannot refresh the table"):
        table.update_incremental()
    _check_writable(table)
    return table.version()


def txn_version(table: DeltaTable, app_id: str) -> int | None:
    """The last ``txn`` version of ``app_id`` in the handle's snapshot, ``None`` when there is none."""
    with translating(f"cannot read the txn version of '{app_id}'"):
        return table.transaction_version(app_id)


def referenced_files(table: DeltaTable) -> set[str]:
    """The snapshot's data files, relative to the table root and decoded (as on disk)."""
    with translating("cannot list the table's add actions"):
        paths = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
    return {unquote(p) for p in paths}


# A commit is the commit alone: delta-rs' own post-commit hooks would write a checkpoint every
# delta.checkpointInterval versions on the commit path, and clean the expired log up after every
# commit, a listing of the whole _delta_log (one LIST page per 1,000 of its files) on the commit
# path. parka checkpoints every --checkpoint-interval commits beside them (parka.lake._checkpoints),
# and cleans the log up there (:func:`checkpoint`).
NO_POST_COMMIT = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def checkpoint(table: DeltaTable) -> None:
    """Write a checkpoint of the handle's version, then delete the log's commits older than
    ``delta.logRetentionDuration`` that a checkpoint covers (delta-rs' ``cleanup_metadata``), as
    delta-rs' post-commit hook would have after every commit."""
    with crash_during("during-checkpoint"):
        with translating("cannot write a checkpoint"):
            table.create_checkpoint()
        with translating("the log cleanup after a checkpoint failed"):
            table.cleanup_metadata()


def add_columns(table: DeltaTable, fields: list[pa.Field]) -> int:
    """Evolve the table's schema to take ``fields`` (top-level columns as they must become:
    :func:`parka.evolution.merge_schemas`'s): new nullable columns, new fields at any depth
    (in structs, lists of structs, map values), top-level nullability relaxed. Returns the table
    version. What is there already is skipped, so a retry after a crash is harmless.

    delta-rs 1.6 commits new fields with ``alter.add_columns`` (which merges nested fields) and
    a relaxed column with ``alter.drop_column_not_null``; it cannot change a column's type (nor
    read or write a table with type widening), nor relax a field inside a struct.

    Raises:
        SchemaMismatchError: a type Delta cannot store, a change the table cannot take (names
            the path and both types), or one delta-rs cannot commit.
        CommitConflict, CommitError: the metadata commit failed.
    """
    check_schema(pa.schema(list(fields)))
    merged = rules.evolve_schema_json(schema_json_of(table), fields, widening=False)
    if merged is None:
        return table.version()
    with translating("cannot read the table schema"):
        current = pa.schema(table.schema().to_arrow())
    changes = merge_schemas(current, pa.schema(list(fields)), widening=False, absent_ok=current.names).changes
    nested_relaxed = next((c for c in changes if c.kind == "relaxed" and "." in c.path), None)
    if nested_relaxed is not None:
        raise SchemaMismatchError(
            "delta-rs cannot make a field inside a struct nullable; use parka spark-ingest --mode raw",
            field=nested_relaxed.path,
        )
    added = {c.path.split(".", 1)[0] for c in changes if c.kind == "added"}
    with translating("cannot add columns", read_version=table.version()):
        if added:
            table.alter.add_columns([DeltaField.from_arrow(f.with_nullable(True)) for f in fields if f.name in added])
        for c in changes:
            if c.kind == "relaxed":
                table.alter.drop_column_not_null(c.path)
    return table.version()


def schema_json_of(table: DeltaTable) -> str:
    """The table's Delta schema JSON (the ``metaData`` action's ``schemaString``)."""
    with translating("cannot read the table schema"):
        return str(table.schema().to_json())


def commit_add_files(
    table: DeltaTable,
    files: list[DataFile],
    *,
    txns: Mapping[str, int],
    schema: pa.Schema | None = None,
    partition_by: list[str] | None = None,
    commit_info: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """Commit ``files`` (already written under the table root) and ``txns`` as one table version.

    1. The add actions and the ``txn`` actions (app id -> last Kafka offset) are one commit: data
       and offsets become visible together or not at all. ``files`` may be empty, to move app ids
       past dead-lettered messages; with neither files nor txns nothing is committed.
    2. The commit goes to exactly the handle's version + 1, without retries. If anything else
       committed since (another worker, a zombie, an ALTER), :class:`CommitConflict` is raised:
       :func:`refresh`, re-read :func:`txn_version`, decide again.
    3. On success the handle is loaded at the committed version, not later, so that the next
       commit, too, conflicts with whatever this worker has not seen.
    4. After a :class:`~parka.errors.CommitError` the commit may still have landed (a timeout
       after the log write): only the log, read back through :func:`txn_version`, tells.

    ``schema`` (the files' schema) is checked against the table: each column must be a table
    column of the same Delta type (``__parka_*`` columns outside the table are fine: readers skip
    them). ``partition_by``, when given, must be the table's partition columns. ``commit_info``
    entries (JSON values) are added to ``commitInfo``. ``storage_options`` are the table's, for
    parka's write of the log entry (:func:`_append`).

    Returns the new table version.

    Raises:
        CommitConflict: a concurrent commit won.
        SchemaMismatchError: ``schema`` or ``partition_by`` does not match the table.
        ValueError: a path that is not relative, or partition values for other columns.
        CommitError: any other failure.
    """
    read_version = table.version()
    version = _append(table, read_version, files, txns, schema, partition_by, commit_info, storage_options)
    if version != read_version:
        with translating(f"committed version {version} but cannot load it"):
            table.load_as_version(version)
    return version


def _append(
    table: DeltaTable,
    read_version: int,
    files: Collection[DataFile],
    txns: Mapping[str, int],
    schema: pa.Schema | None,
    partition_by: Collection[str] | None,
    commit_info: Mapping[str, Any] | None,
    storage_options: Mapping[str, str] | None,
) -> int:
    """Steps 1 and 2 of :func:`commit_add_files` at ``read_version`` (the handle's version, or a
    later one of this process's own appends, which changed neither the table's metadata nor its
    protocol): the checks, then the commit, written by parka as every Delta commit of its own
    (:func:`._dv_commit.commit_row_deletions`, no rows deleted). delta-rs' commit
    (``create_write_transaction``) built the snapshot of the new version, at a cost in proportion
    to the table's live files, and the handle's load after it once more
    (``benchmarks/results/2026-12-01-delta-commit-cost/``)."""
    if not files and not txns:
        return read_version
    _check_writable(table)
    with translating("cannot read the table metadata"):
        partitions = list(table.metadata().partition_columns)
    if partition_by is not None and list(partition_by) != partitions:
        raise SchemaMismatchError(f"the table is partitioned by {partitions}, not {list(partition_by)}")
    if schema is not None:
        _check_files_schema(table, schema)
    return dv_commit.commit_row_deletions(
        table.table_uri,
        read_version,
        {},
        partition_columns=partitions,
        files=list(files),
        txns=txns,
        commit_info=commit_info,
        operation="WRITE",
        storage_options=storage_options,
    )


def commit_row_deletions(
    table: DeltaTable,
    deletions: Mapping[str, Iterable[int]],
    *,
    files: list[DataFile] | None = None,
    new_file_deletions: Mapping[str, Iterable[int]] | None = None,
    txns: Mapping[str, int] | None = None,
    commit_info: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """Delete rows by deletion vector, add ``files`` and move ``txns`` as one version at exactly
    the handle's version + 1 (``_dv_commit.py`` writes that commit: delta-rs' commit API carries
    no deletion vectors); the handle is loaded at it. Returns the new version.

    Raises:
        CommitConflict: another commit took the version.
        CommitError: the table has no deletion vectors (the message names
            ``delta.enableDeletionVectors``), is not writable, or the commit failed
            (:func:`._dv_commit.commit_row_deletions`).
        ValueError: as :func:`commit_add_files`.
    """
    read_version = table.version()
    _check_writable(table)
    with translating("cannot read the table protocol"):
        protocol = table.protocol()
        metadata = table.metadata()
    dv_commit.check_deletion_vectors(
        table.table_uri, metadata.configuration or {}, protocol.reader_features or (), protocol.writer_features or ()
    )
    version = dv_commit.commit_row_deletions(
        table.table_uri,
        read_version,
        deletions,
        partition_columns=list(metadata.partition_columns),
        files=files or (),
        new_file_deletions=new_file_deletions,
        txns=txns,
        commit_info=commit_info,
        storage_options=storage_options,
    )
    if version != read_version:
        with translating(f"committed version {version} but cannot load it"):
            table.load_as_version(version)
    return version


MAX_APPENDS_AHEAD = 1000
"""How many of its own appends an :class:`RsTableLog` lets its handle fall behind before it loads
it again: the load reads each of those commits, and the log's cleanup removes commits a
checkpoint covers once ``delta.logRetentionDuration`` is over."""


class RsTableLog:
    """:class:`parka.lake.TableLog` over a delta-rs handle: the functions above, bound
    to one table. Commits go to exactly the read version + 1 (:func:`commit_add_files`).

    Its own appends do not load the handle again (a load costs time in proportion to the table's
    live files): the handle stays at the version it was loaded at, and this log keeps the
    version of its last append and the ``txn`` versions its appends set since. That is the
    table as of that version, since each append went to exactly the version after the one before
    and changed neither the table's metadata nor its protocol: :meth:`version` and
    :meth:`txn_version` answer from it, the metadata from the handle. Whatever reads the
    table's files, or commits through delta-rs, loads the handle at that version first
    (:meth:`_synced`); :meth:`refresh` moves it to the latest."""

    def __init__(self, uri: str, table: DeltaTable, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = uri
        self.table = table
        self.storage_options = dict(storage_options or {})
        self._appended: tuple[int, dict[str, int]] | None = None  # past the handle: version, txns

    def _synced(self) -> DeltaTable:
        """The handle, loaded at this log's version."""
        if self._appended is not None:
            self._load(self._appended[0])
            self._appended = None
        return self.table

    def _load(self, version: int | None) -> None:
        """Move the handle to ``version`` (``None``: the latest) from where it is, or from a
        handle opened afresh when the commits in between are gone (the log's cleanup deleted
        them after a checkpoint that covers them)."""
        what = "the latest version" if version is None else f"version {version}"
        try:
            if version is None:
                self.table.update_incremental()
            else:
                self.table.load_as_version(version)
            return
        except Exception as exc:  # whatever failed, a handle opened afresh tells
            log.debug("loading %s of %s from the handle failed (%s): opening it afresh", what, self.uri, exc)
        with translating(f"cannot load {what}"):
            self.table = DeltaTable(self.uri, version=version, storage_options=self.storage_options or None)

    def version(self) -> int:
        return self._appended[0] if self._appended is not None else int(self.table.version())

    def refresh(self) -> int:
        """Move to the latest version. After this log's own appends, only when a later version
        exists, so that a refresh between two appends of its own loads nothing: when the next
        commit's file is there, or when its own last commit's file is gone (the log's cleanup
        deletes commits in order, and only below a checkpoint). Two lookups, where delta-rs
        lists the log."""
        if self._appended is not None:
            version = self._appended[0]
            with translating("cannot refresh the table"):
                exists = partial(_storage.log_file_exists, self.uri, storage_options=self.storage_options)
                newer = exists(f"{version + 1:020d}.json") or not exists(f"{version:020d}.json")
            if not newer:
                return version
            self._appended = None
        self._load(None)
        _check_writable(self.table)
        return int(self.table.version())

    def txn_version(self, app_id: str) -> int | None:
        if self._appended is not None and app_id in self._appended[1]:
            return self._appended[1][app_id]
        return txn_version(self.table, app_id)

    def arrow_schema(self) -> pa.Schema:
        return arrow_schema(self.table)

    def partition_columns(self) -> list[str]:
        return partition_columns(self.table)

    def configuration(self) -> dict[str, str]:
        return configuration(self.table)

    def referenced_files(self) -> set[str]:
        return referenced_files(self._synced())

    def logged_files(self) -> set[str]:
        return logged_files(self.uri, self.storage_options)

    def add_columns(self, fields: Collection[pa.Field]) -> None:
        add_columns(self._synced(), list(fields))

    def commit_add_files(
        self, files: Collection[DataFile], *, txns: Mapping[str, int], commit_info: Mapping[str, Any] | None = None
    ) -> int:
        read_version = self.version()
        version = _append(self.table, read_version, files, txns, None, None, commit_info, self.storage_options)
        if version != read_version:
            earlier = self._appended[1] if self._appended is not None else {}
            self._appended = (version, {**earlier, **txns})
            if version - self.table.version() >= MAX_APPENDS_AHEAD:
                self._synced()
        return version

    def key_index(self, key_columns: Sequence[str], sequence_by: str | None = None) -> KeyIndex:
        return dv_commit.index_keys(
            self.uri,
            self.version(),
            key_columns=key_columns,
            sequence_by=sequence_by,
            storage_options=self.storage_options,
        )

    def catch_up_index(
        self, index: KeyIndex, from_version: int, key_columns: Sequence[str], sequence_by: str | None = None
    ) -> None:
        dv_commit.catch_up_keys(
            index,
            self.uri,
            from_version,
            self.version(),
            key_columns=key_columns,
            sequence_by=sequence_by,
            storage_options=self.storage_options,
        )

    def commit_upsert(
        self,
        files: Sequence[DataFile],
        deletes: Mapping[str, Sequence[int]],
        new_file_deletes: Mapping[str, Sequence[int]],
        *,
        txns: Mapping[str, int],
        commit_info: Mapping[str, Any] | None = None,
        copy_on_write: bool = False,
    ) -> UpsertCommit:
        table = self._synced()
        if not copy_on_write:
            version = commit_row_deletions(
                table,
                deletes,
                files=list(files),
                new_file_deletions=new_file_deletes,
                txns=txns,
                commit_info=commit_info,
                storage_options=self.storage_options,
            )
            return UpsertCommit(version)
        read_version = table.version()
        _check_writable(table)
        with translating("cannot read the table's metadata"):
            partitions = list(table.metadata().partition_columns)
        result = commit_rewrites(
            table.table_uri,
            read_version,
            deletes,
            files=files,
            new_file_deletions=new_file_deletes,
            txns=txns,
            table_schema=arrow_schema(table),
            partition_columns=partitions,
            stats_config=StatsConfig.from_properties(configuration(table)),
            commit_info=commit_info,
            storage_options=self.storage_options,
        )
        with translating(f"committed version {result.version} but cannot load it"):
            table.load_as_version(result.version)
        return result

    def checkpoint(self) -> None:
        checkpoint(self._synced())


class RsEngine:
    """:class:`parka.lake.LogEngine` of delta-rs. The tables it creates get
    ``created_properties`` (``parka ingest``: its retentions), and the one at each address of
    ``properties_at`` those properties too (an upsert table's deletion vectors, which its
    dead-letter table does not need)."""

    name = "delta-rs"
    checkpoint_beside_commits = True  # a Parquet file beside the log: the commits go on while it is written
    # Delta's pure rules, as delta-spark's engine checks new columns: one message whichever commits
    check_columns = staticmethod(rules.check_schema)

    def __init__(
        self,
        *,
        created_properties: Mapping[str, str] | None = None,
        properties_at: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.created_properties = dict(created_properties or {})
        self.properties_at = {uri: dict(props) for uri, props in (properties_at or {}).items()}

    def open(self, uri: str, storage_options: Mapping[str, str] | None = None) -> RsTableLog | None:
        table = open_table(uri, dict(storage_options or {}))
        return None if table is None else RsTableLog(uri, table, storage_options)

    def read_at(self, uri: str, version: int, storage_options: Mapping[str, str] | None = None) -> RsTableLog | None:
        """The table as of ``version``, to read from only (``txn`` versions, its files), or
        ``None`` when delta-rs cannot read it (a reader feature it lacks, storage it cannot
        reach): the caller then reads through its own engine. Another engine's fast path
        (delta-spark answers those reads with Spark jobs). Never raises."""
        table = read_version(uri, version, storage_options)
        return None if table is None else RsTableLog(uri, table, storage_options)

    def create(
        self,
        uri: str,
        schema: pa.Schema,
        *,
        partition_by: Collection[str],
        storage_options: Mapping[str, str] | None = None,
    ) -> RsTableLog:
        table = create_table(
            uri,
            schema,
            partition_by=list(partition_by),
            storage_options=dict(storage_options or {}),
            configuration={**self.created_properties, **self.properties_at.get(uri, {})} or None,
        )
        return RsTableLog(uri, table, storage_options)
