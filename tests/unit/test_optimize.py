"""``parka optimize`` against real delta-rs tables in temporary folders (no Kafka): compaction,
Z-order, VACUUM's retention, conflicts with concurrent commits, and the orphan cleanup that
must leave compacted files to VACUUM."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from parka.lake import Committer, logged_files
from parka.lake._storage import list_log
from parka.lake.delta._optimize import optimize_table, plan_bins, z_order_indices
from parka.lake.delta._rewrite import conform
from parka.lake.delta._rs_maintenance import live_files

from parka.errors import CommitConflict, CommitError, ConfigError

from ._tables import committer, landed, stitched

MiB = 1024 * 1024


def ingest(c: Committer, partition: int, first_offset: int, segments: int, rows: int = 10) -> None:
    """One commit per segment, ids ``offset * 1000 + i``: many small files."""
    for offset in range(first_offset, first_offset + segments):
        c.commit([landed(c, partition, offset, [offset * 1000 + i for i in range(rows)])])


def ids(path: Path, version: int | None = None) -> list[int]:
    return sorted(DeltaTable(str(path), version=version).to_pyarrow_table(columns=["id"])["id"].to_pylist())


def test_compacted_files_stay_for_old_versions_through_the_orphan_cleanup(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    ingest(c, 0, 0, 6)
    old_version, old_ids = DeltaTable(str(path)).version(), ids(path)
    orphan = landed(c, 0, 3, [999_999])  # a crashed worker's file of a covered offset: a true orphan

    result = optimize_table(str(path))
    assert (result.files_removed, result.files_added) == (6, 1)
    assert result.version_after == old_version + 1 == result.checkpoint_version
    assert ids(path) == old_ids
    removed = c.remove_orphans()

    assert removed == 1  # the orphan goes at once; the six compacted files are left to VACUUM
    assert not (path / orphan.files[0].path).exists()
    assert ids(path, old_version) == old_ids  # time travel still reads the old files
    assert len(list(path.glob("t-p0-o*.parquet"))) == 6


def test_a_tombstone_kept_by_a_checkpoint_protects_its_file_after_log_cleanup(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    ingest(c, 0, 0, 4)
    optimize_table(str(path))  # compaction, then a checkpoint of its version
    ingest(c, 0, 4, 1)
    for commit in sorted((path / "_delta_log").glob("*.json"))[:-1]:  # what log retention removes
        commit.unlink()
    compacted = {f"t-p0-o{o}" for o in range(4)}
    assert {p for p in logged_files(str(path)) if p[:7] in compacted}  # the checkpoint's remove actions
    assert c.remove_orphans() == 0
    assert len(list(path.glob("t-p0-o*.parquet"))) == 5


def test_an_expired_tombstone_no_longer_protects_its_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    ingest(c, 0, 0, 3)
    DeltaTable(str(path)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 seconds"})
    optimize_table(str(path))  # its checkpoint drops the expired tombstones
    for commit in sorted((path / "_delta_log").glob("*.json"))[:-1]:
        commit.unlink()
    assert c.remove_orphans() == 3  # what VACUUM with the table's retention would delete
    assert ids(path) == sorted(o * 1000 + i for o in range(3) for i in range(10))


def test_a_stitched_file_at_the_target_size_is_rewritten_into_large_row_groups(tmp_path: Path) -> None:
    """Found by the lake benchmark: a stitched file holds one row group per segment, and one
    that reached the target size was never rewritten, so a compacted 10M-row table kept 189 row
    groups of 10,000-53,000 rows, and DuckDB's scan stayed 1.10 x the row baseline's."""
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    c.commit(stitched(c, [(0, o, [o * 10 + i for i in range(10)]) for o in range(12)]))
    [uri] = DeltaTable(str(path)).file_uris()
    assert pq.read_metadata(uri.removeprefix("file://")).num_row_groups == 12
    [live] = live_files(DeltaTable(str(path)))
    assert plan_bins([live], target_size=live.size, small_row_groups=lambda f: True) == [[live]]
    assert plan_bins([live], target_size=live.size) == []  # large, and its row groups too: left alone
    assert plan_bins([live], target_size=MiB, small_row_groups=lambda f: True) == [[live]]  # alone but small
    result = optimize_table(str(path), target_size=MiB, row_group_rows=1000, checkpoint=False)
    assert (result.files_removed, result.files_added) == (1, 1)
    [uri] = DeltaTable(str(path)).file_uris()
    meta = pq.read_metadata(uri.removeprefix("file://"))
    assert meta.num_row_groups == 1
    assert ids(path) == list(range(120))


def test_compaction_keeps_every_row_and_writes_large_row_groups_per_partition(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, partition_by=["day"], checkpoint_interval=0)
    for offset in range(8):
        c.commit([landed(c, 0, offset, [offset * 10 + i for i in range(10)], day=f"d{offset % 2}")])
    before = ids(path)
    result = optimize_table(str(path), row_group_rows=25, checkpoint=False)
    assert (result.files_removed, result.files_added, result.checkpoint_version) == (8, 2, None)
    table = DeltaTable(str(path))
    assert ids(path) == before
    assert table.history(1)[0]["operation"] == "WRITE"
    by_day = table.to_pyarrow_table().group_by("day").aggregate([("id", "count")]).to_pylist()
    assert sorted((r["day"], r["id_count"]) for r in by_day) == [("d0", 40), ("d1", 40)]
    for uri in table.file_uris():
        meta = pq.read_metadata(uri.removeprefix("file://"))
        assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [25, 15]
        assert "day" not in meta.schema.names  # partition values live in the add actions
    assert optimize_table(str(path), row_group_rows=25).files_removed == 0  # nothing small left: no commit
    assert table.transaction_version("app-0") == 7


def test_plan_leaves_large_files_and_single_small_ones_alone() -> None:
    def f(path: str, size: int, day: str = "a") -> object:
        from parka.lake.delta._rs_maintenance import LiveFile

        return LiveFile(path, size, {"day": day}, 0)

    files = [f("1", 40), f("2", 40), f("3", 500), f("4", 40), f("5", 40), f("6", 10, "b")]
    bins = plan_bins(files, target_size=100)  # type: ignore[arg-type]
    assert [[x.path for x in b] for b in bins] == [["1", "2"], ["4", "5"]]
    assert [[x.path for x in b] for b in plan_bins(files, target_size=100, z_order=True)] == [  # type: ignore[arg-type]
        ["1", "2", "3", "4", "5"],
        ["6"],
    ]


def test_z_order_sorts_along_the_curve_and_checks_its_columns(tmp_path: Path) -> None:
    rows = pa.table({"x": [3, 0, 1, 0, 2, 1], "y": [3, 0, 0, 1, 2, 1]})
    ordered = rows.take(z_order_indices(rows, ["x", "y"])).to_pylist()
    assert [(r["x"], r["y"]) for r in ordered] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 2), (3, 3)]
    path = tmp_path / "t"
    c = committer(path, partition_by=["day"], checkpoint_interval=0)
    ingest(c, 0, 0, 3)
    with pytest.raises(ConfigError, match="'day' is a partition column"):
        optimize_table(str(path), z_order=["day"])
    with pytest.raises(ConfigError, match="--z-order"):
        optimize_table(str(path), z_order=["nope"])
    before = ids(path)
    result = optimize_table(str(path), z_order=["id"])
    assert (result.files_removed, result.files_added) == (3, 1)
    assert DeltaTable(str(path)).to_pyarrow_table(columns=["id"])["id"].to_pylist() == before


def test_vacuum_respects_the_tables_retention_unless_told(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    ingest(c, 0, 0, 3)
    optimize_table(str(path), checkpoint=False)
    with pytest.raises(ConfigError, match="deletedFileRetentionDuration"):
        optimize_table(str(path), vacuum_retention_hours=1)
    assert optimize_table(str(path), vacuum_retention_hours=168).vacuumed == 0  # too young
    unfinished = landed(c, 0, 3, [3000])  # a live worker's file, not committed yet
    result = optimize_table(str(path), vacuum_retention_hours=0, allow_short_retention=True)
    assert result.vacuumed == 3
    assert (path / unfinished.files[0].path).exists()  # "lite" VACUUM: only removed files
    assert len(ids(path)) == 30


def test_bad_settings_and_a_missing_table_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--target-file-size"):
        optimize_table(str(tmp_path), target_size=10)
    with pytest.raises(ConfigError, match="--vacuum-retention-hours"):
        optimize_table(str(tmp_path), vacuum_retention_hours=-1)
    with pytest.raises(Exception, match="no Delta table"):
        optimize_table(str(tmp_path / "none"))


def test_delta_rs_own_optimize_duplicates_rows_when_two_race(tmp_path: Path) -> None:
    """Why parka commits its own rewrites: delta-rs 1.6's OPTIMIZE rebases over another that
    removed the same files. If this starts failing, delta-rs fixed it."""
    path = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(path, pa.table({"id": [i]}), mode="append")
    first, second = DeltaTable(path), DeltaTable(path)
    first.optimize.compact()
    second.optimize.compact()  # planned on the version before the first one's commit
    assert DeltaTable(path).to_pyarrow_table().num_rows == 6


def test_racing_rewrites_and_appends_keep_every_row_once(tmp_path: Path) -> None:
    """Two optimizers and an ingesting committer at once: every id exactly once."""
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    ingest(c, 0, 0, 10)
    stop = threading.Event()
    errors: list[BaseException] = []
    results = []

    def optimize_loop() -> None:
        while not stop.is_set():
            try:
                results.append(optimize_table(str(path), checkpoint=False, target_size=MiB))
            except CommitConflict:
                continue  # gave up on one run: allowed, nothing lost
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=optimize_loop) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        ingest(c, 0, 10, 30)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert ids(path) == sorted(o * 1000 + i for o in range(40) for i in range(10))
    assert sum(r.files_removed for r in results) > 0
    assert {f.path for f in live_files(DeltaTable(str(path)))} <= logged_files(str(path))


def test_sizes_on_the_command_line() -> None:
    import argparse

    from parka.ops.cli_util import size_bytes

    assert [size_bytes(t) for t in ("128MiB", "1GiB", "500MB", "1048576", "1.5 KiB")] == [
        128 * MiB,
        1024 * MiB,
        500_000_000,
        MiB,
        1536,
    ]
    for bad in ("12XB", "MiB", "0", "-1MiB"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a size"):
            size_bytes(bad)


def test_a_tables_retentions_read_as_delta_writes_them_and_set_only_when_told(tmp_path: Path) -> None:
    """Delta's interval syntax (singular or plural units), its defaults when unset or unreadable,
    and ``set_to_s`` commits the properties once, not again when they already are."""
    from parka.lake import Retention, retention_properties, table_retention

    assert Retention.of({}) == Retention(7 * 86_400, 30 * 86_400)
    assert Retention.of(
        {"delta.deletedFileRetentionDuration": "interval 1 hour", "delta.logRetentionDuration": "INTERVAL 90 minutes"}
    ) == Retention(3_600, 5_400)
    assert Retention.of({"delta.deletedFileRetentionDuration": "1 hour"}).deleted_file_s == 7 * 86_400
    assert table_retention(str(tmp_path / "none")) is None
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"a": [1]}), configuration=retention_properties(60))
    assert table_retention(uri) == Retention(60, 60)
    assert table_retention(uri, set_to_s=7_200) == Retention(7_200, 7_200)
    assert DeltaTable(uri).version() == 1
    assert table_retention(uri, set_to_s=7_200) == Retention(7_200, 7_200)
    assert DeltaTable(uri).version() == 1  # already so: no commit


def test_vacuum_by_the_tables_retention_finds_files_a_checkpoint_no_longer_names(tmp_path: Path) -> None:
    """A checkpoint drops the tombstones past the retention, so a VACUUM that read only those
    (delta-rs' lite mode) would never delete the files; the daemon's deletes them, and never a
    file younger than the retention that no version names yet (a commit in flight's)."""
    import time

    from parka.lake import retention_properties, vacuum_by_table_retention

    uri = tmp_path / "t"
    write_deltalake(str(uri), pa.table({"a": [1]}), configuration=retention_properties(1))
    removed = set(DeltaTable(str(uri)).file_uris())
    write_deltalake(str(uri), pa.table({"a": [2]}), mode="overwrite")
    assert vacuum_by_table_retention(str(uri)) == []  # inside the retention: kept
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:  # the retention passes (table time, not a test's sleep)
        write_deltalake(str(uri), pa.table({"a": [3]}), mode="append")
    DeltaTable(str(uri)).create_checkpoint()  # leaves the expired tombstone out
    in_flight = uri / "part-in-flight.parquet"
    in_flight.write_bytes(b"PAR1")
    assert DeltaTable(str(uri)).vacuum(dry_run=True, full=False) == []  # what lite mode would see
    deleted = vacuum_by_table_retention(str(uri))
    assert {str(uri / d) for d in deleted} >= {r.removeprefix("file://") for r in removed}
    assert in_flight.exists() and not any(Path(r.removeprefix("file://")).exists() for r in removed)
    assert sorted(DeltaTable(str(uri)).to_pyarrow_table()["a"].to_pylist())[:1] == [2]


def test_the_log_is_read_from_the_last_checkpoint_on_unless_that_checkpoint_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    ingest(c, 0, 0, 4)
    optimize_table(str(path))  # compaction, then a checkpoint of its version (5)
    ingest(c, 0, 4, 1)
    everything = logged_files(str(path))
    assert list_log(str(path), from_version=5) == [
        "00000000000000000005.checkpoint.parquet",
        "00000000000000000005.json",
        "00000000000000000006.json",
        "_last_checkpoint",
    ]
    (path / "_delta_log" / "00000000000000000000.json").unlink()  # not read: before the checkpoint
    assert logged_files(str(path)) == everything
    # _last_checkpoint naming a checkpoint that is not there: every name is looked at, and
    # without the first commit the log cannot be told
    (path / "_delta_log" / "00000000000000000005.checkpoint.parquet").unlink()
    with pytest.raises(CommitError, match="no commit 0 or a gap"):
        logged_files(str(path))


def test_a_rewrite_reads_each_file_as_the_table_schema() -> None:
    """A file of the table's schema keeps its columns and takes the schema's metadata; an older
    file gets the columns added since as nulls, its narrower types cast, and loses columns the
    table no longer has."""
    schema = pa.schema([("id", pa.int64(), False), ("name", pa.string()), ("added", pa.float64())], {b"k": b"table"})
    same = pa.table({"id": [1, 2], "name": ["a", None], "added": [0.5, None]}).cast(schema.remove_metadata())
    same = same.replace_schema_metadata({b"k": b"file", b"parka.other": b"x"})
    conformed = conform(same, schema)
    assert conformed.schema.equals(schema, check_metadata=True)
    assert conformed.to_pylist() == same.to_pylist()
    old = pa.table({"name": ["c"], "id": pa.array([3], pa.int32()), "dropped": [True]})
    conformed = conform(old, schema)
    assert conformed.schema.equals(schema, check_metadata=True)
    assert conformed.to_pylist() == [{"id": 3, "name": "c", "added": None}]
