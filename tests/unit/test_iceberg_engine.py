"""The Iceberg engine behind the committer, on pyiceberg's SQL catalog (SQLite, in a temporary
warehouse): the same protocol as Delta's, its ``txn`` in the snapshot summaries."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from parka.lake import (
    Committer,
    CompactionPolicy,
    DataFile,
    IcebergEngine,
    IcebergTableLog,
    LandedSegment,
    RsEngine,
    check_segment,
    compact_iceberg,
    optimize_iceberg,
    read_segment,
    write_segments,
)

from parka.errors import CommitConflict, CommitError, ConfigError, SchemaMismatchError
from parka.extras import install_command
from parka.schema import schema_fingerprint
from parka.segment import encode_segment

from .._iceberg_files import assert_files_hold_their_partitions
from ._tables import SCHEMA, landed, stitched


def engine(tmp_path: Path) -> IcebergEngine:
    return IcebergEngine("test", {"warehouse": str(tmp_path / "warehouse")})


def iceberg_committer(tmp_path: Path, **kwargs: object) -> Committer:
    return Committer(engine(tmp_path), table_uri="db.t", topic="t", app_id="app", **kwargs)  # type: ignore[arg-type]


def ids(e: IcebergEngine, identifier: str = "db.t") -> list[int]:
    return sorted(e.catalog.load_table(identifier).scan().to_arrow()["id"].to_pylist())


def test_the_embedded_catalog_needs_a_warehouse_and_the_error_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="warehouse=DIR"):
        IcebergEngine("unconfigured-" + tmp_path.name)
    with pytest.raises(ConfigError, match="local warehouse"):
        IcebergEngine("x", {"warehouse": "s3://bucket/wh"})


def test_commits_record_each_partitions_offset_in_the_snapshot_summary(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    c.commit([landed(c, 0, 0, [1, 2]), landed(c, 1, 4, [3])])
    c.commit([landed(c, 0, 1, [4])])
    table = c.engine.catalog.load_table("db.t")  # type: ignore[attr-defined]
    summaries = [s.summary.additional_properties for s in table.snapshots()]  # type: ignore[union-attr]
    assert [json.loads(s["parka.txns"]) for s in summaries] == [{"app-0": 0, "app-1": 4}, {"app-0": 1, "app-1": 4}]
    assert all(s["parka.app_id"] == "app" and s["parka.topic"] == "t" for s in summaries)
    assert ids(c.engine) == [1, 2, 3, 4]  # type: ignore[arg-type]


def test_a_snapshot_of_another_writer_is_passed_over_when_reading_the_txn(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    c.commit([landed(c, 0, 0, [1])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    # a writer that is not parka: no parka.txns in its summary
    e.catalog.load_table("db.t").append(pa.table({"id": [100], "day": ["d9"]}, schema=SCHEMA))
    assert c.txn_versions([0]) == {0: 0}
    result = c.commit([landed(c, 0, 0, [1]), landed(c, 0, 1, [2])])  # a replay of 0, and 1
    assert dict(result.last) == {0: 1}
    assert ids(e) == [1, 2, 100]


def test_of_two_writers_that_read_the_same_snapshot_exactly_one_commits(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    c.commit([landed(c, 0, 0, [1])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    a, b = e.open("db.t"), e.open("db.t")
    assert isinstance(a, IcebergTableLog) and isinstance(b, IcebergTableLog)
    fa, fb = landed(c, 0, 1, [2]).files[0], landed(c, 0, 1, [2]).files[0]
    a.commit_add_files([fa], txns={"app-0": 1})
    with pytest.raises(CommitConflict):
        b.commit_add_files([fb], txns={"app-0": 1})  # read before a's commit: refused, not rebased
    assert ids(e) == [1, 2]
    assert b.refresh() == a.version() and b.txn_version("app-0") == 1


def test_writers_racing_with_one_app_id_land_each_offset_once(tmp_path: Path) -> None:
    """Four committers with the same app id commit the same two offsets at once: whoever loses
    a race re-reads (the protocol's step 3), finds them covered and deletes its files."""
    first = iceberg_committer(tmp_path)
    first.commit([landed(first, 0, 0, [0])])
    committers = [iceberg_committer(tmp_path) for _ in range(4)]
    batches = [[landed(c, 0, 1, [1]), landed(c, 0, 2, [2])] for c in committers]
    start = threading.Barrier(len(committers))
    errors: list[BaseException] = []

    def run(c: Committer, batch: list[object]) -> None:
        try:
            start.wait()
            c.commit(batch)  # type: ignore[arg-type]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c, b)) for c, b in zip(committers, batches, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert ids(first.engine) == [0, 1, 2]  # type: ignore[arg-type]
    assert sum(c.stats.segments for c in committers) == 2  # one committer's two segments
    assert sum(c.stats.covered_files for c in committers) == 6  # the others' files, deleted
    first.refresh()
    assert first.table is not None
    on_disk = {p.name for p in Path(first.root.removeprefix("file://")).iterdir()}
    assert on_disk == first.table.referenced_files()  # no file of a lost race left behind


def test_a_stitched_file_the_table_partly_covers_is_trimmed_to_the_rest(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    c.commit([landed(c, 0, 0, [1, 2]), landed(c, 0, 1, [3])])
    run = stitched(c, [(0, 0, [1, 2]), (0, 1, [3]), (0, 2, [4, 5]), (0, 3, [6])])
    assert dict(c.commit(run).last) == {0: 3}
    assert ids(c.engine) == [1, 2, 3, 4, 5, 6]  # type: ignore[arg-type]
    assert (c.stats.trimmed_files, c.stats.covered_files) == (1, 1)


def test_a_new_column_and_a_promotion_evolve_the_table_and_what_iceberg_forbids_is_refused(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    c.commit([landed(c, 0, 0, [1])])
    table = c.table
    assert isinstance(table, IcebergTableLog)
    table.add_columns([pa.field("extra", pa.struct([("a", pa.int32())]))])
    table.add_columns([pa.field("extra", pa.struct([("a", pa.int64()), ("b", pa.string())]))])  # int -> long
    extra = table.arrow_schema().field("extra").type
    assert extra == pa.struct([("a", pa.int64()), ("b", pa.string())])
    mapping = json.loads(table.configuration()["schema.name-mapping.default"])
    assert [m["names"] for m in mapping if m["names"] == ["extra"]] and any(
        [f["names"] for f in m.get("fields", [])] == [["a"], ["b"]] for m in mapping
    )  # the name mapping follows the schema, so files without field ids keep resolving
    with pytest.raises(Exception, match="extra"):
        table.add_columns([pa.field("extra", pa.struct([("a", pa.string()), ("b", pa.string())]))])


TIME_SCHEMA = SCHEMA.append(pa.field("at", pa.time64("us")))


def test_a_new_column_is_judged_by_the_tables_format_a_time_of_day_lands_in_iceberg_not_delta(
    tmp_path: Path,
) -> None:
    """The segment check asks the table's engine: Iceberg has a time type, Delta has none (and
    says so as it always did)."""
    rows = pa.table({"id": [7], "day": ["d1"], "at": [dt.time(12, 30, 0, 5)]}, schema=TIME_SCHEMA)
    seg = encode_segment(rows, codec="zstd", fingerprint=schema_fingerprint(TIME_SCHEMA))
    read = read_segment(topic="t", partition=0, offset=1, value=seg.value, headers=seg.headers)

    c = iceberg_committer(tmp_path, merge=True)
    c.commit([landed(c, 0, 0, [1])])
    checked = check_segment(
        read, table_schema=c.table_schema(), partition_by=(), merge=True, check_columns=c.engine.check_columns
    )
    assert [f.name for f in checked.new_fields] == ["at"]
    c.commit(write_segments([checked], table_uri=c.root, table_schema=c.table_schema()))
    table = c.engine.catalog.load_table("db.t")  # type: ignore[attr-defined]
    assert str(table.schema().find_field("at").field_type) == "time"
    assert table.scan().to_arrow().sort_by("id").select(["id", "at"]).to_pylist() == [
        {"id": 1, "at": None},
        {"id": 7, "at": dt.time(12, 30, 0, 5)},
    ]

    delta = Committer(RsEngine(), table_uri=str(tmp_path / "delta"), topic="t", app_id="app", merge=True)
    delta.ensure_table(SCHEMA)
    with pytest.raises(SchemaMismatchError) as refused:
        check_segment(
            read,
            table_schema=delta.table_schema(),
            partition_by=(),
            merge=True,
            check_columns=delta.engine.check_columns,
        )
    assert refused.value.field == "at"
    assert str(refused.value) == (
        "field 'at': the table cannot take this segment: Delta has no time-of-day or interval type (time64[us]); "
        "store an integer or a string at t[0]@1"
    )


def test_a_partitioned_table_gets_iceberg_transforms_and_each_file_its_partition(tmp_path: Path) -> None:
    """``day`` (identity on a string column) and ``bucket=truncate(id, 10)``: segments that span
    several partitions are split, each file lands with its partition record, and the committer
    reads the table's partitioning back as parka's specs."""
    c = Committer(
        engine(tmp_path), table_uri="db.p", topic="t", app_id="app", partition_by=["day", "b=truncate(id, 10)"]
    )
    c.commit([landed(c, 0, 0, [1, 2, 15], day="d1"), landed(c, 0, 1, [3], day="d2")])
    table = c.table
    assert isinstance(table, IcebergTableLog)
    spec = table.iceberg.spec()
    assert [(f.name, str(f.transform)) for f in spec.fields] == [("day", "identity"), ("b", "truncate[10]")]
    assert table.partition_columns() == ["day", "b"]
    assert "b" not in table.iceberg.schema().column_names  # a transform, not a column of the Iceberg schema
    files = table.iceberg.inspect.files().select(["partition", "record_count"]).to_pylist()
    assert sorted((f["partition"]["day"], f["partition"]["b"], f["record_count"]) for f in files) == [
        ("d1", 0, 2),
        ("d1", 10, 1),
        ("d2", 0, 1),
    ]
    e = c.engine
    assert isinstance(e, IcebergEngine)
    assert ids(e, "db.p") == [1, 2, 3, 15]
    scan = e.catalog.load_table("db.p").scan(row_filter="day = 'd2'")
    assert [t.file.record_count for t in scan.plan_files()] == [1]  # partition pruning
    reopened = Committer(e, table_uri="db.p", topic="t", app_id="app")  # no --partition-by: the table's own
    assert [str(s) for s in reopened.partitioning] == ["day", "b=truncate(id, 10)"]
    assert optimize_iceberg(e, "db.p").files_removed == 0  # no partition has two small files


def test_a_new_table_partitioned_by_what_its_first_segment_cannot_give_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    schema = pa.schema([*SCHEMA, ("v", pa.float64())])
    for spec, reason in [("dya", "has no column 'dya'"), ("b=bucket(v, 4)", "not double"), ("y=year(id)", "not int64")]:
        with pytest.raises(ConfigError, match="--partition-by") as info:
            iceberg_committer(tmp_path, partition_by=[spec]).ensure_table(schema)
        assert reason in str(info.value) and str(info.value).endswith("day: string, id: int64, v: double"), info.value
    c = iceberg_committer(tmp_path)
    assert c.table is None and not c.engine.catalog.list_namespaces()  # type: ignore[attr-defined]


def test_a_partition_transform_parka_has_no_spec_for_is_refused(tmp_path: Path) -> None:
    from pyiceberg.transforms import BucketTransform, VoidTransform

    e = engine(tmp_path)
    e.catalog.create_namespace("db")
    created = e.catalog.create_table("db.v", schema=SCHEMA)
    with created.update_spec() as spec:
        spec.add_field("id", VoidTransform(), "id_void")
    with pytest.raises(CommitError, match="identity, year, month, day, hour, truncate and bucket partitions only"):
        e.open("db.v")
    decimals = e.catalog.create_table("db.d", schema=pa.schema([("amount", pa.decimal128(10, 2))]))
    with decimals.update_spec() as spec:
        spec.add_field("amount", BucketTransform(4), "amount_bucket")
    with pytest.raises(CommitError, match=r"bucket\(amount, 4\) needs an integer, a date, .* not decimal128"):
        e.open("db.d")


TS_SCHEMA = pa.schema([("id", pa.int64(), False), ("ts", pa.timestamp("us", tz="UTC"))])
UTC = dt.timezone.utc
NEW_YEAR = [dt.datetime(2025, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), dt.datetime(2026, 1, 1, tzinfo=UTC)]


def land_ts(c: Committer, offset: int, ids: list[int], ts: list[dt.datetime]) -> LandedSegment:
    """A segment of ``(id, ts)`` rows checked and written as a commit writes it."""
    table = pa.table({"id": ids, "ts": ts}, schema=TS_SCHEMA)
    seg = encode_segment(table, codec="zstd", fingerprint=schema_fingerprint(TS_SCHEMA))
    read = read_segment(topic="t", partition=0, offset=offset, value=seg.value, headers=seg.headers)
    c.ensure_table(read.schema)
    checked = check_segment(
        read,
        table_schema=c.table_schema(),
        partition_by=c.partitioning,
        merge=False,
        check_columns=c.engine.check_columns,
    )
    [one] = write_segments([checked], table_uri=c.root, table_schema=c.table_schema(), partition_by=c.partitioning)
    return one


def partitions(e: IcebergEngine, identifier: str) -> dict[tuple[Any, ...], int]:
    """Rows per partition record, over the table's data files."""
    out: Counter[tuple[Any, ...]] = Counter()
    for f in e.catalog.load_table(identifier).inspect.files().to_pylist():
        out[tuple(f["partition"].values())] += f["record_count"]
    return dict(out)


def micros(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)


def test_year_month_and_bucket_partitions_are_icebergs_own_transforms(tmp_path: Path) -> None:
    """Each file's partition record is what pyiceberg's transforms give for its rows; a scan
    filtered on the source columns plans only the files of the partitions it needs."""
    from pyiceberg.transforms import BucketTransform, MonthTransform, YearTransform
    from pyiceberg.types import LongType, TimestamptzType

    year = YearTransform().transform(TimestamptzType())
    month = MonthTransform().transform(TimestamptzType())
    bucket = BucketTransform(4).transform(LongType())
    e = engine(tmp_path)
    ids = list(range(12))
    ts = [NEW_YEAR[i % 2] + dt.timedelta(days=40 * (i // 6)) for i in ids]  # December, January, February
    c = Committer(e, table_uri="db.yb", topic="t", app_id="app", partition_by=["y=year(ts)", "b=bucket(id, 4)"])
    c.commit([land_ts(c, 0, ids[:6], ts[:6]), land_ts(c, 1, ids[6:], ts[6:])])
    table = e.catalog.load_table("db.yb")
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("y", "year"), ("b", "bucket[4]")]
    assert partitions(e, "db.yb") == Counter((year(micros(t)), bucket(i)) for i, t in zip(ids, ts, strict=True))
    assert assert_files_hold_their_partitions(table) == len(table.inspect.files())
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == ids
    planned = list(table.scan(row_filter="id = 5").plan_files())  # bucket pruning: one bucket's files
    assert planned and {t.file.partition[1] for t in planned} == {bucket(5)}
    assert len(planned) < len(table.inspect.files())
    planned = list(table.scan(row_filter="ts >= '2026-01-01T00:00:00+00:00'").plan_files())
    assert planned and {t.file.partition[0] for t in planned} == {2026 - 1970}
    reopened = Committer(e, table_uri="db.yb", topic="t", app_id="app")
    assert [str(s) for s in reopened.partitioning] == ["y=year(ts)", "b=bucket(id, 4)"]

    c = Committer(e, table_uri="db.m", topic="t", app_id="app", partition_by=["m=month(ts)"])
    c.commit([land_ts(c, 0, ids, ts)])
    table = e.catalog.load_table("db.m")
    assert [str(f.transform) for f in table.spec().fields] == ["month"]
    assert partitions(e, "db.m") == Counter((month(micros(t)),) for t in ts)
    assert (2025 - 1970) * 12 + 11 in {k[0] for k in partitions(e, "db.m")}  # December 2025: months since 1970-01
    assert assert_files_hold_their_partitions(table) == 3


def test_a_table_pyiceberg_partitioned_by_month_and_bucket_is_landed_into(tmp_path: Path) -> None:
    from pyiceberg.transforms import BucketTransform, MonthTransform
    from pyiceberg.types import LongType

    e = engine(tmp_path)
    e.catalog.create_namespace("db")
    created = e.catalog.create_table("db.ext", schema=TS_SCHEMA)
    with created.update_spec() as spec:
        spec.add_field("ts", MonthTransform(), "ts_month")
        spec.add_field("id", BucketTransform(3), "id_bucket")
    c = Committer(e, table_uri="db.ext", topic="t", app_id="app")
    assert [str(s) for s in c.partitioning] == ["ts_month=month(ts)", "id_bucket=bucket(id, 3)"]
    ids = list(range(9))
    one_bucket = [i for i in range(100, 200) if BucketTransform(3).transform(LongType())(i) == 0][:3]
    raw = land_ts(c, 1, one_bucket, [NEW_YEAR[1]] * 3)
    split = land_ts(c, 0, ids, [NEW_YEAR[i % 2] for i in ids])
    c.commit([split, raw])
    table = e.catalog.load_table("db.ext")
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [*ids, *one_bucket]
    assert assert_files_hold_their_partitions(table) == len(split.files) + 1
    assert split.split and not raw.split and len(raw.files) == 1  # one month, one bucket: the segment as it came


def test_a_data_file_outside_the_table_is_refused(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    c.commit([landed(c, 0, 0, [1])])
    assert c.table is not None
    with pytest.raises(Exception, match="nowhere"):
        c.table.commit_add_files([DataFile(path="nowhere.parquet", size=4, stats="{}")], txns={"app-0": 5})
    assert c.table.txn_version("app-0") == 0  # nothing moved


def test_compaction_keeps_rows_and_offsets_and_ingestion_continues_after_it(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    for offset in range(6):
        c.commit([landed(c, offset % 2, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    result = optimize_iceberg(e, "db.t")
    assert (result.files_removed, result.files_added, result.attempts) == (6, 1, 1)
    table = e.open("db.t")
    assert table is not None
    assert len(table.referenced_files()) == 1
    assert table.txns() == {"app-0": 4, "app-1": 5}  # carried forward by the compaction's snapshot
    assert ids(e) == [0, 1, 2, 3, 4, 5]
    c.commit([landed(c, 0, 4, [4]), landed(c, 0, 6, [6])])  # a replay of 4, and 6
    assert ids(e) == [0, 1, 2, 3, 4, 5, 6]


def test_a_commit_during_compaction_wins_and_the_compaction_commits_on_the_new_snapshot(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    for offset in range(3):
        c.commit([landed(c, 0, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    raced: list[int] = []

    def ingest_meanwhile() -> None:
        if not raced:  # the first attempt only
            raced.append(c.commit([landed(c, 0, 3, [3])]).version or 0)

    result = optimize_iceberg(e, "db.t", before_commit=ingest_meanwhile)
    assert result.attempts == 2 and raced  # the first commit lost to the ingest commit
    assert ids(e) == [0, 1, 2, 3]
    # its inputs were all still live: the same rewrite, committed on the new snapshot
    assert (result.files_removed, result.files_added) == (3, 1)
    table = e.open("db.t")
    assert table is not None
    assert table.txns() == {"app-0": 3}  # the ingest commit's offsets, carried forward
    data = Path(table.uri.removeprefix("file://"))
    compacted = [p.name for p in data.iterdir() if p.name.startswith("compacted-")]
    assert len(compacted) == 1 and len(table.referenced_files()) == 2


class WatchedTurn:
    """A committer's :attr:`Committer.commit_turn`, noting when ``thread`` asks for it."""

    def __init__(self, turn: Any) -> None:
        self.turn = turn
        self.thread: threading.Thread | None = None
        self.asked = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if threading.current_thread() is self.thread:
            self.asked.set()
        return bool(self.turn.acquire(blocking, timeout))

    def release(self) -> None:
        self.turn.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_a_background_compaction_commits_in_the_ingests_turn_and_the_ingest_commit_waits_for_it(
    tmp_path: Path,
) -> None:
    c = iceberg_committer(tmp_path)
    for offset in range(3):
        c.commit([landed(c, 0, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    turn = c.commit_turn = WatchedTurn(c.commit_turn)  # type: ignore[assignment]
    segment = landed(c, 0, 3, [3])
    versions: list[int | None] = []
    ingest = turn.thread = threading.Thread(target=lambda: versions.append(c.commit([segment]).version))

    def ingest_meanwhile() -> None:
        if turn.asked.is_set():
            return
        ingest.start()  # the ingest commits while the compaction is about to
        assert turn.asked.wait(60), "the ingest's commit never asked for the turn"

    policy = CompactionPolicy(min_files=3).scoped("t", {0})
    result = compact_iceberg(
        e, "db.t", policy, target_size=1024 * 1024, before_commit=ingest_meanwhile, commit_turn=c.commit_turn
    )
    ingest.join(60)
    # the compaction's first commit landed: the ingest's waited for it, then committed on top
    assert (result.attempts, result.files_removed, result.files_added) == (1, 3, 1)
    assert versions and versions[0] is not None and versions[0] > result.version_after
    assert c.stats.conflicts == 0
    assert ids(e) == [0, 1, 2, 3]
    table = e.open("db.t")
    assert table is not None
    assert table.txns() == {"app-0": 3}


def test_a_compaction_waiting_for_the_turn_is_cancelled_and_deletes_its_files(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    for offset in range(3):
        c.commit([landed(c, 0, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    cancel = threading.Event()
    results: list[Any] = []
    policy = CompactionPolicy(min_files=3).scoped("t", {0})
    compaction = threading.Thread(
        target=lambda: results.append(
            compact_iceberg(e, "db.t", policy, target_size=1024 * 1024, cancel=cancel, commit_turn=c.commit_turn)
        )
    )
    table = e.open("db.t")
    assert table is not None
    data = Path(table.uri.removeprefix("file://"))
    with c.commit_turn:  # an ingest commit that does not end
        compaction.start()
        deadline = time.monotonic() + 60
        while not [p for p in data.iterdir() if p.name.startswith("compacted-")]:  # its rewrite written
            assert time.monotonic() < deadline, "the compaction wrote nothing"
            time.sleep(0.05)
        cancel.set()
        compaction.join(60)
        assert not compaction.is_alive()
    assert results[0].files_removed == 0
    assert not [p for p in data.iterdir() if p.name.startswith("compacted-")]
    assert ids(e) == [0, 1, 2]


def test_a_compaction_whose_inputs_another_compaction_took_is_dropped_and_plans_again(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    for offset in range(4):
        c.commit([landed(c, 0, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    other: list[Any] = []

    def compact_meanwhile() -> None:
        if not other:  # another optimizer compacts the same files first
            other.append(optimize_iceberg(IcebergEngine("test", {"warehouse": str(tmp_path / "warehouse")}), "db.t"))

    result = optimize_iceberg(e, "db.t", before_commit=compact_meanwhile)
    assert other[0].files_removed == 4
    assert result.files_removed == 0 and result.attempts == 2  # dropped, and nothing small left
    assert ids(e) == [0, 1, 2, 3]  # never a row twice
    table = e.open("db.t")
    assert table is not None
    data = Path(table.uri.removeprefix("file://"))
    assert len([p for p in data.iterdir() if p.name.startswith("compacted-")]) == 1  # the loser's file deleted


def test_a_new_file_whose_every_row_its_own_commit_supersedes_is_never_added(tmp_path: Path) -> None:
    """One commit of two files whose keys are the same (Kafka partitions 0 and 1, ordered by
    partition): partition 0's file has no live row, so it is neither added nor given a delete
    file, and it is deleted from storage; on a topic of few keys most small files are such, and
    each one added made every later commit and scan slower."""
    c = iceberg_committer(tmp_path, upsert=True, key_columns=("id",))
    c.commit([landed(c, 0, 0, [0, 1])])
    first, second = stitched(c, [(0, 1, [2, 3]), (1, 0, [2, 3, 1])])
    c.commit([first, second])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    assert ids(e) == [0, 1, 2, 3]
    table = e.open("db.t")
    assert table is not None
    dead, kept = first.files[0].path, second.files[0].path
    live = {table.relative(f.file_path) for f in table.data_files()}
    assert dead not in live and kept in live and len(live) == 2
    assert not (Path(table.uri.removeprefix("file://")) / dead).exists()
    deleted = {path: rows.tolist() for path, rows in table.delete_state().positions.items()}
    assert deleted == {next(iter(live - {kept})): [1]}  # key 1 of the first commit, and no more
    assert table.txns() == {"app-0": 1, "app-1": 0}


def test_a_compaction_whose_input_an_upsert_removed_commits_with_that_inputs_rows_deleted(tmp_path: Path) -> None:
    """An upsert table whose small files are soon wholly superseded: an upsert commit between a
    compaction's read and its commit deletes every row of one input (the commit removes that
    file) and one row of another. The compaction commits on the new snapshot anyway, those rows
    deleted in its new file, rather than dropping a rewrite that lost an input (which starved
    compaction on such tables); the keys stay one row each, before and after the next upsert."""
    c = iceberg_committer(tmp_path, upsert=True, key_columns=("id",))
    for offset, keys in enumerate([[0, 1, 2], [3, 4], [5, 6]]):
        c.commit([landed(c, 0, offset, keys)])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    raced: list[int] = []

    def upsert_meanwhile() -> None:
        if not raced:  # the first attempt only: every row of [0, 1, 2] and row 0 of [3, 4]
            raced.append(c.commit([landed(c, 0, 3, [0, 1, 2, 3])]).version or 0)

    result = optimize_iceberg(e, "db.t", before_commit=upsert_meanwhile)
    assert raced and result.attempts == 2
    assert (result.files_removed, result.files_added) == (2, 1)  # the removed input is not removed twice
    assert ids(e) == list(range(7))
    table = e.open("db.t")
    assert table is not None
    compacted = [f for f in table.data_files() if Path(str(f.file_path)).name.startswith("compacted-")]
    assert len(compacted) == 1 and compacted[0].record_count == 7  # the inputs' rows, as read
    positions = table.delete_state().positions[table.relative(compacted[0].file_path)]
    assert positions.tolist() == [0, 1, 2, 3]  # [0, 1, 2] and 3, deleted since the read
    assert table.txns() == {"app-0": 3}
    c.commit([landed(c, 0, 4, [4, 6])])  # the key index found 4 and 6 where the compaction put them
    assert ids(e) == list(range(7))


def test_a_compaction_whose_named_input_an_upsert_removed_is_dropped_as_the_orphan_cleanup_may_take_its_file(
    tmp_path: Path,
) -> None:
    """The orphan cleanup deletes a compacted file no snapshot names once the input its name
    carries is gone, and may do so while the compaction writes its commit. So an upsert commit
    that removes that input (every row deleted) between the compaction's read and its commit
    drops the rewrite, which is planned again; a cleanup just before the next commit then finds
    nothing of the compaction's to delete, and the compaction lands over the files now live."""
    c = iceberg_committer(tmp_path, upsert=True, key_columns=("id",))
    for offset, keys in enumerate([[0, 1, 2], [3, 4], [5, 6]]):
        c.commit([landed(c, 0, offset, keys)])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    table = e.open("db.t")
    assert table is not None
    first = min(str(f.file_path) for f in table.data_files())  # the input the compacted file is named after
    cleaned: list[int] = []
    attempts: list[None] = []

    def upsert_then_clean() -> None:
        attempts.append(None)
        if len(attempts) == 1:  # every row of [0, 1, 2], the first file: the commit removes it
            c.commit([landed(c, 0, 3, [0, 1, 2])])
        else:
            cleaned.append(c.remove_orphans())

    result = compact_iceberg(e, "db.t", CompactionPolicy(min_files=3), before_commit=upsert_then_clean)
    assert cleaned == [0] and result.attempts == 2
    assert (result.files_removed, result.files_added) == (3, 1)  # [3, 4], [5, 6] and the upsert's [0, 1, 2]
    table = e.open("db.t")
    assert table is not None
    live = [str(f.file_path) for f in table.data_files()]
    assert first not in live and len(live) == 1 and Path(live[0].removeprefix("file://")).exists()
    assert ids(e) == list(range(7))


def test_expiry_keeps_the_offsets_and_deletes_only_files_no_snapshot_names(tmp_path: Path) -> None:
    c = iceberg_committer(tmp_path)
    for offset in range(4):
        c.commit([landed(c, 0, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    result = optimize_iceberg(e, "db.t", expire_older_than_hours=0)
    table = e.open("db.t")
    assert table is not None
    data = Path(table.uri.removeprefix("file://"))
    assert {p.name for p in data.iterdir()} == table.referenced_files()  # the small files are gone
    assert result.vacuumed == 4
    assert len(table.iceberg.metadata.snapshots) == 1  # the compaction's, which holds the offsets
    assert table.txns() == {"app-0": 3}
    assert ids(e) == [0, 1, 2, 3]


def test_without_the_iceberg_extra_the_daemon_exits_2_naming_it(tmp_path: Path) -> None:
    program = (
        "import sys\n"
        "sys.modules['pyiceberg'] = None\n"
        "from parka.cli import main\n"
        "sys.exit(main(['ingest', 't', 'db.t', '-k', '127.0.0.1:1', '--end-at-latest', '--catalog', 'x',"
        f" '--catalog-option', 'warehouse={tmp_path}']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "needs parka's 'iceberg' extra" in proc.stderr and install_command("iceberg") in proc.stderr


def test_a_commit_copies_none_of_the_tables_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyiceberg 0.12 deep-copies the whole metadata (every snapshot) on each read of a
    transaction's ``table_metadata`` and again when the SQL catalog stages the commit: a
    commit's cost grew with the table's history. parka's commits apply the updates with
    :func:`updated_metadata`, which shares the snapshots it keeps."""
    from pyiceberg.table.snapshots import Snapshot

    c = iceberg_committer(tmp_path)
    for offset in range(3):
        c.commit([landed(c, 0, offset, [offset])])
    copied: list[int] = []
    deepcopy = Snapshot.__deepcopy__

    def counted(self: Snapshot, memo: dict[int, Any] | None = None) -> Snapshot:
        copied.append(self.snapshot_id)
        return deepcopy(self, memo)

    previous = c.engine.catalog.load_table("db.t").metadata_location  # type: ignore[attr-defined]
    monkeypatch.setattr(Snapshot, "__deepcopy__", counted)
    c.commit([landed(c, 0, 3, [3])])
    assert copied == []
    assert ids(c.engine) == [0, 1, 2, 3]  # type: ignore[arg-type]
    table = c.engine.catalog.load_table("db.t")  # type: ignore[attr-defined]
    assert len(table.snapshots()) == 4 and table.metadata.metadata_log[-1].metadata_file == previous


def test_updated_metadata_is_pyicebergs_own_with_the_history_shared(tmp_path: Path) -> None:
    """The same metadata as pyiceberg's ``update_table_metadata`` (an appended snapshot, a
    property, the metadata log), the base left as it was; its lists are new and the snapshots
    in them the base's own."""
    from parka.lake.iceberg._snapshots import updated_metadata
    from pyiceberg.table import Transaction
    from pyiceberg.table.update import update_table_metadata

    c = iceberg_committer(tmp_path)
    for offset in range(3):
        c.commit([landed(c, 0, offset, [offset])])
    table = c.engine.catalog.load_table("db.t")  # type: ignore[attr-defined]
    tx = Transaction(table)
    tx.set_properties({"a": "b"})
    tx.append(pa.table({"id": [9], "day": ["d9"]}, schema=SCHEMA))
    base = table.metadata
    before = base.model_dump_json()
    location = table.metadata_location
    theirs = update_table_metadata(base, tx._updates, metadata_location=location)
    ours = updated_metadata(base, tx._updates, metadata_location=location)
    assert ours == theirs and ours.model_dump_json() == theirs.model_dump_json()
    assert base.model_dump_json() == before
    assert len(ours.snapshots) == 4 and ours.properties["a"] == "b"
    assert [e.metadata_file for e in ours.metadata_log] == [*(e.metadata_file for e in base.metadata_log), location]
    assert ours.snapshots is not base.snapshots
    assert all(mine is kept for mine, kept in zip(ours.snapshots, base.snapshots, strict=False))


def test_each_manifest_is_read_once_per_handle_and_the_files_follow_the_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The orphan cleanup asks for the referenced and logged files every few commits; manifests
    never change once written, so only the new ones are read, and a compaction's removals show."""
    from pyiceberg.manifest import ManifestFile

    c = iceberg_committer(tmp_path)
    for offset in range(4):
        c.commit([landed(c, offset % 2, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    table = e.open("db.t")
    assert table is not None
    reads: list[str] = []
    fetch = ManifestFile.fetch_manifest_entry

    def counted(self: ManifestFile, *args: Any, **kwargs: Any) -> Any:
        reads.append(self.manifest_path)
        return fetch(self, *args, **kwargs)

    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", counted)
    first = table.referenced_files()
    assert len(first) == 4 and len(reads) == 4
    assert table.logged_files() == first and table.referenced_files() == first
    assert len(reads) == 4  # nothing read twice
    optimize_iceberg(e, "db.t")  # reads the manifests through its own handle
    table.refresh()
    known, reads[:] = set(reads), []
    compacted = table.referenced_files()
    assert len(compacted) == 1 and not compacted & first
    assert table.logged_files() == first | compacted  # older snapshots still name the small files
    assert reads and not set(reads) & known and len(reads) == len(set(reads))  # the new ones, once


def test_the_daemons_checkpoint_expires_snapshots_by_the_tables_own_retention(tmp_path: Path) -> None:
    """Every ``checkpoint_interval`` commits, snapshots older than the table's
    ``history.expire.max-snapshot-age-ms`` go (parka creates tables with one hour), except the
    ``history.expire.min-snapshots-to-keep`` latest and the one holding the offsets; files only
    they named are deleted, and a table younger than its retention keeps every snapshot."""
    c = iceberg_committer(tmp_path, checkpoint_interval=3)
    c.commit([landed(c, 0, 0, [0])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    table = e.catalog.load_table("db.t")
    assert table.metadata.properties["history.expire.max-snapshot-age-ms"] == "3600000"
    for offset in (1, 2):  # the third commit's checkpoint: nothing is an hour old
        c.commit([landed(c, 0, offset, [offset])])
    assert len(e.catalog.load_table("db.t").metadata.snapshots) == 3
    with table.transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": "0", "history.expire.min-snapshots-to-keep": "2"})
    optimize_iceberg(e, "db.t")  # a snapshot without offsets, whose small files only older ones name
    for offset in (3, 4, 5):
        c.commit([landed(c, 1, offset, [offset])])
    log = e.open("db.t")
    assert log is not None
    snapshots = log.iceberg.metadata.snapshots
    assert len(snapshots) == 2  # the two latest (each holds the offsets)
    assert log.txns() == {"app-0": 2, "app-1": 5}
    data = Path(log.uri.removeprefix("file://"))
    assert {p.name for p in data.iterdir()} == log.logged_files() == log.referenced_files()
    # the expired snapshots' manifest lists and the manifests only they listed are gone too
    table = log.iceberg
    kept = {Path(s.manifest_list).name for s in snapshots}
    kept |= {Path(m.manifest_path).name for s in snapshots for m in s.manifests(table.io)}
    metadata = data.parent / "metadata"
    assert {p.name for p in metadata.glob("*.avro")} == kept
    assert ids(e) == [0, 1, 2, 3, 4, 5]


def test_tables_parka_creates_keep_the_last_100_metadata_files(tmp_path: Path) -> None:
    """Every commit writes a metadata file; the tables parka creates have pyiceberg delete those
    past ``write.metadata.previous-versions-max`` (Iceberg's default, 100) after each commit, as
    Iceberg Java does with the same properties. With the maximum set to 2, six commits leave
    three: the current one and the two before it."""
    c = iceberg_committer(tmp_path)
    c.commit([landed(c, 0, 0, [0])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    properties = e.catalog.load_table("db.t").metadata.properties
    assert properties["write.metadata.delete-after-commit.enabled"] == "true"
    assert properties["write.metadata.previous-versions-max"] == "100"
    with e.catalog.load_table("db.t").transaction() as tx:
        tx.set_properties({"write.metadata.previous-versions-max": "2"})
    for offset in range(1, 6):
        c.commit([landed(c, 0, offset, [offset])])
    table = e.catalog.load_table("db.t")
    metadata = Path(table.location().removeprefix("file://")) / "metadata"
    assert len(list(metadata.glob("*.metadata.json"))) == 3
    assert ids(e) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(("merge", "manifests"), [("true", 2), (None, 2), ("false", 6)])
def test_appends_merge_small_manifests_unless_the_table_says_not_to(
    tmp_path: Path, merge: str | None, manifests: int
) -> None:
    """Iceberg Java's default (``commit.manifest-merge.enabled``: true), not pyiceberg's, also
    when the table does not set it (pyiceberg's merging append then appends as a fast append
    does): one manifest per commit would stay listed by every later snapshot. With a minimum of
    3 to merge, six commits leave the current snapshot 2 manifests, against 6 without merging.
    The tables parka creates merge from 8 manifests on."""
    c = iceberg_committer(tmp_path)
    c.commit([landed(c, 0, 0, [0])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    created = e.catalog.load_table("db.t").metadata.properties
    assert created["commit.manifest.min-count-to-merge"] == "8"
    assert "commit.manifest-merge.enabled" not in created
    with e.catalog.load_table("db.t").transaction() as tx:
        tx.set_properties({"commit.manifest.min-count-to-merge": "3"})
        if merge is not None:
            tx.set_properties({"commit.manifest-merge.enabled": merge})
    for offset in range(1, 6):
        c.commit([landed(c, 0, offset, [offset])])
    table = e.catalog.load_table("db.t")
    current = table.current_snapshot()
    assert current is not None
    assert len(current.manifests(table.io)) == manifests
    assert ids(e) == [0, 1, 2, 3, 4, 5]
    # the handle's commit settings stay in memory: the catalog's table has none of them
    assert {k: v for k, v in table.metadata.properties.items() if k.startswith("commit.")} == {
        "commit.manifest.min-count-to-merge": "3",
        **({} if merge is None else {"commit.manifest-merge.enabled": merge}),
    }


def test_a_merging_append_leaves_no_manifest_that_no_snapshot_lists(tmp_path: Path) -> None:
    """A merging append writes its new files' manifest, then merges it with the small ones into
    another: the first is deleted once the commit has landed, so every manifest in the metadata
    folder is listed by a snapshot (all are kept here: the table's hour of history)."""
    c = iceberg_committer(tmp_path)
    for offset in range(20):  # merges from 8 manifests: at least two merges
        c.commit([landed(c, 0, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    table = e.catalog.load_table("db.t")
    folder = Path(table.location().removeprefix("file://")) / "metadata"
    on_disk = {p.name for p in folder.glob("*.avro") if not p.name.startswith("snap-")}
    listed = {Path(m.manifest_path).name for s in table.metadata.snapshots for m in s.manifests(table.io)}
    current = table.current_snapshot()
    assert current is not None and len(current.manifests(table.io)) < 8
    assert len(table.metadata.snapshots) == 20
    assert on_disk == listed
    assert ids(e) == list(range(20))


def test_two_workers_expiring_the_same_snapshots_at_once_both_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers of one table reach their checkpoints together: the expiry that loses finds the
    snapshots gone and returns quietly; one that fails otherwise raises a short CommitError."""
    c = iceberg_committer(tmp_path)
    for offset in range(4):
        c.commit([landed(c, 0, offset, [offset])])
    e = c.engine
    assert isinstance(e, IcebergEngine)
    first, second = e.open("db.t"), e.open("db.t")
    assert first is not None and second is not None
    logged = IcebergTableLog.logged_files
    raced: list[int] = []

    def first_wins(self: IcebergTableLog) -> set[str]:
        if self is second and not raced:  # between second's plan and its commit
            raced.append(first.expire_snapshots(time.time() * 1000 + 1000))
        return logged(self)

    monkeypatch.setattr(IcebergTableLog, "logged_files", first_wins)
    assert second.expire_snapshots(time.time() * 1000 + 1000) == 0
    assert raced == [0] and len(first.iceberg.metadata.snapshots) == 1
    assert ids(e) == [0, 1, 2, 3]


def test_a_create_that_loses_with_the_catalogs_own_error_takes_the_table_that_won(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Iceberg's REST catalog answers a create transaction that lost the race with its own
    AlreadyExistsException (not pyiceberg's TableAlreadyExistsError): a table there now is a
    lost race, and the worker lands into the table that won."""
    c = iceberg_committer(tmp_path)
    other = iceberg_committer(tmp_path)
    e = c.engine
    assert isinstance(e, IcebergEngine)
    catalog = e.catalog

    def lost(*args: Any, **kwargs: Any) -> Any:
        other.commit([landed(other, 0, 0, [1])])  # the other worker creates the table and commits
        raise RuntimeError("AlreadyExistsException: Table already exists: db.t")

    monkeypatch.setattr(catalog, "create_table_transaction", lost)
    c.commit([landed(c, 0, 0, [1]), landed(c, 0, 1, [2])])
    assert ids(e) == [1, 2]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(catalog, "create_table_transaction", broken)
    with pytest.raises(CommitError, match=r"cannot create Iceberg table db\.u: disk full"):  # no table: an error
        e.create("db.u", pa.schema([("id", pa.int64())]), partition_by=())


def test_two_workers_creating_the_namespace_at_once_both_go_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SQL catalog checks that a namespace is absent, then inserts it: two workers creating
    their first table at once can both pass the check, and the loser's insert fails on the key
    (sqlite3.IntegrityError, not NamespaceAlreadyExistsError; seen in CI). The namespace is there
    now, and the worker goes on to create its table."""
    c = iceberg_committer(tmp_path)
    e = c.engine
    assert isinstance(e, IcebergEngine)
    catalog = e.catalog
    catalog.create_namespace("db")  # the other worker's insert, after this one's check
    real_exists = catalog.namespace_exists
    checks = iter([False])  # the check before the insert, made before the other worker's insert

    def exists(namespace: Any) -> bool:
        return bool(next(checks, real_exists(namespace)))

    monkeypatch.setattr(catalog, "namespace_exists", exists)
    c.commit([landed(c, 0, 0, [1])])
    assert ids(e) == [1]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(catalog, "create_namespace", broken)  # no namespace: the error stands
    with pytest.raises(CommitError, match=r"cannot create Iceberg table other\.u: disk full"):
        e.create("other.u", pa.schema([("id", pa.int64())]), partition_by=())


def test_a_commit_whose_file_the_other_workers_orphan_cleanup_deleted_drops_it_as_covered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers with one app id race on a partition: one commits the offset, and its orphan
    cleanup deletes the other's written, not yet committed file of it (the txn covers it). The
    other's commit reads its file's footer (Iceberg's manifest entry) after its txn check: a file
    gone is a lost race, re-read and dropped as covered, not a failed commit (seen in the fault
    suite). The race is made to happen at that read."""
    import parka.lake.iceberg._table as iceberg_module

    first = iceberg_committer(tmp_path)
    first.commit([landed(first, 0, 0, [0])])
    slow, fast = iceberg_committer(tmp_path), iceberg_committer(tmp_path)
    mine = landed(slow, 0, 1, [1])
    theirs = landed(fast, 0, 1, [1])
    real = iceberg_module.read_parquet_footer
    raced: list[int] = []

    def footer_after_the_race(uri: str, path: str, options: Any = None) -> Any:
        if not raced and path in {f.path for f in mine.files}:
            fast.commit([theirs])
            raced.append(fast.remove_orphans())  # deletes slow's file: the txn covers its offset
        return real(uri, path, options)

    monkeypatch.setattr(iceberg_module, "read_parquet_footer", footer_after_the_race)
    slow.commit([mine])
    assert raced == [1]
    assert ids(first.engine) == [0, 1]  # type: ignore[arg-type]
    assert (slow.stats.conflicts, slow.stats.covered_files) == (1, 1)


def test_a_rewrite_catches_up_with_rows_deleted_in_its_inputs_since_it_read_them() -> None:
    """A compaction's new file holds its inputs' live rows, input after input; rows deleted in
    an input after the rewrite read it map to their places in the new file, and a delete that
    vanished (a restore) makes the rewrite unusable."""
    from types import SimpleNamespace

    import numpy as np
    from parka.lake import DataFile
    from parka.lake.iceberg._optimize import Rewrite

    inputs = [SimpleNamespace(record_count=5), SimpleNamespace(record_count=4)]
    rewrite = Rewrite(inputs, DataFile(path="c.parquet", size=1, stats="{}"), [np.array([1, 3]), np.array([0])])
    # input 0's live rows 0, 2, 4 are the new file's 0-2; input 1's live rows 1, 2, 3 its 3-5
    caught = rewrite.caught_up([np.array([1, 2, 3]), np.array([0, 3])])
    assert caught is not None and caught.late.tolist() == [1, 5]
    assert rewrite.caught_up([np.array([1, 3]), np.array([0])]).late.tolist() == []  # type: ignore[union-attr]
    assert rewrite.caught_up([np.array([3]), np.array([0])]) is None  # row 1 back


def test_a_catalog_whose_first_open_raced_another_processes_is_opened_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes opening a new SQL catalog at once both create its tables, and the second's
    ``CREATE TABLE`` fails; the engine opens it again, and any other failure stays one."""
    import sqlite3

    import parka.lake.iceberg._engine as engine_module

    own = engine_module.load_catalog
    calls: list[str] = []

    def racing(name: str, **properties: str) -> Any:
        calls.append(name)
        if len(calls) == 1:
            own(name, **properties)  # the other process's open, which creates the tables
            raise sqlite3.OperationalError("table iceberg_tables already exists")
        return own(name, **properties)

    monkeypatch.setattr(engine_module, "load_catalog", racing)
    assert engine(tmp_path).catalog.list_namespaces() == []
    assert len(calls) == 2

    def broken(name: str, **properties: str) -> Any:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(engine_module, "load_catalog", broken)
    with pytest.raises(CommitError, match="unable to open database file"):
        _ = engine(tmp_path / "other").catalog
