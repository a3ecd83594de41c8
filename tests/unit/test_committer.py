"""The one committer, against real delta-rs tables in temporary folders (no Kafka, no Spark):
the covered rule (for stitched files too), a refused message without and with a dead-letter
table, orphans of interrupted writes, and the table's own partitioning."""

from __future__ import annotations

import dataclasses
import io
import json
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from parka.lake import (
    FileName,
    LandedSegment,
    Refused,
    SegmentRead,
    check_segment,
    read_file,
    read_segment,
    write_segments,
)
from parka.lake import _committer as lake_committer
from parka.lake import _orphans as lake_orphans
from parka.lake.delta._rs import RsTableLog

from parka.errors import CommitError, ConfigError, SegmentDecodeError, SegmentError
from parka.schema import schema_fingerprint
from parka.segment import decode_segment, encode_segment

from ._tables import SCHEMA, SteppingClock, committer, conflicting, landed, rows_run, stitched


def refused(partition: int, offset: int) -> Refused:
    err = SegmentError("not a parka segment", value=b"{}", headers=[], topic="t", partition=partition, offset=offset)
    return Refused(partition, offset, err, 1_700_000_000_000)


def ids(path: Path) -> list[int]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table(columns=["id"])["id"].to_pylist())


def test_data_the_table_already_covers_is_deleted_not_committed(tmp_path: Path) -> None:
    c = committer(tmp_path / "t")
    first = [landed(c, 0, 0, [1, 2]), landed(c, 0, 1, [3])]
    result = c.commit(first)
    assert (dict(result.last), dict(result.table_txn)) == ({0: 1}, {0: None})
    again = [landed(c, 0, 0, [1, 2]), landed(c, 0, 1, [3]), landed(c, 0, 2, [4])]  # a replay, and one more
    result = c.commit(again)
    assert (dict(result.last), dict(result.table_txn)) == ({0: 2}, {0: 1})
    assert ids(tmp_path / "t") == [1, 2, 3, 4]
    assert c.stats.covered_files == 2
    assert not any((tmp_path / "t" / f.path).exists() for s in again[:2] for f in s.files)


def test_a_stitched_file_the_table_partly_covers_is_trimmed_to_the_rest(tmp_path: Path) -> None:
    """Another writer with this app id committed offsets 0-1 meanwhile: the stitched file of
    0-3 may not be committed as is (duplicates) nor dropped (loss). A new file with the row
    groups of 2-3 is committed, and the stitched one deleted."""
    c = committer(tmp_path / "t")
    c.commit([landed(c, 0, 0, [1, 2]), landed(c, 0, 1, [3])])
    run = stitched(c, [(0, 0, [1, 2]), (0, 1, [3]), (0, 2, [4, 5]), (0, 3, [6])])
    assert len({f.path for s in run for f in s.files}) == 1
    assert [s.row_groups for s in run] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    result = c.commit(run)
    assert dict(result.last) == {0: 3}
    assert ids(tmp_path / "t") == [1, 2, 3, 4, 5, 6]
    assert (c.stats.trimmed_files, c.stats.covered_files) == (1, 1)
    assert not (tmp_path / "t" / run[0].files[0].path).exists()
    [trimmed] = [FileName.parse(p) for p in DeltaTable(str(tmp_path / "t")).file_uris() if "-to" in p]
    assert trimmed is not None and (trimmed.partition, trimmed.offset, trimmed.last) == (0, 2, 3)


def test_a_run_of_row_records_the_table_partly_covers_is_cut_at_the_txn(tmp_path: Path) -> None:
    """Row records 0-9 (ids 100-109) are in; another writer with this app id read offsets 5-14
    (and 20, after a gap) as one run: only the rows at 10-14 and 20 may land, in a new file."""
    c = committer(tmp_path / "t")
    c.commit(rows_run(c, [(0, list(range(10)), list(range(100, 110)))]))
    [run] = rows_run(c, [(0, [*range(5, 15), 20], [*range(105, 115), 120])])
    assert (run.first_offset, run.offset, run.records) == (5, 20, 11)
    result = c.commit([run])
    assert (dict(result.last), dict(result.table_txn)) == ({0: 20}, {0: 9})
    assert ids(tmp_path / "t") == [*range(100, 115), 120]
    assert (c.stats.trimmed_files, c.stats.covered_files) == (1, 1)
    assert not (tmp_path / "t" / run.files[0].path).exists()
    names = [FileName.parse(p) for p in DeltaTable(str(tmp_path / "t")).file_uris()]
    assert sorted((n.offset, n.last) for n in names if n is not None) == [(0, 9), (10, 20)]


def test_a_run_stitched_after_a_segment_is_cut_inside_its_own_rows(tmp_path: Path) -> None:
    """A segment (offset 3) and a run of row records (4-8) stitched into one file; the table
    holds up to offset 5: the segment's row group goes, and of the run only 6-8 stay."""
    c = committer(tmp_path / "t")
    c.commit(rows_run(c, [(0, [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5])]))
    seg = stitched(c, [(0, 3, [30, 31])])
    run = rows_run(c, [(0, [4, 5, 6, 7, 8], [4, 5, 6, 7, 8])])
    both = write_segments(
        [
            check_segment(s, table_schema=c.table_schema(), partition_by=(), merge=False,
                          check_columns=c.engine.check_columns)
            for s in (_read(c, seg[0]), _read(c, run[0]))
        ],
        table_uri=c.root,
        table_schema=c.table_schema(),
    )  # fmt: skip
    assert len({f.path for s in both for f in s.files}) == 1  # stitched
    c.commit(both)
    assert ids(tmp_path / "t") == [0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_a_run_split_by_table_partition_is_cut_in_each_of_its_files(tmp_path: Path) -> None:
    c = committer(tmp_path / "t", partition_by=("day",))
    c.commit(rows_run(c, [(0, [0, 1, 2], [0, 1, 2])], days=["a", "b", "a"]))
    parts = rows_run(c, [(0, [1, 2, 3, 4, 5], [1, 2, 3, 4, 5])], days=["b", "a", "a", "b", "a"])
    assert sorted((p.first_offset, p.offset, p.records) for p in parts) == [(1, 4, 2), (2, 5, 3)]
    c.commit(parts)
    assert ids(tmp_path / "t") == [0, 1, 2, 3, 4, 5]
    days = DeltaTable(str(tmp_path / "t")).to_pyarrow_table().sort_by("id")["day"].to_pylist()
    assert days == ["a", "b", "a", "a", "b", "a"]


def _read(c: object, s: LandedSegment) -> SegmentRead:
    """A landed segment's one file read back as a segment (its offsets kept)."""
    [f] = s.files
    data = read_file(c.root, f.path, c.storage_options)  # type: ignore[attr-defined]
    table = pq.read_table(io.BytesIO(data))
    user = pa.schema([x for x in table.schema if not x.name.startswith("__parka_")])
    encoded = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(user))
    read = read_segment(topic="t", partition=s.partition, offset=s.offset, value=encoded.value, headers=encoded.headers)
    return read if s.offsets is None else dataclasses.replace(read, offsets=s.offsets)


def test_a_refused_message_in_a_stitched_run_keeps_what_came_before_it(tmp_path: Path) -> None:
    c = committer(tmp_path / "t")
    run = stitched(c, [(0, 0, [1]), (0, 1, [2]), (0, 3, [4])])  # offset 2 is a bad message
    with pytest.raises(SegmentError):
        c.commit(run, [refused(0, 2)])
    assert ids(tmp_path / "t") == [1, 2]
    assert DeltaTable(str(tmp_path / "t")).transaction_version("app-0") == 1
    assert not (tmp_path / "t" / run[0].files[0].path).exists()


def test_a_refused_message_without_a_dead_letter_table_stops_its_partition(tmp_path: Path) -> None:
    c = committer(tmp_path / "t")
    before, after = landed(c, 0, 0, [1]), landed(c, 0, 2, [3])
    other = landed(c, 1, 5, [9])
    with pytest.raises(SegmentError) as info:
        c.commit([before, after, other], [refused(0, 1)])
    assert (info.value.partition, info.value.offset) == (0, 1)
    table = DeltaTable(str(tmp_path / "t"))
    assert ids(tmp_path / "t") == [1, 9]  # what came before it, and the other partition
    assert (table.transaction_version("app-0"), table.transaction_version("app-1")) == (0, 5)
    assert not (tmp_path / "t" / after.files[0].path).exists()  # never to be committed


def test_refused_messages_go_to_the_dead_letter_table_once(tmp_path: Path) -> None:
    c = committer(tmp_path / "t", dlq_table_uri=str(tmp_path / "dlq"))
    batch = [landed(c, 0, 0, [1]), landed(c, 0, 2, [3])]
    c.commit(batch, [refused(0, 1)])
    c.commit([], [refused(0, 1)])  # a retry after a crash: the dead-letter txn says it is in
    dead = DeltaTable(str(tmp_path / "dlq")).to_pyarrow_table().to_pylist()
    assert [(d["partition"], d["offset"], d["value"]) for d in dead] == [(0, 1, b"{}")]
    assert dead[0]["error"].startswith("SegmentError: not a parka segment")
    assert ids(tmp_path / "t") == [1, 3]
    assert DeltaTable(str(tmp_path / "t")).transaction_version("app-0") == 2
    assert c.stats.dead_letters == 1


def test_orphans_and_half_written_files_are_removed_once_covered(tmp_path: Path) -> None:
    root = tmp_path / "t"
    c = committer(root)
    c.commit([landed(c, 0, 0, [1]), landed(c, 0, 1, [2])])
    crashed = landed(c, 0, 1, [2])  # written by a worker that crashed before committing
    temporary = root / f".{FileName.new('t', 0, 0)}.{'0' * 32}.tmp"  # a write killed half way
    temporary.write_bytes(b"PAR1 half")
    live = landed(c, 0, 7, [8])  # above the txn: may be a live worker's
    straddling = stitched(c, [(0, 1, [2]), (0, 2, [3])])[0]  # holds offset 2, above the txn
    assert c.remove_orphans() == 2
    assert (root / straddling.files[0].path).exists()
    assert not (root / crashed.files[0].path).exists()
    assert not temporary.exists()
    assert (root / live.files[0].path).exists()


def test_between_listings_the_cleanup_looks_only_at_the_names_the_last_listing_left_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crashed worker's file above the ``txn`` is found by the listing of the new owner's
    assignment and kept; the periodic cleanup inside the commits deletes it, by name, once the
    new owner has committed its offsets again, and lists nothing."""
    root = tmp_path / "t"
    c = committer(root, checkpoint_interval=1)
    c.commit([landed(c, 0, 0, [1])])
    crashed = landed(c, 0, 1, [2])  # written by a worker that died before committing offset 1
    listings = []
    real_list = lake_orphans.list_files
    monkeypatch.setattr(lake_orphans, "list_files", lambda *a, **k: listings.append(a) or real_list(*a, **k))
    assert c.remove_orphans() == 0  # at the assignment: above the txn, it may still be committed
    assert len(listings) == 1 and (root / crashed.files[0].path).exists()
    late = landed(c, 0, 1, [2])  # written after that listing (a writer that lost its partition)
    c.commit([landed(c, 0, 1, [2])])  # the new owner commits offset 1: the periodic cleanup runs
    assert len(listings) == 1  # by name only
    assert not (root / crashed.files[0].path).exists()
    assert c.stats.orphans_removed == 1
    assert (root / late.files[0].path).exists()  # not a name the listing saw: the next listing's
    assert c.remove_orphans() == 1
    assert not (root / late.files[0].path).exists() and len(listings) == 2
    assert ids(root) == [1, 2]


def test_a_pending_file_someone_else_deleted_is_not_counted_and_one_this_writer_failed_to_delete_is_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    c = committer(root, checkpoint_interval=1)
    c.commit([landed(c, 0, 0, [1])])
    gone = landed(c, 0, 1, [2])
    assert c.remove_orphans() == 0  # pending: above the txn
    (root / gone.files[0].path).unlink()  # another worker's cleanup got there first
    c.commit([landed(c, 0, 1, [2])])
    assert c.stats.orphans_removed == 0
    # a replay of offset 1 whose deletion (as covered) fails: its file is watched, and the
    # periodic cleanup after that commit deletes it by name
    replay = landed(c, 0, 1, [2])

    def failing(*args: object, **kwargs: object) -> None:
        raise CommitError("the store said no")

    monkeypatch.setattr(lake_committer, "delete_files", failing)
    monkeypatch.setattr(lake_orphans, "list_files", lambda *a, **k: pytest.fail("a listing"))
    c.commit([replay, landed(c, 0, 2, [3])])
    assert not (root / replay.files[0].path).exists()
    assert c.stats.orphans_removed == 1
    assert ids(root) == [1, 2, 3]


def test_a_writer_that_asks_for_it_lists_the_table_at_every_periodic_cleanup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's raw mode: a retried task attempt's file is never named to the driver."""
    root = tmp_path / "t"
    c = committer(root, checkpoint_interval=1, relist_orphans=True)
    c.commit([landed(c, 0, 0, [1])])
    attempt = landed(c, 0, 1, [2])  # the failed attempt of the task that lands offset 1
    c.commit([landed(c, 0, 1, [2])])
    assert not (root / attempt.files[0].path).exists()
    assert c.stats.orphans_removed == 1


def test_an_existing_tables_partitioning_wins_and_a_different_one_is_refused(tmp_path: Path) -> None:
    first = committer(tmp_path / "t", partition_by=("day",))
    first.commit([landed(first, 0, 0, [1], day="d1")])
    again = committer(tmp_path / "t")  # no --partition-by: the table's own
    assert again.partition_by == ("day",)
    seg = landed(again, 0, 1, [2], day="d2")
    assert seg.files[0].path.startswith("day=d2/")
    again.commit([seg])
    assert ids(tmp_path / "t") == [1, 2]
    with pytest.raises(ConfigError, match=r"'--partition-by'.*the table's own partition columns \(day\)"):
        committer(tmp_path / "t", partition_by=("id",))


def test_dead_letter_appends_racing_another_writer_are_retried(tmp_path: Path) -> None:
    """Found by the fault suite: two workers of one group dead-lettering at the same time. The
    loser's dead-letter append raised CommitConflict out of the committer (the worker exited 1,
    and again on every restart while the other kept writing) instead of re-reading and retrying
    as a conflicting main commit does."""
    first = committer(tmp_path / "t")
    first.commit([landed(first, 0, 0, [1]), landed(first, 1, 0, [2])])
    dlq = tmp_path / "dlq"
    errors: list[BaseException] = []

    def worker(partition: int) -> None:
        c = committer(tmp_path / "t", dlq_table_uri=str(dlq))
        try:
            for offset in range(1, 21):
                c.commit([], [refused(partition, offset)])
        except BaseException as exc:  # reported below, from the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(p,)) for p in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    dead = DeltaTable(str(dlq)).to_pyarrow_table().to_pylist()
    assert sorted((d["partition"], d["offset"]) for d in dead) == [(p, o) for p in (0, 1) for o in range(1, 21)]
    table = DeltaTable(str(tmp_path / "t"))
    assert (table.transaction_version("app-0"), table.transaction_version("app-1")) == (20, 20)


def test_a_segment_whose_data_page_is_corrupt_is_refused_not_landed() -> None:
    """Found while fuzzing for the fault suite: a segment whose footer is intact but whose data
    page is corrupt used to pass read_segment (ingestion reads headers and footer only), so
    parka ingest and Spark raw mode landed it as a data file that fails every scan or reads
    wrong values. The producer's 'parka.crc32' header covers the whole value, pages included,
    and read_segment checks it without decoding a page."""
    table = pa.table({"id": list(range(1000)), "day": ["d1"] * 1000}, schema=SCHEMA)
    # pyarrow's plain layout: every byte of a PLAIN page is a value's, so the flipped byte
    # changes one (with tuning, 0..999 become DELTA_BINARY_PACKED, where a page may have padding)
    seg = encode_segment(table, codec="none", fingerprint=schema_fingerprint(SCHEMA), tuning="none")
    column = pq.read_metadata(pa.BufferReader(seg.value)).row_group(0).column(0)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    corrupt = bytearray(seg.value)
    corrupt[(column.data_page_offset + start + column.total_compressed_size) // 2] ^= 0x5A  # mid data page
    assert not pq.read_table(pa.BufferReader(bytes(corrupt))).equals(table)  # wrong values, silently
    with pytest.raises(SegmentDecodeError, match="CRC"):
        decode_segment(bytes(corrupt), seg.headers)
    with pytest.raises(SegmentDecodeError):
        read_segment(topic="t", partition=0, offset=0, value=bytes(corrupt), headers=seg.headers)


def test_data_files_get_the_statistics_the_tables_properties_ask_for(tmp_path: Path) -> None:
    from parka.lake import StatsConfig
    from parka.lake.delta._rs import create_table

    uri = tmp_path / "t"
    create_table(str(uri), SCHEMA, partition_by=[], configuration={"delta.dataSkippingStatsColumns": "DAY"})
    c = committer(uri)
    assert c.stats_config() == StatsConfig(stats_columns=(("day",),))
    data = pa.table({"id": [1, 2], "day": ["d1", "d" * 40]}, schema=SCHEMA)
    seg = encode_segment(data, codec="zstd", fingerprint=schema_fingerprint(SCHEMA))
    read = read_segment(topic="t", partition=0, offset=0, value=seg.value, headers=seg.headers)
    checked = check_segment(
        read, table_schema=c.table_schema(), partition_by=(), merge=False, check_columns=c.engine.check_columns
    )
    c.commit(
        write_segments([checked], table_uri=c.table_uri, table_schema=c.table_schema(), stats_config=c.stats_config())
    )
    [stats] = [json.loads(a["add"]["stats"]) for a in _log_actions(uri) if "add" in a]
    assert stats == {  # no "id": only the named column; "day" cut to 32 characters and a tie-breaker
        "numRecords": 2,
        "minValues": {"day": "d1"},
        "maxValues": {"day": "d" * 32 + "\x7f"},
        "nullCount": {"day": 0},
    }
    # a new version with other properties: read again
    DeltaTable(str(uri)).alter.set_table_properties({"delta.dataSkippingNumIndexedCols": "x"})
    c.refresh()
    with pytest.raises(ConfigError, match=r"delta\.dataSkippingNumIndexedCols"):
        c.stats_config()


def _log_actions(uri: Path) -> list[dict[str, object]]:
    files = sorted((uri / "_delta_log").glob("*.json"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_trimming_a_stitched_file_another_worker_deleted_is_a_conflict_to_re_read(tmp_path: Path) -> None:
    """Found by the fault suite: another worker with the app id committed the rest of a stitched
    file's offsets and its orphan cleanup deleted the file before this worker trimmed it. That is
    a conflict (re-read: the file is wholly covered now), not a failure that stops the worker."""
    from parka.lake._files import trim_stitched

    from parka.errors import CommitConflict

    c = committer(tmp_path / "t")
    run = stitched(c, [(0, 0, [1]), (0, 1, [2])])
    (tmp_path / "t" / run[0].files[0].path).unlink()
    with pytest.raises(CommitConflict, match="was deleted meanwhile"):
        trim_stitched(run[0].files[0], run[1:], table_uri=c.table_uri, table_schema=c.table_schema())


def test_segments_adding_different_nested_fields_in_one_commit_all_join(tmp_path: Path) -> None:
    """Two Kafka partitions' producers each added a field to ``actor`` (and one a list of
    structs): one commit merges both into the schema it re-read, old files read nulls."""
    from parka.lake import Committer, RsEngine

    def segment(partition: int, offset: int, schema: pa.Schema, rows: list[dict[str, object]]) -> object:
        seg = encode_segment(pa.Table.from_pylist(rows, schema=schema), codec="zstd", fingerprint="0123456789abcdef")
        return read_segment(topic="t", partition=partition, offset=offset, value=seg.value, headers=seg.headers)

    actor = [("id", pa.int64()), ("login", pa.string())]
    v1 = pa.schema([("id", pa.int64()), ("actor", pa.struct(actor))])
    admin = pa.schema([("id", pa.int64()), ("actor", pa.struct([*actor, ("site_admin", pa.bool_())]))])
    commits = pa.list_(pa.struct([("sha", pa.string())]))
    other = pa.schema([("id", pa.int64()), ("actor", pa.struct([*actor, ("type", pa.string())])), ("commits", commits)])
    c = Committer(RsEngine(), table_uri=str(tmp_path), topic="t", app_id="app", merge=True)
    first = segment(0, 0, v1, [{"id": 1, "actor": {"id": 1, "login": "a"}}])
    c.ensure_table(first.schema)  # type: ignore[attr-defined]
    reads = [
        first,
        segment(0, 1, admin, [{"id": 2, "actor": {"id": 2, "login": "b", "site_admin": True}}]),
        segment(1, 0, other, [{"id": 3, "actor": {"id": 3, "login": "c", "type": "User"}, "commits": [{"sha": "x"}]}]),
    ]
    schema = c.table_schema()
    checked = [
        check_segment(r, table_schema=schema, partition_by=(), merge=True, check_columns=c.engine.check_columns)
        for r in reads
    ]  # type: ignore[arg-type]
    c.commit(write_segments(checked, table_uri=str(tmp_path), table_schema=schema))
    assert c.stats.schema_evolutions == 1
    rows = sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert [r["actor"] for r in rows] == [
        {"id": 1, "login": "a", "site_admin": None, "type": None},
        {"id": 2, "login": "b", "site_admin": True, "type": None},
        {"id": 3, "login": "c", "site_admin": None, "type": "User"},
    ]
    assert [r["commits"] for r in rows] == [None, None, [{"sha": "x"}]]


def test_a_slow_checkpoint_is_a_warning_naming_the_tombstone_retention_once_per_ten_minutes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = SteppingClock(2.0)  # each checkpoint "takes" 2 s
    timed: list[float] = []
    c = committer(tmp_path / "t", checkpoint_interval=1, clock=clock, on_checkpoint=timed.append)
    with caplog.at_level("WARNING", logger="parka.commit"):
        c.commit([landed(c, 0, 0, [1])])
        assert c.close()  # the checkpoint is written beside the commits: waited for here
        c.commit([landed(c, 0, 1, [2])])  # 2 clock readings later: within ten minutes, not again
        assert c.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("the checkpoint of version ")
    assert "took 2.0 s (every 1 commits, beside the commits)" in warnings[0]
    assert "delta.deletedFileRetentionDuration is over (interval 1 week, the default here)" in warnings[0]
    assert ids(tmp_path / "t") == [1, 2]  # a warning, nothing else: both commits are in
    assert timed == [2.0, 2.0]  # the checkpoint metric gets each one

    caplog.clear()
    clock.now += 600.0
    DeltaTable(str(tmp_path / "t")).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 1 hours"}
    )
    with caplog.at_level("WARNING", logger="parka.commit"):
        c.commit([landed(c, 0, 2, [3])])
        assert c.close()
    [again] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "(interval 1 hours here)" in again


def test_a_quick_checkpoint_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    c = committer(tmp_path / "t", checkpoint_interval=1, clock=SteppingClock(0.1))
    with caplog.at_level("WARNING", logger="parka.commit"):
        c.commit([landed(c, 0, 0, [1])])
        assert c.close()
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert list((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))  # it did checkpoint


def test_commits_go_on_while_a_checkpoint_is_written_beside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs' checkpoint is written on a thread of its own: a commit never waits for it, and
    the daemon's end waits for the one in progress."""
    release, started = threading.Event(), threading.Event()
    write = RsTableLog.checkpoint

    def held(self: RsTableLog) -> None:  # the real checkpoint, once the test lets it go
        started.set()
        assert release.wait(60)
        write(self)

    monkeypatch.setattr(RsTableLog, "checkpoint", held)
    c = committer(tmp_path / "t", checkpoint_interval=2)
    for offset in range(2):
        c.commit([landed(c, 0, offset, [offset])])
    assert started.wait(60)  # the checkpoint of the second commit is being written
    for offset in range(2, 6):  # and these commit meanwhile (two more checkpoints fall due: one follows)
        c.commit([landed(c, 0, offset, [offset])])
    assert ids(tmp_path / "t") == list(range(6))
    assert not list((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))
    assert not c.close(timeout_s=0.2)  # still held
    release.set()
    assert c.close()
    checkpoints = sorted(p.name for p in (tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))
    assert checkpoints[-1] == "00000000000000000006.checkpoint.parquet", checkpoints  # the latest version


def test_a_conflict_goes_back_to_reading_the_table_after_a_backoff_through_the_injected_sleep(tmp_path: Path) -> None:
    """Another writer with the app id commits offset 1 while this commit of 1-2 is on its way: the
    attempt after the conflict re-reads the table, drops 1 (covered) and commits 2; a second
    conflict, and the third attempt lands. The backoffs went through ``sleep``."""
    slept: list[float] = []
    c = committer(tmp_path / "t", sleep=slept.append)
    c.commit([landed(c, 0, 0, [1])])
    other = committer(tmp_path / "t")
    mine = [landed(c, 0, 1, [2]), landed(c, 0, 2, [3])]
    table = conflicting(c, lambda: other.commit([landed(other, 0, 1, [2])]), lambda: None)
    result = c.commit(mine)
    assert (dict(result.last), dict(result.table_txn), table.attempts) == ({0: 2}, {0: 1}, 3)
    assert slept == [0.05, 0.1]
    assert ids(tmp_path / "t") == [1, 2, 3]
    assert (c.stats.conflicts, c.stats.commits, c.stats.segments, c.stats.covered_files) == (2, 2, 2, 1)
    assert not (tmp_path / "t" / mine[0].files[0].path).exists()  # the covered one's file is deleted


def test_conflicts_past_the_limit_give_up_naming_the_table_and_the_count(tmp_path: Path) -> None:
    from parka.lake import MAX_COMMIT_ATTEMPTS

    from parka.errors import CommitConflict

    slept: list[float] = []
    c = committer(tmp_path / "t", sleep=slept.append)
    segment = landed(c, 0, 0, [1])
    table = conflicting(c, *[lambda: None] * (MAX_COMMIT_ATTEMPTS + 1))
    with pytest.raises(CommitConflict) as info:
        c.commit([segment])
    assert str(info.value) == f"gave up after 20 conflicting commit attempts on {tmp_path / 't'}"
    assert (table.attempts, c.stats.conflicts, c.stats.commits) == (20, 20, 0)
    assert slept[:6] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6] and slept[6:] == [2.0] * 13  # none after the last
    assert ids(tmp_path / "t") == []


def test_the_commit_metric_is_timed_by_the_injected_clock(tmp_path: Path) -> None:
    timed: list[float] = []
    c = committer(tmp_path / "t", clock=SteppingClock(0.25), on_commit=timed.append)
    c.commit([landed(c, 0, 0, [1])])
    c.commit([landed(c, 0, 0, [1])])  # a replay: nothing committed, nothing told
    assert timed == [0.25]
