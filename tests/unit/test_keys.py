"""The key index of upsert tables (``lake/_keys.py``): which rows a batch deletes, in the table's
files and in its own, against a model (a dict of each key's latest row), through its merges."""

from __future__ import annotations

import random

import numpy as np
import pytest
from parka.lake import _keys
from parka.lake._keys import KeyIndex


def test_a_batch_keeps_the_last_row_of_each_key_and_deletes_the_rows_it_supersedes() -> None:
    index = KeyIndex()
    first = index.plan([("f1", [b"a", b"b", b"a"]), ("f2", [b"c", b"b"])])
    assert first.deletes == {}  # an empty table
    assert first.new_file_deletes == {"f1": [0, 1]}  # a's first row, b's first row
    index.apply(first)
    assert (index.lookup(b"a"), index.lookup(b"b"), index.lookup(b"c")) == (("f1", 2), ("f2", 1), ("f2", 0))

    second = index.plan([("f3", [b"b", b"d"])], [b"c", b"a"], after=[1, 0])
    # b and d in f3; a tombstone of a before f3, one of c after it
    assert {path: sorted(rows) for path, rows in second.deletes.items()} == {"f1": [2], "f2": [0, 1]}
    assert second.new_file_deletes == {}
    index.apply(second)
    assert index.lookup(b"a") is None and index.lookup(b"c") is None
    assert index.lookup(b"b") == ("f3", 0) and index.lookup(b"d") == ("f3", 1)
    assert len(index) == 2

    # a tombstone, then the key again, in one batch: the tombstone's earlier rows go, the later row lives
    third = index.plan([("f4", [b"d"]), ("f5", [b"d", b"e"])], [b"d"], after=[1])
    assert third.deletes == {"f3": [1]} and third.new_file_deletes == {"f4": [0]}
    index.apply(third)
    assert index.lookup(b"d") == ("f5", 0) and third.deleted_rows == 2


def test_a_rebuild_takes_each_files_live_rows() -> None:
    index = KeyIndex()
    index.add_file("old", [b"a", b"b", b"c"], live=np.array([True, False, True]))
    index.add_file("new", [b"b"])
    assert (index.lookup(b"a"), index.lookup(b"b"), index.lookup(b"c")) == (("old", 0), ("new", 0), ("old", 2))
    index.drop_files(["old"])
    assert index.lookup(b"a") is None and index.lookup(b"b") == ("new", 0) and len(index) == 1
    index.apply(index.plan([("later", [b"c", b"b"])]))  # a change in the dict
    index.add_file("rewritten", [b"b"])  # then a file added (a compaction's): it wins
    assert index.lookup(b"b") == ("rewritten", 0) and index.lookup(b"c") == ("later", 0)


def test_bad_tombstone_positions_are_refused() -> None:
    with pytest.raises(ValueError, match="2 tombstones, 1 positions"):
        KeyIndex().plan([("f", [b"a"])], [b"a", b"b"], after=[0])
    with pytest.raises(ValueError, match="after file 3 of 1"):
        KeyIndex().plan([("f", [b"a"])], [b"a"], after=[3])


def deleted_rows(plan: _keys.BatchPlan) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """The rows a plan deletes, as (path, row): in files from before the batch, in its own."""
    return (
        {(p, r) for p, rows in plan.deletes.items() for r in rows},
        {(p, r) for p, rows in plan.new_file_deletes.items() for r in rows},
    )


@pytest.mark.parametrize("seed", range(5))
def test_the_index_agrees_with_a_model_through_many_batches_and_merges(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_keys, "MERGE_AT", 7)  # merge into the arrays often
    rng = random.Random(seed)
    index, model = KeyIndex(), {}  # model: key -> (file, row) of its live row
    for batch in range(60):
        files, tombstones, after, deleting = [], [], [], []
        for f in range(rng.randint(0, 3)):
            keys = [b"k%d" % rng.randint(0, 40) for _ in range(rng.randint(1, 6))]
            files.append((f"b{batch}-f{f}", keys))
            # rows that are deletes (change data capture's d events), in some files
            deleting.append(np.array([rng.random() < 0.3 for _ in keys]) if rng.random() < 0.5 else None)
        for _ in range(rng.randint(0, 3)):
            tombstones.append(b"k%d" % rng.randint(0, 40))
            after.append(rng.randint(0, len(files)))
        plan = index.plan(files, tombstones, after=after, deleting=deleting)
        # the model: the events in order; every row superseded is deleted, in old files or new
        expected_old: set[tuple[str, int]] = set()
        expected_new: set[tuple[str, int]] = set()
        latest = dict(model)
        events = [(2 * i + 1, "row", path, keys, deleting[i]) for i, (path, keys) in enumerate(files)]
        events += [(2 * place, "tombstone", None, [key], None) for key, place in zip(tombstones, after, strict=True)]
        batch_rows: set[tuple[str, int]] = set()
        for _, kind, path, keys, marks in sorted(events, key=lambda e: (e[0], e[1] == "row")):
            for row, key in enumerate(keys):
                before = latest.get(key)
                if before is not None:
                    (expected_new if before in batch_rows else expected_old).add(before)
                if kind == "row" and not (marks is not None and marks[row]):
                    latest[key] = (path, row)
                    batch_rows.add((path, row))
                else:
                    latest.pop(key, None)
                    if kind == "row":  # a delete row: deleted itself
                        expected_new.add((path, row))
        assert deleted_rows(plan) == (expected_old, expected_new), batch
        index.apply(plan)
        model = latest
        for k in range(41):
            assert index.lookup(b"k%d" % k) == model.get(b"k%d" % k), (batch, k)
    assert len(index) == len(model)


def test_the_arrays_take_24_bytes_a_key() -> None:
    index = KeyIndex()
    keys = [b"key-%08d" % i for i in range(50_000)]
    index.add_file("one-file", keys)
    assert len(index) == 50_000  # merged
    assert index.nbytes - (len("one-file") + 100) == 24 * 50_000


def test_digests_that_share_their_first_half_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # a lookup searches the first halves, then compares whole digests along a run of equal ones
    crafted = {b"a": (1, 3), b"b": (1, 1), b"c": (1, 2), b"d": (0, 9)}

    def fake(key: bytes) -> bytes:
        hi, lo = crafted.get(key, (7, 7))
        return hi.to_bytes(8, "big") + lo.to_bytes(8, "big")

    monkeypatch.setattr(_keys, "digest", fake)
    monkeypatch.setattr(_keys, "digests", lambda keys: np.frombuffer(b"".join(map(fake, keys)), dtype=_keys._DIGEST))
    index = KeyIndex()
    index.add_file("f", [b"a", b"b", b"c", b"d"])
    assert [index.lookup(k) for k in (b"a", b"b", b"c", b"d")] == [("f", 0), ("f", 1), ("f", 2), ("f", 3)]
    assert index.lookup(b"zz") is None  # (7, 7): past every digest
    index.apply(index.plan([("g", [b"c"])]))
    assert index.lookup(b"c") == ("g", 0) and len(index) == 4


@pytest.mark.parametrize("merge_at", [5, 10**9])
@pytest.mark.parametrize("seed", range(5))
def test_compactions_move_the_keys_and_the_index_stays_the_model(
    seed: int, merge_at: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches as above, and between them compactions of random files (their deleted rows left
    out, the rest concatenated in order) told to the index by :meth:`KeyIndex.move`; the paths
    of files no key is in are forgotten along the way. With merges often (the aliases folded
    in), and never (a compacted file compacted again: aliases of aliases)."""
    monkeypatch.setattr(_keys, "MERGE_AT", merge_at)
    monkeypatch.setattr(_keys, "PATHS_KEPT", 3)
    rng = random.Random(seed)
    index = KeyIndex()
    table: dict[str, tuple[list[bytes], set[int]]] = {}  # live file -> keys by row, deleted rows
    for batch in range(80):
        files = [(f"b{batch}-f{f}", [b"k%d" % rng.randint(0, 30) for _ in range(rng.randint(1, 5))])
                 for f in range(rng.randint(0, 2))]  # fmt: skip
        tombstones = [b"k%d" % rng.randint(0, 30) for _ in range(rng.randint(0, 2))]
        plan = index.plan(files, tombstones)
        for path, keys in files:
            table[path] = (keys, set(plan.new_file_deletes.get(path, ())))
        for path, rows in plan.deletes.items():
            table[path][1].update(rows)
        index.apply(plan)
        if rng.random() < 0.4 and len(table) >= 2:
            inputs = rng.sample(sorted(table), rng.randint(2, min(4, len(table))))
            new_keys: list[bytes] = []
            layout = []
            for path in inputs:
                keys, deleted = table.pop(path)
                new_keys += [k for row, k in enumerate(keys) if row not in deleted]
                layout.append((path, np.array(sorted(deleted), dtype=np.int64) if deleted else None, len(keys)))
            table[f"c{batch}"] = (new_keys, set())
            index.move([_keys.Rewritten(f"c{batch}", tuple(layout))])
        live = {keys[row]: (path, row) for path, (keys, deleted) in table.items()
                for row in range(len(keys)) if row not in deleted}  # fmt: skip
        assert len(live) == sum(len(k) - len(d) for k, d in table.values()), "a key live twice in the table"
        for k in range(31):
            assert index.lookup(b"k%d" % k) == live.get(b"k%d" % k), (batch, k)
    if merge_at == 5:
        assert len(index._paths) <= max(3, 2 * len(index)) + 10  # forgotten as files went


def test_keys_of_columns_are_equal_exactly_when_the_values_are() -> None:
    import datetime as dt

    import pyarrow as pa

    table = pa.table(
        {
            "s": ["ab", "a", "ab", "1", None],
            "t": ["c", "bc", "c", "x", "y"],
            "i": pa.array([1, 1, 1, 1, 2], pa.int64()),
            "d": [dt.date(2026, 1, 1)] * 5,
        }
    )
    keys = _keys.keys_of(table.slice(0, 4).select(["s", "t", "i", "d"]))
    assert keys[0] == keys[2] and len(set(keys)) == 3  # ("ab", "c") and ("a", "bc") differ
    assert _keys.keys_of(pa.table({"i": pa.array([1], pa.int64())})) != _keys.keys_of(pa.table({"s": ["1"]}))
    assert _keys.keys_of(pa.table({"k": pa.array([b"raw"], pa.binary())})) == [b"raw"]  # the record key as it is
    assert _keys.keys_of(pa.table({"s": ["x"]})) == [b"x"]


def test_key_columns_the_schema_lacks_or_cannot_key_by_are_refused_naming_the_flag() -> None:
    import pyarrow as pa
    from parka.lake._plan import check_key_columns

    from parka.errors import ConfigError

    schema = pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string())), ("region", pa.string())])
    check_key_columns(schema, ["id", "region"], where="the topic's first segment")
    with pytest.raises(ConfigError, match=r"'idd' for 'key_columns'; set by --key-columns.*no column 'idd'.*id: int64"):
        check_key_columns(schema, ["idd"], where="the topic's first segment")
    with pytest.raises(ConfigError, match=r"'tags' is list<item: string>, not a primitive type"):
        check_key_columns(schema, ["id", "tags"], where="the table")


@pytest.mark.parametrize("seed", range(5))
def test_a_sequenced_index_keeps_the_highest_sequence_per_key(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--sequence-by``: a row whose sequence is below its key's live row's is deleted on
    arrival, an equal or higher one supersedes it; a tombstone deletes whatever is live. Against a
    model that takes the events one by one, through merges."""
    monkeypatch.setattr(_keys, "MERGE_AT", 7)
    rng = random.Random(seed)
    index = KeyIndex(sequenced=True)
    model: dict[bytes, tuple[tuple[str, int], int]] = {}  # key -> (file, row), sequence
    for batch in range(60):
        files, seqs, tombstones, after, deleting = [], [], [], [], []
        for f in range(rng.randint(0, 3)):
            n = rng.randint(1, 6)
            files.append((f"b{batch}-f{f}", [b"k%d" % rng.randint(0, 25) for _ in range(n)]))
            seqs.append(np.array([rng.randint(0, 20) for _ in range(n)], dtype=np.int64))
            deleting.append(np.array([rng.random() < 0.3 for _ in range(n)]) if rng.random() < 0.5 else None)
        for _ in range(rng.randint(0, 2)):
            tombstones.append(b"k%d" % rng.randint(0, 25))
            after.append(rng.randint(0, len(files)))
        plan = index.plan(files, tombstones, after=after, seqs=seqs, deleting=deleting)
        expected_old: set[tuple[str, int]] = set()
        expected_new: set[tuple[str, int]] = set()
        state = dict(model)
        batch_rows: set[tuple[str, int]] = set()
        events = [(2 * i + 1, 1, path, keys, list(seqs[i]), deleting[i]) for i, (path, keys) in enumerate(files)]
        events += [(2 * place, 0, None, [key], [0], None) for key, place in zip(tombstones, after, strict=True)]
        for _, is_row, path, keys, file_seqs, marks in sorted(events, key=lambda e: (e[0], e[1])):
            for r, (key, s) in enumerate(zip(keys, file_seqs, strict=True)):
                live = state.get(key)
                superseded = None if live is None else live[0]
                if not is_row:
                    state.pop(key, None)
                elif marks is not None and marks[r]:
                    # a delete row: deleted itself; it deletes the live row unless that is newer
                    expected_new.add((path, r))
                    batch_rows.add((path, r))
                    if live is not None and s >= live[1]:
                        state.pop(key)
                    else:
                        superseded = None
                else:
                    here = (path, r)
                    batch_rows.add(here)
                    if live is None or s >= live[1]:
                        state[key] = (here, s)
                    else:
                        superseded = here  # older than the live row: deleted on arrival
                if superseded is not None:
                    (expected_new if superseded in batch_rows else expected_old).add(superseded)
        assert deleted_rows(plan) == (expected_old, expected_new), batch
        index.apply(plan)
        model = state
        for k in range(26):
            key = b"k%d" % k
            want = model.get(key)
            assert index.lookup(key) == (None if want is None else want[0]), (batch, k)
            assert index.sequence_of(key) == (None if want is None else want[1]), (batch, k)
    assert len(index) == len(model)


def test_a_sequenced_index_takes_sequences_and_an_unsequenced_one_none() -> None:
    with pytest.raises(ValueError, match="sequenced"):
        KeyIndex(sequenced=True).add_file("f", [b"a"])
    with pytest.raises(ValueError, match="sequenced"):
        KeyIndex().plan([("f", [b"a"])], seqs=[np.array([1])])
    with pytest.raises(ValueError, match="1 sequences for 2 rows"):
        KeyIndex(sequenced=True).add_file("f", [b"a", b"b"], seqs=np.array([1]))


def test_short_keys_are_kept_as_they_are_and_long_ones_as_a_digest_never_equal_to_a_short_ones() -> None:
    """:func:`digests` against a reference taken key by key: a key of up to 15 bytes is its
    length and its bytes (zero-padded), a longer one its BLAKE2b digest with the first bit set;
    mixed lengths, in more keys than one gathering chunk."""
    import hashlib

    def reference(key: bytes) -> bytes:
        if len(key) <= _keys.SHORT_KEY:
            return bytes([len(key)]) + key + bytes(_keys.SHORT_KEY - len(key))
        hashed = bytearray(hashlib.blake2b(key, digest_size=16).digest())
        hashed[0] |= 0x80
        return bytes(hashed)

    rng = random.Random(4)
    keys = [bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 2, 14, 15, 16, 17, 40]))) for _ in range(70_000)]
    assert _keys.digests(keys).tobytes() == b"".join(map(reference, keys))
    assert _keys.digest(b"a") != _keys.digest(b"a\x00") and _keys.digest(b"") == bytes(16)
    assert _keys.digests([]).size == 0
