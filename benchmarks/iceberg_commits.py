"""What one ``parka ingest`` commit into Iceberg costs as the table's snapshots accumulate, with
and without the daemon's snapshot expiry, and what a reader's table open costs meanwhile.

pyiceberg rewrites the metadata of every snapshot kept on each commit, so a daemon committing
every second pays more per commit the longer it runs, unless snapshots are expired. Two arms on
topics of the same segments (``--segments`` of 10 rows each, one partition), each ``parka
ingest`` in-process into a fresh table of the embedded catalog, one segment per commit:

* **keep**: the table as parka creates it (``history.expire.max-snapshot-age-ms`` one hour, so
  nothing expires during the run): every commit adds a snapshot that stays;
* **expire**: the same table with ``history.expire.max-snapshot-age-ms=0`` and
  ``history.expire.min-snapshots-to-keep=10``: every ``checkpoint_interval`` (10) commits the
  daemon expires all but the latest ten;
* **expire-merge100**: as **expire**, with ``commit.manifest.min-count-to-merge=100`` (Iceberg's
  default) instead of the 8 parka gives the tables it creates: appends merge the manifests the
  current snapshot lists once there are that many.

The statistics: the process's CPU time per commit (mean over each window of ``--window``
commits; the first window starts when the first commit has ended), from the ingest's own
progress callback; and a reader's table open, pyiceberg's ``load_table`` and its scan's
planning (``plan_files``, which reads every manifest listed), timed after every
``--open-every``-th commit from the same callback (its CPU is taken out of the commits'), as the
median and the largest per window, with the manifests listed; at the end, the manifest files in
the metadata folder and how many of them a snapshot lists. The arms run in a shuffled order,
once per repeat. Writes ``results.json`` and ``report.md``::

    python -m benchmarks.iceberg_commits --bootstrap 127.0.0.1:9092 \\
        --kafka-data-dir "$(scripts/kafka-local.sh data-dir)" --out DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from parka.consumer import IngestionConsumer
from parka.lake import IcebergEngine
from parka.producer import ParquetProducer

from .broker import Broker
from .lake import ingest
from .machine import machine_info

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("value", pa.float64())])
ARMS = {
    "keep": {},
    "expire": {"history.expire.max-snapshot-age-ms": "0", "history.expire.min-snapshots-to-keep": "10"},
    "expire-merge100": {
        "history.expire.max-snapshot-age-ms": "0",
        "history.expire.min-snapshots-to-keep": "10",
        "commit.manifest.min-count-to-merge": "100",
    },
}


def produce(bootstrap: str, topic: str, first: int, segments: int) -> None:
    """``segments`` Parquet segments of 10 rows each (one flush each) to partition 0 of ``topic``."""
    producer = ParquetProducer({"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "linger.ms": 60_000})
    producer.set_schema(topic, SCHEMA)
    for s in range(first, first + segments):
        for i in range(10):
            producer.produce(topic, {"id": s * 10 + i, "name": f"n{i}", "value": float(i)}, partition=0)
        if producer.flush(30) != 0:
            raise RuntimeError(f"segment {s} of {topic} was not delivered")


def run_arm(broker: Broker, arm: str, segments: int, window: int, open_every: int) -> dict[str, Any]:
    """One arm: a table made by a first one-segment ingest, its properties set, then
    ``segments`` more segments ingested one commit each; CPU-ms per commit per window, and the
    reader's open every ``open_every`` commits."""
    topic = f"bench-icecommits-{arm}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1)
    warehouse = tempfile.mkdtemp(prefix=f"parka-icecommits-{arm}-")
    table = "bench.commits"
    produce(broker.bootstrap, topic, 0, 1)
    ingest(broker.bootstrap, topic, table, warehouse=warehouse, max_segments_per_commit=1)
    if ARMS[arm]:
        loaded = IcebergEngine("bench", {"warehouse": warehouse}).catalog.load_table(table)
        with loaded.transaction() as tx:
            tx.set_properties(ARMS[arm])
    produce(broker.bootstrap, topic, 1, segments)
    marks: dict[int, float] = {}  # commits done -> the process's CPU time when first seen, the opens' taken out
    opens: dict[int, tuple[float, int]] = {}  # commits done -> (open seconds, manifests listed)
    reader = IcebergEngine("bench", {"warehouse": warehouse}).catalog
    opening_cpu = 0.0

    def on_progress(consumer: IngestionConsumer) -> None:
        nonlocal opening_cpu
        commits = consumer.stats.commits
        if commits in marks:
            return
        marks[commits] = time.process_time() - opening_cpu
        if commits % open_every == 0:
            cpu, started = time.process_time(), time.perf_counter()
            loaded = reader.load_table(table)
            loaded.scan().plan_files()
            took = time.perf_counter() - started
            snapshot = loaded.current_snapshot()
            opens[commits] = (took, len(snapshot.manifests(loaded.io)) if snapshot else 0)
            opening_cpu += time.process_time() - cpu

    started = time.process_time()
    commits = ingest(
        broker.bootstrap, topic, table, warehouse=warehouse, max_segments_per_commit=1, on_progress=on_progress
    ).commits
    ended = time.process_time()
    engine = IcebergEngine("bench", {"warehouse": warehouse})
    loaded = engine.catalog.load_table(table)
    rows = loaded.scan().to_arrow().num_rows
    if rows != (segments + 1) * 10:
        raise RuntimeError(f"{arm}: {rows} rows in the table, {(segments + 1) * 10} produced")
    # the progress call that follows a commit marks its end; the first window starts after commit 1
    ends = [min(marks), *range(window, segments + 1, window)]
    per_window = [(marks[b] - marks[a]) * 1000 / (b - a) for a, b in itertools.pairwise(ends)]
    in_window = [[v for c, v in opens.items() if a < c <= b] for a, b in itertools.pairwise(ends)]
    folder = Path(loaded.location().removeprefix("file://")) / "metadata"
    on_disk = {p.name for p in folder.glob("*.avro") if not p.name.startswith("snap-")}
    listed = {Path(m.manifest_path).name for s in loaded.metadata.snapshots for m in s.manifests(loaded.io)}
    return {
        "arm": arm,
        "commits": commits,
        "snapshots_at_end": len(loaded.metadata.snapshots),
        "manifests_on_disk_at_end": len(on_disk),
        "manifests_listed_at_end": len(listed & on_disk),
        "cpu_s": ended - started - opening_cpu,
        "cpu_ms_per_commit_by_window": per_window,
        "open_ms_median_by_window": [statistics.median(t * 1000 for t, _ in w) for w in in_window],
        "open_ms_max_by_window": [max(t * 1000 for t, _ in w) for w in in_window],
        "manifests_max_by_window": [max(m for _, m in w) for w in in_window],
        "rows": rows,
    }


def report(results: dict[str, Any]) -> str:
    window = results["window"]
    n = results["segments"] // window
    lines = [
        "# Iceberg: CPU per `parka ingest` commit as snapshots accumulate",
        "",
        f"{results['segments']} commits of one 10-row segment each per arm; statistic: the mean CPU-ms",
        f"per commit over each window of {window} commits (the ingest process's CPU time), per repeat.",
        "",
        "| repeat | arm | snapshots at the end | manifests on disk at the end (listed by a snapshot) | "
        + " | ".join(f"commits {i * window + 1}-{(i + 1) * window}" for i in range(results["segments"] // window))
        + " |",
        "|---|---|---|---|" + "---|" * (results["segments"] // window),
    ]
    for r in results["runs"]:
        cells = " | ".join(f"{v:.0f}" for v in r["cpu_ms_per_commit_by_window"])
        manifests = f"{r['manifests_on_disk_at_end']} ({r['manifests_listed_at_end']})"
        lines.append(f"| {r['repeat']} | {r['arm']} | {r['snapshots_at_end']} | {manifests} | {cells} |")
    lines += [
        "",
        f"A reader's table open (pyiceberg's `load_table` and `plan_files`) after every {results['open_every']}th",
        "commit: the median ms per window, the largest in brackets, and the most manifests the current",
        "snapshot listed.",
        "",
        "| repeat | arm | " + " | ".join(f"commits {i * window + 1}-{(i + 1) * window}" for i in range(n)) + " |",
        "|---|---|" + "---|" * n,
    ]
    for r in results["runs"]:
        cells = " | ".join(
            f"{m:.1f} ({x:.1f}), {k} manifests"
            for m, x, k in zip(
                r["open_ms_median_by_window"], r["open_ms_max_by_window"], r["manifests_max_by_window"], strict=True
            )
        )
        lines.append(f"| {r['repeat']} | {r['arm']} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument(
        "--kafka-data-dir", required=True, help="the broker's log dir (scripts/kafka-local.sh data-dir)"
    )
    parser.add_argument("--segments", type=int, default=600, help="commits per arm (a multiple of --window)")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--open-every", type=int, default=5, help="a reader's table open after every Nth commit")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="bench-out/iceberg-commits")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    broker = Broker(args.bootstrap, args.kafka_data_dir)
    rng = random.Random(args.seed)
    runs = []
    for repeat in range(1, args.repeats + 1):
        order = list(ARMS)
        rng.shuffle(order)
        for arm in order:
            result = run_arm(broker, arm, args.segments, args.window, args.open_every)
            result["repeat"] = repeat
            runs.append(result)
            print(json.dumps(result), flush=True)
    results = {
        "machine": machine_info(broker),
        "segments": args.segments,
        "window": args.window,
        "open_every": args.open_every,
        "runs": runs,
        "growth": {
            arm: statistics.median(
                r["cpu_ms_per_commit_by_window"][-1] / r["cpu_ms_per_commit_by_window"][0]
                for r in runs
                if r["arm"] == arm
            )
            for arm in ARMS
        },
    }
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "report.md").write_text(report(results))
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
