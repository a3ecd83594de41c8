"""`parka ingest --catalog` on a real broker into real Iceberg tables, on pyiceberg's SQL catalog
(SQLite, the embedded default) and on Iceberg's own REST catalog server
(``scripts/iceberg-rest.sh``): raw files, exactly once after kill -9, races, evolution, dead
letters."""

from __future__ import annotations

import datetime as dt
import json
import signal
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from parka.lake import DataFile, FileName
from parka.producer import ParquetProducer

from parka.errors import CommitConflict
from reliability import forkserver

from ..._iceberg_files import assert_files_hold_their_partitions
from .._ingest_util import (
    EVENTS,
    app_id_of,
    assert_segments_stored_byte_for_byte,
    events,
    last_json,
    message_values,
    produce_events,
    row_group_bytes,
    run_ingest,
    table_ids,
)
from ._lake import Lake, ingest, race


def watermarks(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    """``(partition, high watermark)`` of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return [(p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]) for p in range(partitions)]
    finally:
        consumer.close()


def test_segments_land_as_the_tables_data_files_byte_for_byte_and_read_back_equal(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    topic = new_topic(partitions=3)
    segments = produce_events(bootstrap, topic, 0, 3000, batch=100)
    result = last_json(ingest(lake, topic, lake.name("events"), bootstrap, "--end-at-latest"))
    assert (result["segments"], result["records"]) == (segments, 3000)
    files = lake.files(lake.name("events"))
    assert result["files"] == len(files) <= 3 * result["commits"] < segments  # stitched per partition
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, lake.data_root(lake.name("events")), files=files)
    expected = events(0, 3000)
    by_pyiceberg = lake.rows(lake.name("events")).select(EVENTS.names).sort_by("id")
    assert by_pyiceberg.cast(EVENTS).equals(expected)
    root = lake.data_root(lake.name("events"))
    columns = ", ".join(f'"{n}"' for n in EVENTS.names)
    paths = sorted(f"{root}/{f}" for f in files)
    by_duckdb = duckdb.sql(f"select {columns} from read_parquet({paths}) order by id").to_arrow_table()
    assert by_duckdb.cast(EVENTS).equals(expected)
    # the snapshot summary's txn state: each partition's last offset
    assert lake.txns(lake.name("events")) == {
        f"{app_id_of(topic, lake.name('events'), lake.engine().catalog_name)}-{p}": high - 1
        for p, high in watermarks(bootstrap, topic, 3)
    }


def test_manifests_carry_the_footers_statistics_by_field_id(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 500, batch=100)
    ingest(lake, topic, lake.name("stats"), bootstrap, "--end-at-latest")
    table = lake.catalog().load_table(lake.name("stats"))
    [entry] = table.inspect.files().to_pylist()
    ids = {f.name: f.field_id for f in table.schema().fields}
    assert entry["record_count"] == 500
    nulls, lower, upper = (dict(entry[k]) for k in ("null_value_counts", "lower_bounds", "upper_bounds"))
    assert nulls[ids["value"]] == sum(1 for i in range(500) if i % 11 == 0)
    assert lower[ids["id"]] == (0).to_bytes(8, "little")
    assert upper[ids["id"]] == (499).to_bytes(8, "little")
    # a scan filtered outside [0, 499] plans no file: the bounds are the ones readers prune with
    assert list(table.scan(row_filter="id > 1000").plan_files()) == []


# Every point on the SQL catalog; on the REST catalog the one where the catalog holds the commit
# and the restart must read its offsets back from it. At the earlier points the catalog has seen
# nothing of the crashed run: the restart reads the table from the catalog (as after a commit) and
# finds the crash's files in the table's folder, the same on either catalog.
@pytest.mark.parametrize(
    ("lake", "point", "after"),
    [
        ("sql", "before-write", 4),
        ("sql", "mid-write", 4),
        ("sql", "after-write", 4),
        ("sql", "after-delta-commit", 2),
        ("rest", "after-delta-commit", 2),
    ],
    indirect=["lake"],
)
def test_kill_9_then_restart_is_exactly_once_without_orphans(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake, point: str, after: int
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 2000, batch=100)
    flags = ("--end-at-latest", "--max-segments-per-commit", "3")
    crashed = ingest(
        lake,
        topic,
        lake.name("t"),
        bootstrap,
        *flags,
        env={"PARKA_TEST_CRASH_AT": point, "PARKA_TEST_CRASH_AFTER": str(after)},
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    left = lake.on_disk(lake.name("t")) - lake.files(lake.name("t"))
    if point in ("after-write", "mid-write"):
        assert left  # the crash left a file (or a half-written temporary one) behind
    ingest(lake, topic, lake.name("t"), bootstrap, *flags)
    ids = lake.rows(lake.name("t"))["id"].to_pylist()
    assert sorted(ids) == list(range(2000))
    assert lake.on_disk(lake.name("t")) == lake.files(lake.name("t"))  # no orphans


def test_of_two_handles_that_read_one_snapshot_exactly_one_commits(lake: Lake, tmp_path: Path) -> None:
    """The catalog refuses the second commit made from the same snapshot (no rebasing retry):
    the engine reports a conflict, and the loser's data is not in the table."""
    engine = lake.engine()
    identifier = lake.name("race")
    created = engine.create(identifier, EVENTS, partition_by=())
    winner, loser = engine.open(identifier), engine.open(identifier)
    assert winner is not None and loser is not None
    root = Path(created.uri.removeprefix("file://"))
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for n in range(2):  # one data file for each writer
        name = f"t-p0-o{n:020d}-{uuid.uuid4().hex[:12]}.parquet"
        pq.write_table(events(n * 10, 10), root / name)
        files.append(DataFile(path=name, size=(root / name).stat().st_size, stats="{}"))
    winner.commit_add_files([files[0]], txns={"app-0": 0})
    with pytest.raises(CommitConflict):
        loser.commit_add_files([files[1]], txns={"app-0": 0})
    assert sorted(lake.rows(identifier)["id"].to_pylist()) == list(range(10))
    assert lake.txns(identifier) == {"app-0": 0}


def test_two_workers_racing_with_one_app_id_land_each_record_once(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    """Two ``parka ingest`` runs in two consumer groups read every partition and commit under
    one app id: every commit one wins, the other re-reads the offsets and drops what is in."""
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 4000, batch=100)
    flags = ("--end-at-latest", "--max-segments-per-commit", "2", "-a", "racing")
    results = race(lake, topic, lake.name("race"), bootstrap, *flags)
    ids = lake.rows(lake.name("race"))["id"].to_pylist()
    assert sorted(ids) == list(range(4000))  # each once
    # the losers' files deleted; what is left unreferenced, background compaction's inputs, a
    # snapshot still names (both runs compact, racing too)
    on_disk, name = lake.on_disk(lake.name("race")), lake.name("race")
    assert on_disk - lake.files(name) <= lake.logged(name), sorted(on_disk - lake.logged(name))[:5]
    stats = [last_json(r) for r in results]
    assert sum(st["records"] for st in stats) == 4000  # what each run committed adds up, no overlap


def test_a_delta_and_an_iceberg_table_of_one_topic_each_get_every_record(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Two runs at once, one into a Delta table, one into an Iceberg table of the same topic:
    each table's default group is its own, so neither takes partitions from the other."""
    topic = new_topic(partitions=3)
    produce_events(bootstrap, topic, 0, 1500, batch=100)
    lake, delta = Lake(tmp_path / "warehouse"), tmp_path / "delta"
    results: dict[str, Any] = {}
    start = threading.Barrier(2)

    def run(kind: str) -> None:
        start.wait()
        table, flags = (lake.name("events"), lake.flags) if kind == "iceberg" else (str(delta), ())
        results[kind] = run_ingest(topic, table, bootstrap, "--end-at-latest", *flags, check=False)

    threads = [threading.Thread(target=run, args=(kind,)) for kind in ("iceberg", "delta")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert all(r.returncode == 0 for r in results.values()), [r.stderr[-2000:] for r in results.values()]
    assert sorted(lake.rows(lake.name("events"))["id"].to_pylist()) == list(range(1500))
    assert sorted(table_ids(delta)) == list(range(1500))
    assert app_id_of(topic, lake.name("events"), "test") != app_id_of(topic, delta)


def test_a_field_added_inside_a_struct_evolves_the_table(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    topic = new_topic()
    v1 = pa.schema([("id", pa.int64(), False), ("geo", pa.struct([("lat", pa.float64())]))])
    v2 = pa.schema([("id", pa.int64(), False), ("geo", pa.struct([("lat", pa.float64()), ("lon", pa.float64())]))])
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 10}
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, v1)
        producer.produce_batch(topic, pa.table({"id": range(10), "geo": [{"lat": 1.0}] * 10}, schema=v1))
        assert producer.flush(30) == 0
        producer.set_schema(topic, v2)
        rows = [{"lat": 2.0, "lon": 3.0}] * 10
        producer.produce_batch(topic, pa.table({"id": range(10, 20), "geo": rows}, schema=v2))
        assert producer.flush(30) == 0
    ingest(lake, topic, lake.name("nested"), bootstrap, "--end-at-latest", "--schema-evolution", "merge")
    table = lake.catalog().load_table(lake.name("nested"))
    geo = table.schema().find_field("geo").field_type
    assert [f.name for f in geo.fields] == ["lat", "lon"]  # type: ignore[attr-defined]
    rows_back = sorted(lake.rows(lake.name("nested")).select(["id", "geo"]).to_pylist(), key=lambda r: r["id"])
    assert rows_back[0]["geo"] == {"lat": 1.0, "lon": None}  # the old files, through the name mapping
    assert rows_back[-1]["geo"] == {"lat": 2.0, "lon": 3.0}


def test_messages_the_table_cannot_take_go_to_an_iceberg_dead_letter_table_once(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 300, batch=100)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(3):
        plain.produce(topic, value=f'{{"plain": {i}}}'.encode())
    assert plain.flush(30) == 0
    produce_events(bootstrap, topic, 300, 300, batch=100)
    flags = ("--end-at-latest", "--dlq-table", lake.name("dead"))
    crashed = ingest(
        lake, topic, lake.name("t"), bootstrap, *flags, env={"PARKA_TEST_CRASH_AT": "after-dead-letters"}, check=False
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    assert lake.rows(lake.name("dead")).num_rows == 3  # in before the crash
    ingest(lake, topic, lake.name("t"), bootstrap, *flags)
    assert sorted(lake.rows(lake.name("t"))["id"].to_pylist()) == list(range(600))
    dead = lake.rows(lake.name("dead")).to_pylist()
    assert sorted(d["value"] for d in dead) == [f'{{"plain": {i}}}'.encode() for i in range(3)]  # once each
    assert all(d["error"].startswith("SegmentError") for d in dead)
    assert lake.on_disk(lake.name("t")) == lake.files(lake.name("t"))
    names = [FileName.parse(p) for p in lake.files(lake.name("dead"))]
    assert all(n is not None and n.topic == topic for n in names)


def test_without_a_catalog_configuration_the_error_names_what_is_missing(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    proc = run_ingest(topic, "db.t", bootstrap, "--end-at-latest", "--catalog", "nowhere", check=False)
    assert proc.returncode == 2, proc.stderr
    assert "--catalog" in proc.stderr and "warehouse=DIR" in proc.stderr


def test_parka_optimize_compacts_and_expires_and_ingestion_resumes_after_it(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    topic = new_topic(partitions=2)
    segments = produce_events(bootstrap, topic, 0, 1000, batch=100)
    table = lake.name("opt")
    ingest(lake, topic, table, bootstrap, "--end-at-latest", "--max-segments-per-commit", "1")
    small = lake.files(table)
    assert len(small) == segments  # one commit, one file per segment
    cmd = [sys.executable, "-m", "parka.cli", "optimize", table, *lake.flags, "--vacuum-retention-hours", "0"]
    proc = forkserver.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert (result["files_removed"], result["files_added"], result["vacuumed"]) == (segments, 1, segments)
    assert lake.on_disk(table) == lake.files(table) and len(lake.files(table)) == 1
    produce_events(bootstrap, topic, 1000, 200, batch=100)
    ingest(lake, topic, table, bootstrap, "--end-at-latest")  # resumes from the offsets the compaction kept
    assert sorted(lake.rows(table)["id"].to_pylist()) == list(range(1200))


def test_a_partitioned_table_splits_segments_by_partition_and_prunes(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    """``--partition-by day,b=truncate(id, 1000)``: Iceberg's identity and truncate transforms;
    segments spanning several days are split, each file in one partition; a filtered scan reads
    only its partition's files."""
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 3000, batch=200)
    table = lake.name("parts")
    flags = ("--end-at-latest", "--partition-by", "day,b=truncate(id, 1000)")
    result = last_json(ingest(lake, topic, table, bootstrap, *flags))
    assert result["split_segments"] > 0
    loaded = lake.catalog().load_table(table)
    assert [(f.name, str(f.transform)) for f in loaded.spec().fields] == [("day", "identity"), ("b", "truncate[1000]")]
    rows = lake.rows(table).select(EVENTS.names).sort_by("id")
    assert rows.cast(EVENTS).equals(events(0, 3000))
    for entry in loaded.inspect.files().to_pylist():  # each file holds one partition's rows
        path = entry["file_path"].removeprefix("file://")
        ids = pq.read_table(path, columns=["id", "day"]).to_pydict()
        assert {d for d in ids["day"]} == {entry["partition"]["day"]}
        assert {i // 1000 * 1000 for i in ids["id"]} == {entry["partition"]["b"]}
    planned = list(loaded.scan(row_filter="day = '2024-01-02' and id < 1000").plan_files())
    assert planned and all((t.file.partition[0], t.file.partition[1]) == ("2024-01-02", 0) for t in planned)


def test_derived_day_and_hour_partitions_are_icebergs_day_and_hour_transforms(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    from pyiceberg.transforms import DayTransform, HourTransform
    from pyiceberg.types import TimestamptzType

    topic = new_topic()
    produce_events(bootstrap, topic, 0, 300, batch=100)
    micros = events(0, 1)["at"].cast("int64")[0].as_py()
    day = dt.date(1970, 1, 1) + dt.timedelta(days=DayTransform().transform(TimestamptzType())(micros))
    hour = HourTransform().transform(TimestamptzType())(micros)
    for spec, transform, expected in (("d=date(at)", "day", day), ("h=hour(at)", "hour", hour)):
        table = lake.name(transform)
        ingest(lake, topic, table, bootstrap, "--end-at-latest", "--partition-by", spec)
        loaded = lake.catalog().load_table(table)
        [field] = loaded.spec().fields
        assert (field.name, str(field.transform)) == (spec[0], transform)
        # what Iceberg's own transform gives for these rows (all in one hour)
        assert {e["partition"][spec[0]] for e in loaded.inspect.files().to_pylist()} == {expected}
        assert lake.rows(table).num_rows == 300
    # Iceberg takes one time transform per column: both at once is a configuration error
    both = ingest(lake, topic, lake.name("both"), bootstrap, "--end-at-latest", "--partition-by",
                  "d=date(at),h=hour(at)", check=False)  # fmt: skip
    assert both.returncode == 2 and "conflicts with" in both.stderr, both.stderr[-2000:]
    # a column the segments lack: a configuration error before anything is made, not a dead letter
    typo, dlq = lake.name("typo"), lake.name("typo_dlq")
    refused = ingest(lake, topic, typo, bootstrap, "--end-at-latest", "--partition-by", "d=date(att)",
                     "--dlq-table", dlq, check=False)  # fmt: skip
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "d=date(att): the topic's first segment has no column 'att'" in refused.stderr, refused.stderr[-2000:]
    assert not lake.catalog().table_exists(typo) and not lake.catalog().table_exists(dlq)


# -- year, month and bucket ------------------------------------------------------------------------

TIMED = pa.schema([("id", pa.int64(), False), ("ts", pa.timestamp("us", tz="UTC"))])
START = dt.datetime(2025, 11, 1, tzinfo=dt.timezone.utc)
RUN = 150  # ids come in runs of one bucket[4]: a 100-record segment is in one bucket or two


def timed(n: int) -> pa.Table:
    """``n`` records 6 h apart from 2025-11-01 (months and a new year crossed), whose ids come in
    runs of ``RUN`` of one ``bucket[4]`` each (the next bucket every run)."""
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import LongType

    bucket = BucketTransform(4).transform(LongType())
    pools: dict[int, list[int]] = {b: [] for b in range(4)}
    for i in range(8 * n):
        pools[bucket(i)].append(i)
    ids = [pools[(k // RUN) % 4][(k // (4 * RUN)) * RUN + k % RUN] for k in range(n)]
    ts = [START + dt.timedelta(hours=6 * k) for k in range(n)]
    return pa.table({"id": ids, "ts": ts}, schema=TIMED)


def produce_timed(bootstrap: str, topic: str, data: pa.Table) -> int:
    """Segments of 100 records, cut by count (no key: each segment's records go to one Kafka
    partition in order); returns how many."""
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 100}
    with ParquetProducer({**conf, "linger.ms": 60_000}) as producer:
        producer.set_schema(topic, TIMED)
        producer.produce_batch(topic, data)
        assert producer.flush(30) == 0
        return int(producer.stats()["segments"])


def one_partition(table: Any, segment: pa.Table) -> bool:
    """Whether pyiceberg's own transforms put every row of ``segment`` in one partition of ``table``."""
    keys = set()
    fields = [(f.transform, table.schema().find_field(f.source_id)) for f in table.spec().fields]
    micros = segment["ts"].cast(pa.int64()).to_pylist()
    for i, m in zip(segment["id"].to_pylist(), micros, strict=True):
        keys.add(tuple(t.transform(s.field_type)(m if s.name == "ts" else i) for t, s in fields))
    return len(keys) == 1


def check_landed(lake: Lake, identifier: str, bootstrap: str, topic: str, segments: int, data: pa.Table) -> int:
    """Every record once; every file's rows in its partition (pyiceberg's transforms); the row
    groups of the files that are not splits are those of the segments whose rows share one
    partition, byte for byte. Returns how many segments were split."""
    table = lake.catalog().load_table(identifier)
    assert lake.rows(identifier).sort_by("id").cast(TIMED).equals(data.sort_by("id"))
    assert assert_files_hold_their_partitions(table) == len(lake.files(identifier))
    whole: list[bytes] = []
    spanning = 0
    for m in message_values(bootstrap, topic, segments):
        if one_partition(table, pq.read_table(pa.BufferReader(m.value()))):
            whole += row_group_bytes(m.value())
        else:
            spanning += 1
    root = lake.data_root(identifier)
    stored: list[bytes] = []
    for path in lake.files(identifier):
        name = FileName.parse(path)
        assert name is not None, path
        if name.split is None:
            stored += row_group_bytes((Path(root) / path).read_bytes())
    assert sorted(stored) == sorted(whole) and whole  # the raw ones, unchanged
    return spanning


def test_year_month_and_bucket_partitions_split_only_the_segments_that_span_them(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    """``--partition-by y=year(ts),b=bucket(id, 4)`` and ``m=month(ts)``: Iceberg's transforms;
    a segment whose rows span partitions is split, the others land raw, and a scan filtered on
    the source columns reads only the partitions it needs."""
    from pyiceberg.transforms import BucketTransform, MonthTransform
    from pyiceberg.types import LongType, TimestamptzType

    topic = new_topic(partitions=2)
    data = timed(1200)
    segments = produce_timed(bootstrap, topic, data)
    for table, spec, transforms in (
        (lake.name("yb"), "y=year(ts),b=bucket(id, 4)", [("y", "year"), ("b", "bucket[4]")]),
        (lake.name("m"), "m=month(ts)", [("m", "month")]),
    ):
        result = last_json(ingest(lake, topic, table, bootstrap, "--end-at-latest", "--partition-by", spec))
        assert (result["segments"], result["records"]) == (segments, 1200)
        loaded = lake.catalog().load_table(table)
        assert [(f.name, str(f.transform)) for f in loaded.spec().fields] == transforms
        spanning = check_landed(lake, table, bootstrap, topic, segments, data)
        assert result["split_segments"] == spanning and 0 < spanning < segments
    files = lake.catalog().load_table(lake.name("yb")).inspect.files()
    planned = list(lake.catalog().load_table(lake.name("yb")).scan(row_filter="id = 7").plan_files())
    assert planned and len(planned) < len(files)
    assert {t.file.partition[1] for t in planned} == {BucketTransform(4).transform(LongType())(7)}
    months = lake.catalog().load_table(lake.name("m"))
    planned = list(months.scan(row_filter="ts >= '2026-02-01T00:00:00+00:00' and ts < '2026-03-01T00:00:00+00:00'")
                   .plan_files())  # fmt: skip
    february = MonthTransform().transform(TimestamptzType())(
        (dt.datetime(2026, 2, 1, tzinfo=dt.timezone.utc) - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))
        // dt.timedelta(microseconds=1)
    )
    assert planned and {t.file.partition[0] for t in planned} == {february}
    assert len(planned) < len(months.inspect.files())


def test_a_table_pyiceberg_partitioned_by_year_and_bucket_is_landed_into(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    """A table made outside parka, by pyiceberg, with Iceberg's year and bucket transforms: parka
    ingest takes its spec (no --partition-by) and lands each row in its partition."""
    from pyiceberg.transforms import BucketTransform, YearTransform

    lake.warehouse.mkdir(parents=True, exist_ok=True)  # the embedded catalog's database is in it
    catalog = lake.catalog()
    catalog.create_namespace_if_not_exists(lake.namespace)
    created = catalog.create_table(lake.name("ext"), schema=TIMED)
    with created.update_spec() as spec:
        spec.add_field("ts", YearTransform(), "ts_year")
        spec.add_field("id", BucketTransform(4), "id_bucket")
    topic = new_topic()
    data = timed(600)
    segments = produce_timed(bootstrap, topic, data)
    result = last_json(ingest(lake, topic, lake.name("ext"), bootstrap, "--end-at-latest"))
    assert (result["segments"], result["records"]) == (segments, 600)
    spanning = check_landed(lake, lake.name("ext"), bootstrap, topic, segments, data)
    assert result["split_segments"] == spanning and 0 < spanning < segments
