"""Background compaction's policy (``parka ingest``'s compaction thread): which of a table's small
files are rewritten, when, and how the new files are named. Pure: no I/O, tested without a table.

**The budget.** Files are counted per table partition and *generation*: a file ingestion wrote
(a parka-named file, :class:`~._plan.FileName`) is generation 0; a file background compaction
wrote from generation ``g`` files is generation ``g + 1`` (:class:`CompactedName`). Once a
table partition holds ``min_files`` files of one generation below ``max_rewrites`` that are
smaller than the target size, or such files that add up to the target size, they are rewritten
into files of up to the target size (one row group per million rows). Between compactions a
table partition keeps fewer than ``min_files`` small files of each such generation.

**The write amplification bound.** A file of generation ``max_rewrites``, a file at the target
size or larger, and any file parka did not name (``parka optimize``'s output, another writer's
files) are never picked. So each row is rewritten at most ``max_rewrites`` times: the bytes
written are at most about ``1 + max_rewrites`` times the bytes ingested (a rewritten file
compresses about as well as its inputs; the freshness benchmark measures it). A file with deleted
rows (a deletion vector) past ``purge_fraction`` is rewritten alone, without them, whatever its
generation: those rewrites follow the deletes, not the ingested bytes.

**The row-group budget.** A file ingestion wrote keeps its producers' row groups (one per
segment, stitched), which scans pay for per row group: a file of half the target size or more
(no tier would merge it with a file of its size) whose row groups are small
(:func:`small_row_groups`) is rewritten alone, once, into row groups of a million rows. So no
file the daemon leaves for good has small row groups; its bytes are written once more (twice in
all), within the tiers' bound.

**Who compacts what.** With several workers on one table, each compacts the generation-0 files
of its own topic's Kafka partitions (those assigned to it), so workers do not race each other
over the same files; the files of later generations are compacted by the worker holding Kafka
partition 0. A race that happens anyway (a rebalance, ``parka optimize``) costs work, not data:
a rewrite commits only while its input files are still live (or, on an upsert table, removed
with every row deleted: see below).

**A crashed compaction's files.** A compaction writes its files before it commits them; a
process killed in between leaves them unreferenced. Their name carries a key of the bin's first
input file (:func:`input_key`), and a compaction commits only while that input is live
(:func:`names_input`; an upsert table's other inputs may be gone by then, removed with every
row deleted): so an unreferenced compacted file whose first input is no longer live can never
be committed, and the orphan cleanup deletes it (:func:`parka.lake._orphans.remove_orphans`),
together with a temporary file of such a write. One whose input is still live waits until a
compaction of that input lands.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
import uuid
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ._files import DEFAULT_TARGET_FILE_SIZE
from ._keys import Rewritten
from ._plan import FileName, base_name

__all__ = [
    "DEFAULT_PURGE_FRACTION",
    "DEFAULT_ROW_GROUP_ROWS",
    "DEFAULT_TARGET_SIZE",
    "MAX_ATTEMPTS",
    "Bin",
    "CommitTurn",
    "CompactedName",
    "CompactionPolicy",
    "OnRewrite",
    "OptimizeResult",
    "generation_of",
    "input_key",
    "names_input",
    "plan_bins",
    "small_row_groups",
    "take_turn",
]


class CommitTurn(Protocol):
    """The lock a committer's attempts hold (:attr:`parka.lake.Committer.commit_turn`, a
    ``threading.RLock``), which a compaction of the same process takes to commit between them."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


OnRewrite = Callable[[int, int, "Sequence[Rewritten] | None"], None]
"""Told of a compaction's commit, holding the commit turn: the version it was made over, its
version, and where the inputs' rows went (``None``: a rewrite that reordered them)."""


def take_turn(turn: CommitTurn, cancel: threading.Event | None) -> bool:
    """Acquire ``turn``, waiting while the ingest commits; False once ``cancel`` is set instead."""
    while not turn.acquire(timeout=0.1):
        if cancel is not None and cancel.is_set():
            return False
    return True


DEFAULT_COMPACT_MIN_FILES = 16
"""Small files of one generation a table partition may gather before background compaction
rewrites them (``parka ingest --compact-min-files``' default; at one commit a second from four
Kafka partitions, a compaction every 4 s of 16 files into one)."""
DEFAULT_COMPACT_MAX_REWRITES = 3
"""Background compaction's tiers: a row is rewritten three times at most in the tiers, so the
bytes written are at most about four times the bytes ingested (``parka ingest
--compact-max-rewrites``' default). With a fan-in of :data:`DEFAULT_COMPACT_MIN_FILES` (16)
three tiers take files of 32 KiB or more to the 128 MiB target (32 KiB x 16^3 = 128 MiB; files of
up to the target). Smaller files (sub-second commits of a quiet topic) end the tiers below the
target: files of the last tier are then merged once more, but only into files that reach the
target (:meth:`CompactionPolicy.plan`), so the live files of a table stay about its bytes over the
target size, plus under 16 files per lower generation and what does not yet fill a target-sized
file of the last, per table partition. Without that last merge, the last tier's files stopped
below the target and their number grew with the table."""

DEFAULT_PURGE_FRACTION = 0.2
"""The fraction of a file's rows deleted (by deletion vector) at which background compaction
rewrites it without them, alone: past it a scan reads a fifth of the file for nothing."""

# What a compaction of either format (parka.lake.delta's, parka.lake.iceberg's) aims at and returns.

DEFAULT_TARGET_SIZE = DEFAULT_TARGET_FILE_SIZE
"""Bytes a compacted file aims at: 128 MiB (delta-rs' own default is 100 MiB, delta-spark's
OPTIMIZE 1 GiB): long column chunks, yet a rewrite that stays cheap next to running ingestion."""
DEFAULT_ROW_GROUP_ROWS = 1024 * 1024
"""Rows per row group of a rewritten file: a segment's few hundred or thousand rows become row
groups of up to a million, so readers skip by row-group statistics and read long column chunks."""
MAX_ATTEMPTS = 20
"""Conflicting commit attempts of one rewrite before it gives up (each is a re-read and a commit,
milliseconds; ingestion workers commit every few seconds at most)."""


@dataclass(frozen=True)
class OptimizeResult:
    """One compaction of a table (Delta: ``parka.lake.optimize_table``; Iceberg:
    ``parka.lake.optimize_iceberg``): table versions before and after, files the compaction
    removed and added, files VACUUM (Iceberg: snapshot expiry) deleted, the version checkpointed
    (``None``: none) and attempts."""

    table_uri: str
    version_before: int
    version_after: int
    files_removed: int
    files_added: int
    vacuumed: int
    checkpoint_version: int | None
    attempts: int
    # files left as they are because a file of their bin is encrypted (column encryption; no keys)
    encrypted_files: int = 0


_COMPACTED = re.compile(r"^compacted-g(?P<generation>\d+)-(?P<input>[0-9a-f]{16})-(?P<uid>[0-9a-f]{32})\.parquet$")


def input_key(path: str) -> str:
    """The key of a file that a compacted file's name carries: 16 hex digits of the BLAKE2b
    digest of its base name (parka's and compaction's file names are unique: they end in a
    random id)."""
    return hashlib.blake2b(path.rsplit("/", 1)[-1].encode(), digest_size=8).hexdigest()


def names_input(compacted: str, path: str) -> bool:
    """Whether the compacted file ``compacted``'s name carries the key of ``path``: the input by
    which the orphan cleanup judges it (:func:`parka.lake._orphans.remove_orphans` deletes a
    compacted file no log names once that input is not live). A compaction therefore never
    commits a file whose named input is gone from the table: the cleanup may have deleted it."""
    name = CompactedName.parse(compacted)
    return name is not None and name.input == input_key(path)


@dataclass(frozen=True)
class CompactedName:
    """``compacted-g<generation>-<input key>-<32 hex>.parquet``: a file background compaction
    wrote, its generation, and the key of its bin's first input file."""

    generation: int
    input: str
    uid: str

    @classmethod
    def new(cls, generation: int, first_input: str) -> CompactedName:
        return cls(generation, input_key(first_input), uuid.uuid4().hex)

    def __str__(self) -> str:
        return f"compacted-g{self.generation}-{self.input}-{self.uid}.parquet"

    @classmethod
    def parse(cls, name: str, *, temporary: bool = False) -> CompactedName | None:
        """The parts of a compacted file's base name, or ``None`` for another file. With
        ``temporary``, also of such a write's temporary file (``.<name>.<32 hex>.tmp``)."""
        m = _COMPACTED.match(base_name(name, temporary=temporary))
        if m is None:
            return None
        return cls(int(m.group("generation")), m.group("input"), m.group("uid"))


def generation_of(path: str) -> int | None:
    """0 for a file ingestion wrote, ``g`` for one of background compaction's generation ``g``,
    ``None`` for any other file (never picked)."""
    if FileName.parse(path) is not None:
        return 0
    name = CompactedName.parse(path)
    return None if name is None else name.generation


F = TypeVar("F")


@dataclass(frozen=True)
class Bin(Generic[F]):
    """Files of one table partition and generation to rewrite as one file of ``generation``."""

    files: list[F]
    generation: int

    def new_name(self, path: Callable[[F], str]) -> str:
        """A fresh name for the file this bin becomes (its first input's key in it)."""
        return str(CompactedName.new(self.generation, path(self.files[0])))


@dataclass(frozen=True)
class CompactionPolicy:
    """What background compaction picks (see the module docstring): ``min_files`` small files
    of a generation below ``max_rewrites`` per table partition, or as many as add up to the
    target size. ``topic`` and ``partitions`` scope it to one worker: only ingestion files of
    that topic's Kafka ``partitions`` (``None``: any), and files of later generations only when
    Kafka partition 0 is among them.

    Raises:
        ValueError: ``min_files`` below 2 or ``max_rewrites`` below 1.
    """

    min_files: int = DEFAULT_COMPACT_MIN_FILES
    max_rewrites: int = DEFAULT_COMPACT_MAX_REWRITES
    topic: str | None = None
    partitions: frozenset[int] | None = None
    purge_fraction: float = DEFAULT_PURGE_FRACTION

    def __post_init__(self) -> None:
        if self.min_files < 2:
            raise ValueError(f"min_files must be at least 2, not {self.min_files}")
        if self.max_rewrites < 1:
            raise ValueError(f"max_rewrites must be at least 1, not {self.max_rewrites}")
        if not 0 < self.purge_fraction <= 1:
            raise ValueError(f"purge_fraction must be above 0 and at most 1, not {self.purge_fraction}")

    def scoped(self, topic: str, partitions: Collection[int]) -> CompactionPolicy:
        """This policy for a worker of ``topic`` holding Kafka ``partitions``."""
        return dataclasses.replace(self, topic=topic, partitions=frozenset(partitions))

    def picks(self, path: str, size: int, target_size: int) -> int | None:
        """The generation of a file this policy may rewrite, ``None`` for one it leaves: below
        the target size, of a generation up to ``max_rewrites`` (the last tier's files only into
        target-sized files: :meth:`plan`)."""
        if size >= target_size:
            return None
        generation = self._in_scope(path)
        return None if generation is None or generation > self.max_rewrites else generation

    def _in_scope(self, path: str) -> int | None:
        """The generation of a file parka named that this worker looks after, whatever its size."""
        generation = generation_of(path)
        if generation is None:
            return None
        if generation == 0:
            name = FileName.parse(path)
            assert name is not None
            if self.topic is not None and name.topic != self.topic:
                return None
            return generation if self.partitions is None or name.partition in self.partitions else None
        return generation if self.partitions is None or 0 in self.partitions else None

    def plan(
        self,
        files: Sequence[F],
        *,
        target_size: int,
        path: Callable[[F], str],
        size: Callable[[F], int],
        partition: Callable[[F], Hashable],
        deleted: Callable[[F], float] = lambda f: 0.0,
        small_row_groups: Callable[[F], bool] = lambda f: False,
    ) -> list[Bin[F]]:
        """The rewrites due now, in the order of ``files`` (commit order) within each table
        partition and generation: a group that reached ``min_files`` files or ``target_size``
        bytes is packed into bins of up to ``target_size`` bytes; a bin of one file is left,
        and so is the group's last bin when it holds fewer than ``min_files`` files and could
        still take the group's smallest file (it waits for more). The last tier's files
        (generation ``max_rewrites``, already rewritten that many times) are packed only into
        full bins, ones that could take no more of the group's files: their one more rewrite
        makes a file of about the target size, never another small one. Then, after those, each other
        file this worker looks after whose ``deleted`` fraction of rows (by deletion vector)
        reached ``purge_fraction``, alone, whatever its size and generation: a rewrite leaves
        the deleted rows out, so scans stop reading them (deletes, not the tiers, cause these
        rewrites); and each other ingestion file of half ``target_size`` or more whose
        ``small_row_groups`` says so, alone (the row-group budget: the module docstring)."""
        groups: dict[tuple[Hashable, int], list[F]] = {}
        for f in files:
            generation = self.picks(path(f), size(f), target_size)
            if generation is not None:
                groups.setdefault((partition(f), generation), []).append(f)
        bins: list[Bin[F]] = []
        for (_, generation), group in groups.items():
            last_tier = generation == self.max_rewrites
            if (len(group) < self.min_files or last_tier) and sum(size(f) for f in group) < target_size:
                continue
            packed: list[list[F]] = [[]]
            total = 0
            for f in group:
                if packed[-1] and total + size(f) > target_size:
                    packed.append([])
                    total = 0
                packed[-1].append(f)
                total += size(f)
            if len(packed[-1]) < self.min_files or last_tier:
                last_full = total + min(size(f) for f in group) > target_size
                if not last_full:
                    packed.pop()
            bins += [Bin(b, generation + 1) for b in packed if len(b) >= 2]
        taken = {id(f) for b in bins for f in b.files}
        for f in files:
            if id(f) in taken:
                continue
            generation = self._in_scope(path(f))
            if generation is None:
                continue
            if deleted(f) >= self.purge_fraction or (
                generation == 0 and 2 * size(f) >= target_size and small_row_groups(f)
            ):
                bins.append(Bin([f], generation + 1))
        return bins


def small_row_groups(rows: int, row_groups: int, row_group_rows: int) -> bool:
    """Whether a file of ``rows`` in ``row_groups`` has small row groups, fewer rows than an
    eighth of ``row_group_rows`` (a compaction's) each on average: a file ingestion stitched from
    producers' segments, one row group each. A compaction rewrites such a file even alone."""
    return row_groups > 1 and rows / row_groups < row_group_rows / 8


def plan_bins(
    files: Sequence[F],
    *,
    target_size: int,
    size: Callable[[F], int],
    partition: Callable[[F], Hashable],
    alone: Callable[[F], bool] = lambda f: False,
) -> list[list[F]]:
    """``parka optimize``'s compaction, of either format: which files each rewrite takes, per
    table partition, in the order given. Files smaller than ``target_size``, in runs that add up
    to at most about ``target_size``; a run of one file is left unless ``alone`` says to
    rewrite it by itself (small row groups, deleted rows), and so is a file of ``target_size``
    or more."""
    partitions: dict[Hashable, list[F]] = {}
    for f in files:
        partitions.setdefault(partition(f), []).append(f)
    bins: list[list[F]] = []
    lone: list[list[F]] = []
    for group in partitions.values():
        current: list[F] = []
        total = 0
        for f in group:
            if size(f) >= target_size:
                if alone(f):
                    lone.append([f])
                continue
            if current and total + size(f) > target_size:
                bins.append(current)
                current, total = [], 0
            current.append(f)
            total += size(f)
        bins.append(current)
    return [b for b in bins if len(b) > 1 or (len(b) == 1 and alone(b[0]))] + lone
