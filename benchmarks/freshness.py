"""Freshness: how soon produced rows can be read from the Delta table ``parka ingest`` keeps, and
what the table looks like for its readers while it does.

For each producer rate of ``--rates`` (rows/s; ``max``: as fast as the producer goes), into a
fresh topic of ``--partitions`` partitions and a fresh table:

1. ``parka ingest TOPIC TABLE -k BOOTSTRAP -l LATENCY`` runs as a subprocess (``python -m
   parka.cli ingest``, a daemon with default settings but the allowed latency, background
   compaction included, and any ``--ingest-arg``) for the whole run; its final counters
   (compactions, files compacted) are recorded.
2. A warm-up (1,000 rows per partition) creates the table; the run starts once the poller sees
   it, so neither the group join nor the table's creation is billed to the paced rows.
3. A ``ParquetProducer`` (zstd, 10,000 rows per segment at most) produces the flights rows
   (cycled) for ``--duration`` seconds, paced: every ``--batch-ms`` (100, ``linger.ms``'s
   default) it hands the rows due by then (rate x elapsed time) to ``produce_batch``, split
   evenly over the partitions, so each partition gets one segment per 100 ms, as ``produce()``
   per record with ``linger.ms=100`` would cut them, without a Python call per row.
   ``produce_batch`` sends at once. Two columns are added to the data set's: ``bench_seq`` (the
   row's number, unique) and ``bench_produced_at_us``, **a row's produce time: its slot in the
   pacing schedule** (epoch µs; row *i* of the run at start + *i* / rate), so the wait for its
   batch and any lag of the producer behind the schedule count in its latency; at ``max`` (no
   schedule) and in the warm-up, the wall clock when its ``produce_batch`` call started. The
   achieved rate is measured (rows / the seconds from the first call's start to the last's end),
   never assumed. ``max`` stops after 10M rows (:data:`MAX_RATE_ROWS`) if ``--duration`` has not
   passed by then: the checks and the row baselines hold the rows in memory.
4. A poller thread in this process refreshes the table every ``--poll-ms`` (deltalake
   ``update_incremental``) and records when it first saw each version (the wall clock when the
   refresh returned) and the files that version added. A row's **produce-to-visible latency** is
   the time its file's version was first seen minus its produce time (the earliest such time
   when a row is in several files, as after a compaction). The poll interval bounds the error
   (latencies are overstated by up to one interval, never understated).
5. After the last row is produced and flushed, the run waits until the table holds every row,
   reads the ingest process's CPU time (psutil, all its threads) and stops it with SIGTERM.

Reported per rate: p50 and p99 of the per-row latencies (numpy's linear percentile; one
statistic per figure), the table's files and Parquet row groups at the end and versions, each
scaled per hour of the paced run; **write amplification** = bytes of every Parquet file in the
table's directory (removed ones included: any rewrite counts) / bytes of the segments the
producer delivered; **CPU per row** of the ingest process between the warm-up's visibility and
the last row's (µs/row); and the **scan ratio** against the row baseline's table at
``--scan-points`` (fractions of the run: the table's version first seen at that time, read by
time travel, so the scans run after the run and do not disturb it): the same rows written as
the row baseline writes them (:func:`benchmarks.lake.row_baseline_table`, kafka-delta-ingest's
128 MiB files), both scanned with DuckDB (:class:`benchmarks.scans.DuckDbScanner`) in
:func:`benchmarks.scans.rounds`, and the median of the paired per-round ratios
(:func:`benchmarks.measure.paired_ratio`). Checks: the table ends with exactly the produced rows
(count, every ``bench_seq`` once, exact column sums), and every scan of both tables gives the
same groups. At the end point the two tables are also scanned with Spark
(:func:`benchmarks.scans.spark_child_main` in a child process, one session, ``--no-spark`` to
skip), the same rounds and statistic.

Writes ``results.json``, ``report.md`` and ``freshness.png`` into ``--out``::

    python -m benchmarks.freshness --bootstrap 127.0.0.1:9092 --rates 10000,100000 \\
        --partitions 4 --duration 60 --out DIR
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from parka.producer import ParquetProducer

from .broker import Broker
from .checks import CheckFailed, column_sums
from .clients import produce_with_backpressure
from .datasets import Dataset, load
from .lake import row_baseline_table, table_shape
from .machine import machine_info
from .measure import paired_ratio, process_cpu_s
from .plots import write_plots
from .report import render_freshness, save_run
from .scans import ENGINES, SPARK_MARK, DuckDbScanner, from_json, rounds, same_groups
from .spark import child_json

__all__ = [
    "PacedProducer",
    "PollThread",
    "latencies_s",
    "main",
    "paced",
    "per_hour",
    "percentiles",
    "run_rate",
    "version_at",
]

SEQ, PRODUCED = "bench_seq", "bench_produced_at_us"
WARMUP_ROWS_PER_PARTITION = 1_000
SEGMENT_ROWS = 10_000
_MAX_ROWS_PER_CALL = 10_000
# "max" stops here even before --duration: the checks and the baselines hold the rows in memory
# (52M flight rows, about 60 s on the dev machine, took 12 GB before the checks began)
MAX_RATE_ROWS = 10_000_000
_WAIT_S = 300.0
_SCAN_WARMUPS = 1  # unmeasured scan rounds per point (page cache, DuckDB's connection)


# -- pure parts ---------------------------------------------------------------------------------


def latencies_s(seq: np.ndarray, produced_us: np.ndarray, visible_us: np.ndarray) -> np.ndarray:
    """Per distinct row (``seq``), seconds from its produce time to the first time a file holding
    it was seen in the table. The three arrays are parallel, one entry per row occurrence in a
    file; a row that occurs in several files (rewritten by a compaction) counts once, at its
    earliest visibility. Raises ``ValueError`` when the arrays differ in length, when one row
    has two produce times, or when a row is visible before it was produced."""
    if not len(seq) == len(produced_us) == len(visible_us):
        raise ValueError(f"latencies_s: arrays of {len(seq)}, {len(produced_us)} and {len(visible_us)} entries")
    if len(seq) == 0:
        return np.empty(0, dtype=np.float64)
    order = np.lexsort((visible_us, seq))  # by row, earliest visibility first
    seq, produced_us, visible_us = seq[order], produced_us[order], visible_us[order]
    first = np.ones(len(seq), dtype=bool)
    first[1:] = seq[1:] != seq[:-1]
    starts = np.flatnonzero(first)
    if np.any(produced_us != np.repeat(produced_us[starts], np.diff(np.append(starts, len(seq))))):
        raise ValueError("latencies_s: a row occurs with two different produce times")
    latency = (visible_us[first] - produced_us[first]) / 1e6
    if np.any(latency < 0):
        raise ValueError(f"latencies_s: {int(np.sum(latency < 0))} rows visible before they were produced")
    return latency.astype(np.float64)


def percentiles(values: np.ndarray) -> dict[str, Any]:
    """p50, p99 and max of ``values`` (seconds; numpy's linear percentile), with their count;
    None for each figure when there are none."""
    if len(values) == 0:
        return {"unit": "s", "n": 0, "p50": None, "p99": None, "max": None}
    p50, p99 = np.percentile(values, [50, 99])
    return {"unit": "s", "n": len(values), "p50": float(p50), "p99": float(p99), "max": float(np.max(values))}


def per_hour(count: float, seconds: float) -> float:
    """``count`` over ``seconds`` scaled to one hour. Raises ``ValueError`` unless ``seconds`` > 0."""
    if not seconds > 0:
        raise ValueError(f"per_hour: the window must last more than 0 s, got {seconds}")
    return count * 3600.0 / seconds


def version_at(seen: Sequence[tuple[int, float]], at: float) -> int:
    """The newest version of ``seen`` ((version, first seen at), in version order) that was
    visible at time ``at``: the last one first seen at or before it (the first one when none was).
    Raises ``ValueError`` when ``seen`` is empty."""
    if not seen:
        raise ValueError("version_at: no versions were seen")
    chosen = seen[0][0]
    for version, seen_at in seen:
        if seen_at <= at:
            chosen = version
    return chosen


def parse_rates(text: str) -> list[int | None]:
    """``10000,100000,max`` -> [10000, 100000, None] (None: as fast as the producer goes).
    Raises ``ValueError`` naming a bad entry."""
    rates: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if part == "max":
            rates.append(None)
            continue
        try:
            rate = int(part)
        except ValueError:
            raise ValueError(f"--rates: {part!r} is neither a number of rows/s nor 'max'") from None
        if rate <= 0:
            raise ValueError(f"--rates: {rate} rows/s; a rate must be at least 1")
        rates.append(rate)
    return rates


# -- the poller -------------------------------------------------------------------------------


@dataclass
class Version:
    version: int
    seen_us: int
    added: dict[str, int]  # absolute file path -> bytes


class PollThread:
    """A table poller's thread: :meth:`_loop` runs on it until :meth:`stop`, which raises
    ``CheckFailed`` with what the loop raised, if anything. Subclasses (dataclasses) give
    ``_stop``, ``_thread``, ``error`` and :meth:`_loop`, and name their table in ``_what``."""

    _stop: threading.Event
    _thread: threading.Thread | None
    error: BaseException | None
    rows: int
    interval_s: float
    _what: str = "the table"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"{type(self).__name__}-thread", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self.error is not None:
            raise CheckFailed(f"the poller of {self._what} failed: {self.error!r}")

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _loop(self) -> None:
        raise NotImplementedError

    def wait_rows(self, rows: int, timeout_s: float, what: str, *, writer: Any = None) -> None:
        """Return once the table holds ``rows`` rows; raises ``CheckFailed`` after ``timeout_s``,
        or as soon as ``writer`` (a ``subprocess.Popen``) has exited."""
        deadline = time.monotonic() + timeout_s
        while self.rows < rows:
            gone = writer is not None and writer.poll() is not None
            if gone or self.error is not None or time.monotonic() > deadline:
                when = f"its writer exited {writer.returncode}" if gone else f"after {timeout_s:.0f} s"
                raise CheckFailed(f"{what}: the table holds {self.rows:,} rows ({when}), {rows:,} produced")
            time.sleep(self.interval_s)


@dataclass
class Poller(PollThread):
    """Refreshes the table every ``interval_s`` on a thread; records each version when first seen."""

    uri: str
    interval_s: float
    versions: list[Version] = field(default_factory=list)
    polls: int = 0
    max_gap_s: float = 0.0
    rows: int = 0
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self._what = self.uri

    def _loop(self) -> None:
        table: DeltaTable | None = None
        files: dict[str, int] = {}
        last = time.perf_counter()
        while not self._stop.is_set():
            if table is None:
                try:
                    table = DeltaTable(self.uri)
                except TableNotFoundError:
                    table = None
            else:
                table.update_incremental()
            seen_us = time.time_ns() // 1000
            now = time.perf_counter()
            self.polls += 1
            self.max_gap_s = max(self.max_gap_s, now - last) if self.polls > 1 else 0.0
            last = now
            if table is not None and (not self.versions or table.version() != self.versions[-1].version):
                adds = pa.table(table.get_add_actions(flatten=True))
                current = dict(zip(table.file_uris(), adds["size_bytes"].to_pylist(), strict=True))
                added = {path: size for path, size in current.items() if path not in files}
                self.versions.append(Version(table.version(), seen_us, added))
                self.rows = int(sum(adds["num_records"].to_pylist()))
                files = current
            self._stop.wait(max(0.0, self.interval_s - (time.perf_counter() - now)))


# -- the producer ----------------------------------------------------------------------------


class PacedProducer:
    """Flights rows (cycled) with ``bench_seq`` and ``bench_produced_at_us``, round-robin over
    partitions, with ``produce_batch``."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        ds: Dataset,
        partitions: int,
        *,
        producer: ParquetProducer | None = None,
        keep_sent: bool = True,
    ) -> None:
        """``producer``: one to share with other topics' (None: one of its own); ``keep_sent``:
        keep every row sent in :attr:`sent_tables` (for the checks), or only count them."""
        self.topic, self.ds, self.partitions, self.keep_sent = topic, ds, partitions, keep_sent
        self.schema = ds.table.schema.append(pa.field(SEQ, pa.int64(), False)).append(
            pa.field(PRODUCED, pa.int64(), False)
        )
        self.producer = producer or ParquetProducer(
            {
                "bootstrap.servers": bootstrap,
                "columnar.encoding": "parquet",
                "columnar.encoding.compression": "zstd",
                "columnar.batch.records": SEGMENT_ROWS,
                "allow.auto.create.topics": False,
            }
        )
        self.producer.set_schema(topic, self.schema)
        self.producer.list_topics(topic, timeout=30)
        self.sent = 0
        self.sent_tables: list[pa.Table] = []

    def send(self, rows: int, produced_us: np.ndarray | None = None) -> None:
        """Produce the next ``rows`` rows, split evenly over the partitions, with their produce
        times ``produced_us`` (one per row; None: now)."""
        if produced_us is None:
            produced_us = np.full(rows, time.time_ns() // 1000, dtype=np.int64)
        share, extra = divmod(rows, self.partitions)
        at = 0
        for p in range(self.partitions):
            n = share + (1 if p < extra else 0)
            while n > 0:
                take = min(n, _MAX_ROWS_PER_CALL)
                chunk = self._rows(self.sent, take, produced_us[at : at + take])
                produce_with_backpressure(self.producer.produce_batch, self.producer.poll, self.topic, chunk, p)
                if self.keep_sent:
                    self.sent_tables.append(chunk)
                self.sent += take
                at += take
                n -= take
        self.producer.poll(0)

    def _rows(self, first: int, n: int, produced_us: np.ndarray) -> pa.Table:
        pieces, at, left = [], first % self.ds.rows, n
        while left > 0:
            piece = self.ds.table.slice(at, min(left, self.ds.rows - at))
            pieces.append(piece)
            left -= piece.num_rows
            at = 0
        data = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
        seq = pa.array(np.arange(first, first + n, dtype=np.int64))
        stamp = pa.array(produced_us)
        return pa.Table.from_arrays([*data.columns, seq, stamp], schema=self.schema)

    def paced(self, rate: int | None, duration_s: float, batch_s: float) -> dict[str, Any]:
        """Produce at ``rate`` rows/s (None: as fast as possible, at most :data:`MAX_RATE_ROWS`
        rows) for ``duration_s``, a batch every ``batch_s``; the rows and seconds achieved (from
        the first call's start to the last call's end)."""
        return paced([self], rate, duration_s, batch_s)

    def flush(self) -> dict[str, int]:
        left = self.producer.flush(120)
        if left:
            raise CheckFailed(f"{self.topic}: {left} segments not delivered")
        stats = self.producer.stats()
        self.producer.close()
        return stats


def paced(producers: Sequence[PacedProducer], rate: int | None, duration_s: float, batch_s: float) -> dict[str, Any]:
    """Produce at ``rate`` rows/s into each of ``producers``' topics (None: as fast as possible,
    at most :data:`MAX_RATE_ROWS` rows a topic) for ``duration_s``, a batch every ``batch_s``
    (each topic's rows due by then, its rows' produce times their slots in the schedule); the
    rows and seconds achieved, all topics together (from the first call's start to the last
    call's end), and the most rows one topic was due in one batch."""
    first = [p.sent for p in producers]
    start, start_us = time.perf_counter(), time.time_ns() // 1000
    behind_max = 0

    def due_by(rate: int, elapsed_s: float) -> int:
        most = 0
        for producer, begun in zip(producers, first, strict=True):
            due = int(rate * elapsed_s) - (producer.sent - begun)
            if due > 0:  # rows first+k .. : slots start + k / rate
                slots = np.arange(producer.sent - begun, producer.sent - begun + due, dtype=np.float64)
                producer.send(due, (start_us + slots * 1e6 / rate).astype(np.int64))
            most = max(most, due)
        return most

    while True:
        now = time.perf_counter()
        elapsed = now - start
        if elapsed >= duration_s:
            break
        if rate is None:
            if all(p.sent - b >= MAX_RATE_ROWS for p, b in zip(producers, first, strict=True)):
                break
            for producer in producers:
                producer.send(_MAX_ROWS_PER_CALL * producer.partitions)
            continue
        behind_max = max(behind_max, due_by(rate, elapsed))
        time.sleep(max(0.0, batch_s - (time.perf_counter() - now)))
    if rate is not None:  # the rows due at the end of the window
        due_by(rate, duration_s)
    ended = time.perf_counter()
    rows = sum(p.sent - b for p, b in zip(producers, first, strict=True))
    return {
        "rows": rows,
        "seconds": ended - start,
        "rows_per_s": rows / (ended - start),
        "most_rows_in_one_batch": behind_max,
    }


# -- one rate ---------------------------------------------------------------------------------


def _ingest_command(bootstrap: str, topic: str, table: str, latency_s: float, extra: Sequence[str] = ()) -> list[str]:
    cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, table, "-k", bootstrap, "-l", f"{latency_s:g}"]
    return [*cmd, *extra]


def _ingest_stats(log_path: str) -> dict[str, Any]:
    """The ingest process's final JSON line (its counters: commits, compactions, ...)."""
    with open(log_path, errors="replace") as f:
        lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def _cpu_s(pid: int) -> float:
    import psutil  # the bench extra

    return process_cpu_s(psutil.Process(pid))


def _latencies(poller: Poller, warmup_rows: int) -> np.ndarray:
    seqs, produced, visible = [], [], []
    for version in poller.versions:
        for path in version.added:
            part = pq.read_table(path, columns=[SEQ, PRODUCED])
            seqs.append(part[SEQ].to_numpy())
            produced.append(part[PRODUCED].to_numpy())
            visible.append(np.full(part.num_rows, version.seen_us, dtype=np.int64))
    seq = np.concatenate(seqs)
    keep = seq >= warmup_rows  # the warm-up's rows were produced before the run
    return latencies_s(seq[keep], np.concatenate(produced)[keep], np.concatenate(visible)[keep])


def _data_file_bytes(table_dir: str) -> int:
    """Bytes of every Parquet file under the table's directory (files a later commit removed,
    and files of failed commits, included: they were written)."""
    paths = glob.glob(os.path.join(table_dir, "**", "*.parquet"), recursive=True)
    return sum(os.path.getsize(p) for p in paths if f"{os.sep}_delta_log{os.sep}" not in p)


def _check_table(uri: str, sent: list[pa.Table], schema: pa.Schema) -> int:
    data = DeltaTable(uri).to_pyarrow_table()
    produced = pa.concat_tables(sent)
    if data.num_rows != produced.num_rows:
        raise CheckFailed(f"{uri}: {data.num_rows:,} rows, {produced.num_rows:,} produced")
    if len(np.unique(data[SEQ].to_numpy())) != produced.num_rows:
        raise CheckFailed(f"{uri}: some {SEQ} values are missing or repeated")
    expected, got = column_sums(produced, schema), column_sums(data, schema)
    for column, value in expected.items():
        if got.get(column) != value:
            raise CheckFailed(f"{uri}: column {column} sums to {got.get(column)}, produced {value}")
    return len(expected)


def _spark_scans(
    tables: dict[str, str], ds: Dataset, *, repeats: int, seed: int, log_path: str, timeout_s: float
) -> dict[str, Any]:
    """The same rounds in Spark (:func:`benchmarks.scans.spark_child_main` in a child process)
    over the tables' current snapshots; "not run" and why when the child fails."""
    spec = {
        "tables": tables,
        "group_by": ds.scan.group_by,
        "aggregations": [list(a) for a in ds.scan.aggregations],
        "repeats": repeats,
        "warmups": 1,
        "seed": seed,
    }
    child = child_json(
        ["-m", "benchmarks.scans", json.dumps(spec)],
        mark=SPARK_MARK,
        timeout_s=timeout_s,
        log_path=log_path,
        what="the Spark scans (python -m benchmarks.scans)",
    )
    if child["status"] != "ok":
        return {"status": "not run", "reason": child["reason"], "reader": ENGINES["spark"]}
    timed = child["result"]["tables"]
    same_groups(from_json(timed["row baseline"]["result"]), from_json(timed["parka"]["result"]), "Spark at the end")
    return {
        "status": "ok",
        "reader": ENGINES["spark"],
        "ratio": paired_ratio(timed["parka"]["times_s"], timed["row baseline"]["times_s"]),
        "scan_s": {k: v["times_s"] for k, v in timed.items()},
        "session_start_s": child["result"]["session_start_s"],
    }


def _scans(
    uri: str,
    points: dict[str, int],
    ds: Dataset,
    work: str,
    *,
    repeats: int,
    seed: int,
    spark_log: str | None,
    spark_timeout_s: float,
) -> list[dict[str, Any]]:
    """At each point (label -> version): the same rows as the row baseline's table, both scanned
    with DuckDB in alternating rounds; at the last point (the table's current snapshot) also
    with Spark unless ``spark_log`` is None."""
    out = []
    duck = DuckDbScanner()
    try:
        for i, (label, version) in enumerate(points.items()):
            base = os.path.join(work, f"baseline-v{version}")
            shutil.rmtree(base, ignore_errors=True)
            rows = DeltaTable(uri, version=version).to_pyarrow_table()
            commits = row_baseline_table(base, rows, kdi_files=True)
            tables = {"parka": uri, "row baseline": base}

            opens: dict[str, list[float]] = {t: [] for t in tables.values()}

            def scan(target: str, version: int = version, opens: dict[str, list[float]] = opens) -> Any:
                result = duck(target, ds.scan, version=version if target == uri else None)
                opens[target].append(duck.open_s)
                return result

            timed = rounds(scan, tables, repeats=repeats, warmups=_SCAN_WARMUPS, seed=seed + i)
            same_groups(timed["row baseline"]["result"], timed["parka"]["result"], f"DuckDB at {label}")
            open_s = {k: opens[t][_SCAN_WARMUPS:] for k, t in tables.items()}  # the measured rounds
            read_s = {k: [a - b for a, b in zip(timed[k]["times_s"], open_s[k], strict=True)] for k in tables}
            out.append(
                {
                    "point": label,
                    "version": version,
                    "rows": rows.num_rows,
                    "parka": table_shape(uri, version=version),
                    "row_baseline": {**table_shape(base), "commits": commits},
                    "duckdb_ratio": paired_ratio(timed["parka"]["times_s"], timed["row baseline"]["times_s"]),
                    "duckdb_scan_s": {k: v["times_s"] for k, v in timed.items()},
                    # the same scans in two parts: the Delta log read into the list of files
                    # (deltalake), then DuckDB's read of those files
                    "duckdb_open_s": open_s,
                    "duckdb_read_ratio": paired_ratio(read_s["parka"], read_s["row baseline"]),
                }
            )
            if spark_log is not None and i == len(points) - 1:
                out[-1]["spark"] = _spark_scans(
                    tables, ds, repeats=repeats, seed=seed + 100, log_path=spark_log, timeout_s=spark_timeout_s
                )
            shutil.rmtree(base, ignore_errors=True)
    finally:
        duck.close()
    return out


def run_rate(
    broker: Broker,
    ds: Dataset,
    rate: int | None,
    *,
    partitions: int,
    duration_s: float,
    latency_s: float,
    batch_s: float,
    poll_s: float,
    scan_points: Sequence[float],
    scan_repeats: int,
    seed: int,
    out_dir: str,
    spark: bool = True,
    spark_timeout_s: float = 900.0,
    ingest_args: Sequence[str] = (),
    keep_tables: str | None = None,
) -> dict[str, Any]:
    """One rate, steps 1-5 of the module's docstring (``keep_tables``: a folder the table is
    moved into, as ``table-<rate>``, instead of deleted). Raises ``CheckFailed`` when the table
    does not end with exactly the produced rows or a scan disagrees."""
    name = "max" if rate is None else str(rate)
    topic = f"bench-freshness-{name}-{uuid.uuid4().hex[:8]}"
    work = tempfile.mkdtemp(prefix=f"parka-freshness-{name}-")
    table = os.path.join(work, "table")
    broker.create_topic(topic, partitions)
    log_path = os.path.join(out_dir, f"ingest-{name}.log")
    producer = PacedProducer(broker.bootstrap, topic, ds, partitions)
    poller = Poller(table, poll_s)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            _ingest_command(broker.bootstrap, topic, table, latency_s, ingest_args),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        poller.start()
        producer.send(WARMUP_ROWS_PER_PARTITION * partitions)
        producer.producer.flush(60)
        warmup = producer.sent
        poller.wait_rows(warmup, _WAIT_S, f"{topic} warm-up")
        cpu0, rows0 = _cpu_s(proc.pid), poller.rows
        run_start_us = time.time_ns() // 1000
        produced = producer.paced(rate, duration_s, batch_s)
        flush_start = time.perf_counter()
        stats = producer.flush()
        flush_s = time.perf_counter() - flush_start
        poller.wait_rows(producer.sent, _WAIT_S, topic)
        cpu1, rows1 = _cpu_s(proc.pid), poller.rows
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        poller.stop()
    if exit_code != 0:
        raise CheckFailed(f"parka ingest of {topic} exited {exit_code} (see {log_path})")
    columns = _check_table(table, producer.sent_tables, producer.schema)
    lat = _latencies(poller, warmup)
    if len(lat) != produced["rows"]:
        raise CheckFailed(f"{topic}: latencies of {len(lat):,} rows, {produced['rows']:,} produced in the run")
    seen = [(v.version, v.seen_us / 1e6) for v in poller.versions]
    run_end = run_start_us / 1e6 + produced["seconds"]
    run_versions = sum(1 for v in poller.versions if v.seen_us > run_start_us)
    points = {
        f"{frac:g} of the run": version_at(seen, run_start_us / 1e6 + frac * produced["seconds"])
        for frac in scan_points
    }
    points["end"] = poller.versions[-1].version
    shape = table_shape(table)
    written = _data_file_bytes(table)
    scans = _scans(
        table,
        points,
        ds,
        work,
        repeats=scan_repeats,
        seed=seed,
        spark_log=os.path.join(out_dir, f"spark-scans-{name}.log") if spark else None,
        spark_timeout_s=spark_timeout_s,
    )
    if keep_tables is not None:
        kept = os.path.join(keep_tables, f"table-{name}")
        shutil.rmtree(kept, ignore_errors=True)
        shutil.move(table, kept)
        print(f"freshness: the table of rate {name} kept in {kept}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    broker.delete_topics([topic])
    window_s = produced["seconds"]
    return {
        "rate": name,
        "target_rows_per_s": rate,
        "partitions": partitions,
        "topic": topic,
        "produced": {**produced, "flush_s": flush_s, "warmup_rows": warmup, "producer_stats": stats},
        "achieved_rows_per_s": produced["rows_per_s"],
        "latency_s": percentiles(lat),
        "poller": {"polls": poller.polls, "interval_s": poll_s, "max_gap_s": poller.max_gap_s},
        "versions": {
            "total": len(poller.versions),
            "during_run": run_versions,
            "last_seen_after_run_end_s": poller.versions[-1].seen_us / 1e6 - run_end,
        },
        "table": shape,
        "per_hour": {
            "files": per_hour(shape["files"], window_s),
            "row_groups": per_hour(shape["row_groups"], window_s),
            "versions": per_hour(run_versions, window_s),
        },
        "write_amplification": {
            "data_file_bytes": written,
            "segment_bytes": stats["segment_bytes"],
            "ratio": written / stats["segment_bytes"],
        },
        "ingest": {
            "command": ["python", *_ingest_command("BOOTSTRAP", "TOPIC", "TABLE", latency_s, ingest_args)[1:]],
            "stats": _ingest_stats(log_path),
            "exit_code": exit_code,
            "cpu_s": cpu1 - cpu0,
            "rows": rows1 - rows0,
            "cpu_us_per_row": (cpu1 - cpu0) * 1e6 / (rows1 - rows0),
            "cpu_s_total": cpu1,
        },
        "scans": scans,
        "checks": {"rows": producer.sent, "columns_summed": columns, "scan_points": len(scans)},
    }


def run(
    broker: Broker,
    ds: Dataset,
    rates: Sequence[int | None],
    *,
    partitions: int,
    duration_s: float,
    latency_s: float = 1.0,
    batch_ms: float = 100.0,
    poll_ms: float = 100.0,
    scan_points: Sequence[float] = (0.5,),
    scan_repeats: int = 5,
    seed: int = 1,
    out_dir: str,
    spark: bool = True,
    spark_timeout_s: float = 900.0,
    ingest_args: Sequence[str] = (),
    keep_tables: str | None = None,
) -> dict[str, Any]:
    """Every rate of ``rates`` (:func:`run_rate`), one after the other: the section ``main`` and
    the benchmark suite write, ``{"settings": ..., "runs": [...]}``."""
    runs = []
    for rate in rates:
        result = run_rate(
            broker,
            ds,
            rate,
            partitions=partitions,
            duration_s=duration_s,
            latency_s=latency_s,
            batch_s=batch_ms / 1000.0,
            poll_s=poll_ms / 1000.0,
            scan_points=scan_points,
            scan_repeats=scan_repeats,
            seed=seed,
            out_dir=out_dir,
            spark=spark,
            spark_timeout_s=spark_timeout_s,
            ingest_args=ingest_args,
            keep_tables=keep_tables,
        )
        runs.append(result)
        print(json.dumps({k: result[k] for k in ("rate", "achieved_rows_per_s", "latency_s", "per_hour")}), flush=True)
    settings = {
        "dataset": ds.name,
        "partitions": partitions,
        "duration_s": duration_s,
        "allowed_latency_s": latency_s,
        "ingest_args": list(ingest_args),
        "batch_ms": batch_ms,
        "poll_ms": poll_ms,
        "segment_rows": SEGMENT_ROWS,
        "warmup_rows_per_partition": WARMUP_ROWS_PER_PARTITION,
        "scan_repeats": scan_repeats,
        "scan_readers": {"duckdb": ENGINES["duckdb"], "spark": ENGINES["spark"] if spark else None},
    }
    return {"settings": settings, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--kafka-data-dir", help="the broker's log dir (for the machine section's Kafka version)")
    parser.add_argument("--rates", default="10000,100000", help="rows/s, comma-separated; 'max': as fast as it goes")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of paced producing per rate")
    parser.add_argument("--allowed-latency", type=float, default=1.0, help="parka ingest -l (seconds)")
    parser.add_argument("--batch-ms", type=float, default=100.0, help="how often the producer sends what is due")
    parser.add_argument("--poll-ms", type=float, default=100.0, help="how often the table's version is read")
    parser.add_argument("--scan-points", default="0.5", help="fractions of the run to scan at, besides the end")
    parser.add_argument("--scan-repeats", type=int, default=5)
    parser.add_argument("--no-spark", action="store_true", help="no Spark scans at the end point")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="one rate (10000 rows/s), 15 s, 3 scan rounds, no Spark")
    parser.add_argument(
        "--ingest-arg",
        action="append",
        default=[],
        help="one more argument for parka ingest (repeatable; e.g. --ingest-arg=--compact-min-files=8)",
    )
    parser.add_argument("--out", default="bench-out/freshness")
    parser.add_argument(
        "--keep-tables",
        metavar="DIR",
        help="move each rate's Delta table into DIR (table-RATE) instead of deleting it, e.g. for "
        "python -m benchmarks.scan_parts",
    )
    args = parser.parse_args(argv)
    try:
        rates = parse_rates("10000" if args.quick else args.rates)
        points = [float(p) for p in args.scan_points.split(",") if p.strip()]
    except ValueError as exc:
        parser.error(str(exc))
    if any(not 0 < p < 1 for p in points):
        parser.error(f"--scan-points: fractions strictly between 0 and 1, got {args.scan_points!r}")
    if args.partitions < 1 or args.duration <= 0:
        parser.error("--partitions must be at least 1 and --duration above 0")
    duration = 15.0 if args.quick else args.duration
    os.makedirs(args.out, exist_ok=True)
    if args.keep_tables:
        os.makedirs(args.keep_tables, exist_ok=True)
    data_dir = args.kafka_data_dir or tempfile.mkdtemp(prefix="parka-freshness-nodir-")
    broker = Broker(args.bootstrap, data_dir)
    section = run(
        broker,
        load("flights", None),
        rates,
        partitions=args.partitions,
        duration_s=duration,
        latency_s=args.allowed_latency,
        batch_ms=args.batch_ms,
        poll_ms=args.poll_ms,
        scan_points=points,
        scan_repeats=3 if args.quick else args.scan_repeats,
        seed=args.seed,
        out_dir=args.out,
        spark=not (args.no_spark or args.quick),
        ingest_args=args.ingest_arg,
        keep_tables=args.keep_tables,
    )
    results = {
        "machine": machine_info(broker),
        "command": ["python", "-m", "benchmarks.freshness", *(sys.argv[1:] if argv is None else argv)],
        "freshness": section,
    }
    write_plots(results, args.out)
    save_run(args.out, results, render_freshness(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
