"""The exactly-once commit of raw segments into a table, written once, whatever its format.

``parka ingest`` (:mod:`._ingest`) and Spark raw mode's driver (``spark_ext/_raw.py``) both hand
:meth:`Committer.commit` what they have: segments already written as data files
(:class:`~parka.lake._plan.LandedSegment`) and messages the table cannot take
(:class:`~parka.lake._plan.Refused`). The committer reaches the table only through
:class:`~parka.lake._log.TableLog` (delta-rs, delta-spark or Iceberg's). The table's log is the
source of truth for progress: for every Kafka partition, the ``txn`` of app id
``<app_id>-<partition>`` holds the last offset in the table (Delta: a ``txn`` action; Iceberg: the
snapshot summary's ``parka.txns``). Kafka (seeking, offsets for lag tools) stays with the caller.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from parka.crash import crash_point
from parka.errors import CommitConflict, CommitError, ConfigError
from parka.partitioning import PartitionSpec, parse_partition_by
from parka.segment import KEY_COLUMN

from ._cdc import Debezium
from ._checkpoints import CHECKPOINT_CLOSE_S, Checkpoints
from ._commit_stats import CommitResult, CommitStats
from ._dead_letters import append_dead_letters
from ._files import trim_stitched
from ._keys import KeyIndex, Rewritten, key_columns_read, keys_of, sequences_of
from ._log import DataFile, LogEngine, TableLog, UpsertLog
from ._orphans import Orphans
from ._plan import (
    FileName,
    LandedSegment,
    Refused,
    Tombstone,
    app_txn_id,
    check_key_columns,
    check_partitioning,
    check_sequence_column,
    dead_letter_txn_id,
    default_app_id,
    table_identity,
    table_partitioning,
    table_schema_from_segment,
)
from ._settle import evolved_columns, settle_files, split_covered, stop_at_refused, with_widening
from ._stats import StatsConfig
from ._storage import delete_files, make_durable, read_columns

__all__ = ["DEFAULT_CHECKPOINT_INTERVAL", "CommitResult", "CommitStats", "Committer"]

log = logging.getLogger("parka.commit")

DEFAULT_CHECKPOINT_INTERVAL = 10
"""Commits between two checkpoints (and orphan cleanups) when none is given
(``--checkpoint-interval``' default); 0 never."""
MAX_COMMIT_ATTEMPTS = 20
T = TypeVar("T")


def backoff_s(attempt: int) -> float:
    """The pause after the ``attempt``-th conflict in a row (from 0): 50 ms, doubling, at most 2 s."""
    return min(0.05 * 2**attempt, 2.0)


class Committer:
    """Commits one topic's raw segments into one table for one app id; see :meth:`commit`.

    Opens the table when there is one. ``partition_by`` is what the caller was told (column
    names, or specs such as ``day=date(ts)``: :mod:`parka.partitioning`); an existing table's
    own partitioning wins (its derived columns carry their expression), and a different
    non-empty ``partition_by`` is refused. ``partitioning`` holds the specs, ``partition_by``
    the table's partition column names; ``identity`` names the table
    (:func:`parka.lake.table_identity`; an Iceberg engine's catalog included); ``app_id`` names
    the ``txn`` app ids (:func:`parka.lake.default_app_id` of the table when not given, and then
    ``app_id_given`` is false). ``on_commit`` is told the seconds each :meth:`commit`
    that committed something took (the commit-latency metric), ``on_checkpoint`` the seconds each
    checkpoint took (the checkpoint metric), as ``clock`` times it; ``sleep`` waits out the
    backoff after a conflict (:meth:`retry`); :attr:`commit_turn` is the lock each attempt holds.
    ``relist_orphans``: every periodic orphan cleanup
    lists the table (Spark: a retried task attempt's file is never named to this process).
    ``upsert``: the table holds the latest row per record key (:meth:`_commit_upsert`);
    ``cdc``: its rows are change events (:mod:`parka.lake._cdc`), whose delete rows delete their
    key, ordered by the table's default sequence column unless ``sequence_by`` names one.
    ``copy_on_write``: an upsert deletes superseded rows by rewriting their files, not by
    deletion vector (:mod:`parka.lake.delta._cow`).

    Raises:
        ConfigError: a malformed spec, or ``partition_by`` contradicts the existing table's
            partitioning.
        CommitError: the table cannot be read, or uses a feature raw files would bypass.
    """

    def __init__(
        self,
        engine: LogEngine,
        *,
        table_uri: str,
        topic: str,
        app_id: str | None = None,
        partition_by: Sequence[str | PartitionSpec] = (),
        merge: bool = False,
        dlq_table_uri: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
        stats: CommitStats | None = None,
        on_commit: Callable[[float], None] | None = None,
        on_checkpoint: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        relist_orphans: bool = False,
        upsert: bool = False,
        key_columns: Sequence[str] = (),
        sequence_by: str | None = None,
        cdc: Debezium | None = None,
        copy_on_write: bool = False,
    ) -> None:
        if checkpoint_interval < 0:
            raise ConfigError("checkpoint_interval", checkpoint_interval, "an integer >= 0 (0: never)")
        self.engine = engine
        self.table_uri = table_uri
        self.topic = topic
        # an Iceberg engine names its catalog; a Delta table is named by its address alone
        self.identity = table_identity(table_uri, getattr(engine, "catalog_name", None))
        self.app_id = app_id or default_app_id(topic, self.identity)
        self.app_id_given = bool(app_id)
        self.merge = merge
        self.dlq_table_uri = dlq_table_uri
        self.storage_options = dict(storage_options or {})
        self.checkpoint_interval = checkpoint_interval
        self.stats = CommitStats() if stats is None else stats
        self.on_commit = on_commit
        self.on_checkpoint = on_checkpoint
        self.clock = clock
        self._sleep = sleep
        # Held by every attempt of retry (commits, schema changes, the checkpoint after a commit):
        # a writer of the same process that would otherwise lose its commit to this one's takes
        # it too (an Iceberg table's background compaction: consumer/_compactor.py)
        self.commit_turn = threading.RLock()
        self._orphans = Orphans(topic, self.storage_options)
        self._relist_orphans = relist_orphans
        beside = engine.checkpoint_beside_commits
        self._checkpoints = Checkpoints(
            engine.name,
            checkpoint_interval,
            clock=clock,
            on_checkpoint=self._checkpoint_took,
            open_table=(lambda: engine.open(table_uri, self.storage_options)) if beside else None,
        )
        self.partitioning = parse_partition_by(partition_by)
        self.partition_by = tuple(s.name for s in self.partitioning)
        self.upsert = upsert
        # the columns a row's key is made of (upserts): the record key, or --key-columns
        self.key_columns = tuple(key_columns) or (KEY_COLUMN,)
        self.sequence_by = sequence_by  # the column that orders a key's rows (upserts), else the offset
        self.cdc = cdc
        self.copy_on_write = copy_on_write  # upserts: superseded rows go by rewriting their files
        self.table: TableLog | None = engine.open(table_uri, self.storage_options)
        if self.table is not None:
            self._adopt_partitioning()
            self._cdc_sequence(self.table.arrow_schema())
            if key_columns:
                check_key_columns(self.table.arrow_schema(), key_columns, where="the table")
            if sequence_by:
                check_sequence_column(self.table.arrow_schema(), sequence_by, where="the table")
        self._schema: tuple[int, pa.Schema] | None = None
        self._stats_config: tuple[int, StatsConfig] | None = None
        self._keys: tuple[int, KeyIndex] | None = None  # (the version it is of, the index): upserts'

    def _cdc_sequence(self, schema: pa.Schema) -> None:
        """A CDC table without ``sequence_by``: its default sequence column, once the schema is known."""
        if self.cdc is not None and self.sequence_by is None:
            self.sequence_by = self.cdc.default_sequence(schema)

    def _adopt_partitioning(self) -> None:
        assert self.table is not None
        actual = table_partitioning(self.table.arrow_schema(), self.table.partition_columns())
        if self.partitioning and self.partitioning != actual:
            raise ConfigError(
                "--partition-by",
                ",".join(map(str, self.partitioning)),
                f"the table's own partition columns ({','.join(map(str, actual)) or 'none'}), or nothing",
                reason=f"{self.table_uri} exists",
            )
        self.partitioning = actual
        self.partition_by = tuple(s.name for s in actual)

    # -- the table ---------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """Where the table's data files go: its :attr:`TableLog.uri` (an Iceberg table's is its
        location's ``data`` directory, while ``table_uri`` names it in its catalog)."""
        return self.table.uri if self.table is not None else self.table_uri

    def app_txn(self, partition: int) -> str:
        return app_txn_id(self.app_id, partition)

    def txn_versions(self, partitions: Iterable[int]) -> dict[int, int | None]:
        """The table's latest ``txn`` version of each partition (``None``: nothing of it yet)."""
        if self.table is None:
            self.table = self.engine.open(self.table_uri, self.storage_options)
            if self.table is None:
                return {p: None for p in partitions}
            self._adopt_partitioning()
        self.table.refresh()
        return {p: self.table.txn_version(self.app_txn(p)) for p in partitions}

    def ensure_table(self, segment_schema: pa.Schema, *, source: str = "the topic's first segment") -> None:
        """Create the table from a segment's schema (user columns, derived partition columns,
        then its reserved ones as nullable columns), unless it exists (or another writer just
        created it). ``source`` names where ``segment_schema`` comes from, for the error.

        Raises:
            ConfigError: ``partition_by`` names a column the schema lacks or one of a type it
                cannot partition by (:func:`parka.lake._plan.check_partitioning`: nothing is
                created, and the data is no reason for a dead letter); another writer just
                created the table with another partitioning.
            SchemaMismatchError: a column the table format cannot store.
        """
        if self.table is not None:
            return
        check_partitioning(segment_schema, self.partitioning, where=source)
        self._cdc_sequence(segment_schema)
        if self.key_columns != (KEY_COLUMN,):
            check_key_columns(segment_schema, self.key_columns, where=source)
        if self.sequence_by:
            check_sequence_column(segment_schema, self.sequence_by, where=source)
        try:
            self.table = self.engine.create(
                self.table_uri,
                table_schema_from_segment(segment_schema, self.partitioning),
                partition_by=self.partition_by,
                storage_options=self.storage_options,
            )
            log.info("new table %s from the segment schema (%s)", self.table_uri, self.engine.name)
        except CommitConflict:
            self.table = self.engine.open(self.table_uri, self.storage_options)
            self._adopt_partitioning()

    def table_schema(self) -> pa.Schema:
        """The table's Arrow schema at its current snapshot (converted once per version)."""
        assert self.table is not None, "no table yet: ensure_table first"
        version = self.table.version()
        if self._schema is None or self._schema[0] != version:
            self._schema = (version, with_widening(self.table.arrow_schema(), self.table.configuration()))
        return self._schema[1]

    def stats_config(self) -> StatsConfig:
        """The statistics the table's properties ask its data files for, at its current snapshot
        (read once per version).

        Raises:
            ConfigError: a data-skipping property delta-spark would refuse, naming it.
        """
        assert self.table is not None, "no table yet: ensure_table first"
        version = self.table.version()
        if self._stats_config is None or self._stats_config[0] != version:
            self._stats_config = (version, StatsConfig.from_properties(self.table.configuration()))
        return self._stats_config[1]

    def refresh(self) -> None:
        if self.table is not None:
            self.table.refresh()

    def remove_orphans(self, *, listing: bool = True) -> int:
        """Delete the files of commits that never happened, in the table and the dead-letter table
        (:mod:`parka.lake._orphans`); without ``listing``, only those the last listing left pending."""
        listing, dlq_uri = listing or self._relist_orphans, self.dlq_table_uri
        table, removed = self.table, 0
        if table is not None:
            removed += self._orphans.clean(self.table_uri, table, self.app_txn, listing=listing)
        if dlq_uri and (listing or self._orphans.pending(dlq_uri)):  # else no need to open it
            dlq = self.engine.open(dlq_uri, self.storage_options)
            if dlq is not None:
                txn = lambda p: dead_letter_txn_id(self.app_id, p)  # noqa: E731
                removed += self._orphans.clean(dlq_uri, dlq, txn, listing=listing)
        self.stats.orphans_removed += removed
        return removed

    # -- the protocol ------------------------------------------------------------------------

    def commit(
        self,
        landed: Sequence[LandedSegment],
        refused: Sequence[Refused] = (),
        *,
        durable: bool = False,
        commit_info: Mapping[str, Any] | None = None,
        tombstones: Sequence[Tombstone] = (),
    ) -> CommitResult:
        """Commit ``landed`` segments and dead-letter ``refused`` messages, exactly once.

        1. The data files are written under fresh names nothing references: one per segment, or
           one for several segments of a Kafka partition (stitched; each ``LandedSegment`` says
           which row groups are its own). Unless the caller says they are ``durable`` already
           (Spark's executors flush their own), one flush of the table's file system makes them
           durable before a log entry can name them.
        2. Without a dead-letter table, a refused message stops its partition: what comes
           before it is committed (3-7), its files and any after it are deleted, and its error
           is raised at the end (the first one, by partition and offset). Ingestion resumes
           from the table's ``txn``, so the same message stops it again until the topic is
           fixed or a dead-letter table is given.
        3. Re-read the table. For each partition, ``v`` = its ``txn`` version. A segment or
           message at an offset <= ``v`` is already covered (committed by an earlier attempt,
           a replayed Spark batch, or another writer with this app id): its files are deleted
           in 7, never committed. The rest is new. A stitched file holding both is rewritten
           with the new segments' row groups only (so is one a refused message cuts in 2), and
           deleted in 7. (The caller's data for a partition starts
           right after the ``txn`` it last saw, and ``txn`` versions only grow, so the new
           data always continues the table's without a gap.)
        4. New refused messages go to the dead-letter table first, with its own ``txn``
           (``<app_id>-dlq-<partition>``), so a retry never duplicates a row.
        5. The schema changes the new files need (reserved columns; with ``merge``, new fields
           at any depth, widenings, relaxed nullability: :meth:`_evolve`, built on the schema
           read in 3) are made (delta-rs: commits of their own; delta-spark: part of the
           commit in 6).
        6. One table commit (a Delta log version, an Iceberg snapshot), no automatic retries: the
           new files (Kafka coordinates in their tags) and, per partition with anything new,
           ``txn`` = its highest new offset.
           A ``CommitConflict`` (a concurrent commit the engine could not rebase this one on,
           in 4, 5 or 6) goes back to 3 after a short backoff (:meth:`retry`); after
           :data:`MAX_COMMIT_ATTEMPTS` it is raised.
           Any other ``CommitError`` is raised with the files left in place: the commit may
           have landed, and only the log tells; step 3 of the next attempt sorts it out.
        7. Delete the covered files. Every ``checkpoint_interval`` commits, checkpoint the table
           (Delta: a log checkpoint, which delta-rs writes beside the commits on a thread of its
           own; Iceberg: snapshot expiry) and remove orphan files.

        A crash between 1 and 6 leaves files no log entry names, above the ``txn``: the data is
        consumed again (from the ``txn`` version + 1, or Spark's checkpoint), committed in new
        files, after which the old ones are at or below the ``txn`` and :meth:`remove_orphans`
        deletes them. A crash after 6 loses nothing: the ``txn`` says what is in.

        Raises:
            SegmentError, SegmentDecodeError, SchemaMismatchError: a refused message without a
                dead-letter table (step 2), after the rest was committed.
            CommitConflict: conflicts that did not resolve (step 6).
            CommitError: the commit, a write or a deletion failed.
        """
        if not landed and not refused and not tombstones:
            return CommitResult()
        started, commits = self.clock(), self.stats.commits
        if landed and not durable:
            make_durable(self.root, self.storage_options)
        failure: Refused | None = None
        stopped: list[LandedSegment] = []
        if refused and self.dlq_table_uri is None:
            failure, landed, stopped = stop_at_refused(landed, refused)
            refused = []
            if not landed:  # nothing to keep: no stitched file needs trimming
                self._discard(settle_files([], stopped, self._trim)[1])
                stopped = []
        partitions = {s.partition for s in landed} | {r.partition for r in refused} | {t.partition for t in tombstones}
        info = commit_info or {}
        result = self.retry(lambda txn: self._attempt(txn, landed, refused, info, stopped, tombstones), partitions)
        if self.on_commit is not None and self.stats.commits > commits:
            self.on_commit(self.clock() - started)
        if failure is not None:
            log.error("stopped at %s[%d]@%d: %s", self.topic, failure.partition, failure.offset, failure.error)
            raise failure.error
        return result

    def _attempt(
        self,
        table_txn: Mapping[int, int | None],
        landed: Sequence[LandedSegment],
        refused: Sequence[Refused],
        commit_info: Mapping[str, Any],
        stopped: Sequence[LandedSegment],
        tombstones: Sequence[Tombstone] = (),
    ) -> CommitResult:
        """Steps 3 (from the ``txn`` versions just read) to 7 of :meth:`commit`, once."""
        table = self.table
        split = split_covered(table_txn, landed, refused)
        fresh, stale, last = split.fresh, split.stale, split.last
        deletes = [t for t in tombstones if t.offset > _or_before_first(table_txn[t.partition])]
        for t in deletes:
            last[t.partition] = max(t.offset, last.get(t.partition, -1))
        trimmed: list[str] = []
        # Steps 4-6 each commit to a table another writer may have moved: a conflict in any
        # of them goes back to 3 (they are idempotent: the dead-letter txn, the columns present).
        try:
            if table is None:  # refused messages only, and no table yet to record progress in
                self._dead_letter(refused)
                return CommitResult(table_txn=table_txn)
            if self._dead_letter(split.dead):
                crash_point("after-dead-letters")
            self._evolve(table, fresh)
            files, doomed = settle_files(fresh, [*stale, *stopped], self._trim)
            trimmed = [f.path for f in files if f.path not in {g.path for s in fresh for g in s.files}]
            if trimmed:
                make_durable(self.root, self.storage_options)
            txns = {self.app_txn(p): off for p, off in last.items()}
            info = {"parka.app_id": self.app_id, "parka.topic": self.topic, **commit_info}
            if self.upsert:
                version = self._commit_upsert(table, files, deletes, txns, info)
            else:
                version = table.commit_add_files(files, txns=txns, commit_info=info)
        except CommitConflict:
            # another writer's commit: the index (of the version this attempt read; a plan is
            # applied only once its commit landed) catches up at the next attempt
            self._discard(trimmed)
            raise
        crash_point("after-delta-commit")
        if stale:
            log.info(
                "dropped %d segment(s) the table already had: partitions %s (another writer with app id %s, "
                "or a replay)",
                len(stale),
                sorted({s.partition for s in stale}),
                self.app_id,
            )
        self._discard(doomed)
        self._count(fresh, files, {f.path for s in stale for f in s.files}, version, last)
        return CommitResult(version, last, table_txn)

    def _commit_upsert(
        self,
        table: TableLog,
        files: Sequence[DataFile],
        tombstones: Sequence[Tombstone],
        txns: Mapping[str, int],
        commit_info: Mapping[str, Any],
    ) -> int:
        """Step 6 of an upsert table: the new files land as they are, and the rows they and the
        tombstones supersede are deleted in the same commit (by deletion vector), with the
        ``txn`` versions. A key's order is its Kafka partition's offsets: the files (one Kafka
        partition each, never spanning a tombstone) and the tombstones are ordered by
        (partition, offset), and the key index (:class:`parka.lake._keys.KeyIndex`, read from the
        table when it is not of the version just read) says where each key's live row is. The
        index takes the commit's changes only once it landed.

        Raises:
            CommitError: the engine takes no upserts, a file has a record without a key, or the
                commit failed; CommitConflict: another commit won.
        """
        if not isinstance(table, UpsertLog):
            raise CommitError(
                f"{self.table_uri}: this table format takes no upserts (Delta tables through delta-rs do)"
            )
        version = table.version()
        if self._keys is not None and self._keys[0] < version:  # another writer's commits since
            started, since = time.monotonic(), self._keys[0]
            try:
                table.catch_up_index(self._keys[1], since, self.key_columns, self.sequence_by)
                self._keys = (version, self._keys[1])
                log.info(
                    "key index caught up from version %d to %d in %.2f s", since, version, time.monotonic() - started
                )
            except CommitError as exc:
                log.info("key index read again: it could not catch up from version %d (%s)", since, exc)
                self._keys = None
        if self._keys is None or self._keys[0] != version:
            started = time.monotonic()
            self._keys = (version, table.key_index(self.key_columns, self.sequence_by))
            log.info(
                "key index read from version %d: %d keys in %.2f s", version, len(self._keys[1]),
                time.monotonic() - started,
            )  # fmt: skip
        index = self._keys[1]
        if tombstones and self.key_columns != (KEY_COLUMN,):
            if self.cdc is None:
                n = len(tombstones)
                raise CommitError(f"--key-columns: {n} tombstone(s) cannot name rows by their key columns")
            # a change stream's tombstones follow its delete events, which deleted the rows: the
            # commit moves past them (their offsets are in the txn versions already)
            tombstones = []
        placed = sorted(((_coordinates(f.path), f) for f in files), key=lambda pair: pair[0])
        places, ordered = [place for place, _ in placed], [f for _, f in placed]
        chunks, seqs, deleting = [], [], []
        keyed = key_columns_read(self.key_columns, self.sequence_by)
        marker = None if self.cdc is None else self.cdc.delete_column(self.table_schema())
        wanted = [*keyed, *([marker] if marker is not None and marker not in keyed else [])]
        for f in ordered:
            columns = read_columns(self.root, f.path, wanted, self.storage_options)
            if columns is None or any(c.null_count for c in columns.select(keyed).columns):
                what = ", ".join(keyed)
                raise CommitError(f"--upsert: {f.path} holds records without a key or sequence ({what})")
            chunks.append((f.path, keys_of(columns.select(list(self.key_columns)))))
            if self.sequence_by:
                seqs.append(sequences_of(columns.column(self.sequence_by)))
            if marker is not None:
                deleting.append(Debezium.deleting(columns.column(marker), marker))
        after = [bisect.bisect_left(places, (t.partition, t.offset)) for t in tombstones]
        plan = index.plan(
            chunks,
            [t.key for t in tombstones],
            after=after,
            seqs=seqs if self.sequence_by else None,
            deleting=deleting if marker is not None else None,
        )
        done = table.commit_upsert(
            ordered,
            plan.deletes,
            plan.new_file_deletes,
            txns=txns,
            commit_info=commit_info,
            copy_on_write=self.copy_on_write,
        )
        committed = done.version
        index.apply(plan)
        index.move(done.moved)  # the rows of the files a copy-on-write commit rewrote, as after a compaction
        self._discard(done.replaced)  # new files rewritten, or all of whose rows it deleted: never committed
        self._keys = (committed, index)
        return committed

    def rows_moved(self, read_version: int, version: int, moved: Sequence[Rewritten] | None) -> None:
        """A compaction of this process committed ``version`` over ``read_version``, holding
        :attr:`commit_turn` (:func:`parka.lake.compact_table`'s ``on_commit``): an upsert
        table's key index of ``read_version`` follows the rows to their new files
        (:meth:`parka.lake._keys.KeyIndex.move`) and is of ``version`` then; an index of an
        earlier version (or ``moved`` ``None``: a rewrite that reordered rows) stays of its
        version, and the next commit catches it up through this one as through any other."""
        if self._keys is None:
            return
        at, index = self._keys
        if at != read_version or moved is None:
            return
        index.move(moved)
        self._keys = (version, index)

    # -- the retry, for the protocol and for the commits it does not make itself ---------------

    def retry(
        self, attempt: Callable[[Mapping[int, int | None]], T], partitions: Iterable[int] = (), *, what: str = "commit"
    ) -> T:
        """Run ``attempt`` until no other writer's commit refuses it; returns what it returned.
        Each attempt gets the ``txn`` version of each of ``partitions``, read afresh
        (:meth:`txn_versions`), and holds :attr:`commit_turn` (the backoff does not); one that
        raises ``CommitConflict`` is counted, logged (a ``what`` conflict) and tried again after a
        backoff (:func:`backoff_s`, through ``sleep``). Used by
        :meth:`commit`, a schema given up front (:meth:`add_columns`) and Iceberg's Spark writer
        in decode mode (then :meth:`count_commit`). Anything else ``attempt`` raises goes up at once.

        Raises:
            CommitConflict: :data:`MAX_COMMIT_ATTEMPTS` attempts in a row conflicted; it names the
                table and the count.
        """
        wanted = list(partitions)
        for n in range(MAX_COMMIT_ATTEMPTS):
            try:
                with self.commit_turn:
                    return attempt(self.txn_versions(wanted))
            except CommitConflict as exc:
                self.stats.conflicts += 1
                log.info("%s conflict (attempt %d): re-reading the table (%s)", what, n + 1, exc)
                if n + 1 < MAX_COMMIT_ATTEMPTS:
                    self._sleep(backoff_s(n))
        raise CommitConflict(f"gave up after {MAX_COMMIT_ATTEMPTS} conflicting {what} attempts on {self.table_uri}")

    def add_columns(self, fields: Sequence[pa.Field]) -> None:
        """Add ``fields`` to the table in a commit of their own (a schema given up front:
        :meth:`parka.lake.LandingSession.evolve_to`), counted as a schema evolution. An attempt
        of :meth:`retry`.

        Raises:
            CommitConflict: another writer's commit won.
            CommitError: the table refused the columns.
        """
        assert self.table is not None, "no table yet: ensure_table first"
        self.table.add_columns(list(fields))
        self.table.commit_add_files([], txns={}, commit_info={"parka.app_id": self.app_id, "parka.topic": self.topic})
        self.stats.schema_evolutions += 1

    def count_commit(self, *, segments: int, records: int, started: float) -> None:
        """Count a commit a writer of the caller's made through :meth:`retry` (Iceberg's Spark
        writer in decode mode): ``segments`` and ``records`` in it, and the seconds since
        ``started`` (a reading of ``clock`` before the first attempt) told to ``on_commit``."""
        self.stats.commits += 1
        self.stats.segments += segments
        self.stats.records += records
        if self.on_commit is not None:
            self.on_commit(self.clock() - started)

    def _trim(self, f: DataFile, kept: list[LandedSegment]) -> DataFile:
        """A stitched file rewritten with ``kept``'s row groups only (:func:`settle_files`)."""
        self.stats.trimmed_files += 1
        return trim_stitched(
            f,
            kept,
            table_uri=self.root,
            table_schema=self.table_schema(),
            partition_by=self.partitioning,
            storage_options=self.storage_options,
            stats_config=self.stats_config(),
        )

    def _count(
        self, fresh: Sequence[LandedSegment], files: Sequence[DataFile], covered: set[str], version: int, last: Any
    ) -> None:
        st = self.stats
        st.covered_files += len(covered)
        if not last:
            return
        st.add_commit(fresh, len(files))
        log.debug(  # the progress: line sums them up; a healthy daemon stays quiet (-v shows each)
            "committed %d segment(s), %d records in %d file(s): table version %d",
            len(fresh),
            sum(s.records for s in fresh),
            len(files),
            version,
        )
        if self.checkpoint_interval and st.commits % self.checkpoint_interval == 0:
            assert self.table is not None
            self._checkpoints.due(self.table, version)
            self.remove_orphans(listing=False)

    def _checkpoint_took(self, seconds: float) -> None:
        if self.on_checkpoint is not None:  # (Spark's ingest sets it after construction)
            self.on_checkpoint(seconds)

    def close(self, timeout_s: float = CHECKPOINT_CLOSE_S) -> bool:
        """Finish a checkpoint being written beside the commits; False if not done in ``timeout_s``."""
        return self._checkpoints.close(timeout_s)

    def _dead_letter(self, dead: Sequence[Refused]) -> int:
        """Append dead letters not yet in the dead-letter table; returns how many were appended."""
        if not dead or self.dlq_table_uri is None:
            return 0
        options = self.storage_options
        appended = append_dead_letters(
            self.engine, self.dlq_table_uri, topic=self.topic, app_id=self.app_id, refused=dead, storage_options=options
        )
        self.stats.dead_letters += appended
        for r in dead:  # once they are in (an attempt that lost a race logs nothing)
            log.error("dead-lettered %s[%d]@%d: %s", self.topic, r.partition, r.offset, r.error)
        return appended

    def _evolve(self, table: TableLog, fresh: Sequence[LandedSegment]) -> None:
        """Evolve the table's schema to take the new files (idempotent: :func:`evolved_columns`
        of the schema re-read in step 3).

        Raises:
            SchemaMismatchError: another writer changed the table so that it no longer takes them.
        """
        if not any(s.new_fields for s in fresh):
            return
        changed = evolved_columns(with_widening(table.arrow_schema(), table.configuration()), fresh)
        if changed:
            table.add_columns(changed)
            self.stats.schema_evolutions += 1
            log.info("table schema evolved: %s", ", ".join(f"{f.name}: {f.type}" for f in changed))

    def _discard(self, paths: Sequence[str]) -> None:
        """Delete files that will never be committed, best effort: what stays is an orphan the
        cleanup removes once the table's ``txn`` covers it."""
        if not paths:
            return
        try:
            delete_files(self.root, paths, self.storage_options)
        except CommitError as exc:
            log.warning("could not delete %d uncommitted file(s), left to the orphan cleanup: %s", len(paths), exc)
            self._orphans.watch(self.table_uri, paths)


def _coordinates(path: str) -> tuple[int, int]:
    """A data file's (Kafka partition, first offset), from its name (:class:`FileName`)."""
    name = FileName.parse(path)
    if name is None:
        raise CommitError(f"--upsert: {path} is not a file ingestion named")
    return name.partition, name.offset


def _or_before_first(version: int | None) -> int:
    """A partition's ``txn`` version, -1 when it has none yet (every offset is new)."""
    return -1 if version is None else version
