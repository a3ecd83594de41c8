"""The orphan cleanup: data files ingestion (or background compaction) wrote that no commit will
ever name, deleted without ever touching a file some log entry names or a live writer may still
commit. Called by the committer (:meth:`parka.lake.Committer.remove_orphans`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from ._compaction import CompactedName, input_key
from ._log import TableLog
from ._plan import FileName
from ._storage import delete_files, list_files

__all__ = ["remove_orphans"]

log = logging.getLogger("parka.ingest")


def remove_orphans(
    table: TableLog,
    topic: str,
    app_txn: Callable[[int], str],
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """Delete data files this topic's ingestion wrote but never committed; returns how many.

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
    points at is not in a snapshot read after the listing: a compaction commits only while all
    its inputs are live, so nobody will ever commit it.

    Raises:
        CommitError: listing, reading the log or deleting failed.
    """
    table.refresh()
    referenced = table.referenced_files()
    versions: dict[int, int | None] = {}
    candidates = []
    written: list[tuple[str, str]] = []  # compacted files and their first input's key
    for info in list_files(table.uri, storage_options):
        if info.path in referenced:
            continue
        compacted = CompactedName.parse(info.path, temporary=True)
        if compacted is not None:
            written.append((info.path, compacted.input))
            continue
        name = FileName.parse(info.path, temporary=True)
        if name is None or name.topic != topic:
            continue
        if name.partition not in versions:
            versions[name.partition] = table.txn_version(app_txn(name.partition))
        version = versions[name.partition]
        if version is not None and name.last_offset <= version:
            candidates.append(info.path)
    if written:
        # Judged on a snapshot read after the listing: the compaction that wrote a listed file
        # planned on a snapshot no newer than that, so an input it had is either still live in
        # it or was removed, for good.
        table.refresh()
        live = table.referenced_files()
        live_keys = {input_key(path) for path in live}
        candidates += [path for path, key in written if path not in live and key not in live_keys]
    if not candidates:
        return 0
    logged = table.logged_files()  # read after the snapshot: it names all of the snapshot's files
    doomed = [path for path in candidates if path not in logged]
    if doomed:
        delete_files(table.uri, doomed, storage_options)
        log.info("removed %d orphan data file(s) left by interrupted commits or compactions", len(doomed))
    if len(doomed) < len(candidates):
        log.debug("left %d removed file(s) to VACUUM", len(candidates) - len(doomed))
    return len(doomed)
