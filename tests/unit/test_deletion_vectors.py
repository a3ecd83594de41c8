"""Deletion vectors parka writes into Delta tables (``lake/delta/_dv.py``) and the commit that
deletes rows with them (``lake/delta/_dv_commit.py``), read back by delta-rs' query engine (which
applies deletion vectors; its ``to_pyarrow_table`` refuses tables that have them)."""

from __future__ import annotations

import json
import struct
import threading
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from parka.lake import _storage
from parka.lake._compaction import CompactedName
from parka.lake._log import DataFile
from parka.lake._orphans import remove_orphans
from parka.lake._stats import data_file_stats
from parka.lake.delta import _dv, _rs
from parka.lake.delta._dv_commit import index_keys
from parka.lake.delta._logscan import live_adds
from parka.lake.delta._optimize import _Rewrite, optimize_table
from parka.lake.delta._rs import RsEngine
from parka.lake.delta._rs_maintenance import live_files

from parka.errors import CommitConflict, CommitError

ENABLED = {"delta.enableDeletionVectors": "true"}


def test_z85_is_zeromq_base85() -> None:
    # the Z85 specification's own example (rfc.zeromq.org/spec/32)
    assert _dv.z85_encode(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"
    assert _dv.z85_decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")
    assert _dv.z85_decode(_dv.z85_encode(b"abcdefg"), 7) == b"abcdefg"  # padded, then cut to size
    with pytest.raises(ValueError, match="multiple of 5"):
        _dv.z85_decode("abcd")
    with pytest.raises(ValueError, match="not Z85"):
        _dv.z85_decode("abcd~")


def test_a_vector_is_the_protocols_roaring_bitmap_array() -> None:
    # row 1 deleted, as Databricks writes it: magic 1681511377 (little-endian), one bucket (int64),
    # its key 0 (int32), then the portable 32-bit Roaring bitmap (no-run cookie 0x303a, one array container)
    expected = bytes.fromhex("d1d339640100000000000000000000003a3000000100000000000000100000000100")
    assert _dv.encode([1]) == expected
    assert _dv.decode(expected).tolist() == [1]
    rows = [0, 7, 7, 65_535, 65_536, 2**32 - 1, 2**32, 2**33 + 5]
    data = _dv.encode(reversed(rows))
    assert struct.unpack_from("<iq", data) == (_dv.MAGIC, 3)  # buckets 0, 1 and 2 of the high 32 bits
    assert _dv.decode(data).tolist() == sorted(set(rows))
    assert _dv.decode(_dv.encode([])).tolist() == []


def test_bad_vector_bytes_are_named() -> None:
    with pytest.raises(ValueError, match="magic number 1, not 1681511377"):
        _dv.decode(struct.pack("<iq", 1, 0))
    with pytest.raises(ValueError, match="at least 12"):
        _dv.decode(b"\x00")
    with pytest.raises(ValueError, match="malformed"):
        _dv.decode(_dv.encode([1, 2, 3])[:-3])
    with pytest.raises(ValueError, match="negative"):
        _dv.encode([3, -1])


def test_descriptor_json_and_file_names() -> None:
    inline = _dv.Descriptor("i", "abcde", 4, 1)
    assert inline.to_json() == {"storageType": "i", "pathOrInlineDv": "abcde", "sizeInBytes": 4, "cardinality": 1}
    assert _dv.Descriptor.from_json(inline.to_json()) == inline
    assert inline.relative_path() is None and inline.unique_id() == "iabcde"
    uuid_z85 = _dv.z85_encode(bytes(range(16)))
    in_file = _dv.Descriptor.from_json(
        {"storageType": "u", "pathOrInlineDv": "ab" + uuid_z85, "offset": 1, "sizeInBytes": 40, "cardinality": 9}
    )
    assert in_file.relative_path() == "ab/deletion_vector_00010203-0405-0607-0809-0a0b0c0d0e0f.bin"
    assert in_file.unique_id() == f"uab{uuid_z85}@1"
    with pytest.raises(ValueError, match="storage type 'x'"):
        _dv.Descriptor.from_json({**inline.to_json(), "storageType": "x"})
    with pytest.raises(ValueError, match="not a deletion vector descriptor"):
        _dv.Descriptor.from_json({"storageType": "i"})


def test_a_commits_large_vectors_go_to_one_file_of_the_protocols_format(tmp_path: Path) -> None:
    rows = np.arange(0, 200_000, 7)
    others = np.arange(5, 100_000, 3)
    stored = _dv.store_all(str(tmp_path), {"small": [3, 4], "big": rows, "other": others}, inline_max_bytes=64)
    small, big, other = stored["small"], stored["big"], stored["other"]
    assert small.storage_type == "i" and _dv.load(str(tmp_path), small).tolist() == [3, 4]
    assert (big.storage_type, big.offset, big.cardinality) == ("u", 1, rows.size)
    assert big.relative_path() == other.relative_path() is not None  # one file for the commit
    assert other.offset == 1 + 4 + big.size_in_bytes + 4
    relative = big.relative_path()
    assert relative is not None
    raw = (tmp_path / relative).read_bytes()
    # format byte 1; then per vector its size (int32 big-endian), its bytes, their CRC-32 (int32 big-endian)
    assert raw[0] == 1 and struct.unpack_from(">i", raw, 1)[0] == big.size_in_bytes
    data = raw[5 : 5 + big.size_in_bytes]
    assert struct.unpack_from(">I", raw, 5 + big.size_in_bytes)[0] == zlib.crc32(data)
    assert len(raw) == 1 + 2 * 8 + big.size_in_bytes + other.size_in_bytes
    assert _dv.load(str(tmp_path), big).tolist() == rows.tolist()
    assert _dv.load(str(tmp_path), other).tolist() == others.tolist()
    (tmp_path / relative).write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    with pytest.raises(CommitError, match="fails its CRC-32"):
        _dv.load(str(tmp_path), other)
    with pytest.raises(CommitError, match="its descriptor says 5"):
        _dv.load(str(tmp_path), _dv.Descriptor("i", small.path_or_inline_dv, small.size_in_bytes, 5))
    with pytest.raises(ValueError, match="no rows for empty"):
        _dv.store_all(str(tmp_path), {"empty": []})


def file_deletions(uri: str, version: int) -> dict[str, np.ndarray]:
    """The deleted rows of each live file of ``version`` that has a deletion vector."""
    return {
        path: _dv.load(uri, _dv.Descriptor.from_json(add["deletionVector"]))
        for path, add in live_adds(uri, version=version).items()
        if add.get("deletionVector")
    }


def logical_rows(uri: str) -> list[dict[str, Any]]:
    """The table's rows as delta-rs' query engine reads them (deletion vectors applied)."""
    reader = QueryBuilder().register("t", DeltaTable(uri)).execute("select k, v from t order by k, v")
    return pa.table(reader.read_all()).to_pylist()


def rows(*keys: int) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys], "key": [b"%d" % k for k in keys]})


def two_files(uri: str, **properties: str) -> tuple[DeltaTable, list[str]]:
    write_deltalake(uri, rows(0, 1, 2, 3, 4), configuration=properties or ENABLED)
    write_deltalake(uri, rows(5, 6, 7), mode="append")
    table = DeltaTable(uri)
    paths = sorted(live_adds(uri), key=lambda p: json.loads(live_adds(uri)[p]["stats"])["numRecords"])
    return table, paths  # the file of 3 rows, then the file of 5


def test_a_commit_deletes_rows_of_live_files_and_adds_a_file_with_rows_deleted(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table, (three, five) = two_files(uri)
    new = tmp_path / "t" / "new.parquet"
    pq.write_table(rows(8, 9, 10), new)
    stats = data_file_stats(pq.read_metadata(new), rows(8, 9, 10).schema)
    added = DataFile("new.parquet", new.stat().st_size, stats, tags={"kafka.offsets": "0-2"})
    version = _rs.commit_row_deletions(
        table, {five: [1, 3], three: [0]}, files=[added], new_file_deletions={"new.parquet": [1]}, txns={"app": 7}
    )
    assert version == 2 == table.version()
    assert [r["k"] for r in logical_rows(uri)] == [0, 2, 4, 6, 7, 8, 10]
    assert DeltaTable(uri).transaction_version("app") == 7
    commit = [
        json.loads(line) for line in (tmp_path / "t" / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    ]
    assert commit[0]["commitInfo"]["parka.fileTags"] == {"new.parquet": {"kafka.offsets": "0-2"}}
    adds = {a["add"]["path"]: a["add"] for a in commit if "add" in a}
    assert json.loads(adds[five]["stats"])["tightBounds"] is False
    assert json.loads(adds[five]["stats"])["numRecords"] == 5  # the physical rows

    # more rows of a file that has a vector: the remove names the old vector, the add has both
    _rs.commit_row_deletions(table, {five: [4]})
    assert [r["k"] for r in logical_rows(uri)] == [0, 2, 6, 7, 8, 10]
    last = [json.loads(line) for line in (tmp_path / "t" / "_delta_log" / f"{3:020d}.json").read_text().splitlines()]
    removed = next(a["remove"] for a in last if "remove" in a)
    assert removed["deletionVector"] == adds[five]["deletionVector"]
    assert sorted(file_deletions(uri, table.version())[five].tolist()) == [1, 3, 4]

    # every row of a file deleted: the file is removed, no vector written
    _rs.commit_row_deletions(table, {three: [1, 2]})
    assert three not in live_adds(uri)
    assert [r["k"] for r in logical_rows(uri)] == [0, 2, 8, 10]


def test_vectors_survive_delta_rs_checkpoints_and_appends(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table, (_three, five) = two_files(uri)
    _rs.commit_row_deletions(table, {five: [0]})
    table.create_checkpoint()
    write_deltalake(uri, rows(20), mode="append")  # delta-rs commits on top of parka's commit
    reopened = DeltaTable(uri)
    assert {p: r.tolist() for p, r in file_deletions(uri, reopened.version()).items()} == {five: [0]}
    _rs.commit_row_deletions(reopened, {five: [2]})  # its remove names the vector the checkpoint holds
    assert [r["k"] for r in logical_rows(uri)] == [1, 3, 4, 5, 6, 7, 20]


def test_another_commit_on_the_version_is_a_conflict_and_nothing_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_dv, "INLINE_MAX_BYTES", 0)  # every vector in a file of its own
    uri = str(tmp_path / "t")
    table, (_three, five) = two_files(uri)
    write_deltalake(uri, rows(30), mode="append")  # version 2, which the handle (at 1) has not read
    log_file = tmp_path / "t" / "_delta_log" / f"{2:020d}.json"
    before = log_file.read_bytes()
    with pytest.raises(CommitConflict) as caught:
        _rs.commit_row_deletions(table, {five: [0]})
    assert caught.value.read_version == 1
    assert log_file.read_bytes() == before
    assert not list((tmp_path / "t").glob("deletion_vector_*.bin"))  # the lost attempt's vector file deleted
    assert [r["k"] for r in logical_rows(uri)] == [0, 1, 2, 3, 4, 5, 6, 7, 30]
    _rs.commit_row_deletions(DeltaTable(uri), {five: [0]})  # on the version it read now
    assert len(list((tmp_path / "t").glob("deletion_vector_*.bin"))) == 1


def test_of_two_commits_racing_for_one_version_exactly_one_lands(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _, (_three, five) = two_files(uri)
    handles = [DeltaTable(uri), DeltaTable(uri)]
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def commit(handle: DeltaTable, row: int) -> None:
        start.wait()
        try:
            _rs.commit_row_deletions(handle, {five: [row]})
            outcomes.append("landed")
        except CommitConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=commit, args=(h, r)) for h, r in zip(handles, (0, 1), strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict", "landed"]
    assert len(logical_rows(uri)) == 7


def test_a_table_without_deletion_vectors_or_a_dead_file_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table, (_three, five) = two_files(uri, **{"delta.appendOnly": "false"})
    with pytest.raises(CommitError, match=r"delta\.enableDeletionVectors"):
        _rs.commit_row_deletions(table, {five: [0]})
    uri2 = str(tmp_path / "t2")
    table2, (_three2, five2) = two_files(uri2)
    with pytest.raises(CommitError, match="not a live file"):
        _rs.commit_row_deletions(table2, {"gone.parquet": [0]})
    with pytest.raises(CommitError, match="positions 0-5 of 5"):
        _rs.commit_row_deletions(table2, {five2: [0, 5]})
    assert len(logical_rows(uri2)) == 8


def test_a_log_file_is_created_once(tmp_path: Path) -> None:
    _storage.create_log_file(str(tmp_path), "00000000000000000000.json", b"first\n")
    with pytest.raises(_storage.FileExists):
        _storage.create_log_file(str(tmp_path), "00000000000000000000.json", b"second\n")
    assert (tmp_path / "_delta_log" / "00000000000000000000.json").read_bytes() == b"first\n"
    assert [p.name for p in (tmp_path / "_delta_log").iterdir()] == ["00000000000000000000.json"]  # no temp left
    with pytest.raises(ValueError, match="not a file name"):
        _storage.create_log_file(str(tmp_path), "../x.json", b"")


def test_the_key_index_of_a_table_leaves_deleted_rows_and_other_partitions_files_out(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    keyed = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "__parka_key": [b"a", b"b", b"c"]})
    write_deltalake(uri, keyed, configuration=ENABLED)
    (first,) = live_adds(uri)
    partition_1 = "topic-p1-o00000000000000000007-0123456789ab.parquet"  # ingestion's name: Kafka partition 1
    pq.write_table(pa.table({"k": pa.array([4], pa.int64()), "__parka_key": [b"d"]}), tmp_path / "t" / partition_1)
    meta = pq.read_metadata(tmp_path / "t" / partition_1)
    added = DataFile(partition_1, (tmp_path / "t" / partition_1).stat().st_size, data_file_stats(meta, keyed.schema))
    table = DeltaTable(uri)
    _rs.commit_row_deletions(table, {first: [1]}, files=[added])
    index = index_keys(uri, table.version())
    assert (index.lookup(b"a"), index.lookup(b"b"), index.lookup(b"d")) == ((first, 0), None, (partition_1, 0))
    only_0 = index_keys(uri, table.version(), kafka_partitions={0})
    assert only_0.lookup(b"d") is None and only_0.lookup(b"c") == (first, 2)  # delta-rs' file: no partition in its name
    assert index_keys(uri, 0).lookup(b"b") == (first, 1)  # as of version 0
    with pytest.raises(CommitError, match="lacks a column of nope"):
        index_keys(uri, table.version(), key_columns=("nope",))


def test_a_live_row_without_a_key_is_named_and_a_deleted_one_is_not_indexed(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"__parka_key": pa.array([None, b"e"], pa.binary())}), configuration=ENABLED)
    (path,) = live_adds(uri)
    with pytest.raises(CommitError, match=r"live rows without a key \(__parka_key\)"):
        index_keys(uri, 0)
    table = DeltaTable(uri)
    _rs.commit_row_deletions(table, {path: [0]})
    assert index_keys(uri, table.version()).lookup(b"e") == (path, 1)


def test_optimize_leaves_deleted_rows_out_and_removes_each_file_with_its_vector(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table, (three, five) = two_files(uri)
    _rs.commit_row_deletions(table, {five: [0, 4], three: [1]})
    result = optimize_table(uri, checkpoint=False)
    assert (result.files_removed, result.files_added) == (2, 1)
    assert [r["k"] for r in logical_rows(uri)] == [1, 2, 3, 5, 7]
    (only,) = live_adds(uri).values()
    assert "deletionVector" not in only and json.loads(only["stats"])["numRecords"] == 5

    # a lone file with deleted rows is rewritten too
    _rs.commit_row_deletions(DeltaTable(uri), {only["path"]: [0]})
    assert optimize_table(uri, checkpoint=False).files_removed == 1
    assert [r["k"] for r in logical_rows(uri)] == [2, 3, 5, 7]


def test_rows_deleted_after_a_compaction_read_its_inputs_are_deleted_in_its_new_file(tmp_path: Path) -> None:
    """Rows deleted after the rewrite read its inputs (the same path with a grown vector): the
    compaction knows where each input row went, so it commits over the new version, removing the
    file by its vector as it is now and deleting those rows in its own file in the same commit.
    The commit turn is held around the commit and the hook hears where the rows went: a key index
    of the version it committed over, moved, is the index read from the table afterwards."""
    uri = str(tmp_path / "t")
    table, (three, five) = two_files(uri)
    _rs.commit_row_deletions(table, {five: [0]})
    read = DeltaTable(uri)
    inputs = live_files(read)
    late = DeltaTable(uri)
    _rs.commit_row_deletions(late, {five: [1]})  # lands between the read and the commit
    index = index_keys(uri, late.version(), key_columns=("key",))
    turn = threading.RLock()
    heard: list[tuple[int, int, Any]] = []

    def on_commit(read_version: int, version: int, moved: Any) -> None:
        assert turn._is_owned()  # type: ignore[attr-defined]
        heard.append((read_version, version, moved))
        index.move(moved)

    rewrite = _Rewrite(uri, {}, (), 128 * 2**20, 1_000_000, 3, lambda s: None)
    result = rewrite.run(read, [(inputs, "compacted.parquet")], commit_turn=turn, on_commit=on_commit)
    assert (result.files_removed, result.files_added, result.attempts) == (2, 1, 2)
    assert [r["k"] for r in logical_rows(uri)] == [2, 3, 4, 5, 6, 7]
    assert [(r, v) for r, v, _ in heard] == [(3, 4)]
    (moved,) = heard[0][2]
    assert moved.path == "compacted.parquet" and [(p, n) for p, _, n in moved.inputs] == [(five, 5), (three, 3)]
    assert live_adds(uri).keys() == {"compacted.parquet"}
    assert _dv.load(uri, _dv.Descriptor.from_json(live_adds(uri)["compacted.parquet"]["deletionVector"])).tolist() == [
        0
    ]
    again = index_keys(uri, 4, key_columns=("key",))
    keys = [b"%d" % k for k in range(8)]
    assert [index.lookup(k) for k in keys] == [again.lookup(k) for k in keys]
    assert index.lookup(b"2") == ("compacted.parquet", 1)  # 1 and 2 were rows 0 and 1; 0 was left out


def test_rows_deleted_before_one_conflict_stay_deleted_through_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction that conflicts twice: rows deleted before the first, then an unrelated append
    before the second. The new file's vector still deletes the first conflict's rows."""
    from parka.lake.delta import _optimize

    uri = str(tmp_path / "t")
    _, (_three, five) = two_files(uri)
    read = DeltaTable(uri)
    inputs = live_files(read)
    _rs.commit_row_deletions(DeltaTable(uri), {five: [1]})  # before the first attempt
    real = _optimize._rs_maintenance.commit_rewrite
    calls = []

    def commit_rewrite(*args: Any, **kwargs: Any) -> int:
        calls.append(kwargs.get("new_file_deletions"))
        if len(calls) == 2:
            write_deltalake(uri, rows(8), mode="append")  # lands before the second attempt
        return real(*args, **kwargs)

    monkeypatch.setattr(_optimize._rs_maintenance, "commit_rewrite", commit_rewrite)
    rewrite = _Rewrite(uri, {}, (), 128 * 2**20, 1_000_000, 5, lambda s: None)
    result = rewrite.run(read, [(inputs, "compacted.parquet")])
    assert (result.files_removed, result.files_added, result.attempts) == (2, 1, 3)
    assert [r["k"] for r in logical_rows(uri)] == [0, 2, 3, 4, 5, 6, 7, 8]


def test_a_z_order_rewrite_whose_input_lost_rows_meanwhile_is_dropped_not_committed(tmp_path: Path) -> None:
    """A rewrite that sorted its rows cannot say where they went: an input whose vector grew
    since it read it is another file, which the rewrite (holding its deleted rows) must not
    replace."""
    uri = str(tmp_path / "t")
    table, (three, five) = two_files(uri)
    _rs.commit_row_deletions(table, {five: [0]})
    read = DeltaTable(uri)
    inputs = live_files(read)
    _rs.commit_row_deletions(DeltaTable(uri), {five: [1]})  # lands between the read and the commit
    rewrite = _Rewrite(uri, {}, ("v",), 128 * 2**20, 1_000_000, 3, lambda s: None)
    result = rewrite.run(read, [(inputs, None)])
    assert result.files_added == 0 and result.files_removed == 0
    assert [r["k"] for r in logical_rows(uri)] == [2, 3, 4, 5, 6, 7]
    assert {p.name for p in (tmp_path / "t").glob("*.parquet")} == {three, five}  # its new file deleted


def test_which_readers_apply_deletion_vectors(tmp_path: Path) -> None:
    """What docs/reading-tables.md says of a table with deleted rows: delta-rs' QueryBuilder and
    polars leave them out, the DuckDB recipe over the live files' list reads them, and
    ``to_pyarrow_table`` refuses the table."""
    import duckdb
    import polars as pl
    from deltalake.exceptions import DeltaProtocolError

    uri = str(tmp_path / "t")
    table, (_three, five) = two_files(uri)
    _rs.commit_row_deletions(table, {five: [0, 1]})
    assert len(logical_rows(uri)) == 6
    assert pl.read_delta(uri).height == 6
    files = DeltaTable(uri).file_uris()
    assert duckdb.read_parquet(files).aggregate("count(*)").fetchall() == [(8,)]  # the deleted rows too
    with pytest.raises(DeltaProtocolError, match="deletionVectors"):
        DeltaTable(uri).to_pyarrow_table()


@pytest.mark.parametrize("seed", range(3))
def test_a_key_index_caught_up_from_the_commits_in_between_equals_one_read_from_the_table(
    tmp_path: Path, seed: int
) -> None:
    """Another writer's commits between two of ours (updates that delete rows by vector and add
    files, deletes alone, compactions that remove files and add others, a file all of whose rows
    go): the index of the earlier version, caught up from those commits alone, equals the index
    read from the table at the later one, key by key."""
    import random

    from parka.lake.delta._dv_commit import catch_up_keys

    rng = random.Random(seed)
    uri = str(tmp_path / "t")
    write_deltalake(uri, rows(*range(40)), configuration=ENABLED)
    table = DeltaTable(uri)
    index = index_keys(uri, table.version(), key_columns=("key",))
    made = 0
    for _ in range(6):
        since = table.version()
        for _ in range(rng.randint(1, 4)):
            table = DeltaTable(uri)
            current = index_keys(uri, table.version(), key_columns=("key",))
            if rng.random() < 0.25:
                optimize_table(uri, checkpoint=False)
                continue
            keys = rng.sample(range(60), rng.randint(1, 8))
            deletions: dict[str, list[int]] = {}
            for k in keys:
                found = current.lookup(b"%d" % k)
                if found is not None:
                    deletions.setdefault(found[0], []).append(found[1])
            updated = [k for k in keys if rng.random() < 0.7]  # the others are deleted
            files = []
            if updated:
                made += 1
                name = f"new-{made}.parquet"
                pq.write_table(rows(*updated), tmp_path / "t" / name)
                stats = data_file_stats(pq.read_metadata(tmp_path / "t" / name), rows(0).schema)
                files.append(DataFile(name, (tmp_path / "t" / name).stat().st_size, stats))
            _rs.commit_row_deletions(table, deletions, files=files)
        table = DeltaTable(uri)
        catch_up_keys(index, uri, since, table.version(), key_columns=("key",))
        read = index_keys(uri, table.version(), key_columns=("key",))
        for k in range(60):
            assert index.lookup(b"%d" % k) == read.lookup(b"%d" % k), (since, k)
        assert len(index) == len(read)


def test_a_compaction_whose_named_input_an_upsert_removed_is_dropped_as_the_orphan_cleanup_may_take_its_file(
    tmp_path: Path,
) -> None:
    """The orphan cleanup deletes a compacted file no log entry names once the input its name
    carries is not live. An upsert commit that removes that input while the compaction waits for
    its turn, and a cleanup run then, delete the compaction's file: the compaction must drop the
    rewrite rather than commit a file that is gone, and the table reads whole."""
    uri = str(tmp_path / "t")
    _, (three, five) = two_files(uri)
    read = DeltaTable(uri)
    inputs = live_files(read)
    name = str(CompactedName.new(1, three))
    cleaned: list[int] = []

    class Turn:  # the ingest's commit turn, during which the upsert commits and the cleanup runs
        def acquire(self, timeout: float = -1) -> bool:
            _rs.commit_row_deletions(DeltaTable(uri), {three: [0, 1, 2]})  # three removed
            log = RsEngine().open(uri)
            assert log is not None
            cleaned.append(remove_orphans(log, "t", lambda p: f"app-{p}").removed)
            return True

        def release(self) -> None:
            pass

    rewrite = _Rewrite(uri, {}, (), 128 * 2**20, 1_000_000, 3, lambda s: None)
    result = rewrite.run(read, [(inputs, name)], commit_turn=Turn())
    assert cleaned == [1] and not (tmp_path / "t" / name).exists()  # the cleanup took the new file
    assert (result.files_removed, result.files_added) == (0, 0)  # and the rewrite was dropped
    assert live_adds(uri).keys() == {five}
    assert all((tmp_path / "t" / path).exists() for path in live_adds(uri))
    assert [r["k"] for r in logical_rows(uri)] == [0, 1, 2, 3, 4]


def test_a_compaction_input_an_upsert_removed_has_all_its_rows_deleted_in_the_new_file(tmp_path: Path) -> None:
    """Every row of an input deleted between the read and the commit (the commit removes the
    file): with no rewrite in between, the compaction commits on the new version, removing only
    the other input and deleting the gone one's rows in its new file; after a rewrite in between
    it is dropped (the rows may live on in that rewrite's file)."""
    uri = str(tmp_path / "t")
    _, (three, five) = two_files(uri)
    read = DeltaTable(uri)
    inputs = live_files(read)
    assert [f.path for f in inputs] == [five, three]
    _rs.commit_row_deletions(DeltaTable(uri), {three: [0, 1, 2], five: [4]})  # three removed
    assert three not in live_adds(uri)
    rewrite = _Rewrite(uri, {}, (), 128 * 2**20, 1_000_000, 3, lambda s: None)
    name = str(CompactedName.new(1, five))  # named after the input that stays, as compaction names it
    result = rewrite.run(read, [(inputs, name)])
    assert (result.files_removed, result.files_added, result.attempts) == (1, 1, 2)
    assert [r["k"] for r in logical_rows(uri)] == [0, 1, 2, 3]
    assert live_adds(uri).keys() == {name}
    vector = _dv.Descriptor.from_json(live_adds(uri)[name]["deletionVector"])
    assert sorted(_dv.load(uri, vector).tolist()) == [4, 5, 6, 7]  # five's last row, then three's rows

    # the same race with another compaction committed in between: dropped, nothing twice
    other = str(tmp_path / "u")
    _, (three, five) = two_files(other)
    read = DeltaTable(other)
    inputs = live_files(read)
    rival = _Rewrite(other, {}, (), 128 * 2**20, 1_000_000, 3, lambda s: None)
    rival.run(DeltaTable(other), [([f for f in inputs if f.path == three], "rival.parquet")])
    _rs.commit_row_deletions(DeltaTable(other), {"rival.parquet": [0, 1, 2]})  # the rival's file removed too
    result = _Rewrite(other, {}, (), 128 * 2**20, 1_000_000, 3, lambda s: None).run(read, [(inputs, "late.parquet")])
    assert result.files_removed == 0
    assert [r["k"] for r in logical_rows(other)] == [0, 1, 2, 3, 4]
    assert "late.parquet" not in live_adds(other) and not (tmp_path / "u" / "late.parquet").exists()
