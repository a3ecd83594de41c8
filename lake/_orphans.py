"""The orphan cleanup: data files ingestion (or background compaction) wrote that no commit will
ever name, deleted without ever touching a file some log entry names or a live writer may still
commit. Called by the committer (:meth:`parka.lake.Committer.remove_orphans`).

It lists the table only when asked to, which the daemons do when partitions are assigned (a
crashed predecessor's files are then on disk) and when they stop. What the listing found that
may still become an orphan (a crashed commit's files, above the ``txn`` until the new owner
commits those offsets again; a crashed compaction's output, while its inputs are live) is kept
by name, and the cleanup between listings looks at those names only: its cost does not grow
with the table. A file a writer leaves after the last listing (one that lost its partitions but
went on writing) waits for the next listing, or for VACUUM, which deletes unnamed files older
than the retention."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from ._compaction import CompactedName, input_key
from ._log import TableLog
from ._plan import FileName
from ._storage import delete_files, existing_files, list_files

__all__ = ["OrphanScan", "Orphans", "remove_orphans"]

log = logging.getLogger("parka.ingest")


@dataclass
class OrphanScan:
    """What one cleanup did: the files it deleted, and the unreferenced files it could not yet
    judge (``pending``: the ones to look at again by name)."""

    removed: int = 0
    pending: set[str] = field(default_factory=set)


def remove_orphans(
    table: TableLog,
    topic: str,
    app_txn: Callable[[int], str],
    storage_options: Mapping[str, str] | None = None,
    *,
    among: Collection[str] | None = None,
) -> OrphanScan:
    """Delete data files this topic's ingestion wrote but never committed.

    The files looked at are the table's, listed, or only ``among`` (the ``pending`` of an
    earlier scan: no listing). A file the rules below keep, but which may become an orphan
    later, is in the result's ``pending``.

    A parka-named file is an orphan, and deleted, when all three hold:

    1. the table's ``txn`` for its partition (``app_txn(partition)``) has reached its offset:
       that offset's data was committed in another file (or dead-lettered), so nobody will ever
       commit this one. Files above it may belong to a live worker's open commit;
    2. the table's current snapshot does not reference it;
    3. no entry still in the Delta log names it (:meth:`TableLog.logged_files`: the ``add`` and
       ``remove`` actions of the latest checkpoint and of every commit after it). A file some
       commit added and a later one removed (OPTIMIZE compacted it, a DELETE rewrote it) is
       left to VACUUM: readers of older versions and time travel still need it until the
       table's ``delta.deletedFileRetentionDuration`` is over, and the checkpoints keep its
       tombstone that long. Once the tombstone has expired (and log cleanup removed the commits
       that named the file) VACUUM no longer protects it, and deleting it is what VACUUM would do.

    A file of a crashed, never-committed write is in no log entry, so it goes as soon as the
    ``txn`` covers it; so does the temporary file of a write a crash interrupted
    (``.<name>.<id>.tmp``, which no reader, VACUUM included, ever looks at). The log is read
    only when there is a candidate; a log this cannot read deletes nothing (it raises).

    A file background compaction wrote (:class:`~._compaction.CompactedName`, of any topic's
    worker) goes by the same rules 2 and 3 when, instead of 1, the first input file its name
    points at is not in a snapshot read after the listing: a compaction commits only while that
    input is live (:func:`~._compaction.names_input`; other inputs an upsert removed meanwhile
    do not stop it), so nobody will ever commit it.

    Raises:
        CommitError: listing, reading the log or deleting failed.
    """
    table.refresh()
    referenced = table.referenced_files()
    if among is None:
        paths = [info.path for info in list_files(table.uri, storage_options)]
    else:  # the ones still there: another writer's cleanup, or VACUUM, may have deleted some
        paths = existing_files(table.uri, sorted(set(among) - referenced), storage_options)
    versions: dict[int, int | None] = {}
    candidates = []
    pending = set()
    written: list[tuple[str, str]] = []  # compacted files and their first input's key
    for path in paths:
        if path in referenced:
            continue
        compacted = CompactedName.parse(path, temporary=True)
        if compacted is not None:
            written.append((path, compacted.input))
            continue
        name = FileName.parse(path, temporary=True)
        if name is None or name.topic != topic:
            continue
        if name.partition not in versions:
            versions[name.partition] = table.txn_version(app_txn(name.partition))
        version = versions[name.partition]
        if version is not None and name.last_offset <= version:
            candidates.append(path)
        else:
            pending.add(path)  # a live writer's, or a crashed one's until its offsets are committed again
    if written:
        # Judged on a snapshot read after the listing: the compaction that wrote a listed file
        # planned on a snapshot no newer than that, so the input its name carries is either
        # still live in it or was removed, for good.
        table.refresh()
        live = table.referenced_files()
        live_keys = {input_key(path) for path in live}
        for path, key in written:
            if path in live:
                continue
            if key in live_keys:
                pending.add(path)  # a compaction in flight's, or a crashed one's until its inputs go
            else:
                candidates.append(path)
    if not candidates:
        return OrphanScan(0, pending)
    logged = table.logged_files()  # read after the snapshot: it names all of the snapshot's files
    doomed = [path for path in candidates if path not in logged]
    if doomed:
        delete_files(table.uri, doomed, storage_options)
        log.info("removed %d orphan data file(s) left by interrupted commits or compactions", len(doomed))
    if len(doomed) < len(candidates):
        log.debug("left %d removed file(s) to VACUUM", len(candidates) - len(doomed))
    return OrphanScan(len(doomed), pending)


class Orphans:
    """The cleanup of one writer's tables of ``topic``, each known by the name the writer gives it
    (its URI or catalog name): a listing when asked, and in between the names the last listing of
    each table left pending (:func:`remove_orphans`)."""

    def __init__(self, topic: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.topic = topic
        self.storage_options = storage_options
        self._pending: dict[str, set[str]] = {}

    def watch(self, name: str, paths: Collection[str]) -> None:
        """Look at ``paths`` of the table ``name`` in the cleanups to come (files this writer
        could not delete when it gave them up)."""
        self._pending.setdefault(name, set()).update(paths)

    def pending(self, name: str) -> bool:
        """Whether a cleanup without a listing has anything to look at in the table ``name``."""
        return bool(self._pending.get(name))

    def clean(self, name: str, table: TableLog, app_txn: Callable[[int], str], *, listing: bool) -> int:
        """Remove the orphans of ``table`` (named ``name``), listing it or (``listing`` False)
        looking only at the names its last listing left pending: nothing to do when there are
        none. Returns how many files were deleted.

        Raises:
            CommitError: listing, reading the log or deleting failed.
        """
        known = self._pending.get(name)
        if not listing and not known:
            return 0
        among = None if listing else known
        scan = remove_orphans(table, self.topic, app_txn, self.storage_options, among=among)
        self._pending[name] = scan.pending
        return scan.removed
