"""The key index of an upsert table: where the live row of each key is, as (file, row position).

An upsert commit lands new files as they are and deletes the rows they supersede, in the files
that hold them (by deletion vector): so it must find, for each key of a batch, the file and row of
that key's live row, without reading the table. This index answers that from memory: it is
read from the table once, then takes the worker's own commits and compactions as they land and
catches up with other writers' commits from those commits alone (:meth:`KeyIndex.forget`,
:meth:`KeyIndex.drop_files`, :meth:`KeyIndex.add_file`; the reading is the caller's).

**The keys.** A key is the record's bytes (``__parka_key``) or the bytes of the key columns
(:func:`keys_of`); the index keeps 16 bytes of it (:func:`digest`): a key of up to 15 bytes
itself (length-prefixed), a longer one's 127-bit BLAKE2b digest. Two long keys with one digest
would make one delete the other's row: at 10 million keys the chance is about 10^-25.

**The memory.** Runs of four numpy arrays sorted by digest: its two 64-bit halves, a file number
and a row position, 24 bytes a key (240 MB at 10 million keys); the file numbers name a list of
the files' paths. The base run holds the table as it was at the last merge; each applied batch
adds a run of its changes (a deleted key as file -1), searched newest first. Once the changes'
runs hold :data:`MERGE_AT` entries or a sixteenth of the base, whichever is more, they are merged
into the base. So a batch costs time in its own size, not the index's: its keys are digested
one by one (BLAKE2b), everything else is numpy over the batch, with a binary search per run. A
rebuild adds the table's files one after the other and sorts them in once. A merge also forgets
the paths of files no live key is in any more, so the list of paths follows the live files, not
the commits.

**Compaction.** A compaction's commit moves rows to new files: :meth:`KeyIndex.move` takes where
each input's rows went (:class:`Rewritten`) as aliases that lookups follow and the next merge
folds in, so the index stays of the table without reading it, at a cost in the compaction's size.

Pure: no I/O. The table's side (reading the key column of each live file, minus the rows its
deletion vector deletes) is the caller's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

__all__ = [
    "MERGE_AT",
    "BatchPlan",
    "KeyIndex",
    "Rewritten",
    "digest",
    "digests",
    "key_columns_read",
    "keys_of",
    "sequences_of",
]

MERGE_AT = 100_000
"""The changes the index holds in runs of their own before it merges them into its base (at least)."""
PATHS_KEPT = 4096
"""Paths the index keeps before a merge forgets those no live key is in (and past twice the keys)."""

_DIGEST = np.dtype([("hi", ">u8"), ("lo", ">u8")])  # big-endian halves: as the 16 bytes read


def keys_of(columns: pa.Table) -> list[bytes]:
    """The key of each row of ``columns`` (the key columns, in order; no nulls): one binary or
    string column's values as they are (the record key, ``__parka_key``); otherwise each value
    tagged by its kind and prefixed by its length, one after the other, so that two rows get one
    key exactly when their values are equal (``1`` and ``"1"`` differ, ``("ab", "c")`` and
    ``("a", "bc")`` too)."""
    if columns.num_columns == 1:
        t = columns.schema.types[0]
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return columns.column(0).to_pylist()
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return [v.encode() for v in columns.column(0).to_pylist()]
    parts = [_encoded(columns.column(i)) for i in range(columns.num_columns)]
    return [b"".join(row) for row in zip(*parts, strict=True)]


def key_columns_read(key_columns: Sequence[str], sequence_by: str | None) -> list[str]:
    """The columns a file's keys and sequences are read from: the key columns, then the
    ``--sequence-by`` column unless it is one of them."""
    return [*key_columns, *([sequence_by] if sequence_by is not None and sequence_by not in key_columns else [])]


def sequences_of(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A ``--sequence-by`` column (integer, timestamp or date; no nulls) as int64 values that
    order as the column does."""
    t = column.type
    if pa.types.is_date32(t):
        column = column.cast(pa.int32())
    elif pa.types.is_date64(t) or pa.types.is_timestamp(t):
        column = column.cast(pa.int64())
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64) if len(column) else np.empty(0, np.int64)


def _encoded(column: pa.ChunkedArray) -> list[bytes]:
    """A key column's values as tagged, length-prefixed bytes (:func:`keys_of`)."""
    t = column.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        tag, values = b"b", column.to_pylist()
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        tag, values = b"s", [v.encode() for v in column.to_pylist()]
    elif pa.types.is_integer(t):
        tag, values = b"i", [str(v).encode() for v in column.to_pylist()]
    else:  # dates, timestamps, decimals, booleans, floats: their Python value's repr
        tag, values = b"o", [repr(v).encode() for v in column.to_pylist()]
    return [tag + len(v).to_bytes(4, "big") + v for v in values]


SHORT_KEY = 15
"""Keys of at most this many bytes are kept as they are (:func:`digest`)."""
_CHUNK = 1 << 16  # keys gathered this many at a time (a 15-column array of positions each)


def digest(key: bytes) -> bytes:
    """The 16 bytes the index keeps of ``key``: a key of at most :data:`SHORT_KEY` bytes itself,
    after a byte of its length and padded with zeros (two keys never share it); a longer one's
    BLAKE2b digest with its first bit set (so never a short key's), 127 bits."""
    return digests([key]).tobytes()


def digests(keys: Iterable[bytes]) -> np.ndarray:
    """The :func:`digest` of each of ``keys`` (one 16-byte record each: ``hi`` and ``lo``,
    big-endian): the short keys copied with numpy from their bytes joined, the others hashed one
    by one (a BLAKE2b call per key was most of reading an index:
    ``benchmarks/results/2026-11-29-upsert-10m-again/``)."""
    keys = keys if isinstance(keys, list) else list(keys)
    n = len(keys)
    out = np.zeros((n, 16), dtype=np.uint8)
    if n:
        lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
        joined = np.frombuffer(b"".join(keys), dtype=np.uint8)
        wide = np.int64 if joined.size >= 2**31 else np.int32  # narrow positions: half the memory to fill
        starts = (np.cumsum(lengths) - lengths).astype(wide)
        sizes = lengths.astype(wide)
        columns = np.arange(SHORT_KEY, dtype=wide)
        last = max(joined.size - 1, 0)
        for at in range(0, n, _CHUNK):  # every row as if short (a long key's row is replaced below)
            where = starts[at : at + _CHUNK, None] + columns
            np.minimum(where, last, out=where)
            taken = joined[where] if joined.size else np.zeros(where.shape, dtype=np.uint8)
            taken[columns >= sizes[at : at + _CHUNK, None]] = 0
            out[at : at + _CHUNK, 1:] = taken
        out[:, 0] = np.minimum(lengths, 255)
        long = np.flatnonzero(lengths > SHORT_KEY)
        if long.size:
            hashed = b"".join(hashlib.blake2b(keys[i], digest_size=16).digest() for i in long.tolist())
            out[long] = np.frombuffer(hashed, dtype=np.uint8).reshape(-1, 16)
            out[long, 0] |= 0x80
    return out.reshape(-1).view(_DIGEST)


@dataclass(frozen=True)
class _Run:
    """Entries sorted by (hi, lo), one per digest; ``file`` -1: the key was deleted."""

    hi: np.ndarray
    lo: np.ndarray
    file: np.ndarray
    row: np.ndarray
    seq: np.ndarray | None = None  # the live row's sequence (--sequence-by), int64

    @classmethod
    def empty(cls, sequenced: bool = False) -> _Run:
        seq = np.empty(0, np.int64) if sequenced else None
        return cls(np.empty(0, np.uint64), np.empty(0, np.uint64), np.empty(0, np.int32), np.empty(0, np.int32), seq)

    def take(self, at: np.ndarray) -> _Run:
        """The entries at ``at`` (positions or a mask), in that order."""
        return _Run(self.hi[at], self.lo[at], self.file[at], self.row[at], None if self.seq is None else self.seq[at])

    @classmethod
    def concat(cls, runs: Sequence[_Run]) -> _Run:
        seqs = [r.seq for r in runs]
        return cls(
            np.concatenate([r.hi for r in runs]),
            np.concatenate([r.lo for r in runs]),
            np.concatenate([r.file for r in runs]),
            np.concatenate([r.row for r in runs]),
            None if any(q is None for q in seqs) else np.concatenate(seqs),  # type: ignore[arg-type]
        )

    @classmethod
    def of(
        cls, hi: np.ndarray, lo: np.ndarray, file: np.ndarray, row: np.ndarray, seq: np.ndarray | None = None
    ) -> _Run:
        """Sorted, the last of each digest kept (the arrays are in order of age)."""
        # by first half alone: a stable sort (timsort, which runs through the already sorted runs
        # the arrays are made of) keeps a digest's entries in age order; only two keys whose
        # digests share a first half (about never) need the sort by both halves
        order = np.argsort(hi, kind="stable")
        sorted_hi, sorted_lo = hi[order], lo[order]
        same_hi = sorted_hi[1:] == sorted_hi[:-1]
        if (same_hi & (sorted_lo[1:] != sorted_lo[:-1])).any():
            order = np.lexsort((lo, hi))
        hi, lo = hi[order], lo[order]
        last = np.ones(hi.size, dtype=bool)
        last[:-1] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
        return cls(hi[last], lo[last], file[order][last], row[order][last], None if seq is None else seq[order][last])

    def merged(self, changes: _Run) -> _Run:
        """This run (sorted, live entries) with ``changes`` (sorted, newer) folded in: an entry of
        a digest it holds replaced, a deleted one (file -1) removed, a new one inserted where it
        sorts. Time in this run's size for the copies, not a sort of it: a merge into the base
        of 10 million keys re-sorted it whole before (a seventh of a daemon's CPU in a profile)."""
        at = self.find(changes.hi, changes.lo)
        found = at >= 0
        file, row = self.file.copy(), self.row.copy()
        file[at[found]], row[at[found]] = changes.file[found], changes.row[found]
        seq = None
        if self.seq is not None and changes.seq is not None:
            seq = self.seq.copy()
            seq[at[found]] = changes.seq[found]
        new = ~found & (changes.file >= 0)
        where = self._insertion_points(changes.hi[new], changes.lo[new])
        keep = file >= 0  # entries a change deleted leave
        where = where - np.concatenate([[0], np.cumsum(~keep)])[where]
        return _Run(
            np.insert(self.hi[keep], where, changes.hi[new]),
            np.insert(self.lo[keep], where, changes.lo[new]),
            np.insert(file[keep], where, changes.file[new]),
            np.insert(row[keep], where, changes.row[new]),
            None if seq is None or changes.seq is None else np.insert(seq[keep], where, changes.seq[new]),
        )

    def _insertion_points(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """Where digests this run lacks go (sorted by first half, then by second)."""
        at = np.searchsorted(self.hi, hi, side="left")
        while True:  # past the entries of the same first half and a lower second one (about never)
            inside = at < self.size
            ahead = np.zeros(hi.size, dtype=bool)
            ahead[inside] = (self.hi[at[inside]] == hi[inside]) & (self.lo[at[inside]] < lo[inside])
            if not ahead.any():
                return at
            at[ahead] += 1

    @property
    def size(self) -> int:
        return int(self.hi.size)

    @property
    def nbytes(self) -> int:
        seq = 0 if self.seq is None else self.seq.nbytes
        return int(self.hi.nbytes + self.lo.nbytes + self.file.nbytes + self.row.nbytes + seq)

    def find(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """The position of each (hi, lo) in the run; -1 where it is not."""
        found = np.full(hi.size, -1, dtype=np.int64)
        if not self.size or not hi.size:
            return found
        at = np.searchsorted(self.hi, hi)  # the first entry of that first half
        while True:  # along a run of equal first halves (about never longer than one)
            inside = at < self.size
            same_hi = np.zeros(hi.size, dtype=bool)
            same_hi[inside] = self.hi[at[inside]] == hi[inside]
            match = same_hi & (found < 0)
            match[match] = self.lo[at[match]] == lo[match]
            found[match] = at[match]
            more = same_hi & (found < 0)
            if not more.any():
                return found
            at = np.where(more, at + 1, self.size)


@dataclass(frozen=True)
class Rewritten:
    """A file a compaction wrote: the rows of ``inputs`` in their order, each input's deleted rows
    left out, are its rows from 0. An input is (its path, the row positions its deletion vector
    deleted when it was read, sorted, or ``None``, its physical rows)."""

    path: str
    inputs: tuple[tuple[str, np.ndarray | None, int], ...]

    def offsets(self) -> list[int]:
        """The row of the new file each input's first row that was not deleted went to."""
        out, at = [], 0
        for _, deleted, rows in self.inputs:
            out.append(at)
            at += rows - (0 if deleted is None else deleted.size)
        return out

    def new_rows(self, i: int, rows: np.ndarray) -> np.ndarray:
        """Where rows of input ``i`` that were not deleted went in the new file."""
        deleted = self.inputs[i][1]
        before = 0 if deleted is None else np.searchsorted(deleted, rows)
        return (self.offsets()[i] + rows - before).astype(np.int64)


@dataclass
class BatchPlan:
    """What a batch does to the table, from :meth:`KeyIndex.plan`: the rows to delete in files
    already in the table (path -> row positions), the rows of the batch's own files that a later
    row or tombstone of the batch supersedes (path -> row positions), and the index's changes
    once the commit landed (:meth:`KeyIndex.apply`)."""

    deletes: dict[str, list[int]] = field(default_factory=dict)
    new_file_deletes: dict[str, list[int]] = field(default_factory=dict)
    _changes: tuple[_Run, list[str]] | None = None  # (the run, the batch's paths by its file numbers)

    @property
    def deleted_rows(self) -> int:
        """Rows the commit deletes, in old and new files."""
        return sum(map(len, self.deletes.values())) + sum(map(len, self.new_file_deletes.values()))


class KeyIndex:
    """Key digest -> (file, row) of the live row, for the keys of some Kafka partitions; with
    ``sequenced``, and the live row's sequence (``--sequence-by``: 8 bytes a key more)."""

    def __init__(self, *, sequenced: bool = False) -> None:
        self.sequenced = sequenced
        self._base = _Run.empty(sequenced)
        self._runs: list[_Run] = []  # the changes since the base, oldest first
        self._paths: list[str] = []
        self._numbers: dict[str, int] = {}
        self._added: list[_Run] = []  # add_file's, not yet sorted in (unsorted runs)
        # files compactions moved, not yet folded into the runs (by the next merge): old number ->
        # new number (-1: not moved) and the offset of its rows there; (old << 32) | deleted row
        self._alias_target = np.empty(0, dtype=np.int32)
        self._alias_offset = np.empty(0, dtype=np.int64)
        self._alias_gone = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        """Live keys (merges first)."""
        self._settle()
        self._merge()
        return self._base.size

    @property
    def nbytes(self) -> int:
        """The runs' bytes and the paths' (100 bytes each besides their characters)."""
        self._settle()
        runs = self._base.nbytes + sum(r.nbytes for r in self._runs)
        return runs + sum(len(p) + 100 for p in self._paths)

    def add_file(
        self, path: str, keys: Sequence[bytes], live: np.ndarray | None = None, seqs: np.ndarray | None = None
    ) -> None:
        """Index a file of the table as it is: row ``i`` holds ``keys[i]`` (and sequence
        ``seqs[i]``: a sequenced index's); only the rows where ``live`` is true (the file's
        deletion vector's complement) are live. A key found twice keeps the row added last.
        Files added one after the other are sorted in together, once, when the index is next
        read (a rebuild costs one sort, not one merge per file).
        """
        self._check_seqs(seqs, len(keys))
        number = self._number(path)
        rows = np.arange(len(keys), dtype=np.int32)
        if live is not None:
            rows = rows[live]
            keys = [keys[i] for i in rows.tolist()]
        ds = digests(keys)
        seq = None if seqs is None else np.asarray(seqs, dtype=np.int64)[rows]
        number_of = np.full(rows.size, number, dtype=np.int32)
        self._added.append(_Run(ds["hi"].astype(np.uint64), ds["lo"].astype(np.uint64), number_of, rows, seq))

    def _check_seqs(self, seqs: object, n: int) -> None:
        if (seqs is None) == self.sequenced:
            raise ValueError("a sequenced index takes a sequence for every row, another none")
        if seqs is not None and len(seqs) != n:  # type: ignore[arg-type]
            raise ValueError(f"{len(seqs)} sequences for {n} rows")  # type: ignore[arg-type]

    def plan(
        self,
        files: Sequence[tuple[str, Sequence[bytes]]],
        tombstones: Sequence[bytes] = (),
        *,
        after: Sequence[int] | None = None,
        seqs: Sequence[np.ndarray] | None = None,
        deleting: Sequence[np.ndarray | None] | None = None,
    ) -> BatchPlan:
        """The deletes and index changes of a batch: ``files`` (path, keys by row) in the order
        their records were produced, and ``tombstones`` (key) each after the files before
        position ``after[i]`` of ``files``, i.e. tombstone ``i`` supersedes the rows of
        ``files[:after[i]]`` and is superseded by those of ``files[after[i]:]``
        (``after`` defaults to all tombstones after every file). The index is not changed:
        :meth:`apply` the plan once its commit landed.

        A sequenced index takes ``seqs`` (file ``i``'s rows' sequences): a row whose sequence is
        lower than its key's live row's does not supersede it, and is deleted itself (equal
        sequences: the later row wins). Tombstones have no sequence: each deletes its key's
        row, whatever its sequence, and what comes after it starts afresh.

        ``deleting`` (file ``i``'s rows that are deletes: a change data capture ``d`` event, by
        row, or ``None``: none) marks rows that delete their key rather than hold it: such a row
        is ordered and sequenced as a row is, supersedes what it wins over, and is deleted
        itself, so a key whose last event is one ends without a row (and a tombstone after it
        finds nothing more to delete).
        """
        self._settle()
        if (seqs is None) == self.sequenced or (seqs is not None and len(seqs) != len(files)):
            raise ValueError("a sequenced index plans with one sequence array per file, another without")
        positions = list(after) if after is not None else [len(files)] * len(tombstones)
        if len(positions) != len(tombstones):
            raise ValueError(f"{len(tombstones)} tombstones, {len(positions)} positions")
        if any(not 0 <= place <= len(files) for place in positions):
            raise ValueError(f"a tombstone after file {max(positions)} of {len(files)}")
        paths = [path for path, _ in files]
        # every event of the batch: a row of a file (its batch file number, its row) or a
        # tombstone (file -1), with its place in the batch's order (file i at 2i+1, a tombstone
        # after file j at 2j: before file j, after file j-1; tombstones in their given order)
        if deleting is not None and len(deleting) != len(files):
            raise ValueError(f"{len(deleting)} delete masks for {len(files)} files")
        keys: list[bytes] = []
        file_parts, row_parts, place_parts, seq_parts, delete_parts = [], [], [], [], []
        for i, (_, file_keys) in enumerate(files):
            keys.extend(file_keys)
            mask = None if deleting is None else deleting[i]
            if mask is not None and len(mask) != len(file_keys):
                raise ValueError(f"{len(mask)} delete marks for the {len(file_keys)} rows of {paths[i]}")
            delete_parts.append(np.zeros(len(file_keys), dtype=bool) if mask is None else np.asarray(mask, dtype=bool))
            file_parts.append(np.full(len(file_keys), i, dtype=np.int32))
            row_parts.append(np.arange(len(file_keys), dtype=np.int32))
            place_parts.append(np.full(len(file_keys), 2 * i + 1, dtype=np.int64))
            if seqs is not None:
                if len(seqs[i]) != len(file_keys):
                    raise ValueError(f"{len(seqs[i])} sequences for the {len(file_keys)} rows of {paths[i]}")
                seq_parts.append(np.asarray(seqs[i], dtype=np.int64))
        keys.extend(tombstones)
        file_parts.append(np.full(len(tombstones), -1, dtype=np.int32))
        row_parts.append(np.full(len(tombstones), -1, dtype=np.int32))
        place_parts.append(2 * np.asarray(positions, dtype=np.int64))
        seq_parts.append(np.zeros(len(tombstones), dtype=np.int64))
        delete_parts.append(np.zeros(len(tombstones), dtype=bool))
        ds = digests(keys)
        hi, lo = ds["hi"].astype(np.uint64), ds["lo"].astype(np.uint64)
        file, row, place = np.concatenate(file_parts), np.concatenate(row_parts), np.concatenate(place_parts)
        seq = np.concatenate(seq_parts) if seqs is not None else np.zeros(file.size, dtype=np.int64)
        deletes = np.concatenate(delete_parts)
        order = np.argsort(place, kind="stable")  # the batch's order of events
        hi, lo, file, row, seq, deletes = hi[order], lo[order], file[order], row[order], seq[order], deletes[order]
        by_key = np.lexsort((lo, hi))  # stable: a key's events stay in the batch's order
        hi, lo, file, row, seq = hi[by_key], lo[by_key], file[by_key], row[by_key], seq[by_key]
        deletes = deletes[by_key]
        n = hi.size
        first = np.ones(n, dtype=bool)
        first[1:] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
        group = np.cumsum(first) - 1  # the key's number, per event
        starts = np.flatnonzero(first)
        tomb = file < 0
        tombs_through = np.cumsum(tomb)
        before_group = np.concatenate([[0], tombs_through])[starts][group]  # tombstones of earlier keys
        segment = tombs_through - before_group - tomb  # tombstones of its key before it
        tombs_of = np.add.reduceat(tomb.astype(np.int64), starts) if n else np.empty(0, np.int64)
        old_file, old_row, old_seq = self._find(hi[starts], lo[starts])  # each key's live row from before
        # each (key, segment)'s winning row: the highest sequence, the later on a tie
        rows_at = np.flatnonzero(~tomb)
        ranked = rows_at[np.lexsort((rows_at, seq[rows_at], segment[rows_at], group[rows_at]))]
        last_of_block = np.ones(ranked.size, dtype=bool)
        if ranked.size:
            g, sg = group[ranked], segment[ranked]
            last_of_block[:-1] = (g[1:] != g[:-1]) | (sg[1:] != sg[:-1])
        winners = ranked[last_of_block]
        wg, ws = group[winners], segment[winners]
        # a first segment's winner loses to a live row from before whose sequence is higher
        beaten = (ws == 0) & (old_file[wg] >= 0) & (old_seq[wg] > seq[winners])
        # the key's row at the end: its last segment's winner, unless beaten or a delete
        final = winners[(ws == tombs_of[wg]) & ~beaten]
        final = final[~deletes[final]]
        # the row from before goes when a tombstone comes, or a first segment's row beats it
        took_first = np.zeros(starts.size, dtype=bool)
        took_first[wg[(ws == 0) & ~beaten]] = True
        old_goes = (old_file >= 0) & ((tombs_of > 0) | took_first)
        if self.sequenced and deletes.any():
            final, old_goes = _sequenced_deletes(group, starts, tomb, deletes, seq, old_file, old_seq, final, old_goes)
        deleted_new = np.ones(n, dtype=bool)
        deleted_new[tomb] = False
        deleted_new[final] = False
        plan = BatchPlan()
        plan.new_file_deletes = _by_file(file[deleted_new], row[deleted_new], paths)
        plan.deletes = _by_file(old_file[old_goes], old_row[old_goes], self._paths)
        # the changes: each key with a row at the end, and each whose row from before went without one
        ends_with_row = np.zeros(starts.size, dtype=bool)
        ends_with_row[group[final]] = True
        gone = old_goes & ~ends_with_row | (~ends_with_row & (tombs_of > 0))
        change_file = np.concatenate([file[final], np.full(int(gone.sum()), -1, dtype=np.int32)])
        change_row = np.concatenate([row[final], np.full(int(gone.sum()), -1, dtype=np.int32)])
        change_at = np.concatenate([starts[group[final]], starts[gone]])
        change_seq = np.concatenate([seq[final], np.zeros(int(gone.sum()), dtype=np.int64)])
        keep = np.argsort(change_at, kind="stable")  # back in digest order
        at = change_at[keep]
        changes = _Run(
            hi[at], lo[at], change_file[keep], change_row[keep], change_seq[keep] if self.sequenced else None
        )
        plan._changes = (changes, paths)
        return plan

    def apply(self, plan: BatchPlan) -> None:
        """The plan's changes, once its commit landed."""
        if plan._changes is None:
            return
        self._settle()
        run, paths = plan._changes
        numbers = np.array([self._number(p) for p in paths] or [0], dtype=np.int32)
        file = np.where(run.file >= 0, numbers[np.maximum(run.file, 0)], -1).astype(np.int32)
        self._runs.append(_Run(run.hi, run.lo, file, run.row, run.seq))
        if sum(r.size for r in self._runs) >= max(MERGE_AT, self._base.size // 16):
            self._merge()

    def lookup(self, key: bytes) -> tuple[str, int] | None:
        """Where ``key``'s live row is; ``None`` when it has none."""
        self._settle()
        d = np.frombuffer(digest(key), dtype=_DIGEST)
        files, rows, _ = self._find(d["hi"].astype(np.uint64), d["lo"].astype(np.uint64))
        return (self._paths[int(files[0])], int(rows[0])) if files[0] >= 0 else None

    def sequence_of(self, key: bytes) -> int | None:
        """The sequence of ``key``'s live row (a sequenced index); ``None`` when it has none."""
        self._settle()
        d = np.frombuffer(digest(key), dtype=_DIGEST)
        files, _, seqs = self._find(d["hi"].astype(np.uint64), d["lo"].astype(np.uint64))
        return int(seqs[0]) if files[0] >= 0 and self.sequenced else None

    def forget(self, keys: Sequence[bytes]) -> None:
        """Delete ``keys``' entries (another writer deleted their rows in place: their files stay)."""
        if not keys:
            return
        self._settle()
        ds = digests(keys)
        none = np.full(len(keys), -1, dtype=np.int32)
        seq = np.zeros(len(keys), dtype=np.int64) if self.sequenced else None
        self._runs.append(_Run.of(ds["hi"].astype(np.uint64), ds["lo"].astype(np.uint64), none, none, seq))

    def drop_files(self, paths: Iterable[str]) -> None:
        """Forget every key whose row is in one of ``paths`` (files another writer removed: the
        caller then adds the files it added with :meth:`add_file`)."""
        wanted = [p for p in paths if p in self._numbers]
        if not wanted:
            return
        self._settle()
        self._merge()  # may number the files again: their numbers after it
        gone = {self._numbers[p] for p in wanted if p in self._numbers}
        b = self._base
        self._base = b.take(~np.isin(b.file, np.fromiter(gone, dtype=np.int32)))

    def move(self, files: Sequence[Rewritten]) -> None:
        """A compaction's commit landed: the keys whose rows were in its inputs are in its new
        files now (:class:`Rewritten` says where). Recorded as aliases of the inputs, which a
        lookup follows and the next merge folds into the runs: time in the compaction's size,
        not the index's. The index must be of the version the compaction committed over.
        """
        self._settle()
        moves: dict[int, tuple[int, int, np.ndarray | None]] = {}  # old number -> new number, offset, deleted
        for f in files:
            for (path, deleted, _), offset in zip(f.inputs, f.offsets(), strict=True):
                old = self._numbers.get(path)
                if old is not None:
                    moves[old] = (self._number(f.path), offset, deleted)
        if not moves:
            return
        grow = len(self._paths) - self._alias_target.size
        self._alias_target = np.concatenate([self._alias_target, np.full(grow, -1, dtype=np.int32)])
        self._alias_offset = np.concatenate([self._alias_offset, np.zeros(grow, dtype=np.int64)])
        gone: list[np.ndarray] = [self._alias_gone]
        for old, (number, offset, deleted) in moves.items():
            self._alias_target[old], self._alias_offset[old] = number, offset
            if deleted is not None and deleted.size:
                gone.append((np.int64(old) << 32) | deleted.astype(np.int64))
        self._alias_gone = np.sort(np.concatenate(gone))

    def _follow(self, files: np.ndarray, rows: np.ndarray) -> None:
        """Entries (file numbers, rows; -1: none) taken through the aliases of moved files, in
        place (a file compacted again: its alias's alias)."""
        target, offset_of, gone = self._alias_target, self._alias_offset, self._alias_gone
        while target.size:
            at = np.flatnonzero((files >= 0) & (files < target.size))
            at = at[target[files[at]] >= 0]
            if not at.size:
                return
            old, row = files[at].astype(np.int64), rows[at].astype(np.int64)
            before = np.searchsorted(gone, (old << 32) | row) - np.searchsorted(gone, old << 32)
            rows[at] = (offset_of[old] + row - before).astype(rows.dtype)
            files[at] = target[old]

    def _fold_aliases(self) -> None:
        """The aliases into the base (after a merge, nothing else names a file), then forgotten."""
        if not self._alias_target.size:
            return
        b = self._base
        file, row = b.file.copy(), b.row.copy()
        self._follow(file, row)
        self._base = _Run(b.hi, b.lo, file, row, b.seq)
        self._alias_target = np.empty(0, dtype=np.int32)
        self._alias_offset = np.empty(0, dtype=np.int64)
        self._alias_gone = np.empty(0, dtype=np.int64)

    def _find(self, hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each digest, the file number, row and sequence of its live row (newest run
        first); file -1 where it has none (sequence 0 when the index has none)."""
        files = np.full(hi.size, -1, dtype=np.int32)
        rows = np.full(hi.size, -1, dtype=np.int32)
        seqs = np.zeros(hi.size, dtype=np.int64)
        todo = np.ones(hi.size, dtype=bool)
        for run in [*reversed(self._runs), self._base]:
            if not todo.any():
                break
            wanted = np.flatnonzero(todo)
            at = run.find(hi[wanted], lo[wanted])
            hit = at >= 0
            todo[wanted[hit]] = False
            files[wanted[hit]] = run.file[at[hit]]  # -1: deleted in that run
            rows[wanted[hit]] = run.row[at[hit]]
            if run.seq is not None:
                seqs[wanted[hit]] = run.seq[at[hit]]
        self._follow(files, rows)
        return files, rows, seqs

    def _number(self, path: str) -> int:
        number = self._numbers.get(path)
        if number is None:
            number = self._numbers[path] = len(self._paths)
            self._paths.append(path)
        return number

    def _settle(self) -> None:
        """Sort the files :meth:`add_file` added into the base (after the changes' runs): for a
        digest found more than once, the one added last wins."""
        if not self._added:
            return
        self._merge()
        added, self._added = self._added, []
        every = _Run.concat([self._base, *added])
        self._base = _Run.of(every.hi, every.lo, every.file, every.row, every.seq)

    def _merge(self) -> None:
        """Fold the changes' runs into the base (the newest entry of a digest wins, deleted keys
        leave), and the aliases of moved files."""
        if self._runs:
            changes = _Run.concat(self._runs)
            self._runs = []
            self._base = self._base.merged(_Run.of(changes.hi, changes.lo, changes.file, changes.row, changes.seq))
        self._fold_aliases()
        if not self._added and len(self._paths) > max(PATHS_KEPT, 2 * self._base.size):
            self._forget_paths()

    def _forget_paths(self) -> None:
        """Number again the files the base names (after a merge, nothing else names any): the
        paths of files no live key is in any more (superseded, compacted) leave the list."""
        used, file = np.unique(self._base.file, return_inverse=True)
        self._paths = [self._paths[int(n)] for n in used.tolist()]
        self._numbers = {path: n for n, path in enumerate(self._paths)}
        b = self._base
        self._base = _Run(b.hi, b.lo, file.astype(np.int32), b.row, b.seq)


def _sequenced_deletes(
    group: np.ndarray,
    starts: np.ndarray,
    tomb: np.ndarray,
    deletes: np.ndarray,
    seq: np.ndarray,
    old_file: np.ndarray,
    old_seq: np.ndarray,
    final: np.ndarray,
    old_goes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`KeyIndex.plan`'s ``final`` rows and ``old_goes`` for the keys of a sequenced
    batch that have delete rows, worked out event by event (in Python: deletes are the rare
    events): a delete whose sequence is at least the live row's deletes it and forgets the
    sequence, as a tombstone does, while an older one changes nothing. So the outcome never
    depends on how events are batched: the index keeps no sequence for a deleted key."""
    special = np.zeros(starts.size, dtype=bool)
    special[group[deletes]] = True
    final = final[~special[group[final]]]
    old_goes = old_goes.copy()
    ends = np.r_[starts[1:], group.size]
    kept: list[int] = []
    for g in np.flatnonzero(special).tolist():
        live: tuple[int, int] | None = (-1, int(old_seq[g])) if old_file[g] >= 0 else None  # (-1: the old row)
        went = False
        for e in range(int(starts[g]), int(ends[g])):
            if tomb[e] or (deletes[e] and live is not None and seq[e] >= live[1]):
                went, live = went or (live is not None and live[0] == -1), None
            elif not deletes[e] and (live is None or seq[e] >= live[1]):
                went, live = went or (live is not None and live[0] == -1), (e, int(seq[e]))
        old_goes[g] = went
        if live is not None and live[0] >= 0:
            kept.append(live[0])
    return np.sort(np.concatenate([final, np.asarray(kept, dtype=final.dtype)])), old_goes


def _by_file(files: np.ndarray, rows: np.ndarray, paths: Sequence[str]) -> dict[str, list[int]]:
    """Row positions grouped by file (``paths[number]``), each group in ascending order."""
    if not files.size:
        return {}
    order = np.lexsort((rows, files))
    files, rows = files[order], rows[order]
    starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]])
    return {
        paths[int(files[start])]: group.tolist()
        for start, group in zip(starts.tolist(), np.split(rows, starts[1:]), strict=True)
    }
