"""Rows of an Iceberg table deleted by position-delete files (format v2), written by parka: what an
upsert commit needs (:meth:`._table.IcebergTableLog.commit_upsert`). pyiceberg reads these files
in its scans but writes none, so parka writes them and commits them itself.

* **One delete file per data file**, holding every deleted position of that data file (its
  ``file_path`` bounds are that one path, so readers match it to the file by path, as Iceberg
  Java's file-granular deletes are). A commit that deletes more rows of a file writes its new
  delete file (the old rows and the new) and removes the old one in the same snapshot: a data
  file has at most one live delete file, as a Delta file has one deletion vector.
* **A data file all of whose rows are deleted** is removed, with its delete file.
* **The snapshot** (operation ``overwrite``) lists the new data files in a data manifest and the
  new delete files in a delete manifest; manifests that held removed files are rewritten with
  those entries marked deleted. Data manifests merge as appends' do
  (``commit.manifest-merge.enabled``); the delete manifests merge into one when there are more
  than :data:`MAX_DELETE_MANIFESTS`.
* **What parka does not read**: equality deletes and v3 deletion vectors (another writer's) are
  refused, naming the file; position deletes other writers wrote (one file for many data files)
  are read by filtering their ``file_path``.
"""

from __future__ import annotations

import functools
import io
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    ManifestWriterV2,
)
from pyiceberg.table import Transaction
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.table.update.snapshot import _MergeAppendFiles
from pyiceberg.typedef import Record

from parka.errors import CommitError

from .. import _storage
from .._compaction import CompactedName
from .._key_reads import LiveFile
from .._plan import FileName

__all__ = [
    "DELETES_DIR",
    "NO_ROWS",
    "DeleteMemo",
    "DeleteState",
    "RowDelta",
    "delete_file_bytes",
    "delete_file_name",
    "write_delete_file",
]

PATH_FIELD_ID = 2147483546  # the spec's reserved field ids of a position-delete file's columns
POS_FIELD_ID = 2147483545
_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(PATH_FIELD_ID).encode()}),
        pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID).encode()}),
    ]
)
DELETES_DIR = "deletes"
"""Where under the table's data folder parka's delete files go (:func:`delete_file_name`)."""
MAX_DELETE_MANIFESTS = 8


def delete_file_bytes(data_path: str, positions: np.ndarray) -> bytes:
    """A position-delete file deleting ``positions`` (ascending) of the data file ``data_path``
    (its full path, as the manifest names it)."""
    table = pa.table(
        [pa.array([data_path] * len(positions), pa.string()), pa.array(positions, pa.int64())], schema=_SCHEMA
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", use_dictionary=["file_path"])
    return sink.getvalue()


@dataclass
class DeleteState:
    """The current snapshot's live data files and, for each, its delete files and deleted
    positions, read from its manifests (:meth:`read`). Paths are the table handle's (relative to
    the data folder, :meth:`._table.IcebergTableLog._relative`)."""

    data: dict[str, ManifestEntry] = field(default_factory=dict)
    delete_files: dict[str, list[ManifestEntry]] = field(default_factory=dict)  # data path -> delete entries
    positions: dict[str, np.ndarray] = field(default_factory=dict)  # data path -> deleted rows, ascending
    manifests: list[ManifestFile] = field(default_factory=list)

    @classmethod
    def read(cls, snapshot: Snapshot | None, memo: DeleteMemo, relative: Callable[[str], str], uri: str) -> DeleteState:
        """The state of ``snapshot`` (``None``: an empty table), its manifests and delete files
        read through ``memo`` (each read once).

        Raises:
            CommitError: a manifest or delete file cannot be read, or the table holds deletes
                parka cannot read (equality deletes, deletion vectors).
        """
        state = cls()
        if snapshot is None:
            return state
        try:
            state.manifests = memo.manifests(snapshot)
            for manifest in state.manifests:
                for entry in memo.entries(manifest):
                    f = entry.data_file
                    if f.content == DataFileContent.DATA:
                        state.data[relative(f.file_path)] = entry
                        continue
                    if f.content != DataFileContent.POSITION_DELETES or f.file_format != FileFormat.PARQUET:
                        raise CommitError(
                            f"{f.file_path}: {f.content.name.lower()} in {f.file_format.name} (parka reads Parquet "
                            "position deletes only: rewrite the table's deletes with Iceberg's own maintenance)"
                        )
                    for data_path, rows in memo.positions(f).items():
                        rel = relative(data_path)
                        state.delete_files.setdefault(rel, []).append(entry)
                        state.positions[rel] = np.union1d(state.positions.get(rel, NO_ROWS), rows)
        except CommitError:
            raise
        except Exception as exc:
            raise CommitError(f"cannot read the deletes of the table at {uri}: {exc}") from exc
        memo.keep(state.manifests)
        return state

    def live_files(self) -> dict[str, LiveFile]:
        """The live data files as the key index reads them (their deletes told apart by the
        delete files that hold them)."""
        out = {}
        for path in self.data:
            entries = self.delete_files.get(path)
            if not entries:
                out[path] = LiveFile()
                continue
            token = tuple(sorted(e.data_file.file_path for e in entries))
            out[path] = LiveFile(token, functools.partial(_same, self.positions[path]))
        return out


NO_ROWS = np.zeros(0, dtype=np.int64)
"""No row positions (a file without deleted rows)."""


def _same(rows: np.ndarray) -> np.ndarray:
    return rows


class DeleteMemo:
    """The entries of each manifest and the positions of each delete file, read once (neither
    changes once written): a commit reads the table's deletes, and without it would read them
    all again each time."""

    def __init__(self, fileio: FileIO) -> None:
        self._io = fileio
        self._lists: dict[str, list[ManifestFile]] = {}
        self._entries: dict[str, list[ManifestEntry]] = {}
        self._positions: dict[str, dict[str, np.ndarray]] = {}

    def manifests(self, snapshot: Snapshot) -> list[ManifestFile]:
        listed = self._lists.get(snapshot.manifest_list)
        if listed is None:
            listed = list(snapshot.manifests(self._io))
            self._lists = {snapshot.manifest_list: listed}  # the latest only
        return listed

    def entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        entries = self._entries.get(manifest.manifest_path)
        if entries is None:
            entries = self._entries[manifest.manifest_path] = manifest.fetch_manifest_entry(
                self._io, discard_deleted=True
            )
        return entries

    def positions(self, f: DataFile) -> dict[str, np.ndarray]:
        """The positions the position-delete file ``f`` deletes, by data file path."""
        out = self._positions.get(f.file_path)
        if out is not None:
            return out
        with self._io.new_input(f.file_path).open() as stream:
            table = pq.read_table(pa.BufferReader(stream.read()), columns=["file_path", "pos"])
        out = {}
        if table.num_rows:
            paths = table.column("file_path").to_numpy(zero_copy_only=False)
            pos = table.column("pos").to_numpy()
            for path in np.unique(paths):
                out[str(path)] = np.unique(pos[paths == path])
        self._positions[f.file_path] = out
        return out

    def remember(self, manifest_path: str, entries: Sequence[ManifestEntry]) -> None:
        """The live entries of a manifest this process wrote (not read back)."""
        self._entries[manifest_path] = [e for e in entries if e.status != ManifestEntryStatus.DELETED]

    def remember_positions(self, delete_path: str, positions: Mapping[str, np.ndarray]) -> None:
        """What a delete file this process wrote deletes (not read back)."""
        self._positions[delete_path] = dict(positions)

    def keep(self, manifests: Sequence[ManifestFile]) -> None:
        """Forget what ``manifests`` (a snapshot's) do not hold."""
        paths = {m.manifest_path for m in manifests}
        self._entries = {p: e for p, e in self._entries.items() if p in paths}
        live = {e.data_file.file_path for entries in self._entries.values() for e in entries}
        self._positions = {p: v for p, v in self._positions.items() if p in live}


def delete_file_name(anchor: str | None) -> str:
    """A new delete file's name under the data folder, after the commit's ``anchor`` (the name
    of a file the same commit adds) so that the orphan cleanup judges it as that file: a new
    :class:`~parka.lake._plan.FileName` with the anchor's Kafka coordinates (the commit's
    offsets: once the table's ``txn`` passes them without the commit, it never lands), or a new
    :class:`~parka.lake._compaction.CompactedName` with the anchor's input key (a compaction's:
    once that input is gone without it, it never lands). Without an anchor (a commit of
    tombstones alone, ``parka optimize``'s output) a random name, which the cleanup leaves."""
    base = None if anchor is None else anchor.rsplit("/", 1)[-1]
    if base is not None and (name := FileName.parse(base)) is not None:
        return f"{DELETES_DIR}/{FileName.new(name.topic, name.partition, name.offset, last=name.last)}"
    if base is not None and (compacted := CompactedName.parse(base)) is not None:
        return f"{DELETES_DIR}/{CompactedName(compacted.generation, compacted.input, uuid.uuid4().hex)}"
    return f"{DELETES_DIR}/{uuid.uuid4().hex}.parquet"


def write_delete_file(
    uri: str,
    data_path: str,
    positions: np.ndarray,
    spec_id: int,
    partition: Record,
    storage_options: Mapping[str, str],
    *,
    anchor: str | None = None,
) -> DataFile:
    """Write the delete file of ``positions`` of ``data_path`` (a full path) under ``uri`` (the
    table's data folder), named after ``anchor`` (:func:`delete_file_name`), and return its
    manifest entry's file (bounds on ``file_path``: that path alone). Not durable until
    :func:`parka.lake._storage.make_durable`.

    Raises:
        CommitError: the write failed.
    """
    relative = delete_file_name(anchor)
    body = delete_file_bytes(data_path, positions)
    size = _storage.write_data_file(uri, relative, body, storage_options)
    path_bound = data_path.encode()
    f = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=f"{uri}/{relative}",
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=len(positions),
        file_size_in_bytes=size,
        value_counts={PATH_FIELD_ID: len(positions), POS_FIELD_ID: len(positions)},
        null_value_counts={PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
        lower_bounds={PATH_FIELD_ID: path_bound, POS_FIELD_ID: int(positions[0]).to_bytes(8, "little", signed=True)},
        upper_bounds={PATH_FIELD_ID: path_bound, POS_FIELD_ID: int(positions[-1]).to_bytes(8, "little", signed=True)},
        sort_order_id=None,
        equality_ids=None,
        key_metadata=None,
    )
    f.spec_id = spec_id  # not a field of the manifest's file struct: set as reading a manifest sets it
    return f


class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files (pyiceberg's writer writes data manifests only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class RowDelta(_MergeAppendFiles):
    """A snapshot (``overwrite``) that adds data and delete files and removes delete files and
    data files (all of whose rows are deleted, or a compaction's inputs), from the
    manifests of the snapshot the transaction read; see the module docstring. Its base class is
    pyiceberg's merging append (data manifests merge as an append's), whose manifests it writes
    itself."""

    def __init__(
        self,
        transaction: Transaction,
        fileio: FileIO,
        *,
        state: DeleteState,
        memo: DeleteMemo,
        added: Sequence[DataFile],
        removed: Sequence[DataFile],
        snapshot_properties: dict[str, str],
    ) -> None:
        super().__init__(Operation.OVERWRITE, transaction, fileio, snapshot_properties=snapshot_properties)
        self._state = state
        self._memo = memo
        self._written: list[tuple[str, int, list[ManifestEntry]]] = []  # manifests it wrote: spec, entries
        self._removed_paths = {f.file_path for f in removed}
        for f in added:
            self.append_data_file(f)
        for f in removed:
            self.delete_data_file(f)

    def _writer(self, content: ManifestContent, spec_id: int) -> ManifestWriter:
        if content == ManifestContent.DATA:
            return self.new_manifest_writer(self.spec(spec_id))
        metadata = self._transaction.table_metadata
        return _DeleteManifestWriter(
            self.spec(spec_id), metadata.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
        )

    def _entry(self, f: DataFile) -> ManifestEntry:
        return ManifestEntry.from_args(
            status=ManifestEntryStatus.ADDED,
            snapshot_id=self._snapshot_id,
            sequence_number=None,
            file_sequence_number=None,
            data_file=f,
        )

    def _manifests(self) -> list[ManifestFile]:
        out: list[ManifestFile] = []
        spec_id = self._transaction.table_metadata.default_spec_id
        added_data = [f for f in self._added_data_files if f.content == DataFileContent.DATA]
        added_deletes = [f for f in self._added_data_files if f.content != DataFileContent.DATA]
        for content, files in ((ManifestContent.DATA, added_data), (ManifestContent.DELETES, added_deletes)):
            if files:
                out.append(self._write(content, spec_id, [self._entry(f) for f in files]))
        rewritten: list[ManifestEntry] = []  # the entries of the delete manifests written again
        kept: list[ManifestFile] = []  # the delete manifests kept as they are
        for manifest in self._state.manifests:
            entries = self._memo.entries(manifest)
            if not any(e.data_file.file_path in self._removed_paths for e in entries):
                if manifest.content == ManifestContent.DELETES:
                    kept += [manifest] if entries else []
                elif manifest.has_added_files() or manifest.has_existing_files():
                    out.append(manifest)
                continue
            marked = [self._marked(e) for e in entries]
            if manifest.content == ManifestContent.DELETES:
                rewritten += marked
            else:
                out.append(self._write(ManifestContent.DATA, manifest.partition_spec_id, marked))
        if len(kept) + bool(rewritten) > MAX_DELETE_MANIFESTS:
            for manifest in kept:
                rewritten += [self._marked(e) for e in self._memo.entries(manifest)]
            kept = []
        out += kept
        if rewritten:
            out.append(self._write(ManifestContent.DELETES, spec_id, rewritten))
        return self._process_manifests(out)

    def _write(self, content: ManifestContent, spec_id: int, entries: Sequence[ManifestEntry]) -> ManifestFile:
        with self._writer(content, spec_id) as writer:
            for entry in entries:
                writer.add_entry(entry)
        manifest = writer.to_manifest_file()
        self._written.append((manifest.manifest_path, spec_id, list(entries)))
        return manifest

    def remember_written(self, sequence_number: int) -> None:
        """Once committed as ``sequence_number``: the memo holds the entries of the manifests
        this snapshot wrote as a reader of them would get them (an added entry's sequence numbers
        inherited, each file's spec id), so the next commit does not read them back (manifests
        merged by pyiceberg's base class are read once, as any other)."""
        for path, spec_id, entries in self._written:
            read = []
            for e in entries:
                e.data_file.spec_id = spec_id
                if e.sequence_number is None:
                    e = ManifestEntry.from_args(
                        status=e.status,
                        snapshot_id=e.snapshot_id,
                        sequence_number=sequence_number,
                        file_sequence_number=sequence_number,
                        data_file=e.data_file,
                    )
                read.append(e)
            self._memo.remember(path, read)

    def _marked(self, entry: ManifestEntry) -> ManifestEntry:
        """``entry`` as a manifest written by this snapshot lists it: deleted when this snapshot
        removes its file, else existing."""
        removed = entry.data_file.file_path in self._removed_paths
        return ManifestEntry.from_args(
            status=ManifestEntryStatus.DELETED if removed else ManifestEntryStatus.EXISTING,
            snapshot_id=self._snapshot_id if removed else entry.snapshot_id,
            sequence_number=entry.sequence_number,
            file_sequence_number=entry.file_sequence_number,
            data_file=entry.data_file,
        )
