"""What keeps an Iceberg table's commits cheap as it lives on (:mod:`._table`'s helpers).

pyiceberg rewrites the metadata of every snapshot kept on each commit and reads manifests and
manifest lists each time it is asked; a daemon that commits every second needs the opposite.
Here: a transaction and a catalog's staging that apply a commit's updates without copying the
table's history, a memo of what each manifest list and manifest holds (both immutable once
written), which snapshots an expiry removes (by the table's own retention properties) and
whether appends merge small manifests.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import pyiceberg
from pyiceberg.catalog import Catalog, MetastoreCatalog
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import StagedTable, Table, TableProperties, Transaction
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot, ancestors_of
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata
from pyiceberg.typedef import IcebergBaseModel, Identifier
from pyiceberg.utils.datetime import datetime_to_millis

__all__ = [
    "CREATED_MAX_SNAPSHOT_AGE_MS",
    "CREATED_MIN_MERGE_COUNT",
    "CREATED_PROPERTIES",
    "MAX_SNAPSHOT_AGE",
    "MIN_SNAPSHOTS",
    "CachingTransaction",
    "ManifestMemo",
    "expiry_candidates",
    "for_commits",
    "merges_manifests",
    "retention",
    "stage_without_copies",
    "updated_metadata",
]

# Iceberg's snapshot retention properties (what its expire_snapshots procedure reads)
MAX_SNAPSHOT_AGE = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS = "history.expire.min-snapshots-to-keep"
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3_600_000  # Iceberg's default: 5 days
# parka's for the tables it creates: a daemon committing every second makes 3,600 snapshots an
# hour, and each commit copies and rewrites the metadata of all it keeps
CREATED_MAX_SNAPSHOT_AGE_MS = str(3_600_000)
# Appends merge the current snapshot's small manifests once there are this many, not Iceberg's
# default 100: pyiceberg's reader plans a scan by reading every manifest listed, so under a daemon
# committing each second a reader's table open swung with where the count stood between merges
# (benchmarks/results/2026-11-30-iceberg-manifest-merge/: 9-11 ms against 21-48 ms per window)
CREATED_MIN_MERGE_COUNT = "8"
# and pyiceberg deletes the metadata files (one per commit) past Iceberg's default 100 latest, as
# Iceberg Java does with the same properties; without them every commit leaves one behind
CREATED_PROPERTIES = {
    MAX_SNAPSHOT_AGE: CREATED_MAX_SNAPSHOT_AGE_MS,
    TableProperties.MANIFEST_MIN_MERGE_COUNT: CREATED_MIN_MERGE_COUNT,
    TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
    TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: str(TableProperties.METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT),
}
_NO_RETRIES = {TableProperties.COMMIT_NUM_RETRIES: "0"}


# pyiceberg's private steps of ``update_table_metadata``, which :func:`updated_metadata` takes in
# the order 0.12 takes them; another version gets pyiceberg's own function
try:
    from pyiceberg.table.update import _apply_table_update, _TableMetadataUpdateContext, _update_table_metadata_log
except ImportError:  # pragma: no cover - a pyiceberg that moved them
    _MIRRORED = False
else:
    _MIRRORED = pyiceberg.__version__.startswith("0.12.")


def updated_metadata(
    base: TableMetadata, updates: tuple[TableUpdate, ...], metadata_location: str | None = None
) -> TableMetadata:
    """``base`` with ``updates`` applied, as pyiceberg's ``update_table_metadata`` gives it, but
    without copying the table's history: pyiceberg 0.12 ends that function with a deep copy of
    the whole metadata, every snapshot with its summary, so each read of a transaction's
    metadata cost time in proportion to the snapshots kept (3,600 an hour on a table committed
    every second). Here the lists and maps are new and the models in them (snapshots, log
    entries, schemas, specs, sort orders, refs) are shared: pyiceberg's models are frozen, and
    its updates replace a model with a changed copy rather than change it in place.
    ``metadata_location``: the table's current metadata file, added to the metadata log when the
    updates change something (as a catalog's commit does)."""
    if not _MIRRORED:
        return update_table_metadata(base, updates, metadata_location=metadata_location)
    context = _TableMetadataUpdateContext()
    new = base
    for update in updates:
        new = _apply_table_update(update, new, context)
    if context.has_changes():
        if metadata_location:
            new = _update_table_metadata_log(new, metadata_location, base.last_updated_ms)
        if base.last_updated_ms == new.last_updated_ms:
            new = new.model_copy(update={"last_updated_ms": datetime_to_millis(datetime.now().astimezone())})
    new.spec().check_compatible(new.schema())
    new.sort_order().check_compatible(new.schema())
    shared: dict[int, Any] = {}
    for value in new.__dict__.values():
        for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
            if isinstance(item, IcebergBaseModel):
                shared[id(item)] = item
    return copy.deepcopy(new, shared)


def stage_without_copies(catalog: Catalog) -> None:
    """Let ``catalog`` (one parka opened) stage a commit to an existing table with
    :func:`updated_metadata`: a catalog that keeps the metadata files itself (SQL, Hive, Glue:
    pyiceberg's ``MetastoreCatalog``) applies a commit's updates with ``update_table_metadata``,
    the deep copy of the whole history again. The rest is pyiceberg 0.12's
    ``_update_and_stage_table`` as it is; a table's creation, and another pyiceberg version, go to
    pyiceberg's own. A REST catalog applies the updates on its server."""
    if not _MIRRORED or not isinstance(catalog, MetastoreCatalog):
        return
    own = catalog._update_and_stage_table

    def stage(
        current: Table | None, identifier: Identifier, requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> StagedTable:  # fmt: skip
        if current is None:
            return own(current, identifier, requirements, updates)
        for requirement in requirements:
            requirement.validate(current.metadata)
        metadata = updated_metadata(current.metadata, updates, metadata_location=current.metadata_location)
        version = catalog._parse_metadata_version(current.metadata_location) + 1
        provider = load_location_provider(metadata.location, metadata.properties)
        location = provider.new_table_metadata_file_location(version)
        io = catalog._load_file_io(properties=metadata.properties, location=location)
        return StagedTable(identifier=identifier, metadata=metadata, metadata_location=location, io=io, catalog=catalog)

    catalog._update_and_stage_table = stage  # type: ignore[method-assign,assignment]


class CachingTransaction(Transaction):
    """pyiceberg's transaction, reading its metadata once per state, without copying the
    table's history (:func:`updated_metadata`). pyiceberg 0.12 replays the staged updates onto
    a deep copy of the table's whole metadata (every snapshot, every summary) on each read of
    ``table_metadata``, and one append reads it about ten times: a commit's cost grew with the
    table's history (320 ms per commit at 120 snapshots, most of it copying). The state is a
    pair of immutable references (the table's metadata, the tuple of staged updates, rebound on
    every change), so the metadata made for one pair serves every read of it; the approach of
    iceberg-python's pull requests #3302 and #3784, not merged in 0.12."""

    _cached: tuple[Any, Any, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        cached = self._cached
        if cached is None or cached[0] is not base or cached[1] is not updates:
            cached = self._cached = (base, updates, updated_metadata(base, updates))
        return cached[2]

    def written_manifests(self) -> list[str]:
        """The manifests the snapshot producers of this transaction wrote (full paths), before
        its commit: a merging append writes its new files' manifest, then merges it with the
        table's small ones into another, and pyiceberg deletes the first only when a commit
        fails, so each merge left a manifest no snapshot ever listed. Both are pyiceberg's private
        state (0.12): a pyiceberg without them gives none, and the merged-away manifests stay as
        before, rather than every commit failing."""
        producers = getattr(self, "_snapshot_producers", ())
        return [path for producer in producers for path in getattr(producer, "_written_manifests", ())]


def for_commits(t: Table) -> Table:
    """``t`` as parka commits through it: pyiceberg's commit retries off (a retry would rebase an
    append onto a snapshot another writer made, past its ``txn``), and :func:`merges_manifests`'
    answer spelled out in the properties pyiceberg's snapshot producers read. The properties
    of this handle only: the catalog applies a commit's updates to the metadata it holds."""
    properties = t.metadata.properties
    merge = {TableProperties.MANIFEST_MERGE_ENABLED: str(merges_manifests(properties)).lower()}
    metadata = t.metadata.model_copy(update={"properties": {**properties, **_NO_RETRIES, **merge}})
    return Table(t.name(), metadata, t.metadata_location, t.io, t.catalog)


def merges_manifests(properties: Mapping[str, str]) -> bool:
    """Whether appends merge small manifests (``commit.manifest-merge.enabled``), with Iceberg
    Java's default, true, not pyiceberg's (whose merging append, unless the table says true,
    appends as a fast append does: :func:`for_commits` says it): a fast append adds a manifest
    per commit that the current snapshot keeps listing (its files stay live), so a daemon
    committing each second would write and read an ever longer manifest list. Merged once there
    are ``commit.manifest.min-count-to-merge`` of them (Iceberg's default 100; 8 on the tables
    parka creates: :data:`CREATED_MIN_MERGE_COUNT`)."""
    return properties.get(TableProperties.MANIFEST_MERGE_ENABLED, "true").strip().lower() == "true"


def retention(properties: Mapping[str, str]) -> tuple[int, int]:
    """The table's snapshot retention: (maximum age in ms, snapshots always kept), from its
    ``history.expire.*`` properties, Iceberg's defaults when unset."""
    return int(properties.get(MAX_SNAPSHOT_AGE, DEFAULT_MAX_SNAPSHOT_AGE_MS)), int(properties.get(MIN_SNAPSHOTS, 1))


def expiry_candidates(
    metadata: TableMetadata, older_than_ms: float, retain_last: int, holds_offsets: Callable[[Snapshot], bool]
) -> list[int]:
    """The ids of the snapshots made before ``older_than_ms`` (epoch ms) except the
    ``retain_last`` latest of the current snapshot's ancestry and the latest one that
    ``holds_offsets``."""
    current = metadata.current_snapshot()
    if current is None:
        return []
    ancestry = list(ancestors_of(current, metadata))  # the current snapshot first
    keep = {s.snapshot_id for s in ancestry[: max(retain_last, 1)]}
    holder = next((s for s in ancestry if holds_offsets(s)), None)
    if holder is not None:
        keep.add(holder.snapshot_id)
    return [s.snapshot_id for s in metadata.snapshots if s.timestamp_ms < older_than_ms and s.snapshot_id not in keep]


class ManifestMemo:
    """The data files each manifest list and manifest names, read once: neither changes once
    written, and a daemon's orphan cleanup and expiry would otherwise read the table's whole
    history again every few commits. ``relative`` turns a data file's path into the name the
    caller uses."""

    def __init__(self, relative: Callable[[str], str]) -> None:
        self._relative = relative
        self._lists: dict[str, tuple[ManifestFile, ...]] = {}  # manifest list path -> its manifests
        self._files: dict[str, frozenset[str]] = {}  # manifest path -> its live data files

    def metadata_of(self, snapshots: Iterable[Snapshot], io: FileIO) -> set[str]:
        """The manifest lists of ``snapshots`` and the manifests they list (full paths)."""
        out: set[str] = set()
        for snapshot in snapshots:
            out.add(snapshot.manifest_list)
            out.update(m.manifest_path for m in self._manifests(snapshot, io))
        return out

    def _manifests(self, snapshot: Snapshot, io: FileIO) -> tuple[ManifestFile, ...]:
        manifests = self._lists.get(snapshot.manifest_list)
        if manifests is None:
            manifests = self._lists[snapshot.manifest_list] = tuple(snapshot.manifests(io))
        return manifests

    def files_of(self, snapshots: Iterable[Snapshot], io: FileIO, *, all_there_are: bool = False) -> set[str]:
        """The data files the ``snapshots`` hold (a manifest entry marking a file deleted adds
        nothing). ``all_there_are``: ``snapshots`` are all the table has, and what none of
        them lists (merged, expired) leaves the memo."""
        snapshots = list(snapshots)
        files: set[str] = set()
        listed: set[str] = set()
        for snapshot in snapshots:
            for manifest in self._manifests(snapshot, io):
                listed.add(manifest.manifest_path)
                held = self._files.get(manifest.manifest_path)
                if held is None:
                    entries = manifest.fetch_manifest_entry(io, discard_deleted=True)
                    held = self._files[manifest.manifest_path] = frozenset(
                        self._relative(e.data_file.file_path) for e in entries
                    )
                files |= held
        if all_there_are:
            self._files = {path: self._files[path] for path in listed}
            lists = {snapshot.manifest_list for snapshot in snapshots}
            self._lists = {path: v for path, v in self._lists.items() if path in lists}
        return files
