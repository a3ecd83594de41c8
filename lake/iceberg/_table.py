"""The Apache Iceberg engine's table handle (pyiceberg): parka's :class:`~parka.lake.TableLog` for
an Iceberg table named in a catalog (opened and created by :class:`~._engine.IcebergEngine`), so
the same committer lands raw segments in Iceberg as in Delta.

How the Delta protocol's pieces map onto Iceberg:

* **The table** is ``namespace.name`` in a catalog (pyiceberg's ``load_catalog``: its own
  configuration, ``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__<KEY>``, plus options
  given on the command line). A catalog with only a ``warehouse`` and no ``uri`` or ``type`` is
  the embedded one: pyiceberg's SQL catalog on ``<warehouse>/catalog.db`` (SQLite), no server.
  The data files go under ``<table location>/data`` (:attr:`IcebergTableLog.uri`).
* **Raw files.** Segments become data files as they are: their Parquet columns carry no
  Iceberg field ids (the producer cannot know ids a table assigns, and the same segment may
  land in a Delta table too), so readers resolve columns through the table's name mapping
  (``schema.name-mapping.default``), which parka sets when it creates a table or first commits
  to one without it, and which pyiceberg keeps current when the schema evolves. Manifest
  statistics (sizes, value and null counts, bounds by field id) come from each file's footer.
* **The ``txn``**: every parka commit's snapshot summary carries ``parka.txns``, a JSON object
  from ``txn`` app id (``<app>-<partition>``) to the last offset, holding every app id the
  commit read in the table plus its own (as Iceberg's Kafka Connect sink keeps its offsets in
  the summary). The latest snapshot in the current snapshot's ancestry that has the key is the
  table's ``txn`` state; snapshots of other writers (a compaction) are passed over.
* **No lost race**: a commit asserts the snapshot it read is still the branch's head (the
  catalog's optimistic concurrency) and pyiceberg's own retries, which would rebase the append
  past another writer's ``txn``, are off for it; a rejected commit is a
  :class:`~parka.errors.CommitConflict` and the committer goes back to the protocol's step 3.
* **Versions**: the number of the table's metadata file (``00042-<uuid>.metadata.json``), which
  every commit (data or schema) increases (a catalog that names them otherwise: the metadata's
  ``last-updated-ms``).

* **Partitions**: parka's specs as Iceberg transforms (identity, year, month, day, hour,
  truncate, bucket: :mod:`._partitions`); segments are split by partition as for Delta, each data file's
  partition record from the values it was split by. Compaction and snapshot expiry:
  :mod:`._optimize`.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, ValidationError
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.snapshots import Snapshot, ancestors_of
from pyiceberg.table.update.snapshot import ExpireSnapshots
from pyiceberg.typedef import Record

from parka.crash import crash_point
from parka.errors import CommitConflict, CommitError, SchemaMismatchError, one_line
from parka.evolution import TYPE_WIDENING_KEY
from parka.partitioning import EXPRESSION_KEY, PartitionSpec
from parka.segment import KEY_COLUMN

from .. import _key_reads as key_reads
from .. import _storage
from .._keys import KeyIndex
from .._log import FILE_TAGS_KEY, DataFile, UpsertCommit
from .._plan import RESERVED_COLUMNS
from .._storage import FileGone, delete_files, read_parquet_footer
from ._deletes import NO_ROWS, DeleteMemo, DeleteState, RowDelta, write_delete_file
from ._partitions import derived_fields, parka_specs, partition_record
from ._schema import iceberg_arrow_schema, plain_field
from ._snapshots import (
    CachingTransaction,
    ManifestMemo,
    expiry_candidates,
    for_commits,
    merges_manifests,
    retention,
)

__all__ = ["NAME_MAPPING", "TXNS_KEY", "CatalogOwner", "IcebergTableLog"]


class CatalogOwner(Protocol):
    """What a table handle needs of its engine (:class:`~._engine.IcebergEngine`): the catalog,
    to load the table again."""

    @property
    def catalog(self) -> Catalog: ...


log = logging.getLogger("parka.commit")

TXNS_KEY = "parka.txns"
"""The snapshot-summary key of the ``txn`` state: JSON ``{"<app>-<partition>": offset, ...}``."""

NAME_MAPPING = TableProperties.DEFAULT_NAME_MAPPING
"""The table property of the name mapping readers resolve raw files' columns by (they carry no field ids)."""
_VERSIONS_KEPT = 64
"""Versions whose snapshot a handle remembers (an upsert index catches up from its last commit's)."""
_METADATA_NUMBER = re.compile(r"(?:^|/)(\d+)-[^/]*\.metadata\.json$")


def _holds_offsets(snapshot: Snapshot) -> bool:
    return snapshot.summary is not None and TXNS_KEY in snapshot.summary.additional_properties


class IcebergTableLog:
    """One Iceberg table's state, read from its catalog; see the module docstring."""

    def __init__(
        self, engine: CatalogOwner, identifier: str, table: Table, storage_options: Mapping[str, str] | None = None
    ) -> None:
        self.engine = engine
        self.storage_options = dict(storage_options or {})
        self.identifier = identifier
        self._table = table
        self._txns: dict[int, dict[str, int]] = {}  # snapshot id -> the txn state there
        self._specs: tuple[PartitionSpec, ...] = ()
        self._manifests = ManifestMemo(self._relative)
        self._deletes = DeleteMemo(table.io)
        self._state_cache: tuple[int, DeleteState] | None = None
        self._snapshots: dict[int, int | None] = {}  # version -> its current snapshot id (upserts' catch-up)
        self._check(table)
        self.uri = table.location().rstrip("/") + "/data"

    def _check(self, table: Table) -> None:
        """Read the partition spec as parka's (a transform parka has none for is refused)."""
        self._specs = parka_specs(table.spec(), table.schema(), self.identifier)
        snapshot = table.current_snapshot()
        self._snapshots[self.version_of(table)] = None if snapshot is None else snapshot.snapshot_id
        if len(self._snapshots) > _VERSIONS_KEPT:  # a daemon reads a version per commit, for months
            del self._snapshots[next(iter(self._snapshots))]

    @property
    def iceberg(self) -> Table:
        """The pyiceberg table as last read (for maintenance: :mod:`._optimize`)."""
        return self._table

    # -- reading ---------------------------------------------------------------------------

    def version(self) -> int:
        return self.version_of(self._table)

    @staticmethod
    def version_of(table: Table) -> int:
        match = _METADATA_NUMBER.search(table.metadata_location or "")
        # a catalog naming its metadata files otherwise: the time of the last change (it moves too)
        return int(match.group(1)) if match is not None else table.metadata.last_updated_ms

    def refresh(self) -> int:
        try:
            self._table = self.engine.catalog.load_table(self.identifier)
        except Exception as exc:
            raise CommitError(f"cannot read Iceberg table {self.identifier}: {exc}") from exc
        self._check(self._table)
        return self.version()

    def txns(self) -> dict[str, int]:
        """The table's ``txn`` state at its current snapshot."""
        metadata = self._table.metadata
        walked = []
        state: dict[str, int] = {}
        for snapshot in ancestors_of(self._table.current_snapshot(), metadata):
            cached = self._txns.get(snapshot.snapshot_id)
            if cached is not None:
                state = cached
                break
            walked.append(snapshot.snapshot_id)
            text = snapshot.summary.additional_properties.get(TXNS_KEY) if snapshot.summary else None
            if text is not None:
                state = {str(k): int(v) for k, v in json.loads(text).items()}
                break
        for snapshot_id in walked:
            self._txns[snapshot_id] = state
        return state

    def txn_version(self, app_id: str) -> int | None:
        return self.txns().get(app_id)

    def arrow_schema(self) -> pa.Schema:
        """The Iceberg schema, and a column per derived partition (with its expression), before
        the reserved columns: the table as the committer's rules see a partitioned one."""
        data = iceberg_arrow_schema(self._table.schema())
        derived = derived_fields(self._specs, data)
        if not derived:
            return data
        user = [f for f in data if f.name not in RESERVED_COLUMNS]
        return pa.schema([*user, *derived, *(f for f in data if f.name in RESERVED_COLUMNS)])

    def partition_columns(self) -> list[str]:
        return [spec.name for spec in self._specs]

    def configuration(self) -> Mapping[str, str]:
        # Iceberg's promotions (int -> long, float -> double, decimal precision) need no table
        # feature: the rule (parka.evolution) may widen; the schema update refuses the rest.
        return {**self._table.metadata.properties, TYPE_WIDENING_KEY: "true"}

    def relative(self, path: str) -> str:
        """A data file's path as this handle names it (:meth:`_relative`)."""
        return self._relative(path)

    def _relative(self, path: str) -> str:
        """A data file's path relative to :attr:`uri` (files elsewhere keep their full URI)."""
        prefix = self.uri + "/"
        return path[len(prefix) :] if path.startswith(prefix) else path

    def referenced_files(self) -> set[str]:
        snapshot = self._table.current_snapshot()
        return self._files_of([snapshot] if snapshot is not None else [])

    def logged_files(self) -> set[str]:
        """The data files any snapshot still in the metadata holds (a snapshot that needs a file
        lists it as added or existing; an entry marking it deleted adds nothing). When a
        snapshot's manifest list is gone (another writer's expiry deleted it after this handle
        read the metadata), the table is read again, once."""
        try:
            return self._files_of(self._table.metadata.snapshots, all_there_are=True)
        except CommitError:
            self.refresh()
            return self._files_of(self._table.metadata.snapshots, all_there_are=True)

    def _files_of(self, snapshots: Sequence[Snapshot], *, all_there_are: bool = False) -> set[str]:
        try:
            return self._manifests.files_of(snapshots, self._table.io, all_there_are=all_there_are)
        except Exception as exc:
            raise CommitError(f"cannot read the manifests of {self.identifier}: {exc}") from exc

    # -- writing ---------------------------------------------------------------------------

    def add_columns(self, fields: Sequence[pa.Field]) -> None:
        try:
            with self._table.update_schema() as update:
                columns = [f for f in fields if EXPRESSION_KEY.encode() not in (f.metadata or {})]
                update.union_by_name(pa.schema([plain_field(f) for f in columns]))
        except CommitFailedException as exc:
            raise CommitConflict(f"schema change on {self.identifier} lost a race: {exc}") from exc
        except (ValidationError, ValueError, TypeError) as exc:
            names = ", ".join(f.name for f in fields)
            raise SchemaMismatchError(f"Iceberg table {self.identifier} cannot take column(s) {names}: {exc}") from exc
        except Exception as exc:
            raise CommitError(f"schema change on {self.identifier} failed: {exc}") from exc
        self.refresh()

    def commit_add_files(
        self, files: Sequence[DataFile], *, txns: Mapping[str, int], commit_info: Mapping[str, Any] | None = None
    ) -> int:
        if not files and not txns:
            return self.version()
        info = dict(commit_info or {})
        tags = {f.path: dict(f.tags) for f in files if f.tags}
        if tags:
            info[FILE_TAGS_KEY] = tags
        return self._commit(files, (), self.commit_summary(txns, info))

    def commit_summary(self, txns: Mapping[str, int], info: Mapping[str, Any] | None = None) -> dict[str, str]:
        """The snapshot summary of a commit that lands ``txns`` (``txn`` app id -> last offset) on
        the table as last read: the whole ``txn`` state (the table's, ``txns`` over it) under
        :data:`TXNS_KEY`, and ``info`` (as JSON where it is not text). The one serialisation of
        the state, for pyiceberg's commits here and Iceberg's Spark writer (decode mode, as
        ``snapshot-property.<key>`` options)."""
        state = {**self.txns(), **{k: int(v) for k, v in txns.items()}}
        summary = {TXNS_KEY: json.dumps(state, sort_keys=True, separators=(",", ":"))}
        summary.update(
            {
                k: v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))
                for k, v in (info or {}).items()
            }
        )
        return summary

    def data_files(self) -> list[IcebergDataFile]:
        """The current snapshot's data files (their manifest entries, read through the memo that
        :meth:`delete_state` reads them with)."""
        return [entry.data_file for entry in self.delete_state().data.values()]

    def replace_files(
        self,
        removed: Sequence[IcebergDataFile],
        added: Sequence[DataFile],
        *,
        partitions: Sequence[Record],
        commit_info: Mapping[str, Any],
        late_deletes: Mapping[str, np.ndarray] | None = None,
    ) -> int:
        """One commit that swaps ``removed`` for ``added`` (a compaction: same rows; ``added[i]``
        in partition ``partitions[i]``), carrying the ``txn`` state forward, asserting the
        snapshot read is still current.

        Raises:
            CommitConflict: another commit came first (the caller re-plans or gives up).
            CommitError: any other failure (the commit may have landed).
        """
        summary = self.commit_summary({}, commit_info)
        state = self.delete_state()
        gone = {self._relative(f.file_path) for f in removed}
        late = {path: rows for path, rows in (late_deletes or {}).items() if len(rows)}
        if not late and not any(path in state.delete_files for path in gone):
            return self._commit(added, removed, summary, partitions)
        # the removed files' delete files go with them: those that name no other file
        deletes = {e.data_file.file_path: e.data_file for path in gone for e in state.delete_files.get(path, [])}
        dropped = [f for f in deletes.values() if {self._relative(p) for p in self._deletes.positions(f)} <= gone]
        new_files = [self._data_file(f, partitions[i]) for i, f in enumerate(added)]
        spec_id = self._table.metadata.default_spec_id
        for f, data_file in list(zip(added, new_files, strict=True)):
            if f.path in late:  # rows deleted in the inputs since the rewrite read them
                rows = np.unique(late[f.path])
                new_files.append(self._write_deletes(data_file.file_path, rows, spec_id, data_file.partition, f.path))
        if late:
            _storage.make_durable(self.uri, self.storage_options)
        return self._commit_row_delta(state, new_files, [*removed, *dropped], summary)

    def delete_state(self) -> DeleteState:
        """The current snapshot's data files and their deletes (:class:`._deletes.DeleteState`).

        Raises:
            CommitError: they cannot be read, or the table holds deletes parka cannot read.
        """
        return self._delete_state(self._table.current_snapshot())

    # -- upserts (:class:`parka.lake.UpsertLog`; the deletes: :mod:`._deletes`) -----------------

    def key_index(self, key_columns: Sequence[str] = (KEY_COLUMN,), sequence_by: str | None = None) -> KeyIndex:
        self._check_upserts()
        return key_reads.index_keys(
            self.uri,
            self._delete_state(self._table.current_snapshot()).live_files(),
            key_columns=key_columns,
            sequence_by=sequence_by,
            storage_options=self.storage_options,
        )

    def catch_up_index(
        self, index: KeyIndex, from_version: int, key_columns: Sequence[str], sequence_by: str | None = None
    ) -> None:
        if from_version not in self._snapshots:
            raise CommitError(f"this handle never read version {from_version} of {self.identifier}")
        snapshot_id = self._snapshots[from_version]
        before = None if snapshot_id is None else self._table.metadata.snapshot_by_id(snapshot_id)
        if snapshot_id is not None and before is None:
            raise CommitError(f"snapshot {snapshot_id} of {self.identifier} has expired")
        key_reads.catch_up_keys(
            index,
            self.uri,
            self._delete_state(before).live_files(),
            self._delete_state(self._table.current_snapshot()).live_files(),
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
        """One snapshot that adds ``files`` and deletes the rows ``deletes`` and
        ``new_file_deletes`` name by position-delete files (:mod:`._deletes`), with the ``txn``
        state, asserting the snapshot read is still current.

        Raises:
            CommitConflict: another commit came first.
            CommitError: copy-on-write asked for, a table parka cannot delete rows of (format
                v1), or any other failure (the commit may have landed).
        """
        if copy_on_write:
            raise CommitError(f"{self.identifier}: an Iceberg upsert table deletes rows by position-delete files only")
        self._check_upserts()
        state = self._delete_state(self._table.current_snapshot())
        new_files = {f.path: self._data_file(f) for f in files}
        wanted: dict[str, np.ndarray] = {}  # data file -> every row deleted after this commit
        for path, new_rows in [*deletes.items(), *new_file_deletes.items()]:
            if len(new_rows):
                before = wanted.get(path, state.positions.get(path, NO_ROWS))
                wanted[path] = np.union1d(before, np.asarray(new_rows, np.int64))
        # a delete file this commit replaces may hold other data files' rows (another writer's
        # delete file for many): those get delete files of their own
        replaced = {e.data_file.file_path: e.data_file for path in wanted for e in state.delete_files.get(path, [])}
        for f in replaced.values():
            for data_path in self._deletes.positions(f):
                path = self._relative(data_path)
                if path in state.data and path not in wanted:
                    wanted[path] = state.positions[path]
        removed = list(replaced.values())
        dead: list[str] = []  # new files whose every row this commit deletes: never added
        delete_files: list[IcebergDataFile] = []
        for path, rows in wanted.items():
            entry = state.data.get(path)
            target = entry.data_file if entry is not None else new_files.get(path)
            if target is None:
                raise CommitError(f"{path} is not a live data file of {self.identifier}: its rows cannot be deleted")
            if len(rows) >= target.record_count:  # every row deleted: the file goes, or never comes
                if entry is not None:
                    removed.append(target)
                else:
                    dead.append(path)
                continue
            spec_id = target.spec_id if entry is not None else self._table.metadata.default_spec_id
            anchor = files[0].path if files else None
            delete_files.append(self._write_deletes(target.file_path, rows, spec_id, target.partition, anchor))
        _storage.make_durable(self.uri, self.storage_options)
        crash_point("after-deletes")  # the delete files written, the snapshot not yet
        landed = [f for f in files if f.path not in dead]
        info = dict(commit_info or {})
        tags = {f.path: dict(f.tags) for f in landed if f.tags}
        if tags:
            info[FILE_TAGS_KEY] = tags
        summary = self.commit_summary(txns, info)
        added = [new_files[f.path] for f in landed]
        version = self._commit_row_delta(state, [*added, *delete_files], removed, summary)
        return UpsertCommit(version, replaced=dead)

    def _write_deletes(
        self, data_path: str, rows: np.ndarray, spec_id: int, partition: Record, anchor: str | None
    ) -> IcebergDataFile:
        """:func:`._deletes.write_delete_file`, its positions remembered (the next commit reads
        the table's deletes without reading this file back)."""
        written = write_delete_file(self.uri, data_path, rows, spec_id, partition, self.storage_options, anchor=anchor)
        self._deletes.remember_positions(written.file_path, {data_path: rows})
        return written

    def _check_upserts(self) -> None:
        """Raises CommitError when rows of this table cannot be deleted by parka's position deletes."""
        version = self._table.metadata.format_version
        if version < 2:
            raise CommitError(f"{self.identifier} is an Iceberg v1 table: upserts need format v2 (position deletes)")

    def _delete_state(self, snapshot: Snapshot | None) -> DeleteState:
        """The deletes of ``snapshot``, read once per snapshot (snapshots do not change)."""
        if snapshot is None:
            return DeleteState()
        cached = self._state_cache
        if cached is not None and cached[0] == snapshot.snapshot_id:
            return cached[1]
        state = DeleteState.read(snapshot, self._deletes, self._relative, self.uri)
        self._state_cache = (snapshot.snapshot_id, state)
        return state

    def _commit_row_delta(
        self,
        state: DeleteState,
        added: Sequence[IcebergDataFile],
        removed: Sequence[IcebergDataFile],
        summary: Mapping[str, str],
    ) -> int:
        """A snapshot of :class:`._deletes.RowDelta` (delete files added or removed)."""

        made: list[RowDelta] = []

        def snapshot(tx: CachingTransaction, table: Table) -> None:
            delta = RowDelta(
                tx, table.io, state=state, memo=self._deletes, added=added, removed=removed,
                snapshot_properties=dict(summary),
            )  # fmt: skip
            delta.commit()
            made.append(delta)

        version = self._transact(snapshot)
        committed = self._table.metadata.snapshot_by_id(made[0].snapshot_id)
        if committed is not None and committed.sequence_number is not None:
            made[0].remember_written(committed.sequence_number)
        return version

    def _commit(
        self,
        added: Sequence[DataFile],
        removed: Sequence[IcebergDataFile],
        summary: Mapping[str, str],
        partitions: Sequence[Record] | None = None,
    ) -> int:
        """A snapshot adding (and removing) data files, with ``summary`` (:meth:`commit_summary`),
        through pyiceberg's own snapshot producers."""
        data_files = [self._data_file(f, None if partitions is None else partitions[i]) for i, f in enumerate(added)]

        def snapshot(tx: CachingTransaction, table: Table) -> None:
            update = tx.update_snapshot(snapshot_properties=dict(summary))
            merge = merges_manifests(table.metadata.properties)
            with (
                update.overwrite() if removed else update.merge_append() if merge else update.fast_append()
            ) as producer:
                for data_file in removed:
                    producer.delete_data_file(data_file)
                for data_file in data_files:
                    producer.append_data_file(data_file)

        return self._transact(snapshot)

    def _transact(self, snapshot: Callable[[CachingTransaction, Table], None]) -> int:
        """The one commit path: one transaction on the snapshot read, without pyiceberg's
        retries and merging manifests unless the table says not to (:func:`for_commits`), in
        which ``snapshot`` makes the snapshot (and the name mapping is set if the table lacks it).

        Raises:
            CommitConflict: another commit came first.
            CommitError: any other failure (the commit may have landed).
        """
        table = for_commits(self._table)
        try:
            tx = CachingTransaction(table)
            if NAME_MAPPING not in table.metadata.properties:
                tx.set_properties({NAME_MAPPING: table.metadata.schema().name_mapping.model_dump_json()})
            snapshot(tx, table)
            written = tx.written_manifests()
            tx.commit_transaction()
        except CommitFailedException as exc:
            raise CommitConflict(f"commit to {self.identifier} lost a race: {exc}") from exc
        except Exception as exc:
            raise CommitError(f"commit to {self.identifier} failed (it may have landed): {exc}") from exc
        # the table now holds the metadata the catalog answered the commit with (its own, without
        # this handle's in-memory settings): no second read of the metadata file
        self._table = table
        self._delete_unlisted(written)
        self._check(table)
        return self.version()

    def _delete_unlisted(self, written: Sequence[str]) -> None:
        """Delete the manifests a landed commit wrote that its snapshot does not list (merged
        into another: :meth:`CachingTransaction.written_manifests`), as Iceberg Java's commit
        does. A failed delete leaves them, as before, and is logged."""
        current = self._table.current_snapshot()
        if not written or current is None:
            return
        root = self._table.location().rstrip("/")
        metadata = root + "/metadata/"
        try:
            listed = self._metadata_files([current])
            unlisted = sorted(p.removeprefix(root + "/") for p in written if p not in listed and p.startswith(metadata))
            if unlisted:
                delete_files(root, unlisted, self.storage_options)
        except CommitError as exc:
            log.warning("%s: the manifests a merge replaced are left: %s", self.identifier, exc)

    def _data_file(self, f: DataFile, partition: Record | None = None) -> IcebergDataFile:
        """``f``'s manifest entry: statistics from its footer, by the table's field ids; its
        partition record ``partition``, or from the values its rows were split by."""
        metadata = self._table.metadata
        schema = metadata.schema()
        spec = metadata.spec()
        if partition is None and set(f.partition_values) != {field.name for field in spec.fields}:
            raise ValueError(f"{f.path}: partition values {dict(f.partition_values)} for partition spec {spec}")
        try:
            footer = read_parquet_footer(self.uri, f.path, self.storage_options)
        except FileGone as exc:
            # The only deleter of a file not yet committed is the orphan cleanup of another worker
            # with this app id, once a commit of its own covered the file's offsets: this commit
            # lost that race, and the committer re-reads the table and drops the file as covered
            # (on Delta the commit's own txn check says so; here the footer is read first).
            raise CommitConflict(f"{exc}: another worker's commit covered it meanwhile") from exc
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=footer,
            stats_columns=compute_statistics_plan(schema, metadata.properties),
            parquet_column_mapping=parquet_path_to_id_mapping(schema),
        )
        return IcebergDataFile.from_args(
            content=DataFileContent.DATA,
            file_path=f"{self.uri}/{f.path}",
            file_format=FileFormat.PARQUET,
            partition=partition if partition is not None else partition_record(spec, schema, f.partition_values),
            file_size_in_bytes=f.size,
            sort_order_id=None,
            spec_id=metadata.default_spec_id,
            equality_ids=None,
            key_metadata=None,
            **stats.to_serialized_dict(),
        )

    def checkpoint(self) -> None:
        """Iceberg's manifests need no checkpoint; what Delta does next to one, dropping log
        entries past the table's retention, is snapshot expiry here, by the table's own
        properties (``history.expire.*``: :func:`._snapshots.retention`; Iceberg's
        defaults when unset). Every commit rewrites the metadata of every snapshot kept, so a daemon that
        commits each second must expire them. A failure is logged and retried at the next
        checkpoint: ingestion goes on."""
        age_ms, keep = retention(self._table.metadata.properties)
        try:
            self.expire_snapshots(time.time() * 1000 - age_ms, retain_last=keep)
        except CommitError as exc:
            log.warning("%s; trying again at the next checkpoint", exc)

    def expire_snapshots(self, older_than_ms: float, *, retain_last: int = 1) -> int:
        """Expire the snapshots made before ``older_than_ms`` (epoch ms) except the
        ``retain_last`` latest of the current one's ancestry and the latest holding the ``txn``
        state (the offsets every parka worker resumes from), then delete the data files only
        they named (pyiceberg's expiry removes metadata only). Returns the files deleted.

        Raises:
            CommitError: the expiry's commit failed (nothing was deleted).
        """
        self.refresh()
        t = self._table
        doomed = expiry_candidates(t.metadata, older_than_ms, retain_last, _holds_offsets)
        if not doomed:
            return 0
        try:
            logged = self.logged_files()
            listed = self._metadata_files(t.metadata.snapshots)
        except CommitError:
            # another writer's expiry of the same snapshots deleted their manifest lists
            self.refresh()
            if not {s.snapshot_id for s in self._table.metadata.snapshots} & set(doomed):
                log.debug("another writer expired the snapshots of %s first", self.identifier)
                return 0
            raise
        try:
            ExpireSnapshots(CachingTransaction(t, autocommit=True)).by_ids(doomed).commit()
        except Exception as exc:
            self.refresh()
            if not {s.snapshot_id for s in self._table.metadata.snapshots} & set(doomed):
                log.debug("another writer expired the snapshots of %s first", self.identifier)
                return 0  # and deleted what only they named
            # pyiceberg's message lists every snapshot of the table
            raise CommitError(f"cannot expire snapshots of {self.identifier}: {one_line(exc, limit=300)}") from exc
        self.refresh()
        gone = sorted(p for p in logged - self.logged_files() if "://" not in p)  # under the data folder only
        if gone:
            delete_files(self.uri, gone, self.storage_options)
        # the manifest lists of the expired snapshots and the manifests only they listed, as
        # Iceberg's own expiry deletes them (pyiceberg's keeps them): under the metadata folder only
        root = self._table.location().rstrip("/")
        unlisted = listed - self._metadata_files(self._table.metadata.snapshots)
        manifests = sorted(p.removeprefix(root + "/") for p in unlisted if p.startswith(root + "/metadata/"))
        if manifests:
            delete_files(root, manifests, self.storage_options)
        log.info(
            "expired %d snapshot(s) of %s, deleted %d data file(s) and %d manifest file(s)",
            len(doomed),
            self.identifier,
            len(gone),
            len(manifests),
        )
        return len(gone)

    def _metadata_files(self, snapshots: Sequence[Snapshot]) -> set[str]:
        try:
            return self._manifests.metadata_of(snapshots, self._table.io)
        except Exception as exc:
            raise CommitError(f"cannot read the manifest lists of {self.identifier}: {exc}") from exc
