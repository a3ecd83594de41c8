"""Upserts into a keyed table: ``parka ingest --upsert`` against the Python anchors, in one run:
``python -m benchmarks.upsert --bootstrap HOST:PORT --out DIR [--keys 1000000] [--quick]``.

The data set: ``--keys`` ids, each a row of six columns (id, version, user, amount, status, ts),
loaded first (not measured); then a stream of events on uniformly random ids, 95% updates (a
new row for the id) and 5% deletes. With ``--zipf S`` the ids are Zipf-skewed instead: the id of
rank r (1 the most frequent) is drawn with probability proportional to r^-S, and the ranks are
spread over the ids by a seeded permutation, so the hot ids are not neighbours. Every arm takes
the same events in the same order and must end with the same table: one row per live id, at its
latest version, checked by reading the table back (row count, no id twice, the sum of versions
and of ids against a model).

* **parka**: the events produced as segments keyed by id into a topic of ``--partitions``
  partitions (``produce()`` per event, a delete as a tombstone: ``produce(topic, None,
  key=id)``; with ``columnar.tombstone.order`` ``--tombstone-order``, ``key`` by default:
  with ``partition`` every tombstone cuts its partition's segment, and at 5% deletes segments
  hold some 20 records), then ``parka ingest TOPIC TABLE --upsert --end-at-latest`` in a child process,
  its defaults otherwise (background compaction on). Billed: the child's CPU, start to end
  (the interpreter's start, the group join and the key index read from the table included).
* **delta-rs MERGE** (``TableMerger``, copy-on-write; ``streamed_exec=False``): the same events
  in batches of ``--batch``, each deduplicated by id (the last event wins), merged into a Delta
  table holding the same initial rows: matched and deleted -> delete, matched -> update, not
  matched -> insert. Billed: this process's CPU around the merges.
* **pyiceberg upsert**: the same batches into an Iceberg table of the same initial rows (a SQL
  catalog over SQLite): ``Table.upsert(batch, join_cols=["id"])`` for the updates, then
  ``Table.delete(id IN deletes)``. Billed: this process's CPU around the calls.

* **Spark MERGE** (delta-spark, deletion vectors on): the body of a Structured Streaming
  ``foreachBatch`` that upserts, run on the same batches: each batch made a DataFrame
  (``createDataFrame`` of the Arrow batch, as a micro-batch arrives) and merged by
  ``DeltaTable.merge`` with the delta-rs arm's three clauses into a table of the same initial rows
  (written by delta-rs, then ``delta.enableDeletionVectors`` set by Spark: its MERGE then marks
  the matched rows deleted by deletion vector rather than rewriting their files). A local
  session (``local[*]``, the session parka's Spark side makes). Billed: the CPU of this process
  and of its children (the driver's JVM, Python workers) around the merges; the session's start
  is not billed.

The anchors take ``--anchor-events`` of the events (they are slow: a copy-on-write of the
table per batch); parka takes ``--events``. The statistic: CPU-seconds per event, one run per
arm, and the ratio of each anchor's to parka's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .report import save_run

STATUSES = ["new", "paid", "shipped", "returned", "closed"]


@dataclass(frozen=True)
class Events:
    """The stream: ``ids[i]`` updated to version ``i + 1``, or deleted where ``deleted[i]``."""

    ids: np.ndarray
    deleted: np.ndarray

    def head(self, n: int) -> Events:
        return Events(self.ids[:n], self.deleted[:n])


def make_events(keys: int, n: int, delete_share: float, seed: int, zipf: float = 0.0) -> Events:
    """``n`` events on ids below ``keys``: uniformly random, or Zipf-skewed with exponent ``zipf``."""
    rng = np.random.default_rng(seed)
    if not zipf:
        return Events(rng.integers(0, keys, n, dtype=np.int64), rng.random(n) < delete_share)
    ranks = np.arange(1, keys + 1, dtype=np.float64)
    weights = ranks**-zipf
    cumulative = np.cumsum(weights / weights.sum())
    rank = np.minimum(np.searchsorted(cumulative, rng.random(n)), keys - 1)
    ids = rng.permutation(keys).astype(np.int64)[rank]
    return Events(ids, rng.random(n) < delete_share)


def rows(ids: np.ndarray, versions: np.ndarray) -> pa.Table:
    """The rows of ``ids`` at ``versions`` (their other columns derived from both)."""
    mix = ids * 2654435761 + versions
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "version": pa.array(versions, pa.int64()),
            "user": pa.array([f"user-{m % 100_003}" for m in mix.tolist()], pa.string()),
            "amount": pa.array((mix % 100_000) / 100.0, pa.float64()),
            "status": pa.array([STATUSES[m % 5] for m in mix.tolist()], pa.string()),
            "ts": pa.array(1_700_000_000_000_000 + mix % 10**12, pa.timestamp("us")),
        }
    )


def model_of(keys: int, events: Events) -> dict[int, int]:
    """id -> latest version after the initial load (version 0) and ``events``."""
    state = dict.fromkeys(range(keys), 0)
    for i, (key, gone) in enumerate(zip(events.ids.tolist(), events.deleted.tolist(), strict=True)):
        if gone:
            state.pop(key, None)
        else:
            state[key] = i + 1
    return state


def check(table: pa.Table, model: dict[int, int], arm: str) -> dict[str, Any]:
    """The table read back against the model; raises naming the arm and what differs."""
    ids = table["id"]
    got = {
        "rows": table.num_rows,
        "distinct_ids": len(pc.unique(ids)),
        "sum_ids": int(pc.sum(ids).as_py() or 0),
        "sum_versions": int(pc.sum(table["version"]).as_py() or 0),
    }
    want = {
        "rows": len(model),
        "distinct_ids": len(model),
        "sum_ids": sum(model),
        "sum_versions": sum(model.values()),
    }
    if got != want:
        raise AssertionError(f"{arm}: the table is not the model: got {got}, want {want}")
    return got


def batches(events: Events, size: int, first_version: int = 1) -> list[tuple[pa.Table, np.ndarray]]:
    """The events in batches of ``size``, each deduplicated by id (the last event wins): the rows
    to upsert and the ids to delete."""
    out = []
    for start in range(0, events.ids.size, size):
        ids, gone = events.ids[start : start + size], events.deleted[start : start + size]
        versions = np.arange(start, start + ids.size, dtype=np.int64) + first_version
        _, last_from_end = np.unique(ids[::-1], return_index=True)
        last = ids.size - 1 - last_from_end  # each id's last event in the batch
        up, down = last[~gone[last]], last[gone[last]]
        out.append((rows(ids[up], versions[up]), ids[down]))
    return out


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load_initial(conf: dict[str, Any], topic: str, keys: int) -> None:
    """Produce the ``keys`` ids at version 0 (the table before the events)."""
    from parka.producer import ParquetProducer

    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, rows(np.zeros(1, np.int64), np.zeros(1, np.int64)).schema)
        for start in range(0, keys, 100_000):
            ids = np.arange(start, min(keys, start + 100_000), dtype=np.int64)
            producer.produce_batch(topic, rows(ids, np.zeros(ids.size, np.int64)), key_column="id")
        assert producer.flush(120) == 0


def run_parka(
    bootstrap: str,
    keys: int,
    events: Events,
    partitions: int,
    workdir: str,
    chunk: int,
    tombstone_order: str,
    upsert_mode: str = "merge-on-read",
    iceberg: bool = False,
) -> dict[str, Any]:
    """``parka ingest --upsert`` of the events into a Delta table, or (``iceberg``) an Iceberg
    table of the embedded catalog (position deletes)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from parka.producer import ParquetProducer

    topic = f"bench-upsert-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    warehouse = os.path.join(workdir, "warehouse")
    table = "bench.parka" if iceberg else os.path.join(workdir, "parka")
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "linger.ms": 50}
    conf["columnar.tombstone.order"] = tombstone_order
    ingest = [sys.executable, "-m", "parka.cli", "ingest", topic, table, "-k", bootstrap, "--upsert"]
    ingest += ["--upsert-mode", upsert_mode, "--end-at-latest", "-v"]
    if iceberg:
        ingest += ["--catalog", "bench", "--catalog-option", f"warehouse={warehouse}"]
    try:
        load_initial(conf, topic, keys)
        subprocess.run(ingest, check=True, capture_output=True, text=True)  # the initial load, not measured
        with ParquetProducer(conf) as producer:
            producer.set_schema(topic, rows(np.zeros(1, np.int64), np.zeros(1, np.int64)).schema)
            for start in range(0, events.ids.size, chunk):
                ids, gone = events.ids[start : start + chunk], events.deleted[start : start + chunk]
                versions = np.arange(start + 1, start + 1 + ids.size, dtype=np.int64)
                # in event order, one produce() each (produce_batch would make segments of each run
                # of updates between two deletes), a delete as a tombstone
                records = rows(ids, versions).to_pylist()
                for key, deleted, record in zip(ids.tolist(), gone.tolist(), records, strict=True):
                    producer.produce(topic, None if deleted else record, key=str(key))
                producer.poll(0)
            assert producer.flush(120) == 0
        cpu0, wall0 = cpu_children(), time.perf_counter()
        proc = subprocess.run(ingest, check=True, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - wall0, cpu_children() - cpu0
    finally:
        admin.delete_topics([topic])
    index = re.search(r"key index read from version \d+: (\d+) keys in ([0-9.]+) s", proc.stderr)
    if iceberg:
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("bench", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
        landed = catalog.load_table(table).scan(selected_fields=("id", "version")).to_arrow()
        folder = os.path.join(warehouse, "bench.db", "parka", "data")
    else:
        from deltalake import DeltaTable, QueryBuilder

        reader = QueryBuilder().register("t", DeltaTable(table)).execute("select id, version from t")
        landed, folder = pa.table(reader.read_all()), table
    got = check(landed, model_of(keys, events), "parka (Iceberg)" if iceberg else "parka")
    return {
        "events": int(events.ids.size),
        "tombstone_order": tombstone_order,
        "upsert_mode": upsert_mode,
        "files_added": sum(1 for _, _, names in os.walk(folder) for n in names if n.endswith(".parquet")),
        "cpu_s": cpu,
        "wall_s": wall,
        "key_index_read_s": float(index.group(2)) if index else None,
        "table": got,
    }


class VersionPoller(threading.Thread):
    """Reads each new version's commit of the table every ``poll_s`` and notes when it first saw
    each event (by its ``version`` column) in a file a commit added with ``dataChange`` (a
    compaction's adds carry none): the wall clock when the read returned."""

    def __init__(self, table: str, poll_s: float, first_version: int) -> None:
        super().__init__(name="upsert-poller", daemon=True)
        self.table, self.poll_s = table, poll_s
        self.seen: dict[int, float] = {}
        self._halt = threading.Event()
        self._next = first_version

    def run(self) -> None:
        import json

        import pyarrow.parquet as pq

        log = os.path.join(self.table, "_delta_log")
        while not self._halt.wait(self.poll_s):
            while True:
                name = os.path.join(log, f"{self._next:020d}.json")
                if not os.path.exists(name):
                    break
                with open(name) as f:
                    actions = [json.loads(line) for line in f if line.strip()]
                now = time.time()
                for action in actions:
                    add = action.get("add")
                    if add and add.get("dataChange") and not add["path"].startswith("compacted-"):
                        path = os.path.join(self.table, add["path"])
                        for v in pq.read_table(path, columns=["version"])["version"].to_pylist():
                            self.seen.setdefault(v, now)
                self._next += 1

    def finish(self) -> None:
        self._halt.set()
        self.join(timeout=60)


def upsert_commits(table: str, after: int, through: int) -> int:
    """The daemon's upsert commits among versions ``after`` + 1 to ``through`` of ``table`` (its
    own, by their ``parka.app_id``; not its compactions')."""
    n = 0
    for version in range(after + 1, through + 1):
        with open(os.path.join(table, "_delta_log", f"{version:020d}.json")) as log:
            info = json.loads(log.readline()).get("commitInfo", {})
        n += "parka.app_id" in info and "parka.operation" not in info
    return n


def run_freshness(
    bootstrap: str, keys: int, rate: int, duration_s: float, partitions: int, workdir: str, seed: int
) -> dict[str, Any]:
    """``parka ingest --upsert -l 1`` as a daemon (its defaults otherwise, background compaction
    on) while events come at ``rate`` a second for ``duration_s``, paced every 100 ms: each
    slot's updates by one ``produce_batch``, then its tombstones (5% of the events) by
    ``produce()``: each update's produce-to-visible latency (the time the
    poller first saw the commit that added its row minus its slot in the pacing schedule), then
    the table's scan against the same rows written compact."""
    import psutil
    from confluent_kafka.admin import AdminClient, NewTopic
    from deltalake import DeltaTable, QueryBuilder, write_deltalake
    from parka.producer import ParquetProducer

    from .measure import paired_ratio

    topic = f"bench-upsert-fresh-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    table = os.path.join(workdir, "parka-daemon")
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "linger.ms": 100}
    conf["columnar.tombstone.order"] = "key"
    ingest = [sys.executable, "-m", "parka.cli", "ingest", topic, table, "-k", bootstrap, "--upsert"]
    rng = np.random.default_rng(seed)
    produced_at: dict[int, float] = {}
    model = dict.fromkeys(range(keys), 0)
    daemon = None
    try:
        load_initial(conf, topic, keys)
        subprocess.run([*ingest, "--end-at-latest"], check=True, capture_output=True, text=True)
        daemon = subprocess.Popen([*ingest, "-l", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc = psutil.Process(daemon.pid)
        poller = VersionPoller(table, 0.1, DeltaTable(table).version() + 1)
        poller.start()
        with ParquetProducer(conf) as producer:
            producer.set_schema(topic, rows(np.zeros(1, np.int64), np.zeros(1, np.int64)).schema)
            # a warm-up: key 0 again at version 0 (the model's); once it is visible the daemon has
            # read its key index and committed, and the measured window starts
            producer.produce_batch(topic, rows(np.zeros(1, np.int64), np.zeros(1, np.int64)), key_column="id")
            producer.flush(60)
            warm = time.time()
            while 0 not in poller.seen and time.time() - warm < 600:
                time.sleep(0.05)
            started_s = time.time() - warm
            # and once background compaction has merged the initial load's files (no commit for
            # 5 s), so the window sees the steady work, not a one-off rewrite of the whole table
            quiet, version0 = time.time(), DeltaTable(table).version()
            while time.time() - quiet < 5 and time.time() - warm < 900:
                time.sleep(0.5)
                now = DeltaTable(table).version()
                if now != version0:
                    quiet, version0 = time.time(), now
            cpu0 = proc.cpu_times()
            start = last_sent = time.time()
            sent = 0
            while True:
                elapsed = time.time() - start
                if elapsed >= duration_s:
                    break
                due = int(min(elapsed, duration_s) * rate)
                if due > sent:
                    # a slot's updates in one produce_batch (a segment per partition, as produce()
                    # per record with linger.ms=100 would cut them, without a Python call per
                    # row), then its tombstones one by one
                    ids = rng.integers(0, keys, due - sent, dtype=np.int64)
                    gone = rng.random(ids.size) < 0.05
                    versions = np.arange(sent + 1, due + 1, dtype=np.int64)
                    up = ~gone
                    producer.produce_batch(topic, rows(ids[up], versions[up]), key_column="id")
                    for key, version in zip(ids[up].tolist(), versions[up].tolist(), strict=True):
                        produced_at[version] = start + (version - 1) / rate
                        model[key] = version
                    for key in ids[gone].tolist():
                        producer.produce(topic, None, key=str(key))
                        model.pop(key, None)
                    producer.poll(0)
                    sent = due
                    last_sent = time.time()
                time.sleep(max(0.0, 0.1 - (time.time() - start - elapsed)))
            achieved = sent / (last_sent - start)
            assert producer.flush(120) == 0
        deadline = time.time() + 300
        while len(set(produced_at) - set(poller.seen)) and time.time() < deadline:
            time.sleep(0.2)
        cpu1, version1 = proc.cpu_times(), DeltaTable(table).version()
        poller.finish()
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=120)
        admin.delete_topics([topic])
    missing = set(produced_at) - set(poller.seen)
    if missing:
        raise AssertionError(f"parka daemon: {len(missing)} updates never became visible")
    latencies = np.array([poller.seen[v] - t for v, t in produced_at.items()])
    commits = upsert_commits(table, version0, version1)
    daemon_cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    final = pa.table(QueryBuilder().register("t", DeltaTable(table)).execute("select * from t").read_all())
    got = check(final, model, "parka daemon")
    compact = os.path.join(workdir, "compact")
    write_deltalake(compact, final.drop_columns(["__parka_key"]) if "__parka_key" in final.column_names else final)
    query = "select status, count(*), sum(amount) from t group by status order by status"
    upsert_s, compact_s = [], []
    for _ in range(5):
        for uri, out in ((table, upsert_s), (compact, compact_s)):
            t0 = time.perf_counter()
            QueryBuilder().register("t", DeltaTable(uri)).execute(query).read_all()
            out.append(time.perf_counter() - t0)
    return {
        "rate_asked": rate,
        "rate_achieved": achieved,
        "duration_s": duration_s,
        "updates": len(produced_at),
        "p50_s": float(np.percentile(latencies, 50)),
        "p99_s": float(np.percentile(latencies, 99)),
        "daemon_cpu_s": daemon_cpu,
        "start_s": started_s,
        "commits": commits,
        "cpu_per_commit_ms": 1000 * daemon_cpu / commits if commits else None,
        "live_files": len(DeltaTable(table).file_uris()),
        "scan_ratio": paired_ratio(upsert_s, compact_s),
        "table": got,
    }


SET_ALL = {c: f"s.{c}" for c in rows(np.zeros(1, np.int64), np.zeros(1, np.int64)).column_names}
"""A MERGE's assignments: every column of the target from the source's."""


def merge_sources(events: Events, size: int) -> list[pa.Table]:
    """The MERGE arms' sources: each batch of :func:`batches` as one table of its upserted rows
    and its deleted ids, told apart by a ``gone`` column."""
    return [
        pa.concat_tables(
            [
                upserts.append_column("gone", pa.array(np.zeros(upserts.num_rows, bool))),
                rows(deletes, np.zeros(deletes.size, np.int64)).append_column(
                    "gone", pa.array(np.ones(deletes.size, bool))
                ),
            ]
        )
        for upserts, deletes in batches(events, size)
    ]


def run_delta_merge(keys: int, events: Events, batch: int, workdir: str) -> dict[str, Any]:
    from deltalake import DeltaTable, write_deltalake

    uri = os.path.join(workdir, "delta-merge")
    write_deltalake(uri, rows(np.arange(keys, dtype=np.int64), np.zeros(keys, np.int64)))
    work = merge_sources(events, batch)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for source in work:
        (
            DeltaTable(uri)
            .merge(source, "t.id = s.id", source_alias="s", target_alias="t", streamed_exec=False)
            .when_matched_delete("s.gone")
            .when_matched_update(SET_ALL, "NOT s.gone")
            .when_not_matched_insert(SET_ALL, "NOT s.gone")
            .execute()
        )
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    got = check(DeltaTable(uri).to_pyarrow_table(columns=["id", "version"]), model_of(keys, events), "delta-rs MERGE")
    return {"events": int(events.ids.size), "batches": len(work), "cpu_s": cpu, "wall_s": wall, "table": got}


def run_pyiceberg_upsert(keys: int, events: Events, batch: int, workdir: str) -> dict[str, Any]:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import In

    catalog = SqlCatalog("bench", uri=f"sqlite:///{workdir}/catalog.db", warehouse=f"file://{workdir}/warehouse")
    catalog.create_namespace("b")
    initial = rows(np.arange(keys, dtype=np.int64), np.zeros(keys, np.int64))
    table = catalog.create_table("b.t", schema=initial.schema)
    table.append(initial)
    work = batches(events, batch)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for upserts, deletes in work:
        if upserts.num_rows:
            table.upsert(upserts, join_cols=["id"])
        if deletes.size:
            table.delete(In("id", deletes.tolist()))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    got = check(table.scan(selected_fields=("id", "version")).to_arrow(), model_of(keys, events), "pyiceberg upsert")
    return {"events": int(events.ids.size), "batches": len(work), "cpu_s": cpu, "wall_s": wall, "table": got}


def run_spark_merge(keys: int, events: Events, batch: int, workdir: str) -> dict[str, Any]:
    from delta.tables import DeltaTable as SparkDeltaTable
    from deltalake import write_deltalake
    from parka.spark_ext import session

    from .measure import tree_cpu_s

    uri = os.path.join(workdir, "spark-merge")
    write_deltalake(uri, rows(np.arange(keys, dtype=np.int64), np.zeros(keys, np.int64)))
    spark = session(
        app_name="parka upsert benchmark: Spark MERGE",
        extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "4g"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"ALTER TABLE delta.`{uri}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    target = SparkDeltaTable.forPath(spark, uri)
    work = merge_sources(events, batch)
    cpu0, wall0 = tree_cpu_s(), time.perf_counter()
    for source in work:  # a foreachBatch's body, each batch as it arrives
        (
            target.alias("t")
            .merge(spark.createDataFrame(source).alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.gone")
            .whenMatchedUpdate("NOT s.gone", SET_ALL)
            .whenNotMatchedInsert("NOT s.gone", SET_ALL)
            .execute()
        )
    cpu, wall = tree_cpu_s() - cpu0, time.perf_counter() - wall0
    table = pa.table(spark.read.format("delta").load(uri).select("id", "version").toArrow())
    got = check(table, model_of(keys, events), "Spark MERGE")
    vectors = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").where("operation = 'MERGE'").select("operationMetrics")
    metrics = [r[0] for r in vectors.collect()]
    spark.stop()
    return {
        "events": int(events.ids.size),
        "batches": len(work),
        "cpu_s": cpu,
        "wall_s": wall,
        "table": got,
        # the MERGEs' deletion vectors, added and updated (none would mean files were rewritten)
        "deletion_vectors": {
            k: sum(int(m.get(k, 0)) for m in metrics)
            for k in ("numTargetDeletionVectorsAdded", "numTargetDeletionVectorsUpdated", "numTargetFilesRemoved")
        },
        "last_merge_metrics": metrics[-1] if metrics else None,
    }


def render(results: dict[str, Any]) -> str:
    arms = results["arms"]
    zipf = results.get("zipf")
    skew = f"Zipf-skewed keys (exponent {zipf})" if zipf else "uniformly random keys"
    lines = [
        "# Upserts: CPU-seconds per event, parka ingest --upsert against the anchors",
        "",
        f"`{results['command']}`",
        "",
        f"{results['keys']:,} keys loaded first; events on {skew}, "
        f"{results['delete_share']:.0%} deletes (parka's producer: columnar.tombstone.order="
        f"{results['tombstone_order']}; parka ingest --upsert-mode {results.get('upsert_mode', 'merge-on-read')}); "
        f"one run per arm on {results['machine']}.",
    ]
    base = "parka" if "parka" in arms else "parka (Iceberg)" if "parka (Iceberg)" in arms else None
    if base is not None:
        parka = arms[base]["cpu_s"] / arms[base]["events"]
        lines += [
            "Statistic: the arm's CPU-seconds (user + system, all threads) divided by its events.",
            "",
            f"| arm | events | CPU-s | wall s | µs CPU per event | its / {base}'s |",
            "|---|---|---|---|---|---|",
        ]
        for name, arm in arms.items():
            per = arm["cpu_s"] / arm["events"]
            lines.append(
                f"| {name} | {arm['events']:,} | {arm['cpu_s']:.2f} | {arm['wall_s']:.2f} | {per * 1e6:,.1f} | "
                f"{per / parka:,.1f} |"
            )
        best = min((a["cpu_s"] / a["events"] for n, a in arms.items() if not n.startswith("parka")), default=None)
        if best is not None:
            lines += ["", f"The best anchor's CPU per event is {best / parka:,.1f}x parka's (goal: at least 10x)."]
        if "parka (Iceberg)" in arms and "pyiceberg upsert" in arms:
            ours = arms["parka (Iceberg)"]["cpu_s"] / arms["parka (Iceberg)"]["events"]
            theirs = arms["pyiceberg upsert"]["cpu_s"] / arms["pyiceberg upsert"]["events"]
            lines += [
                "",
                f"Into Iceberg: pyiceberg's upsert's CPU per event is {theirs / ours:,.1f}x that of parka ingest "
                "--upsert into an Iceberg table (position deletes).",
            ]
        for name in ("parka", "parka (Iceberg)"):
            if name in arms and arms[name].get("key_index_read_s") is not None:
                lines += [
                    "",
                    f"{name}: its start read the key index of {results['keys']:,} keys from the table in "
                    f"{arms[name]['key_index_read_s']:.2f} s (wall, included above).",
                ]
    fresh = results.get("freshness")
    if fresh:
        ratio = fresh["scan_ratio"]
        lines += [
            "",
            f"## The daemon at {fresh['rate_asked']:,} events/s ({fresh['rate_achieved']:,.0f} achieved) for "
            f"{fresh['duration_s']:.0f} s",
            "",
            "`parka ingest --upsert -l 1` (background compaction on); every 100 ms the slot's updates by one "
            "`produce_batch`, then its tombstones (5% of the events) by `produce()`:",
            "",
            f"- produce-to-visible, p99 of {fresh['updates']:,} updates: {fresh['p99_s']:.2f} s "
            f"(p50 {fresh['p50_s']:.2f} s; a poll every 100 ms)",
            f"- the daemon's CPU over the window (from its first commit, {fresh.get('start_s', 0):.1f} s after it "
            f"started: the key index read, and background compaction of the initial load then done): "
            f"{fresh['daemon_cpu_s']:.1f} CPU-s in {fresh.get('commits', 0):,} upsert "
            f"commits, {fresh.get('cpu_per_commit_ms') or 0:.0f} ms CPU per commit (compactions included); "
            f"live files at the end: {fresh['live_files']}",
            f"- scan of the upsert table against the same rows written compact (delta-rs' query engine, a group-by "
            f"over every row; median of 5 paired ratios): {ratio['median']:.2f}",
        ]
    lines += ["", "Every arm's table was read back and equals the model (rows, ids once, sums of ids and versions)."]
    return "\n".join(lines) + "\n"


ARMS = ("parka", "parka (Iceberg)", "delta-rs MERGE", "pyiceberg upsert", "Spark MERGE")


@dataclass(frozen=True)
class UpsertRun:
    """What one run of the benchmark takes (the command's flags; the suite's upsert section)."""

    keys: int
    events: int
    anchor_events: int
    batch: int
    partitions: int = 4
    delete_share: float = 0.05
    seed: int = 1
    zipf: float = 0.0
    tombstone_order: str = "key"
    upsert_mode: str = "merge-on-read"
    arms: tuple[str, ...] = ARMS
    freshness_rate: int = 0
    freshness_duration_s: float = 60.0


def run_upsert(bootstrap: str, run: UpsertRun) -> dict[str, Any]:
    """Each arm of ``run.arms`` on the same events, then the daemon's run when
    ``run.freshness_rate`` is set: ``{"arms": {...}, "freshness": {...}}``."""
    events = make_events(run.keys, max(run.events, run.anchor_events), run.delete_share, run.seed, run.zipf)
    arms: dict[str, Any] = {}
    out: dict[str, Any] = {"arms": arms}
    with tempfile.TemporaryDirectory(prefix="parka-bench-upsert-") as workdir:
        for name, iceberg in (("parka", False), ("parka (Iceberg)", True)):  # Iceberg: merge-on-read only
            if name in run.arms:
                mode = "merge-on-read" if iceberg else run.upsert_mode
                arms[name] = run_parka(
                    bootstrap,
                    run.keys,
                    events.head(run.events),
                    run.partitions,
                    workdir,
                    run.batch,
                    run.tombstone_order,
                    mode,
                    iceberg=iceberg,
                )
                print(f"{name}: {arms[name]}", file=sys.stderr)
        anchors = events.head(run.anchor_events)
        for name, fn in (
            ("delta-rs MERGE", run_delta_merge),
            ("pyiceberg upsert", run_pyiceberg_upsert),
            ("Spark MERGE", run_spark_merge),
        ):
            if name in run.arms:
                arms[name] = fn(run.keys, anchors, run.batch, workdir)
                print(f"{name}: {arms[name]}", file=sys.stderr)
        if run.freshness_rate:
            out["freshness"] = run_freshness(
                bootstrap, run.keys, run.freshness_rate, run.freshness_duration_s, run.partitions, workdir, run.seed
            )
            print(f"parka daemon: {out['freshness']}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--events", type=int, default=1_000_000, help="events parka takes")
    p.add_argument("--anchor-events", type=int, default=30_000, help="events each anchor takes")
    p.add_argument("--batch", type=int, default=10_000, help="events per anchor batch")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--delete-share", type=float, default=0.05)
    p.add_argument("--zipf", type=float, default=0.0, help="Zipf exponent of the ids' skew (0: uniform)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--tombstone-order",
        choices=("key", "partition"),
        default="key",
        help="the producer's columnar.tombstone.order (partition: each tombstone cuts its partition's segment)",
    )
    p.add_argument(
        "--upsert-mode",
        choices=("merge-on-read", "copy-on-write"),
        default="merge-on-read",
        help="parka ingest --upsert-mode of the parka arm",
    )
    p.add_argument("--arms", default=",".join(ARMS), help="comma-separated, of: " + ", ".join(ARMS))
    p.add_argument("--freshness-rate", type=int, default=0, help="events/s of the daemon run (0: none)")
    p.add_argument("--freshness-duration", type=float, default=60.0)
    p.add_argument("--quick", action="store_true", help="a smoke run: 20,000 keys, 20,000 events, 4,000 for anchors")
    args = p.parse_args(argv)
    if args.quick:
        args.keys, args.events, args.anchor_events, args.batch = 20_000, 20_000, 4_000, 2_000
    os.makedirs(args.out, exist_ok=True)
    run = UpsertRun(
        keys=args.keys,
        events=args.events,
        anchor_events=args.anchor_events,
        batch=args.batch,
        partitions=args.partitions,
        delete_share=args.delete_share,
        seed=args.seed,
        zipf=args.zipf,
        tombstone_order=args.tombstone_order,
        upsert_mode=args.upsert_mode,
        arms=tuple(a.strip() for a in args.arms.split(",") if a.strip()),
        freshness_rate=args.freshness_rate,
        freshness_duration_s=args.freshness_duration,
    )
    measured = run_upsert(args.bootstrap, run)
    import platform

    results = {
        "command": "python -m benchmarks.upsert " + " ".join(argv if argv is not None else sys.argv[1:]),
        "keys": args.keys,
        "tombstone_order": args.tombstone_order,
        "upsert_mode": args.upsert_mode,
        "delete_share": args.delete_share,
        "zipf": args.zipf,
        "machine": f"{os.cpu_count()} cores, {platform.platform()}",
        **measured,
    }
    save_run(args.out, results, render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
