"""``parka ingest``'s background compaction: a thread of its own that keeps the table's small
files within the budget of :class:`parka.lake.CompactionPolicy` while the loop and the commit
thread ingest.

It never blocks a commit and is never part of one: after each commit that ended, the loop
:meth:`~Compactor.poke`\\ s it, and it reads the table as committed (a new handle on the table's
latest version: it cannot see, let alone touch, the files of a commit not yet in the table),
picks the files the policy says, rewrites them and commits the rewrite through
:func:`parka.lake.compact_table` / ``compact_iceberg`` (one commit of ``remove`` + ``add``,
no ``txn``; a conflict re-reads, keeps the rewrites whose inputs are all still live and drops
the others with their files). Pokes that arrive while it works are folded into one more round.
A compaction that fails (conflicts that did not resolve included) is logged and counted, and
the next poke tries again; ingestion goes on either way. :meth:`~Compactor.close` cancels it
between two rewrites or before its commit (its new files deleted) and waits for the thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Protocol

from parka.lake import (
    CommitTurn,
    CompactionPolicy,
    OnRewrite,
    OptimizeResult,
    commits_per_s,
    compact_table,
    optimize_table,
    table_retention,
    vacuum_by_table_retention,
)

from parka.errors import CommitError, NoTableError
from parka.logtopic import carried

from ._settings import IngestSettings

if TYPE_CHECKING:
    from parka.lake import IcebergEngine

__all__ = [
    "CompactionCounts",
    "Compactor",
    "Maintenance",
    "MaintenanceCounts",
    "Vacuum",
    "VacuumCounts",
    "table_compaction",
]

log = logging.getLogger("parka.ingest")

Compact = Callable[[CompactionPolicy | None, threading.Event | None], OptimizeResult]
"""One compaction of the table: by ``policy`` (``None``: all its small files, as ``parka
optimize`` does), cancelled when the event is set."""


def table_compaction(
    settings: IngestSettings, commit_turn: CommitTurn | None = None, rows_moved: OnRewrite | None = None
) -> Compact:
    """The compaction of ``settings``' table (no checkpoint, no VACUUM: the committer and
    ``parka optimize`` do those), for one thread: an Iceberg table is reached through an engine
    (a catalog connection) of its own. An Iceberg compaction commits holding ``commit_turn``,
    the ingest committer's (:attr:`parka.lake.Committer.commit_turn`): pyiceberg's commit asserts
    the snapshot it read, and one that writes hundreds of files' manifests lost every race to a
    daemon committing each 100 ms. A Delta compaction needs no turn (delta-rs commits it over
    the appends that came first), except into an upsert table: there it commits holding it and
    tells ``rows_moved`` (:meth:`parka.lake.Committer.rows_moved`) where the rows went, so the
    key index follows them between two of the ingest's commits."""
    engine: IcebergEngine | None = None
    s = settings

    def compact(policy: CompactionPolicy | None, cancel: threading.Event | None) -> OptimizeResult:
        nonlocal engine
        if s.catalog is None:
            if policy is None:  # --optimize-every: parka optimize's, to its default size, as it always did
                return optimize_table(s.table_uri, checkpoint=False, storage_options=s.storage_options)
            return compact_table(
                s.table_uri,
                policy,
                target_size=s.target_file_size,
                storage_options=s.storage_options,
                cancel=cancel,
                commit_turn=commit_turn if s.upsert else None,
                on_commit=rows_moved if s.upsert else None,
            )
        from parka.lake import (
            IcebergEngine,
            compact_iceberg,
            optimize_iceberg,
        )  # the iceberg extra: only when asked for

        if engine is None:
            engine = IcebergEngine(s.catalog, s.catalog_options, s.storage_options)
        if policy is None:
            return optimize_iceberg(engine, s.table_uri, storage_options=s.storage_options)
        return compact_iceberg(
            engine,
            s.table_uri,
            policy,
            target_size=s.target_file_size,
            storage_options=s.storage_options,
            cancel=cancel,
            commit_turn=commit_turn,
        )

    return compact


def _turns() -> int:
    """How many compactions a process runs at once: half its cores, at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


# Shared by every Compactor of the process: the lanes of a daemon of many topics take turns. A
# compaction builds its new file in memory (a bin of up to --compact-min-files files of a
# generation, decoded), so 50 topics' compactions at once held gigabytes (a 50-topic daemon under
# load peaked at 3-5 GiB with them, 0.9 GiB without: benchmarks/results/2026-11-30-fleet-load/).
# A daemon of one topic has one compactor and never waits.
_COMPACTION_TURNS = threading.BoundedSemaphore(_turns())
_TURN_POLL_S = 0.5  # how often a compactor waiting for its turn looks at its cancellation


class CompactionCounts(Protocol):
    """Where the compactor counts (the daemon's stats)."""

    commits: int
    optimizations: int
    compactions: int
    files_compacted: int
    compaction_failures: int


class Compactor:
    """The compaction thread of one ``parka ingest`` of ``topic``; ``compact`` is called on it,
    with ``policy`` scoped to the Kafka partitions the worker holds (:attr:`partitions`, set by
    the loop on each assignment)."""

    def __init__(self, compact: Compact, policy: CompactionPolicy, *, topic: str, counts: CompactionCounts) -> None:
        self._compact = compact
        self._policy = policy
        self._topic = topic
        self._counts = counts
        self.partitions: frozenset[int] = frozenset()
        self._due = threading.Event()
        self._cancel = threading.Event()
        self._draining = False  # close(drain=True): end once nothing is due
        self._thread = threading.Thread(target=carried(self._run), name="parka-compact", daemon=True)
        self._thread.start()

    def assign(self, partitions: Collection[int]) -> None:
        """The Kafka partitions this worker now holds (its files are the ones it compacts)."""
        self.partitions = frozenset(partitions)

    def poke(self) -> None:
        """A commit ended (or ingestion started): look at the table again."""
        self._due.set()

    def close(self, *, drain: bool = False) -> None:
        """Cancel a compaction in progress (between rewrites, or before its commit) and wait for
        the thread; with ``drain`` (a run-once's end), let it finish what is due first, the
        table's latest commit included, so a short run still compacts. Idempotent."""
        if drain:
            self._draining = True
        else:
            self._cancel.set()
        self._due.set()
        self._thread.join()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        _lower_priority()
        while True:
            if self._draining and not self._due.is_set():
                return
            self._due.wait()
            if self._cancel.is_set():
                return
            self._due.clear()
            policy = self._policy.scoped(self._topic, self.partitions)
            if not policy.partitions:
                continue  # holds nothing: nothing of its own to compact
            while not _COMPACTION_TURNS.acquire(timeout=_TURN_POLL_S):
                if self._cancel.is_set():
                    return
            try:
                result = self._compact(policy, self._cancel)
            except NoTableError:  # a run that has not created its table yet: nothing to compact
                continue
            except CommitError as exc:  # CommitConflict included: nothing lost, the small files stay
                self._counts.compaction_failures += 1
                log.warning("background compaction failed, ingestion goes on: %s", exc)
                continue
            except Exception:  # maintenance only: never the end of ingestion
                self._counts.compaction_failures += 1
                log.exception("background compaction failed unexpectedly, ingestion goes on")
                continue
            finally:
                _COMPACTION_TURNS.release()
            if result.files_removed:
                self._due.set()  # its files may complete the next generation's budget: look again
                self._counts.compactions += 1
                self._counts.files_compacted += result.files_removed
                log.info(
                    "compacted %d small file(s) into %d (version %d -> %d)",
                    result.files_removed,
                    result.files_added,
                    result.version_before,
                    result.version_after,
                )
            if result.encrypted_files:
                log.warning(
                    "background compaction stops for this run: %d file(s) of the table are encrypted (column "
                    "encryption) and compaction holds no keys to rewrite them (--compact-min-files 0 skips it)",
                    result.encrypted_files,
                )
                return


def _lower_priority() -> None:
    """Make the calling thread nice 10 (Linux schedules threads on their own: the loop and the
    commit thread keep theirs), so that on a busy machine a compaction waits, not a commit.
    Where threads cannot be niced, nothing changes."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError) as exc:
        log.debug("background compaction runs at the process's priority: %s", exc)


class VacuumCounts(Protocol):
    """Where the VACUUM thread counts (the daemon's stats)."""

    vacuums: int
    files_vacuumed: int
    vacuum_failures: int


VACUUM_DUTY = 0.1
"""The share of one thread's time VACUUM may take: a run that took ``d`` seconds is followed by
the next after ``max(--vacuum-every, d / VACUUM_DUTY)``. delta-rs' VACUUM deletes every file
that is due in one call (it takes no limit), so its budget is how often it runs."""


class Vacuum:
    """The VACUUM thread of one ``parka ingest`` into a Delta table: at start, then every
    ``every_s`` seconds, delta-rs' VACUUM by the table's own
    ``delta.deletedFileRetentionDuration`` (:func:`parka.lake.vacuum_by_table_retention`): it
    deletes the files older than the retention that no version inside it names, never a file
    such a version names nor one written less than the retention ago (a commit in flight's), so
    it is safe beside the commits, compaction and other writers and readers. A run that fails is
    logged and counted; the next one tries again."""

    def __init__(
        self,
        uri: str,
        storage_options: dict[str, str],
        *,
        every_s: float,
        counts: VacuumCounts,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._uri = uri
        self._storage_options = storage_options
        self._every_s = every_s
        self._counts = counts
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=carried(self._run), name="parka-vacuum", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread (a run in progress ends first: delta-rs cannot be interrupted)."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        _lower_priority()
        wait = 0.0  # the first at start: a run-once job (--end-at-latest) VACUUMs too
        while not self._stop.wait(wait):
            took = self.run_once()
            wait = max(self._every_s, took / VACUUM_DUTY)

    def run_once(self) -> float:
        """One VACUUM; returns the seconds it took."""
        start = self._clock()
        try:
            deleted = vacuum_by_table_retention(self._uri, self._storage_options)
        except Exception as exc:  # maintenance only: never the end of ingestion
            self._counts.vacuum_failures += 1
            log.warning("VACUUM failed, ingestion goes on (the next run tries again): %s", exc)
            return self._clock() - start
        took = self._clock() - start
        self._counts.vacuums += 1
        self._counts.files_vacuumed += len(deleted)
        log.info(
            "VACUUM deleted %d file(s) older than the table's retention that no version inside it names in %.2f s",
            len(deleted),
            took,
        )
        return took


def check_retention(settings: IngestSettings) -> None:
    """At start, on an existing Delta table: warn once when its retentions are longer than
    ``--table-retention`` (every tombstone of a file compaction removed stays in every checkpoint
    that long, and the file on disk), with the numbers; with ``--set-table-retention``, set them
    instead. Maintenance only: a failure is logged and ingestion goes on."""
    s = settings
    if s.catalog is not None:
        return
    try:
        retention = table_retention(
            s.table_uri, s.storage_options, set_to_s=s.table_retention_s if s.set_table_retention else None
        )
    except Exception as exc:
        log.warning("cannot read or set the table's retention, ingestion goes on: %s", exc)
        return
    if retention is None:
        return  # no table yet: ingestion creates it with --table-retention's
    if s.set_table_retention:
        log.info("table retention: deleted files %.0f s, log %.0f s", retention.deleted_file_s, retention.log_s)
        return
    want = s.table_retention_s
    if retention.deleted_file_s <= want and retention.log_s <= want:
        return
    rate = commits_per_s(s.table_uri, s.storage_options)
    at_rate = (
        "its recent commit rate is unknown"
        if rate is None
        else f"at its recent {rate * 86_400:,.0f} commits a day the log keeps {rate * retention.log_s:,.0f} versions"
    )
    log.warning(
        "the table keeps removed files for %.0f s (delta.deletedFileRetentionDuration) and log entries for %.0f s "
        "(delta.logRetentionDuration), longer than --table-retention (%d s); %s, and every file compaction "
        "removes stays on disk and as a tombstone in every checkpoint and every reader's table open for the "
        "deleted-file retention (VACUUM deletes it only after). --set-table-retention sets both to %d s; "
        "the table is left as it is",
        retention.deleted_file_s,
        retention.log_s,
        want,
        at_rate,
        want,
    )


class MaintenanceCounts(CompactionCounts, VacuumCounts, Protocol):
    """Where the maintenance counts (the daemon's stats)."""


class Maintenance:
    """The table maintenance of one ``parka ingest``: the background compaction thread (unless
    ``compact_min_files`` is 0) and ``--optimize-every``'s compaction between commits, which the
    loop runs on its own thread once the commit in flight ended."""

    def __init__(self, settings: IngestSettings, counts: MaintenanceCounts) -> None:
        self._settings = settings
        self._counts = counts
        self._compactor: Compactor | None = None
        self._optimize: Compact | None = None
        self._optimized_at = 0  # counts.commits at the last --optimize-every run
        self._vacuum: Vacuum | None = None

    def start(self, commit_turn: CommitTurn | None = None, rows_moved: OnRewrite | None = None) -> None:
        """Start the compaction and VACUUM threads; ``commit_turn`` and ``rows_moved``: the ingest
        committer's lock and its key index's hook (:func:`table_compaction`)."""
        s = self._settings
        if s.upsert and s.optimize_every and self._compactor is None:
            log.info("--upsert: no --optimize-every (its rewrites may reorder rows the key index points at); "
                     "background compaction keeps the files compact")  # fmt: skip
        if s.compact_min_files and self._compactor is None:
            policy = CompactionPolicy(s.compact_min_files, s.compact_max_rewrites)
            compact = table_compaction(s, commit_turn, rows_moved)
            self._compactor = Compactor(compact, policy, topic=s.topic, counts=self._counts)
        self._start_vacuum()

    def _start_vacuum(self) -> None:
        """A Delta table's retention checked, then its VACUUM thread (unless ``--vacuum-every 0``)."""
        s = self._settings
        if s.catalog is not None or self._vacuum is not None:
            return  # Iceberg: snapshot expiry at each checkpoint deletes the files only expired snapshots named
        check_retention(s)
        if s.vacuum_every_s:
            self._vacuum = Vacuum(s.table_uri, s.storage_options, every_s=s.vacuum_every_s, counts=self._counts)

    def assign(self, partitions: Collection[int], *, table_exists: bool) -> None:
        """The worker holds ``partitions`` now; look at the table when it exists (small files
        another worker left of them), else after the first commit made it."""
        if self._compactor is not None:
            self._compactor.assign(partitions)
            if table_exists:
                self._compactor.poke()

    def committed(self) -> None:
        """A commit ended: the compaction thread looks at the table."""
        if self._compactor is not None:
            self._compactor.poke()

    def close(self, *, drain: bool = False) -> None:
        """Stop the compaction thread: a compaction in progress cancelled, its files deleted; with
        ``drain``, once it compacted what is due (:meth:`Compactor.close`)."""
        if self._compactor is not None:
            self._compactor.close(drain=drain)
            self._compactor = None
        if self._vacuum is not None:
            self._vacuum.close()
            self._vacuum = None

    def optimize_due(self) -> bool:
        """``--optimize-every`` commits of this worker went by since its last run."""
        every = self._settings.optimize_every
        return bool(every) and not self._settings.upsert and self._counts.commits - self._optimized_at >= every

    def optimize(self) -> None:
        """Compact the table's small files, all of them, as ``parka optimize`` does (no
        checkpoint: the committer writes those). Between commits, never inside one: the caller
        waits for the commit in flight, and the next commit re-reads the table (the protocol's
        step 3). Maintenance only: a failure is logged and ingestion goes on."""
        self._optimized_at = self._counts.commits
        if self._optimize is None:
            self._optimize = table_compaction(self._settings)
        try:
            result = self._optimize(None, None)
        except CommitError as exc:  # CommitConflict included: the small files stay, nothing is lost
            log.warning("optimize failed, ingestion goes on: %s", exc)
            return
        self._counts.optimizations += 1
        self._counts.files_compacted += result.files_removed
