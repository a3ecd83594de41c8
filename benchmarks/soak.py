"""Soak: weeks of a ``parka ingest`` daemon's history in an afternoon, and whether anything grows.

A daemon's history stops growing once its table is older than its retentions: VACUUM deletes the
files removed longer ago than ``delta.deletedFileRetentionDuration``, the log cleanup the commits
older than ``delta.logRetentionDuration``, and compaction in tiers keeps the live files near the
table's bytes over the target size. ``parka ingest`` gives the tables it creates one hour of both,
so a month is some 720 turns of that hour. This benchmark runs those turns faster: the daemon
commits every ``--allowed-latency`` seconds (0.1: ten times ``-l 1``'s rate), with both retentions
set to ``--retention`` seconds (``--table-retention``) and VACUUM every ``--retention`` / 6 seconds
(600 s of an hour, the daemon's default), so **one retention window is one simulated hour**: at
``--retention 12``, 300 simulated hours per real one.

What that does not scale: a real hour at ``-l 1`` holds 3,600 versions inside the retention, a
simulated one ``--retention`` / ``--allowed-latency`` (120 at the defaults); and the table's bytes
grow with the real rows produced. So the run shows whether the log, the files on disk, the
checkpoint and the commit stay flat over hundreds of retention windows; a real hour's log, 30
times longer, is what ``benchmarks.tombstones`` measures (a checkpoint's time by the removes it
carries).

Steps: a topic of ``--partitions`` partitions; ``parka ingest TOPIC TABLE -l LATENCY
--table-retention R --vacuum-every R/6 --metrics-port PORT`` (background compaction in tiers and
checkpoints at their defaults); a warm-up; then a :class:`~benchmarks.freshness.PacedProducer`
(flights rows, ``bench_seq`` and ``bench_produced_at_us``) at ``--rate`` rows/s for ``--duration``
seconds. Every ``--retention`` seconds (one simulated hour) the sampler records:

- **commits** (table versions first seen by this process's poller, which refreshes the table every
  ``--poll-ms``), the daemon's **CPU-ms per commit** (psutil, all its threads, over the window),
  and from its metrics endpoint the **mean commit latency** and the **mean checkpoint time**
  (``parka_commit_latency_seconds`` and ``parka_checkpoint_seconds``: sum over count in the window);
- **p99 produce-to-visible** of the rows first visible in the window (a row's produce time is its
  slot in the pacing schedule; visible when the poller first saw a version with a file holding it;
  the poller reads each added file's two columns as soon as it sees it, before VACUUM can take it);
- **table open**: a new ``deltalake.DeltaTable`` of the current version (the median of 3), and
  every ``--spark-every`` windows delta-spark's (a Spark session in a child process, started
  before the run: ``DeltaLog.clearCache()``, then the table's schema; the median of 3);
- the **live data files**, the **files and bytes on disk** (data files, removed ones included) and
  the **log's** (``_delta_log/``), and the daemon's **RSS**.

At the end: the table holds every produced row exactly once (``bench_seq``), the daemon stops on
SIGTERM with exit 0, and DuckDB scans the table against the same rows written compact (the row
baseline's 128 MiB files: :func:`benchmarks.freshness._scans`, the median of paired per-round
ratios). Writes ``results.json``, ``report.md`` and ``soak.png`` into ``--out``::

    python -m benchmarks.soak --bootstrap 127.0.0.1:9092 --rate 2000 --duration 2100 --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from .broker import Broker
from .checks import CheckFailed
from .datasets import load
from .freshness import _SCAN_WARMUPS, PRODUCED, SEQ, WARMUP_ROWS_PER_PARTITION, PacedProducer, PollThread, _scans
from .machine import machine_info
from .measure import process_cpu_s
from .report import save_run

__all__ = ["main", "summary"]

_WAIT_S = 300.0
SPAN = 10  # simulated hours at the start and at the end that summary() compares
MEASURES = (
    "cpu_ms_per_commit",
    "commit_latency_mean_s",
    "checkpoint_mean_s",
    "p99_visible_s",
    "open_s",
    "open_delta_spark_s",
    "live_files",
    "data_files",
    "data_bytes",
    "log_files",
    "log_bytes",
    "rss_bytes",
)
_HOUR_S = 3600.0  # one simulated hour is one retention window: parka's default retention


@dataclass(frozen=True)
class State:
    """What a poll saw: the table's version (Delta's, or Iceberg's last sequence number), its live
    data files (local paths) and rows."""

    version: int
    files: frozenset[str]
    rows: int


class DeltaSoak:
    """The Delta table at ``path``."""

    kind = "delta"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._table: DeltaTable | None = None

    def ingest_args(self, retention_s: int) -> list[str]:
        return [str(self.path), "--table-retention", str(retention_s), "--vacuum-every", f"{retention_s / 6:g}"]

    def after_warmup(self, retention_s: int) -> None:
        """Nothing: ``--table-retention`` gave the table its retentions when it was created."""

    def poll(self) -> State | None:
        if self._table is None:
            try:
                self._table = DeltaTable(str(self.path))
            except TableNotFoundError:
                return None
        else:
            self._table.update_incremental()
        t = self._table
        rows = pa.table(t.get_add_actions(flatten=True))["num_records"].to_pylist()
        return State(t.version(), frozenset(t.file_uris()), int(sum(rows)))

    def open_s(self) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            DeltaTable(str(self.path))
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    def disk(self) -> dict[str, int]:
        files, size = _tree(self.path)
        log_files, log_bytes = _tree(self.path / "_delta_log")
        return {
            "data_files": files - log_files,
            "data_bytes": size - log_bytes,
            "log_files": log_files,
            "log_bytes": log_bytes,
        }


class IcebergSoak:
    """The Iceberg table ``soak.t`` of the embedded catalog (pyiceberg's SQL catalog) in
    ``warehouse``. Its snapshot retention (``history.expire.max-snapshot-age-ms``) is set after
    the warm-up created the table; its "log" is the metadata folder (metadata files, manifest
    lists, manifests); its table open is pyiceberg's: the catalog's table, then its scan's files."""

    kind = "iceberg"
    identifier = "soak.t"

    def __init__(self, warehouse: Path) -> None:
        from pyiceberg.catalog import load_catalog

        self.warehouse = warehouse
        warehouse.mkdir(parents=True, exist_ok=True)
        self.properties = {
            "type": "sql",
            "uri": f"sqlite:///{warehouse}/catalog.db",
            "warehouse": f"file://{warehouse}",
        }
        self._catalog = load_catalog("soak", **self.properties)
        self._poll_catalog = load_catalog("soak", **self.properties)  # the poller's thread's own

    @property
    def path(self) -> Path:
        return self.warehouse / "soak" / "t"

    def ingest_args(self, retention_s: int) -> list[str]:
        return [self.identifier, "--catalog", "soak", "--catalog-option", f"warehouse={self.warehouse}"]

    def after_warmup(self, retention_s: int) -> None:
        with self._catalog.load_table(self.identifier).transaction() as tx:
            tx.set_properties({"history.expire.max-snapshot-age-ms": str(retention_s * 1000)})

    def poll(self) -> State | None:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            table = self._poll_catalog.load_table(self.identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        tasks = table.scan().plan_files() if table.current_snapshot() is not None else []
        files = frozenset(t.file.file_path.removeprefix("file://") for t in tasks)
        return State(table.metadata.last_sequence_number, files, sum(t.file.record_count for t in tasks))

    def open_s(self) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            self._catalog.load_table(self.identifier).scan().plan_files()
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    def disk(self) -> dict[str, int]:
        files, size = _tree(self.path / "data")
        log_files, log_bytes = _tree(self.path / "metadata")
        return {"data_files": files, "data_bytes": size, "log_files": log_files, "log_bytes": log_bytes}


Target = DeltaSoak | IcebergSoak


@dataclass
class Poller(PollThread):
    """Refreshes the table every ``interval_s`` on a thread. For each new version it reads the
    ``bench_seq`` and produce-time columns of the files it added, and keeps the latency of each
    row the first time it is seen (``pending``, drained by the sampler)."""

    target: Target
    interval_s: float
    capacity: int
    version: int = -1
    _drained: int = -1
    live_files: int = 0
    rows: int = 0
    unread: int = 0
    error: BaseException | None = None
    pending: list[np.ndarray] = field(default_factory=list)
    _seen: np.ndarray = field(init=False)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self._seen = np.zeros(self.capacity, dtype=bool)
        self._what = str(self.target.path)

    def drain(self) -> tuple[int, np.ndarray]:
        """The versions seen and the latencies (s) of the rows first seen since the last drain."""
        with self._lock:
            versions, lat = self.version - self._drained, self.pending
            self._drained, self.pending = self.version, []
        return versions, (np.concatenate(lat) if lat else np.zeros(0))

    def _loop(self) -> None:
        files: frozenset[str] = frozenset()
        while not self._stop.is_set():
            started = time.perf_counter()
            state = self.target.poll()
            seen_us = time.time_ns() // 1000
            if state is not None and state.version != self.version:
                lat = [self._first_seen(path, seen_us) for path in state.files - files]
                with self._lock:
                    self.pending.extend(x for x in lat if x is not None)
                    self.version = state.version
                files = state.files
                self.live_files, self.rows = len(files), state.rows
            self._stop.wait(max(0.0, self.interval_s - (time.perf_counter() - started)))

    def _first_seen(self, path: str, seen_us: int) -> np.ndarray | None:
        try:
            part = pq.read_table(path, columns=[SEQ, PRODUCED])
        except FileNotFoundError:  # vacuumed before this poll: its rows were seen in another file
            self.unread += 1
            return None
        seq, produced = part[SEQ].to_numpy(), part[PRODUCED].to_numpy()
        new = ~self._seen[seq]
        self._seen[seq[new]] = True
        return (seen_us - produced[new]) / 1e6


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    """The daemon's metrics endpoint: each sample's value by its name (the topic label dropped)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"^(parka_\w+)(\{[^}]*\})?\s+(\S+)$", line)
        if match and "le=" not in (match.group(2) or ""):
            out[match.group(1)] = float(match.group(3))
    return out


def _tree(folder: Path) -> tuple[int, int]:
    """Files and bytes under ``folder``."""
    count = size = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                size += os.stat(os.path.join(root, name)).st_size
                count += 1
            except FileNotFoundError:  # VACUUM's, between the walk and the stat
                pass
    return count, size


_SPARK_CHILD = """
import json, statistics, sys, time
from parka.spark_ext import session
spark = session("local[1]", "soak-opens", extra_conf={"spark.ui.enabled": "false",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC"})
log = spark._jvm.org.apache.spark.sql.delta.DeltaLog
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    times = []
    for _ in range(3):
        log.clearCache()
        started = time.perf_counter()
        spark.read.format("delta").load(line.strip()).schema
        times.append(time.perf_counter() - started)
    print(json.dumps({"open_s": statistics.median(times)}), flush=True)
"""


class SparkOpens:
    """A Spark session in a child process that times delta-spark's table open on request."""

    def __init__(self, log_path: str) -> None:
        self._log = open(log_path, "w")  # noqa: SIM115 - open for the child's life, closed by close()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SPARK_CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                return dict(json.loads(line))
        raise CheckFailed(f"the Spark child exited {self.proc.wait()} (see {self._log.name})")

    def open_s(self, uri: str) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(uri + "\n")
        self.proc.stdin.flush()
        return float(self._read()["open_s"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=120)
        self._log.close()


def _p99(lat: np.ndarray) -> float | None:
    return float(np.percentile(lat, 99)) if len(lat) else None


def summary(windows: list[dict[str, Any]], span: int = SPAN) -> dict[str, Any]:
    """The start of the run against its end, per measure: the median of its per-hour values over
    simulated hours 2 to ``span`` + 1 (the first holds the table's creation and the warm-up) and
    over the last ``span`` hours, and the end's over the start's; and the largest value of the
    second half of the run over the largest of the first half's after hour 1 (flat: near 1)."""
    out: dict[str, Any] = {}
    for name in MEASURES:
        known = [(i, w[name]) for i, w in enumerate(windows) if w.get(name) is not None]
        start = [v for i, v in known if 1 <= i <= span]
        end = [v for i, v in known if i >= len(windows) - span]
        if not start or not end:
            continue
        half = len(windows) // 2
        early = [v for i, v in known if 1 <= i < half]
        late = [v for i, v in known if i >= half]
        first, last = statistics.median(start), statistics.median(end)
        out[name] = {
            "start": first,
            "end": last,
            "end_over_start": last / first if first else None,
            "late_max_over_early_max": max(late) / max(early) if early and late and max(early) else None,
        }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    broker = Broker(args.bootstrap, args.kafka_data_dir or tempfile.mkdtemp(prefix="parka-soak-nodir-"))
    ds = load("flights", None)
    topic = f"bench-soak-{uuid.uuid4().hex[:8]}"
    work = Path(tempfile.mkdtemp(prefix="parka-soak-"))
    target: Target = IcebergSoak(work / "warehouse") if args.iceberg else DeltaSoak(work / "table")
    broker.create_topic(topic, args.partitions)
    port = _free_port()
    command = [sys.executable, "-m", "parka.cli", "ingest", topic, *target.ingest_args(args.retention)]
    command += ["-k", args.bootstrap, "-l", f"{args.allowed_latency:g}", "--metrics-port", str(port), *args.ingest_arg]
    out = Path(args.out)
    rows_expected = int(args.rate * args.duration) + WARMUP_ROWS_PER_PARTITION * args.partitions
    poller = Poller(target, args.poll_ms / 1000, capacity=rows_expected + 10 * args.partitions * 10_000)
    spark = None if args.spark_every == 0 or args.iceberg else SparkOpens(str(out / "spark-opens.log"))
    producer = PacedProducer(args.bootstrap, topic, ds, args.partitions)
    windows: list[dict[str, Any]] = []
    with open(out / "ingest.log", "w") as log:
        daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    import psutil  # the bench extra

    proc = psutil.Process(daemon.pid)
    try:
        poller.start()
        producer.send(WARMUP_ROWS_PER_PARTITION * args.partitions)
        producer.producer.flush(60)
        poller.wait_rows(producer.sent, _WAIT_S, f"{topic} warm-up (see {out / 'ingest.log'})", writer=daemon)
        target.after_warmup(args.retention)
        poller.drain()
        paced: dict[str, Any] = {}
        thread = threading.Thread(
            target=lambda: paced.update(producer.paced(args.rate, args.duration, 0.1)), name="soak-producer"
        )
        started = time.monotonic()
        thread.start()
        cpu, metrics = process_cpu_s(proc), _scrape(port)
        # whole simulated hours only: the producer's last seconds, if any, are no hour's
        for index in range(1, max(1, int(args.duration // args.retention)) + 1):
            time.sleep(max(0.0, started + index * args.retention - time.monotonic()))
            if daemon.poll() is not None:
                raise CheckFailed(f"parka ingest exited {daemon.returncode} (see {out / 'ingest.log'})")
            producer.sent_tables.clear()  # the rows are checked by bench_seq, not kept
            commits, lat = poller.drain()
            cpu_now, now = process_cpu_s(proc), _scrape(port)

            def mean(name: str, now: dict[str, float] = now, before: dict[str, float] = metrics) -> float | None:
                count = now.get(f"{name}_count", 0) - before.get(f"{name}_count", 0)
                return (now.get(f"{name}_sum", 0) - before.get(f"{name}_sum", 0)) / count if count else None

            window = {
                "simulated_hour": index,
                "elapsed_s": time.monotonic() - started,
                "commits": commits,
                "cpu_ms_per_commit": (cpu_now - cpu) * 1000 / commits if commits else None,
                "commit_latency_mean_s": mean("parka_commit_latency_seconds"),
                "checkpoints": now.get("parka_checkpoint_seconds_count", 0)
                - metrics.get("parka_checkpoint_seconds_count", 0),
                "checkpoint_mean_s": mean("parka_checkpoint_seconds"),
                "rows_visible": len(lat),
                "p99_visible_s": _p99(lat),
                "open_s": target.open_s(),
                "open_delta_spark_s": spark.open_s(str(target.path))
                if spark and (index - 1) % args.spark_every == 0
                else None,
                "live_files": poller.live_files,
                **target.disk(),
                "rss_bytes": proc.memory_info().rss,
                "vacuums": now.get("parka_vacuums_total", 0),
                "files_vacuumed": now.get("parka_files_vacuumed_total", 0),
                "compactions": now.get("parka_compactions_total", 0),
            }
            windows.append(window)
            cpu, metrics = cpu_now, now
            print(json.dumps({k: v for k, v in window.items() if k in _SHOWN}), flush=True)
        thread.join()
        if spark is not None:
            windows[-1]["open_delta_spark_s"] = spark.open_s(str(target.path))
        stats = producer.flush()
        poller.wait_rows(producer.sent, _WAIT_S, topic)
        daemon.send_signal(signal.SIGTERM)
        exit_code = daemon.wait(timeout=120)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        poller.stop()
        if spark is not None:
            spark.close()
    if exit_code != 0:
        raise CheckFailed(f"parka ingest exited {exit_code} on SIGTERM (see {out / 'ingest.log'})")
    final = target.poll()
    assert final is not None
    seq = pa.concat_arrays(
        [pq.read_table(path, columns=[SEQ])[SEQ].combine_chunks() for path in final.files]
    ).to_numpy()
    if len(seq) != producer.sent or len(np.unique(seq)) != producer.sent:
        raise CheckFailed(
            f"{topic}: {len(seq):,} rows ({len(np.unique(seq)):,} distinct) in the table, {producer.sent:,} produced"
        )
    # DuckDB against the same rows compact: Delta's (the freshness benchmark's scans)
    scans = (
        []
        if isinstance(target, IcebergSoak)
        else _scans(
            str(target.path),
            {"end": final.version},
            ds,
            str(work),
            repeats=args.scan_repeats,
            seed=1,
            spark_log=None,
            spark_timeout_s=900.0,
        )
    )
    shutil.rmtree(work, ignore_errors=True)
    broker.delete_topics([topic])
    scale = _HOUR_S / args.retention
    return {
        "machine": machine_info(broker),
        "command": ["python", "-m", "benchmarks.soak", *args.argv],
        "settings": {
            "rate_rows_per_s": args.rate,
            "partitions": args.partitions,
            "duration_s": args.duration,
            "allowed_latency_s": args.allowed_latency,
            "retention_s": args.retention,
            "table": target.kind,
            "simulated_hours_per_real_hour": scale,
            "ingest": ["python", "-m", "parka.cli", *command[3:]],
            "scan_warmups": _SCAN_WARMUPS,
        },
        "produced": {**paced, "rows": producer.sent, "producer_stats": stats},
        "windows": windows,
        "summary": summary(windows),
        "poller_unread_files": poller.unread,
        "final": {"version": final.version, "rows": len(seq), "exit_code": exit_code},
        "scans": scans,
    }


_SHOWN = (
    "simulated_hour",
    "commits",
    "cpu_ms_per_commit",
    "p99_visible_s",
    "open_s",
    "live_files",
    "data_files",
    "log_files",
    "rss_bytes",
)


def render(results: dict[str, Any]) -> str:
    s = results["settings"]
    lines = [
        "# Soak: parka ingest over simulated hours",
        "",
        f"`{' '.join(results['command'])}`",
        "",
        f"{s['rate_rows_per_s']:,} rows/s into {s['partitions']} partitions, `-l {s['allowed_latency_s']:g}`, "
        f"a {s.get('table', 'delta')} table with retentions of {s['retention_s']} s (one simulated hour); "
        f"{len(results['windows'])} simulated hours in {s['duration_s']:.0f} s. The table ended at version "
        f"{results['final']['version']:,} with {results['final']['rows']:,} rows, each once.",
        "",
        f"| measure (per simulated hour) | hours 2-{SPAN + 1} (median) | last {SPAN} hours (median) | end / start "
        "| max of 2nd half / max of 1st half (after hour 1) |",
        "|---|---|---|---|---|",
    ]
    for name, row in results["summary"].items():
        ratio = row["end_over_start"]
        flat = row["late_max_over_early_max"]
        lines.append(
            f"| {name} | {row['start']:.4g} | {row['end']:.4g} | "
            f"{'' if ratio is None else f'{ratio:.2f}'} | {'' if flat is None else f'{flat:.2f}'} |"
        )
    for scan in results["scans"]:
        r = scan["duckdb_ratio"]
        lines += ["", f"DuckDB scan over the same rows compact (median of paired per-round ratios): {r['median']:.2f}x"]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: str) -> None:
    from .plots import _pyplot

    plt = _pyplot()
    panels = [
        ("cpu_ms_per_commit", "daemon CPU-ms per commit"),
        ("commit_latency_mean_s", "mean commit latency (s)"),
        ("checkpoint_mean_s", "mean checkpoint time (s)"),
        ("p99_visible_s", "p99 produce-to-visible (s)"),
        ("open_s", "table open, deltalake or pyiceberg (s, median of 3)"),
        ("open_delta_spark_s", "table open, delta-spark (s, median of 3; Delta only)"),
        ("live_files", "live data files"),
        ("data_files", "data files on disk"),
        ("log_bytes", "log bytes (_delta_log/, or metadata/ of Iceberg)"),
        ("rss_bytes", "daemon RSS (bytes)"),
    ]
    fig, axes = plt.subplots(5, 2, figsize=(11, 16))
    windows = results["windows"]
    for ax, (name, title) in zip(axes.flat, panels, strict=True):
        points = [(w["simulated_hour"], w[name]) for w in windows if w.get(name) is not None]
        if points:
            ax.plot(*zip(*points, strict=True), marker="." if name == "open_delta_spark_s" else None)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("simulated hour")
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--kafka-data-dir", help="the broker's log dir (for the machine section's Kafka version)")
    parser.add_argument("--rate", type=int, default=2000, help="rows/s")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--duration", type=float, default=2100.0, help="seconds of producing")
    parser.add_argument("--allowed-latency", type=float, default=0.1, help="parka ingest -l (seconds)")
    parser.add_argument("--retention", type=int, default=12, help="the table's retentions (s): one simulated hour")
    parser.add_argument("--poll-ms", type=float, default=200.0)
    parser.add_argument("--spark-every", type=int, default=10, help="delta-spark's open every N windows; 0: never")
    parser.add_argument("--scan-repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="60 s, no Spark, 3 scan rounds")
    parser.add_argument("--iceberg", action="store_true", help="an Iceberg table of the embedded catalog")
    parser.add_argument("--ingest-arg", action="append", default=[], help="one more argument of parka ingest")
    parser.add_argument("--out", default="bench-out/soak")
    parser.add_argument("--render", metavar="RESULTS", help="only summarise and plot an earlier run's results.json")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.quick:
        args.duration, args.spark_every, args.scan_repeats = 60.0, 0, 3
    os.makedirs(args.out, exist_ok=True)
    if args.render:
        with open(args.render) as f:
            results = json.load(f)
        for window in results["windows"]:  # the first run's name of the measure
            if "open_deltalake_s" in window:
                window["open_s"] = window.pop("open_deltalake_s")
        # the first run also sampled the producer's last seconds as an hour of their own
        settings = results["settings"]
        limit = settings["duration_s"] + settings["retention_s"] / 2
        results["windows"] = [w for w in results["windows"] if w["elapsed_s"] <= limit]
        results["summary"] = summary(results["windows"])
    else:
        results = run(args)
    plot(results, os.path.join(args.out, "soak.png"))
    save_run(args.out, results, render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
