"""``parka ingest --upsert``: a keyed topic lands as the latest row per key. Updates supersede a
key's row (in the same commit, in earlier commits, across restarts), a tombstone deletes its key
and a later record brings it back; the table read by delta-rs' query engine equals the model (the
latest value per key, in each partition's offset order)."""

from __future__ import annotations

import functools
import random
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable, QueryBuilder
from parka.lake.delta._logscan import live_adds
from parka.producer import ParquetProducer

from ._ingest_util import last_json, run_ingest, start_ingest, wait_for

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64(), False), ("version", pa.int64(), False)])


def produce(bootstrap: str, topic: str, events: list[tuple[int, int | None]]) -> None:
    """``(id, version)`` records keyed by id, in order; version ``None``: a tombstone of the id."""
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 7}
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, SCHEMA)
        for key, version in events:
            value = None if version is None else {"id": key, "version": version}
            producer.produce(topic, value, key=str(key).encode())
        assert producer.flush(30) == 0


def table_rows(table: Path) -> dict[int, int]:
    if not any((table / "_delta_log").glob("[0-9]*.json")):
        return {}  # no version committed yet (the log folder may exist before the first)
    reader = QueryBuilder().register("t", DeltaTable(str(table))).execute("select id, version from t")
    rows = pa.table(reader.read_all()).to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a key holds more than one row"
    return {r["id"]: r["version"] for r in rows}


def apply(model: dict[int, int], events: list[tuple[int, int | None]]) -> None:
    for key, version in events:
        if version is None:
            model.pop(key, None)
        else:
            model[key] = version


def random_events(
    rng: random.Random, step: int, *, keys: int, n: int, tombstones: float
) -> list[tuple[int, int | None]]:
    """``n`` events on random keys below ``keys``: version ``step``, or a tombstone (a ``tombstones`` share)."""
    return [(rng.randrange(keys), None if rng.random() < tombstones else step) for _ in range(n)]


def follow_rounds(
    bootstrap: str,
    topic: str,
    model: dict[int, int],
    rows: Callable[[], dict[int, int]],
    *,
    seed: int,
    steps: int,
    keys: int,
    n: int,
    tombstones: float,
) -> None:
    """``steps`` rounds of :func:`random_events` produced to ``topic`` while daemons run: after each,
    wait until the table (``rows()``) is ``model``."""
    rng = random.Random(seed)
    for step in range(1, steps + 1):
        events = random_events(rng, step, keys=keys, n=n, tombstones=tombstones)
        produce(bootstrap, topic, events)
        apply(model, events)
        wait_for(lambda: rows() == model, f"step {step}: the table to be the model", timeout_s=90)


def compacting_rounds(
    bootstrap: str, topic: str, table: str, model: dict[int, int], rows: Callable[[], dict[int, int]], log: Path,
    *extra: str, steps: int,
) -> str:  # fmt: skip
    """One daemon with background compaction at its most eager (two small files are enough)
    through ``steps`` rounds of random updates and tombstones (:func:`follow_rounds`), stopped by
    SIGTERM once it compacted; returns its log (it exited 0 and logged a compaction)."""
    flags = ("--upsert", "--allowed-latency", "0.2", "--max-segments-per-commit", "2", "--compact-min-files", "2")
    worker = start_ingest(topic, table, bootstrap, *extra, *flags, "-v", log=log)
    try:
        follow_rounds(bootstrap, topic, model, rows, seed=11, steps=steps, keys=120, n=150, tombstones=0.1)
        wait_for(lambda: "compacted" in log.read_text(), "a background compaction", timeout_s=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=60)
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert any("compacted" in ln and "small file(s)" in ln for ln in text.splitlines()), text[-3000:]
    return text


def land(
    bootstrap: str, topic: str, table: Path, model: dict[int, int], events: list[tuple[int, int | None]], *extra: str
) -> None:
    """Produce ``events``, take them into ``model``, and land the topic with ``--upsert`` (and
    ``extra``) to its end."""
    produce(bootstrap, topic, events)
    apply(model, events)
    run_ingest(topic, table, bootstrap, "--upsert", "--end-at-latest", *extra)


# A partitioned upsert table: a key's row moves to another partition when its version changes,
# so an update deletes a row in one partition's file and adds one to another's
BY_VERSION = ("--partition-by", "version")


@pytest.mark.parametrize("extra", [(), BY_VERSION], ids=["unpartitioned", "partitioned"])
def test_the_table_holds_the_latest_row_per_key_through_updates_tombstones_and_restarts(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, extra: tuple[str, ...]
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    model: dict[int, int] = {}
    rounds: list[list[tuple[int, int | None]]] = [
        # inserts, an update of some keys within the same run, tombstones
        [(k, 1) for k in range(60)] + [(k, 2) for k in range(0, 60, 3)] + [(k, None) for k in range(50, 60)],
        # a later run: updates, a tombstone then the key again, a tombstone of a key never seen
        [(k, 3) for k in range(0, 20)] + [(5, None), (5, 4), (7, None), (1000, None)],
        # only tombstones
        [(k, None) for k in range(10, 15)],
    ]
    for events in rounds:
        land(bootstrap, topic, table, model, events, *extra)
        assert table_rows(table) == model
    assert DeltaTable(str(table)).metadata().configuration["delta.enableDeletionVectors"] == "true"
    assert DeltaTable(str(table)).metadata().partition_columns == list(extra[1:])
    assert any("deletionVector" in add for add in live_adds(str(table)).values())
    again = run_ingest(topic, table, bootstrap, "--upsert", "--end-at-latest", *extra)  # nothing new
    assert last_json(again)["records"] == 0 and table_rows(table) == model


def test_background_compaction_moves_the_key_index_with_the_rows(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """With background compaction at its most eager (two small files are enough), one daemon
    lands rounds of random updates and tombstones: its compactions commit between its upserts
    (in the committer's turn, carrying over rows deleted while they rewrote), the key index
    follows the rows into the compacted files without reading the table again, and the table
    stays the model through every round."""
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    model: dict[int, int] = {}
    text = compacting_rounds(
        bootstrap, topic, str(table), model, functools.partial(table_rows, table), tmp_path / "log", steps=6
    )
    assert table_rows(table) == model
    # read once at the first commit, and again only after a compaction that did not move it (none here)
    assert text.count("key index read from version") == 1, text[-3000:]
    # compacted files were committed (they may have been superseded since: all their rows updated)
    assert any('"path":"compacted-' in f.read_text() for f in (table / "_delta_log").glob("*.json"))
    again = run_ingest(topic, table, bootstrap, "--upsert", "--end-at-latest", "--compact-min-files", "0")
    assert last_json(again)["records"] == 0 and table_rows(table) == model


def test_a_segment_without_keys_is_refused_naming_the_flag(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet"}
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, SCHEMA)
        producer.produce(topic, {"id": 1, "version": 1})  # no key
        assert producer.flush(30) == 0
    proc = run_ingest(topic, tmp_path / "t", bootstrap, "--upsert", "--end-at-latest", check=False)
    assert proc.returncode != 0
    assert "--upsert: a segment whose records have no keys" in proc.stderr


def test_key_columns_make_the_key_and_a_tombstone_under_them_is_refused(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``--key-columns region,id``: rows are upserted by those columns (records keyed by the same
    values, so each key keeps to one Kafka partition), whatever the record key's bytes. A
    tombstone cannot name a row by the columns: it goes to the dead-letter table, named, and
    the table is untouched by it. A key column no segment has exits 2 at the first segment,
    naming the flag and the columns there are, with nothing written."""
    schema = pa.schema([("region", pa.string(), False), ("id", pa.int64(), False), ("version", pa.int64(), False)])
    topic = new_topic(partitions=2)
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 5}
    model: dict[tuple[str, int], int] = {}
    events = [(r, i, v) for v in range(3) for r in ("eu", "us") for i in range(8) if (i + v) % 3]
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, schema)
        for region, key, version in events:
            producer.produce(topic, {"region": region, "id": key, "version": version}, key=f"{region}/{key}")
            model[(region, key)] = version
        producer.produce(topic, None, key="eu/1")
        assert producer.flush(30) == 0
    flags = ("--upsert", "--key-columns", "region,id", "--end-at-latest")
    proc = run_ingest(topic, table, bootstrap, *flags, "--dlq-table", str(dlq))
    reader = QueryBuilder().register("t", DeltaTable(str(table))).execute("select region, id, version from t")
    rows = pa.table(reader.read_all()).to_pylist()
    assert len(rows) == len(model)
    assert {(r["region"], r["id"]): r["version"] for r in rows} == model
    dead = pa.table(
        QueryBuilder().register("d", DeltaTable(str(dlq))).execute("select * from d").read_all()
    ).to_pylist()
    assert len(dead) == 1 and "--key-columns: a tombstone" in dead[0]["error"], dead
    assert last_json(proc)["dead_letters"] == 1

    other = new_topic(partitions=1)
    produce(bootstrap, other, [(1, 1)])
    bad = run_ingest(
        other, tmp_path / "t2", bootstrap, "--upsert", "--key-columns", "idd", "--end-at-latest", check=False
    )
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert "--key-columns" in bad.stderr and "has no column 'idd'" in bad.stderr and "id: int64" in bad.stderr
    assert not (tmp_path / "t2" / "_delta_log").exists()


def test_sequence_by_keeps_each_keys_highest_sequence_across_runs(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``--sequence-by seq``: a row with a lower sequence than its key's live row (in the same
    run, or landed by an earlier run and read back into the index) does not overwrite it; an
    equal one does; a tombstone deletes whatever is live, and a row after it lands whatever its
    sequence. Eager compaction moves the rows and their sequences in between. A column that is
    not an integer, timestamp or date exits 2 naming the flag."""
    schema = pa.schema([("id", pa.int64(), False), ("seq", pa.int64(), False), ("version", pa.int64(), False)])
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 4}
    conf["columnar.tombstone.order"] = "key"
    rng = random.Random(5)
    state: dict[int, tuple[int, int]] = {}  # id -> (seq, version) of the live row
    version = 0
    flags = ("--upsert", "--sequence-by", "seq", "--end-at-latest", "--compact-min-files", "2")
    for _ in range(3):
        with ParquetProducer(conf) as producer:
            producer.set_schema(topic, schema)
            for _ in range(120):
                key, seq = rng.randrange(15), rng.randrange(10)
                version += 1
                if rng.random() < 0.1:
                    producer.produce(topic, None, key=str(key))
                    state.pop(key, None)
                    continue
                producer.produce(topic, {"id": key, "seq": seq, "version": version}, key=str(key))
                if key not in state or seq >= state[key][0]:
                    state[key] = (seq, version)
            assert producer.flush(30) == 0
        run_ingest(topic, table, bootstrap, *flags)
        assert table_rows(table) == {k: v for k, (_, v) in state.items()}

    bad = run_ingest(
        topic, tmp_path / "t2", bootstrap, "--upsert", "--sequence-by", "nope", "--end-at-latest", check=False
    )
    assert bad.returncode == 2 and "--sequence-by" in bad.stderr and "has no column 'nope'" in bad.stderr


# the crash points of an upsert commit (on-revoke: the fault suite's rebalances; after-dead-letters:
# the commits with dead letters, tests/integration/test_ingest.py)
UPSERT_POINTS = ("before-write", "mid-write", "after-write", "after-delta-commit")
# an Iceberg upsert commit's: after-deletes first, while the first files are partly superseded (a
# file whose every row a commit supersedes leaves the table whole and gets no delete file)
ICEBERG_UPSERT_POINTS = ("after-deletes", "before-write", "mid-write", "after-write", "after-delta-commit")


def crash_round(i: int) -> list[tuple[int, int | None]]:
    """Round ``i`` of the kill tests' events over keys 0-39 (all landed first): updates of every
    other key, five tombstones, then updates of every fourth key, some of them just deleted."""
    version = 2 + 2 * i
    events: list[tuple[int, int | None]] = [(k, version) for k in range(i % 2, 40, 2)]
    events += [(k, None) for k in range(30 + i, 35 + i)]
    return events + [(k, version + 1) for k in range(0, 40, 4)]


def crash_at_each_point(
    bootstrap: str,
    topic: str,
    table: Path | str,
    model: dict[int, int],
    points: Sequence[str],
    *flags: str,
    left: Callable[[str], None] = lambda point: None,
) -> None:
    """At each crash point in turn, on one table: a round of updates, tombstones and keys created
    again (:func:`crash_round`) into ``model``, then ``parka ingest`` with ``flags`` SIGKILLed
    the second time it reaches the point (files written and not committed, or a commit whose
    changes the key index never took); ``left(point)`` checks what the kill left. The next run
    starts from what the crashed one left and reads the key index from the table. The kill tests
    of every table format and reader call it: Delta (``tests/integration/spark/test_spark_upsert.py``,
    read by delta-spark too), Iceberg (``tests/integration/iceberg/test_iceberg_upsert.py``, and
    ``tests/integration/spark/test_spark_iceberg.py`` for Spark's Iceberg runtime)."""
    for i, point in enumerate(points):
        later = crash_round(i)
        produce(bootstrap, topic, later)
        apply(model, later)
        env = {"PARKA_TEST_CRASH_AT": point, "PARKA_TEST_CRASH_AFTER": "2"}
        crashed = run_ingest(topic, table, bootstrap, *flags, env=env, check=False)
        assert crashed.returncode == -signal.SIGKILL, (point, crashed.stderr[-3000:])
        left(point)


def test_two_workers_on_one_upsert_table_hold_the_latest_row_per_key(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Two daemons of one group split the topic's partitions; each one's key index, read whole
    from the table once (at its first commit), catches up with the other's commits from those
    commits alone, and the table stays the model."""
    topic = new_topic(partitions=4)
    table = tmp_path / "t"
    model: dict[int, int] = {}
    land(bootstrap, topic, table, model, [(k, 0) for k in range(80)])  # the table, before both run
    flags = ("-g", f"grp-{topic}", "--upsert", "--allowed-latency", "1", "--max-segments-per-commit", "2")
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    workers = [start_ingest(topic, table, bootstrap, *flags, log=log) for log in logs]
    try:
        rows = functools.partial(table_rows, table)
        follow_rounds(bootstrap, topic, model, rows, seed=7, steps=4, keys=80, n=60, tombstones=0.15)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        codes = [w.wait(timeout=60) for w in workers]
    assert codes == [0, 0], [log.read_text()[-2000:] for log in logs]
    assert table_rows(table) == model
    assert all("assigned" in log.read_text() for log in logs)  # both held partitions
    texts = [log.read_text() for log in logs]
    assert sum(t.count("key index caught up from version") for t in texts) > 0, texts[0][-2000:]
    assert all("could not catch up" not in t and t.count("key index read from version") == 1 for t in texts), texts


def rows_without_vectors(table: Path) -> list[dict[str, int]]:
    """The table as a reader that knows nothing of deletion vectors reads it: every row of every
    live file."""
    files = [str(table / path) for path in live_adds(str(table))]
    if not files:
        return []
    # a partitioned table's rewritten files hold no partition column: its value is in the path
    data = ds.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(table))
    return data.to_table(columns=["id", "version"]).to_pylist()


@pytest.mark.parametrize(("crash_at", "extra"), [("after-rewrites", ()), ("mid-write", BY_VERSION)])
def test_copy_on_write_holds_the_latest_row_per_key_for_readers_without_deletion_vectors(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, crash_at: str, extra: tuple[str, ...]
) -> None:
    """``--upsert-mode copy-on-write``: the files holding superseded rows are rewritten without
    them in the commit that lands their successors, so a reader that reads every row of every
    live file (no deletion vectors: the log has none, the table does not enable them) reads
    the latest row per key; with eager compaction between the upserts, and after a kill -9
    with the rewritten files written and not committed, or in the middle of a write (into a
    partitioned table, whose rewritten files hold no partition column)."""
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    model: dict[int, int] = {}
    flags = ("--upsert", "--upsert-mode", "copy-on-write", "--end-at-latest", "--compact-min-files", "2", *extra)
    rng = random.Random(3)
    for step in range(1, 5):
        events = random_events(rng, step, keys=80, n=120, tombstones=0.1)
        produce(bootstrap, topic, events)
        apply(model, events)
        if step == 3:
            crashed = run_ingest(
                topic, table, bootstrap, *flags, "--max-segments-per-commit", "1",
                env={"PARKA_TEST_CRASH_AT": crash_at, "PARKA_TEST_CRASH_AFTER": "2"}, check=False,
            )  # fmt: skip
            assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
        run_ingest(topic, table, bootstrap, *flags)
        assert table_rows(table) == model
        plain = rows_without_vectors(table)
        assert len(plain) == len(model) and {r["id"]: r["version"] for r in plain} == model
    log = "".join(f.read_text() for f in (table / "_delta_log").glob("*.json"))
    assert "deletionVector" not in log and "delta.enableDeletionVectors" not in log
    assert '"operation":"MERGE"' in log  # the rewrites' commits
    on_disk = {p.name for p in table.rglob("*.parquet")}
    assert {Path(p).name for p in live_adds(str(table))} <= on_disk
