"""The key index of an upsert table: where the live row of each key is, as (file, row position).

An upsert commit lands new files as they are and deletes the rows they supersede, in the files
that hold them (by deletion vector): so it must find, for each key of a batch, the file and row of
that key's live row, without reading the table. This index answers that from memory, for the
keys of the Kafka partitions a worker holds (a key always goes to one Kafka partition), and is
rebuilt from the table when partitions are assigned.

**The keys.** A key is the record's bytes (``__parka_key``) or the bytes of the key columns; the
index keeps a 128-bit BLAKE2b digest of it, never the key itself. Two keys with one digest would
make one delete the other's row: at 10 million keys the chance is about 10^-25.

**The memory.** The bulk of the index is sorted numpy arrays: the digests (16 bytes a key), their
first halves again as plain integers for the binary search (8), a file number and a row position
(4 bytes each): 32 bytes a key (320 MB at 10 million keys); the
file numbers name a list of the files' paths. Changes since the last merge sit in a dict (about
200 bytes an entry), merged into the arrays once it holds :data:`MERGE_AT` entries or a sixteenth
of the arrays, whichever is larger, so a batch costs time in its own size, not the index's:
a lookup is a dict probe and a binary search over the digests (vectorized, per batch). A
rebuild adds the table's files one after the other and sorts them in once.

Pure: no I/O. The table's side (reading the key column of each live file, minus the rows its
deletion vector deletes) is the caller's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MERGE_AT", "BatchPlan", "KeyIndex", "digest", "digests"]

MERGE_AT = 100_000
"""The changes the index holds in its dict before it merges them into its arrays (at least)."""

_DIGEST = np.dtype([("hi", ">u8"), ("lo", ">u8")])  # big-endian halves: sorts as the 16 bytes do


def digest(key: bytes) -> bytes:
    """The 16-byte digest the index keeps of ``key``."""
    return hashlib.blake2b(key, digest_size=16).digest()


def digests(keys: Iterable[bytes]) -> np.ndarray:
    """The digests of ``keys`` as an array the index searches (one 16-byte record each)."""
    joined = b"".join(hashlib.blake2b(k, digest_size=16).digest() for k in keys)
    return np.frombuffer(joined, dtype=_DIGEST).copy()


_DELETED = (-1, -1)


@dataclass
class BatchPlan:
    """What a batch does to the table, from :meth:`KeyIndex.plan`: the rows to delete in files
    already in the table (path -> row positions), the rows of the batch's own files that a later
    row or tombstone of the batch supersedes (path -> row positions), and the index's changes once
    the commit landed (digest -> (path, row), or ``None`` for a key deleted)."""

    deletes: dict[str, list[int]] = field(default_factory=dict)
    new_file_deletes: dict[str, list[int]] = field(default_factory=dict)
    changes: dict[bytes, tuple[str, int] | None] = field(default_factory=dict)

    @property
    def deleted_rows(self) -> int:
        """Rows the commit deletes, in old and new files."""
        return sum(map(len, self.deletes.values())) + sum(map(len, self.new_file_deletes.values()))


class KeyIndex:
    """Key digest -> (file, row) of the live row, for the keys of some Kafka partitions."""

    def __init__(self) -> None:
        self._digests = np.empty(0, dtype=_DIGEST)
        self._hi = np.empty(0, dtype=np.uint64)  # the digests' first halves, native: what a lookup searches
        self._file = np.empty(0, dtype=np.int32)
        self._row = np.empty(0, dtype=np.int32)
        self._recent: dict[bytes, tuple[int, int]] = {}  # digest -> (file, row); (-1, -1): deleted
        self._paths: list[str] = []
        self._numbers: dict[str, int] = {}
        self._added: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # add_file's, not yet sorted in

    def __len__(self) -> int:
        """Live keys (merges the dict first)."""
        self._settle()
        self._merge()
        return int(self._digests.size)

    @property
    def nbytes(self) -> int:
        """The arrays' bytes plus an estimate for the dict's entries (200 bytes each)."""
        self._settle()
        arrays = self._digests.nbytes + self._hi.nbytes + self._file.nbytes + self._row.nbytes
        return int(arrays + 200 * len(self._recent) + sum(len(p) + 100 for p in self._paths))

    def add_file(self, path: str, keys: Sequence[bytes], live: np.ndarray | None = None) -> None:
        """Index a file of the table as it is: row ``i`` holds ``keys[i]``; only the rows where
        ``live`` is true (the file's deletion vector's complement) are live. A key found twice
        keeps the row added last. Files added one after the other are sorted in together, once,
        when the index is next read (a rebuild costs one sort, not one merge per file).
        """
        number = self._number(path)
        rows = np.arange(len(keys), dtype=np.int32)
        if live is not None:
            rows = rows[live]
            keys = [keys[i] for i in rows.tolist()]
        self._added.append((digests(keys), np.full(rows.size, number, dtype=np.int32), rows))

    def plan(
        self,
        files: Sequence[tuple[str, Sequence[bytes]]],
        tombstones: Sequence[bytes] = (),
        *,
        after: Sequence[int] | None = None,
    ) -> BatchPlan:
        """The deletes and index changes of a batch: ``files`` (path, keys by row) in the order
        their records were produced, and ``tombstones`` (key) each after the files before
        position ``after[i]`` of ``files``, i.e. tombstone ``i`` supersedes the rows of
        ``files[:after[i]]`` and is superseded by those of ``files[after[i]:]``
        (``after`` defaults to all tombstones after every file). The index is not changed:
        :meth:`apply` the plan once its commit landed.
        """
        self._settle()
        positions = list(after) if after is not None else [len(files)] * len(tombstones)
        if len(positions) != len(tombstones):
            raise ValueError(f"{len(tombstones)} tombstones, {len(positions)} positions")
        plan = BatchPlan()
        latest: dict[bytes, tuple[str, int] | None] = {}  # digest -> the batch's last word on it
        events: list[tuple[int, int, str | None, Sequence[bytes]]] = []  # (place, kind, path, keys)
        for i, (path, keys) in enumerate(files):
            events.append((2 * i + 1, 0, path, keys))
        for key, place in zip(tombstones, positions, strict=True):
            if not 0 <= place <= len(files):
                raise ValueError(f"a tombstone after file {place} of {len(files)}")
            events.append((2 * place, 1, None, [key]))
        events.sort(key=lambda e: (e[0], e[1]))
        for _, _, source, keys in events:
            ds = _split(digests(keys))
            if source is None:
                for d in ds:
                    self._supersede(latest, d, plan)
                    latest[d] = None
                continue
            for row, d in enumerate(ds):
                self._supersede(latest, d, plan)
                latest[d] = (source, row)
        old = list(latest)  # each key's row from before the batch is superseded, by a row or a tombstone
        for where in self._lookup(old):
            if where is not None:
                path, row = self._paths[where[0]], where[1]
                plan.deletes.setdefault(path, []).append(row)
        plan.changes = latest
        return plan

    def apply(self, plan: BatchPlan) -> None:
        """The plan's changes, once its commit landed."""
        self._settle()
        for d, where in plan.changes.items():
            self._recent[d] = _DELETED if where is None else (self._number(where[0]), where[1])
        self._maybe_merge()

    def lookup(self, key: bytes) -> tuple[str, int] | None:
        """Where ``key``'s live row is; ``None`` when it has none."""
        self._settle()
        (where,) = self._lookup([digest(key)])
        return None if where is None else (self._paths[where[0]], where[1])

    def drop_files(self, paths: Iterable[str]) -> None:
        """Forget every key whose row is in one of ``paths`` (a compaction rewrote them: the
        caller then adds the new files with :meth:`add_file`)."""
        gone = {self._numbers[p] for p in paths if p in self._numbers}
        if not gone:
            return
        self._settle()
        self._merge()
        keep = ~np.isin(self._file, np.fromiter(gone, dtype=np.int32))
        self._set(self._digests[keep], self._file[keep], self._row[keep])

    def _supersede(self, latest: dict[bytes, tuple[str, int] | None], d: bytes, plan: BatchPlan) -> None:
        """``d``'s earlier row in this batch, if any, is deleted (its file is new)."""
        earlier = latest.get(d)
        if earlier is not None:  # (after a tombstone of the batch there is nothing of it to delete)
            plan.new_file_deletes.setdefault(earlier[0], []).append(earlier[1])

    def _lookup(self, ds: Sequence[bytes]) -> list[tuple[int, int] | None]:
        out: list[tuple[int, int] | None] = [None] * len(ds)
        search: list[int] = []
        for i, d in enumerate(ds):
            where = self._recent.get(d)
            if where is None:
                search.append(i)
            elif where != _DELETED:
                out[i] = where
        if search:
            wanted = np.frombuffer(b"".join(ds[i] for i in search), dtype=_DIGEST)
            at = self._positions(wanted)
            for j in np.flatnonzero(at >= 0).tolist():
                out[search[j]] = (int(self._file[at[j]]), int(self._row[at[j]]))
        return out

    def _positions(self, wanted: np.ndarray) -> np.ndarray:
        """Where each of the ``wanted`` digests is in the arrays; -1 where it is not. A binary
        search over the first halves (plain integers: searching the 16-byte records themselves
        took 4 µs a key at a million keys), then the whole digest compared."""
        found = np.full(wanted.size, -1, dtype=np.int64)
        size = self._digests.size
        if not size or not wanted.size:
            return found
        at = np.searchsorted(self._hi, wanted["hi"].astype(np.uint64))
        inside = at < size
        hit = np.zeros(wanted.size, dtype=bool)
        hit[inside] = self._digests[at[inside]] == wanted[inside]
        found[hit] = at[hit]
        # two digests with one first half (about never): the wanted one may come later in the run
        for j in np.flatnonzero(inside & ~hit).tolist():
            i, hi = int(at[j]), self._hi[at[j]]
            while i < size and self._hi[i] == hi:
                if self._digests[i] == wanted[j]:
                    found[j] = i
                    break
                i += 1
        return found

    def _set(self, ds: np.ndarray, files: np.ndarray, rows: np.ndarray) -> None:
        """The arrays, ``ds`` sorted."""
        self._digests, self._file, self._row = ds, files, rows
        self._hi = ds["hi"].astype(np.uint64)

    def _number(self, path: str) -> int:
        number = self._numbers.get(path)
        if number is None:
            number = self._numbers[path] = len(self._paths)
            self._paths.append(path)
        return number

    def _settle(self) -> None:
        """Sort the files :meth:`add_file` added into the arrays (after the dict's changes): for a
        digest found more than once, the one added last wins."""
        if not self._added:
            return
        self._merge()
        parts = [(self._digests, self._file, self._row), *self._added]
        self._added = []
        ds = np.concatenate([p[0] for p in parts])
        order = np.argsort(ds, kind="stable")
        ds = ds[order]
        last = np.ones(ds.size, dtype=bool)
        last[:-1] = ds[1:] != ds[:-1]  # the last of each run of one digest
        keep = order[last]
        self._set(ds[last], np.concatenate([p[1] for p in parts])[keep], np.concatenate([p[2] for p in parts])[keep])

    def _maybe_merge(self) -> None:
        if len(self._recent) >= max(MERGE_AT, self._digests.size // 16):
            self._merge()

    def _merge(self) -> None:
        """Fold the dict into the arrays: its entries replace the arrays' for the same digest,
        deleted keys leave."""
        if not self._recent:
            return
        ds = np.frombuffer(b"".join(self._recent), dtype=_DIGEST)
        where = np.array(list(self._recent.values()), dtype=np.int32).reshape(-1, 2)
        self._recent = {}
        stale = np.zeros(self._digests.size, dtype=bool)
        at = self._positions(ds)
        stale[at[at >= 0]] = True
        live = where[:, 0] >= 0
        digests_ = np.concatenate([self._digests[~stale], ds[live]])
        files = np.concatenate([self._file[~stale], where[live, 0]])
        rows = np.concatenate([self._row[~stale], where[live, 1]])
        order = np.argsort(digests_, kind="stable")
        self._set(digests_[order], files[order], rows[order])


def _split(ds: np.ndarray) -> list[bytes]:
    raw = ds.tobytes()
    return [raw[i : i + 16] for i in range(0, len(raw), 16)]
