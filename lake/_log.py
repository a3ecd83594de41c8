"""The table operations the raw commit protocol needs, as one small interface, whatever the
table format.

Three implementations, each the one module that talks to its table library:

* :class:`parka.lake.delta.RsTableLog` (delta-rs, in this process): ``parka ingest`` into a
  Delta table, and ``parka spark-ingest --commit-engine delta-rs``;
* :class:`parka.lake.iceberg.IcebergTableLog` (pyiceberg, in this process): an Apache Iceberg
  table named in a catalog (``--catalog``), for both daemons;
* ``parka.spark_ext``'s ``SparkTableLog`` (delta-spark's ``DeltaLog`` and
  ``OptimisticTransaction`` in Spark's JVM, through py4j): ``parka spark-ingest``'s default for
  a Delta table. delta-spark then applies what a table's features ask of a commit (row ids for
  row tracking, in-commit timestamps, domain metadata, checkpoints) and its own conflict checks.

The protocol itself (which files, which ``txn`` versions, in which order) is written once, in
the committer; it sees only this interface. A format's own rules (which column types and names
it stores, how its schema evolves) stay behind it: :meth:`LogEngine.check_columns`,
:meth:`TableLog.add_columns`. Errors (:mod:`parka.errors`)::

    CommitConflict       another commit touched what this one read (a txn version, the schema):
                         refresh, read the txn versions again, decide again
    SchemaMismatchError  files or columns the table cannot take
    CommitError          any other failure of the engine or the storage

No engine lets a commit through that could overwrite or duplicate another writer's ``txn``:
delta-rs commits only on exactly the version it read (no retries), Iceberg only while the
snapshot it read is still the table's current one, and delta-spark rebases a commit over newer
versions unless one of them carries a ``txn`` whose app id this handle read with
:meth:`TableLog.txn_version`, or changed the metadata or protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pyarrow as pa

if TYPE_CHECKING:
    from ._keys import KeyIndex, Rewritten

__all__ = ["FILE_TAGS_KEY", "DataFile", "LogEngine", "TableLog", "UpsertLog"]

FILE_TAGS_KEY = "parka.fileTags"
"""The commit-info key holding ``{path: tags}`` of a commit's files, for formats whose file
entries carry no tags (delta-rs' ``AddAction``: in ``commitInfo``; Iceberg: in the snapshot summary)."""


@dataclass(frozen=True)
class DataFile:
    """A data file written under the table root, for :meth:`TableLog.commit_add_files`.

    ``path`` is relative to the table root, ``/``-separated and not URL-encoded (as on disk);
    ``stats`` is the add action's JSON (:func:`parka.lake._stats.data_file_stats`); ``tags``
    (Kafka coordinates) are recorded with the commit (delta-spark: in the add actions' ``tags``;
    delta-rs, whose add actions carry none, and Iceberg: under :data:`FILE_TAGS_KEY`).
    """

    path: str
    size: int
    stats: str
    partition_values: Mapping[str, str | None] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


class TableLog(Protocol):
    """A handle on one table's log (Delta's log, Iceberg's metadata): a snapshot that
    :meth:`refresh` moves forward."""

    uri: str

    def version(self) -> int:
        """The snapshot's table version."""
        ...

    def refresh(self) -> int:
        """Move to the latest version (and start reading for the next commit); returns it.

        Raises:
            CommitError: the log cannot be read, or the table now uses a feature raw files
                would bypass (Delta: :func:`parka.lake.delta.check_writable`).
        """
        ...

    def txn_version(self, app_id: str) -> int | None:
        """The snapshot's ``txn`` version of ``app_id``; ``None`` when it has none. A later
        :meth:`commit_add_files` conflicts with any commit that moved it meanwhile."""
        ...

    def arrow_schema(self) -> pa.Schema:
        """The table schema in Arrow (timestamp -> timestamp[us, UTC], timestamp_ntz -> timestamp[us])."""
        ...

    def partition_columns(self) -> list[str]: ...

    def configuration(self) -> Mapping[str, str]:
        """The snapshot's table properties (the metadata's ``configuration``)."""
        ...

    def referenced_files(self) -> set[str]:
        """The snapshot's data files, relative to the table root and decoded (as on disk)."""
        ...

    def logged_files(self) -> set[str]:
        """Every data file a log entry still names, added or removed (tombstones a checkpoint
        keeps until ``delta.deletedFileRetentionDuration`` is over included), relative to the
        table root and decoded; read after the snapshot, so it holds all of its files. Both
        Delta engines read the log's files (:func:`parka.lake.delta.logged_files`); Iceberg
        reads the manifests of every snapshot in the metadata.

        Raises:
            CommitError: the log cannot be read or is not understood (then delete nothing).
        """
        ...

    def add_columns(self, fields: Sequence[pa.Field]) -> None:
        """Evolve the schema to take ``fields``: the table's top-level columns as they must
        become (:func:`parka.evolution.merge_schemas`): new columns, new fields at any depth,
        widened types (where the table allows type widening), relaxed nullability; what is
        there already is skipped. They are in the table once the next :meth:`commit_add_files`
        returns (delta-rs commits them at once, delta-spark with that commit).

        Raises:
            SchemaMismatchError: a type the format cannot store, or a change the table (or the
                engine) cannot take: the error names the path and both types.
            CommitConflict, CommitError: the metadata commit failed.
        """
        ...

    def commit_add_files(
        self, files: Sequence[DataFile], *, txns: Mapping[str, int], commit_info: Mapping[str, Any] | None = None
    ) -> int:
        """Commit ``files`` (already written under the table root, and durable) with one ``txn``
        action per entry of ``txns`` as one table version, and return it. Kafka coordinates
        (each file's ``tags``) and ``commit_info`` are recorded.
        Nothing to commit (no files, txns or added columns): returns the version as is.

        Raises:
            CommitConflict: a concurrent commit touched what this handle read.
            ValueError: a path that is not relative, or partition values for other columns.
            CommitError: any other failure; the commit may still have landed (only the log,
                read back through :meth:`txn_version`, tells).
        """
        ...

    def checkpoint(self) -> None:
        """Write a checkpoint of the latest version, unless it has one."""
        ...


@runtime_checkable
class UpsertLog(Protocol):
    """What a :class:`TableLog` of a format that takes upserts adds (delta-rs' today): the key
    index of its version, and a commit that deletes rows."""

    def key_index(self, key_columns: Sequence[str], sequence_by: str | None = None) -> KeyIndex:
        """Where each key's live row is in the handle's version (the whole table read), a row's
        key made of ``key_columns`` (:func:`parka.lake._keys.keys_of`); with ``sequence_by``,
        and the live row's sequence (a sequenced index).

        Raises:
            CommitError: the table cannot be read, or a live row has no key.
        """
        ...

    def catch_up_index(
        self, index: KeyIndex, from_version: int, key_columns: Sequence[str], sequence_by: str | None = None
    ) -> None:
        """Bring ``index``, of ``from_version``, to the handle's version from the commits in
        between (another writer's), without reading every file.

        Raises:
            CommitError: it cannot (``index`` is then unusable: read it again).
        """
        ...

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
        """As :meth:`TableLog.commit_add_files`, and the rows ``deletes`` names (path -> row
        positions) and those of the new files ``new_file_deletes`` names deleted, in the same
        version: by deletion vector, or with ``copy_on_write`` by rewriting their files (no
        deletion vector). Returns the version and, for rewrites, where the rows went.

        Raises:
            CommitConflict, CommitError: as :meth:`TableLog.commit_add_files`.
        """
        ...


@dataclass(frozen=True)
class UpsertCommit:
    """An upsert commit (:meth:`UpsertLog.commit_upsert`): its version; for a copy-on-write one,
    where the rewritten files' rows went (the key index follows them); and the new files it did
    not commit (replaced by rewrites, or every row deleted by the same commit): the caller deletes
    them."""

    version: int
    moved: list[Rewritten] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


class LogEngine(Protocol):
    """Opens and creates :class:`TableLog` handles; ``name`` is what ``--commit-engine`` says
    (``iceberg`` for Iceberg's)."""

    name: str
    checkpoint_beside_commits: bool
    """Whether a checkpoint is a file beside the log that commits need not wait for (delta-rs), not
    a commit of its own (Iceberg's snapshot expiry) nor a call into a JVM (delta-spark): then the
    committer writes it on a thread of its own (:class:`parka.lake._checkpoints.Checkpoints`)."""

    def check_columns(self, schema: pa.Schema) -> None:
        """Whether the table format can store these columns (their types and names, at any
        depth), by its own rules: the check of the columns a segment would add
        (:func:`parka.lake.check_segment`). Implemented as a plain function (a
        ``staticmethod``), so it travels to Spark's executors by reference.

        Raises:
            SchemaMismatchError: a column the format cannot store (``field`` names it).
        """
        ...

    def open(self, uri: str, storage_options: Mapping[str, str] | None = None) -> TableLog | None:
        """The latest version of the table at ``uri``; ``None`` when there is none.

        Raises:
            CommitError: the location cannot be read, or the table uses a feature raw files
                would bypass (the message names the table property).
        """
        ...

    def create(
        self,
        uri: str,
        schema: pa.Schema,
        *,
        partition_by: Sequence[str],
        storage_options: Mapping[str, str] | None = None,
    ) -> TableLog:
        """A new table at ``uri``. delta-rs creates it at once, empty (version 0); delta-spark
        creates it with the handle's first :meth:`TableLog.commit_add_files` (one version
        instead of two), and until then the handle reads as the new table at version -1
        (no ``txn`` versions, no files).

        Raises:
            SchemaMismatchError: a column the format cannot store, or a bad partition column.
            CommitConflict: a table appeared at ``uri`` meanwhile: open it instead.
            CommitError: any other failure.
        """
        ...
