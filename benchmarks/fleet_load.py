"""One ``parka ingest`` of many topics under a steady load, against one of a single topic taking
the same rows: resident memory over time, produce-to-visible latency per topic, CPU per row.

Three arms (``--arms`` picks some), one after the other, on one broker, each with a fresh daemon
started as a process of its own (``python -m benchmarks.named_threads parka.cli ingest``:
``parka ingest`` with its OS threads named, defaults but ``-l`` and any ``--ingest-arg``):

- **one topic**: one topic of ``--partitions`` partitions, one daemon, the same total rate;
- **wide topic**: one topic of ``--topics`` x ``--partitions`` partitions into one table, so
  the same segments as the fleet's (as many, as small) and as many files per second, but one
  table, one lane and one commit a latency;
- **fleet**: ``--topics`` topics of ``--partitions`` partitions, one daemon of
  ``--topics-regex`` into a Delta table per topic (``DIR/{topic}``).

The wide topic splits the fleet's cost over one topic in two: what the smaller segments cost
(wide against one topic) and what the many tables cost (fleet against wide).

In each, the flights rows with a row number and a produce time (:class:`benchmarks.freshness.PacedProducer`,
one ``ParquetProducer`` shared by the topics) go out at ``--rate`` rows/s in all, split evenly
over the topics and their partitions, a batch every ``--batch-ms`` (a segment per partition per
batch, as ``linger.ms`` would cut them), for ``--duration`` seconds (:func:`benchmarks.freshness.paced`).
A warm-up of 1,000 rows a partition first makes every table; the paced run starts once every
table exists.

Measured:

- **Produce-to-visible latency** of each row: the modification time of the table's log entry
  (``_delta_log/<version>.json``) that added the file holding it, minus the row's produce time
  (its slot in the pacing schedule). Read from the tables after the run (nothing polls them
  while it runs); files added by compaction (``dataChange`` false) are not a row's first
  appearance and are skipped. Statistic: p99 (numpy's linear percentile) per topic, and its
  largest over the topics.
- **CPU per row**: user + system CPU of the daemon (every thread, psutil) from the moment every
  table exists to the moment every table holds every row, over the paced rows (µs/row).
- **Resident memory**: the daemon's ``VmRSS``, every second; its largest.
- **CPU by thread**: the same window's CPU of the daemon's live threads by OS thread name
  (:func:`benchmarks.named_threads.thread_cpu_s`), as a share of the arm's CPU.

Checks: each table ends with exactly the rows produced into its topic (row numbers 0..n-1 once
each, the warm-up's included).

    python -m benchmarks.fleet_load --bootstrap 127.0.0.1:9092 \\
        --kafka-data-dir "$(scripts/kafka-local.sh data-dir)" --out bench-out/fleet-load
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from parka.producer import ParquetProducer

from .broker import Broker
from .checks import CheckFailed, Checks
from .datasets import load
from .freshness import (
    PRODUCED,
    SEGMENT_ROWS,
    SEQ,
    WARMUP_ROWS_PER_PARTITION,
    PacedProducer,
    latencies_s,
    paced,
    percentiles,
)
from .measure import process_cpu_s
from .named_threads import thread_cpu_s
from .sizing import run_benchmark, table_rows

log = logging.getLogger("parka.bench")

_WAIT_S = 600.0


class RssSampler(threading.Thread):
    """A process's resident memory (``VmRSS``, bytes) every ``period_s``, with the time."""

    def __init__(self, pid: int, period_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.period_s = pid, period_s
        self.samples: list[tuple[float, int]] = []
        self._stop_event = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        while not self._stop_event.wait(self.period_s):  # a sampling period, not a synchronisation
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
            except (OSError, StopIteration):
                return
            self.samples.append((time.monotonic() - self.started_at, kb * 1024))

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def first_visible(table: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row numbers, produce times in µs, visibility times in µs) of every row of the files the
    table's log added with ``dataChange`` (a write, not a compaction's rewrite); a file is
    visible from the modification time of the log entry that added it."""
    seqs, produced, visible = [], [], []
    for entry in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        seen_us = os.stat(entry).st_mtime_ns // 1000
        with open(entry) as f:
            for line in f:
                add = json.loads(line).get("add")
                if not add or not add.get("dataChange", True):
                    continue
                part = pq.read_table(os.path.join(table, add["path"]), columns=[SEQ, PRODUCED])
                seqs.append(part[SEQ].to_numpy())
                produced.append(part[PRODUCED].to_numpy())
                visible.append(np.full(part.num_rows, seen_us, dtype=np.int64))
    if not seqs:
        return (np.empty(0, np.int64),) * 3  # type: ignore[return-value]
    return np.concatenate(seqs), np.concatenate(produced), np.concatenate(visible)


def committed(table: str) -> bool:
    """Whether the table has a version (its log folder comes before its first commit file)."""
    return bool(glob.glob(os.path.join(table, "_delta_log", "*.json")))


def _wait(condition: Any, what: str, timeout_s: float = _WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise CheckFailed(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(0.5)


def run_arm(
    broker: Broker,
    *,
    name: str,
    topics: int,
    partitions: int,
    rate: int,
    duration_s: float,
    batch_s: float,
    latency_s: float,
    extra: list[str],
    checks: Checks,
    workdir: str,
) -> dict[str, Any]:
    import psutil

    prefix = f"fleet-load-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i:02d}" for i in range(topics)]
    for topic in names:
        broker.create_topic(topic, partitions)
    lake = os.path.join(workdir, name.replace(" ", "-"))
    os.makedirs(lake)
    tables = {t: os.path.join(lake, t) for t in names}
    cmd = [sys.executable, "-m", "benchmarks.named_threads", "parka.cli", "ingest"]
    if topics > 1:
        cmd += ["--topics-regex", f"{prefix}-.*", os.path.join(lake, "{topic}")]
    else:
        cmd += [names[0], tables[names[0]]]
    cmd += ["-k", broker.bootstrap, "-l", f"{latency_s:g}", *extra]
    log_path = os.path.join(workdir, f"{name.replace(' ', '-')}.log")
    ds = load("flights", 100_000)
    shared = ParquetProducer(
        {
            "bootstrap.servers": broker.bootstrap,
            "columnar.encoding": "parquet",
            "columnar.encoding.compression": "zstd",
            "columnar.batch.records": SEGMENT_ROWS,
            "allow.auto.create.topics": False,
        }
    )
    producers = [PacedProducer(broker.bootstrap, t, ds, partitions, producer=shared, keep_sent=False) for t in names]
    with open(log_path, "wb") as out:
        daemon = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        proc = psutil.Process(daemon.pid)
        rss = RssSampler(daemon.pid)
        rss.start()
        for producer in producers:
            producer.send(WARMUP_ROWS_PER_PARTITION * partitions)
        shared.flush(60)
        _wait(lambda: all(committed(t) for t in tables.values()), "every table to be made")
        cpu0, wall0, threads0 = process_cpu_s(proc), time.monotonic(), thread_cpu_s(daemon.pid)
        log.info("%s: %d tables made; %d rows/s for %.0f s", name, topics, rate, duration_s)
        achieved = paced(producers, rate // topics, duration_s, batch_s)
        left = shared.flush(120)
        if left:
            raise CheckFailed(f"{name}: {left} segments not delivered")
        sent = {p.topic: p.sent for p in producers}
        _wait(lambda: all(table_rows(tables[t]) >= n for t, n in sent.items()), "every table to hold every row")
        cpu, wall = process_cpu_s(proc) - cpu0, time.monotonic() - wall0
        threads = thread_cpu_s(daemon.pid)
        threads.subtract(threads0)
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(120)
        rss.stop()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    if code != 0:
        raise CheckFailed(f"{name}: the daemon exited {code} on SIGTERM (log {log_path})")
    per_topic: dict[str, Any] = {}
    everyone = []
    for topic, table in tables.items():
        seq, produced, visible = first_visible(table)
        n = sent[topic]
        if len(seq) != n or not np.array_equal(np.sort(seq), np.arange(n)):
            raise CheckFailed(f"{name}: {topic}'s table holds {len(seq):,} rows first written, not 0..{n - 1} once")
        keep = seq >= WARMUP_ROWS_PER_PARTITION * partitions  # the warm-up's rows were produced before the run
        latency = latencies_s(seq[keep], produced[keep], visible[keep])
        per_topic[topic] = percentiles(latency)
        everyone.append(latency)
        checks.passed_elsewhere(f"{name}: {topic}'s table holds rows 0..{n - 1} once each", rows=n)
    p99s = [v["p99"] for v in per_topic.values()]
    return {
        "topics": topics,
        "partitions": partitions,
        "rows_per_s_asked": rate,
        "produced": achieved,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_us_per_row": cpu / achieved["rows"] * 1e6,
        "p99_s_largest_topic": max(p99s),
        "p99_s_median_topic": float(np.median(p99s)),
        "all_rows": percentiles(np.concatenate(everyone)),
        "per_topic": per_topic,
        "rss_bytes": rss.samples,
        "rss_bytes_max": max((b for _, b in rss.samples), default=0),
        "threads_cpu_s": {k: round(v, 2) for k, v in threads.most_common()},
        "command": " ".join(cmd[1:]),
    }


def run(broker: Broker, args: argparse.Namespace, checks: Checks, workdir: str) -> dict[str, Any]:
    common = {
        "partitions": args.partitions,
        "rate": args.rate,
        "duration_s": args.duration,
        "batch_s": args.batch_ms / 1000,
        "latency_s": args.latency,
        "extra": args.ingest_arg,
        "checks": checks,
        "workdir": workdir,
    }
    arms = {}
    if "one" in args.arms:
        arms["one topic"] = run_arm(broker, name="one topic", topics=1, **common)
    if "wide" in args.arms:
        wide = {**common, "partitions": args.topics * args.partitions}
        arms["wide topic"] = run_arm(broker, name="wide topic", topics=1, **wide)
    if "fleet" in args.arms:
        arms["fleet"] = run_arm(broker, name="fleet", topics=args.topics, **common)
    for other in ("one topic", "wide topic"):
        if "fleet" in arms and other in arms:
            ratio = arms["fleet"]["cpu_us_per_row"] / arms[other]["cpu_us_per_row"]
            arms["fleet"][f"cpu_per_row_against_{other.replace(' ', '_')}"] = ratio
    return {"arms": arms, "batch_ms": args.batch_ms, "latency_s": args.latency, "ingest_args": args.ingest_arg}


def report(doc: dict[str, Any]) -> str:
    r = doc["load"]
    lines = [
        f"# One daemon of many topics under load ({doc['command']})",
        "",
        f"The rate asked in all, a batch every {r['batch_ms']} ms, `-l {r['latency_s']:g}`"
        f"{''.join(' ' + a for a in r.get('ingest_args', []))}; one run of each arm.",
        "",
        "| arm | topics x partitions | rows/s achieved | CPU µs/row | p99 produce-to-visible, largest topic (s) |"
        " p99, median topic (s) | peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, a in r["arms"].items():
        lines.append(
            f"| {name} | {a['topics']} x {a['partitions']} | {a['produced']['rows_per_s']:,.0f} "
            f"| {a['cpu_us_per_row']:.2f} | {a['p99_s_largest_topic']:.2f} | {a['p99_s_median_topic']:.2f} "
            f"| {a['rss_bytes_max'] / 2**20:.0f} |"
        )
    fleet = r["arms"].get("fleet", {})
    lines.append("")
    for other in ("one topic", "wide topic"):
        ratio = fleet.get(f"cpu_per_row_against_{other.replace(' ', '_')}")
        if ratio is not None:
            lines.append(f"CPU per row, fleet against the {other}: {ratio:.2f}x")
    kinds = sorted({k for a in r["arms"].values() for k in a.get("threads_cpu_s", {})})
    if kinds:
        arms = [a for a in r["arms"].values() if "threads_cpu_s" in a]
        top = sorted(kinds, key=lambda k: -max(a["threads_cpu_s"].get(k, 0) / a["cpu_s"] for a in arms))
        names = [n for n, a in r["arms"].items() if "threads_cpu_s" in a]
        lines += [
            "",
            "The daemon's CPU by thread (OS thread names, digits folded; share of the arm's CPU in its window;"
            " `python` is the main thread, a one-topic daemon's loop; a fleet's loops are its `parka-lane`s):",
            "",
            "| threads | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for kind in top:
            shares = [a["threads_cpu_s"].get(kind, 0) / a["cpu_s"] for a in arms]
            if max(shares) >= 0.005:
                lines.append(f"| `{kind}` | " + " | ".join(f"{v:.1%}" for v in shares) + " |")
    return "\n".join(lines) + "\n"


ARMS = ("one", "wide", "fleet")


def _arms(value: str) -> set[str]:
    """``--arms``: names of :data:`ARMS`, comma-separated."""
    names = set(value.split(","))
    if not names <= set(ARMS):
        raise argparse.ArgumentTypeError(f"unknown arm(s) {', '.join(sorted(names - set(ARMS)))}: of {','.join(ARMS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--topics", type=int, default=50)
        parser.add_argument("--partitions", type=int, default=4)
        parser.add_argument("--rate", type=int, default=100_000, help="rows/s in all")
        parser.add_argument("--duration", type=float, default=300.0)
        parser.add_argument("--batch-ms", type=int, default=100)
        parser.add_argument("--latency", type=float, default=1.0)
        parser.add_argument(
            "--arms",
            type=_arms,
            default=set(ARMS),
            help="the arms to run, some of one,wide,fleet (all three by default)",
        )
        parser.add_argument(
            "--ingest-arg", action="append", default=[], help="a flag added to every arm's daemon (repeatable)"
        )

    return run_benchmark(
        "benchmarks.fleet_load",
        argv,
        description=__doc__,
        out="bench-out/fleet-load",
        repeats=1,
        key="load",
        run=run,
        report=report,
        arguments=arguments,
    )


if __name__ == "__main__":
    sys.exit(main())
