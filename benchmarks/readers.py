"""The lake for its readers: a large flights table from ``parka ingest``, its files, and what a
query over it costs in pyarrow, DuckDB and Spark next to the row baseline's table, before and
after ``parka optimize``.

Raw ingestion saves the ingester's CPU; the table's readers pay for its layout on every query.
This section (``lake`` in results.json) builds at least ``rows`` flight rows (the 336,776 real
flights repeated, as the ingest throughput section does; fewer rows: the first ``rows``), as
zstd Parquet segments of 10,000 rows with the suite's producer settings, and the same rows as
Confluent Avro. Then:

1. **Ingest next to its floor**, ``repeats`` times, interleaved in a shuffled order:
   ``parka ingest`` with default settings into a fresh table (:func:`benchmarks.lake.ingest`),
   and "fetch + write + one sync" on the same topic
   (:func:`benchmarks.ingest_throughput.fetch_and_write`), the least any ingester must do.
   The last ingest's table is kept as the table readers scan.
2. **The row baseline's table**: :func:`benchmarks.lake.row_baseline` with ``kdi_files``, the
   128 MiB files kafka-delta-ingest writes by default; once (its rate is reported).
3. **Both tables checked**: rows and exact column sums (:func:`benchmarks.checks.column_sums`)
   equal the produced data's.
4. **``parka optimize``** on a copy of the parka table, as a subprocess (``python -m
   parka.cli optimize URI``, default settings), when this build has the command; otherwise
   "not available" and no after-optimize scans. The optimized table is checked the same way.
5. **Scans**: per reader (:mod:`benchmarks.scans`), one warm-up round, then ``scan_repeats``
   rounds, each scanning every table once in a shuffled order; per table the median time, and
   per pair (parka / baseline, optimized / baseline) the median of the per-round ratios. Every
   scan's groups and aggregates must equal the baseline's in the same reader and pyarrow's.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from . import encodings as enc
from .broker import Broker
from .checks import CheckFailed, Checks, column_sums
from .clients import produce_values
from .datasets import Dataset
from .endtoend import run_rates
from .ingest_summary import FETCH_AND_WRITE
from .ingest_throughput import fetch_and_write, produce_copies
from .lake import KDI_FILE_BYTES, ingest, row_baseline, table_shape
from .measure import STATISTIC, paired_ratio, summarize
from .scans import ENGINES, SPARK_MARK, DuckDbScanner, Result, from_json, rounds, same_groups, scan_pyarrow
from .spark import child_json

__all__ = ["SEGMENT_ROWS", "optimize_command", "run_readers"]

log = logging.getLogger("parka.bench")

SEGMENT_ROWS = 10_000
VARIANTS = ("parka ingest", "fetch + write")
BASE, PARKA, OPTIMIZED = "row baseline", "parka ingest", "parka ingest + optimize"
_OPTIMIZE_TIMEOUT_S = 3600.0


def optimize_command() -> list[str] | None:
    """``[python, -m, parka.cli, optimize]`` when this build's ``parka`` has the subcommand
    (``parka optimize --help`` exits 0), else ``None``."""
    command = [sys.executable, "-m", "parka.cli", "optimize"]
    probe = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=120)
    return command if probe.returncode == 0 else None


def _check_table(uri: str, name: str, rows: int, sums: dict[str, str], ds: Dataset, checks: Checks) -> None:
    got = column_sums(DeltaTable(uri).to_pyarrow_dataset(), ds.table.schema)
    counted = DeltaTable(uri).count()
    if counted != rows:
        raise CheckFailed(f"lake {name}: {counted:,} rows, expected {rows:,}")
    for column, expected in sums.items():
        if got.get(column) != expected:
            raise CheckFailed(f"lake {name}: column {column} reads back {got.get(column)}, produced {expected}")
    checks.passed_elsewhere(f"lake {name}: rows and exact column sums", rows=rows, columns=len(sums))


def _produce(broker: Broker, unit: Dataset, copies: int, run_id: str) -> dict[str, Any]:
    seg = produce_copies(broker, unit, copies, SEGMENT_ROWS, f"bench-{run_id}-lake-seg-{uuid.uuid4().hex[:6]}")
    avro_topic = f"bench-{run_id}-lake-avro-{uuid.uuid4().hex[:6]}"
    broker.create_topic(avro_topic)
    values = enc.serialize(unit, "avro", enc.rows_for(unit, "avro"))
    max_bytes = broker.max_message_bytes_cached()
    produce_values(
        enc.row_producer_conf(broker.bootstrap, "zstd", SEGMENT_ROWS, max_bytes), avro_topic, values * copies
    )
    on_disk = broker.log_stats(avro_topic)
    if on_disk.records != seg["rows"]:
        raise CheckFailed(f"{avro_topic}: the broker's log holds {on_disk.records:,} records, expected {seg['rows']:,}")
    return {**seg, "avro_topic": avro_topic}


def _ingest_vs_floor(
    broker: Broker, topic: dict[str, Any], repeats: int, seed: int, keep: str, progress: Callable[[str], None]
) -> dict[str, Any]:
    """``repeats`` interleaved pairs (parka ingest, fetch + write); the last ingest's table is
    left at ``keep``."""
    samples: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for rep in range(repeats):
        order = list(VARIANTS)
        random.Random(seed + 3000 + rep).shuffle(order)
        for variant in order:
            os.sync()  # clean page cache first: an fsync also writes out other files' dirty data
            if variant == "fetch + write":
                samples[variant].append(fetch_and_write(broker, topic))
                continue
            shutil.rmtree(keep, ignore_errors=True)
            os.makedirs(keep)
            run = ingest(broker.bootstrap, topic["topic"], keep)
            table_rows = table_shape(keep)["rows"]
            if run.rows != topic["rows"] or table_rows != topic["rows"]:
                raise CheckFailed(f"lake ingest: {run.rows:,} records, {table_rows:,} rows, produced {topic['rows']:,}")
            sample = run_rates(run, topic["rows"])
            sample["commits"] = run.commits
            samples[variant].append(sample)
        progress(f"lake: ingest and its floor, repeat {rep + 1}/{repeats} done")
    ing, floor = samples["parka ingest"], samples["fetch + write"]
    return {
        "fetch_and_write": FETCH_AND_WRITE,
        "parka_ingest": {k: summarize([s[k] for s in ing], k) for k in ing[0]},
        "floor": {k: summarize([s[k] for s in floor], k) for k in floor[0]},
        "ratio_steady_mb_per_s": paired_ratio(
            [s["steady_mb_per_s"] for s in ing], [s["steady_mb_per_s"] for s in floor]
        ),
        "ratio_mb_per_s": paired_ratio([s["mb_per_s"] for s in ing], [s["mb_per_s"] for s in floor]),
    }


def _optimize(source: str, target: str) -> dict[str, Any]:
    command = optimize_command()
    if command is None:
        return {"status": "not available", "reason": "this build's `parka` has no `optimize` subcommand"}
    shutil.copytree(source, target)  # the un-optimized table stays for the scans
    started = time.perf_counter()
    proc = subprocess.run([*command, target], capture_output=True, text=True, timeout=_OPTIMIZE_TIMEOUT_S)
    wall = time.perf_counter() - started
    shown = ["python", "-m", "parka.cli", "optimize", "TABLE_URI"]
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        return {"status": "failed", "command": shown, "reason": f"exit {proc.returncode}: {tail}", "wall_s": wall}
    return {"status": "ok", "command": shown, "wall_s": wall, "output": proc.stdout.strip()[-2000:]}


def _engine_summary(timed: dict[str, dict[str, Any]], reader: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": "ok",
        "reader": reader,
        "scan_s": {label: summarize(t["times_s"], "scan_s") for label, t in timed.items()},
    }
    base = timed[BASE]["times_s"]
    out["ratio_parka_over_baseline"] = paired_ratio(timed[PARKA]["times_s"], base)
    if OPTIMIZED in timed:
        out["ratio_optimized_over_baseline"] = paired_ratio(timed[OPTIMIZED]["times_s"], base)
    return out


def _scans(
    ds: Dataset,
    tables: dict[str, str],
    *,
    repeats: int,
    seed: int,
    checks: Checks,
    out_dir: str,
    spark_timeout_s: float,
) -> dict[str, Any]:
    query = ds.scan
    engines: dict[str, Any] = {}
    results: dict[str, dict[str, Result]] = {}
    timed = rounds(lambda uri: scan_pyarrow(uri, query), tables, repeats=repeats, warmups=1, seed=seed)
    engines["pyarrow"], results["pyarrow"] = _engine_summary(timed, ENGINES["pyarrow"]), _results(timed)
    duck = DuckDbScanner()
    try:
        timed = rounds(lambda uri: duck(uri, query), tables, repeats=repeats, warmups=1, seed=seed + 1)
    finally:
        duck.close()
    engines["duckdb"], results["duckdb"] = _engine_summary(timed, ENGINES["duckdb"]), _results(timed)
    spec = {
        "tables": tables,
        "group_by": query.group_by,
        "aggregations": [list(a) for a in query.aggregations],
        "repeats": repeats,
        "warmups": 1,
        "seed": seed + 2,
    }
    child = child_json(
        ["-m", "benchmarks.scans", json.dumps(spec)],
        mark=SPARK_MARK,
        timeout_s=spark_timeout_s,
        log_path=os.path.join(out_dir, "lake_spark_scans.log"),
        what="the Spark scans (python -m benchmarks.scans)",
    )
    if child["status"] == "ok":
        spark_tables = child["result"]["tables"]
        engines["spark"] = {
            **_engine_summary(spark_tables, ENGINES["spark"]),
            "master": child["result"]["master"],
            "session_start_s": child["result"]["session_start_s"],
            "rounds_s": child["result"]["rounds_s"],
            "child_wall_s": child["wall_s"],
        }
        results["spark"] = {label: from_json(t["result"]) for label, t in spark_tables.items()}
    else:
        engines["spark"] = {"status": "not run", "reason": child["reason"], "reader": ENGINES["spark"]}
    reference = results["pyarrow"][BASE]
    for engine, per_table in results.items():
        for label, result in per_table.items():
            same_groups(reference, result, f"lake scan: {engine} over the {label} table vs pyarrow over the baseline's")
            checks.passed_elsewhere(f"lake scan: {engine}, {label}: same groups and aggregates", groups=len(result))
    return {
        "query": query.describe(),
        "statistic": f"scan_s: median of {repeats} timings per table; ratios: {STATISTIC}",
        "repeats": repeats,
        "warmups": 1,
        "engines": engines,
    }


def _results(timed: dict[str, dict[str, Any]]) -> dict[str, Result]:
    return {label: t["result"] for label, t in timed.items()}


def run_readers(
    broker: Broker,
    flights: Dataset,
    *,
    rows: int,
    repeats: int,
    scan_repeats: int,
    run_id: str,
    checks: Checks,
    seed: int,
    out_dir: str,
    spark_timeout_s: float,
    progress: Callable[[str], None] = log.info,
) -> dict[str, Any]:
    """The ``lake`` section of results.json (see the module docstring). Raises ``CheckFailed``
    when a table or a scan differs from the produced data."""
    copies = 1 if rows <= flights.rows else math.ceil(rows / flights.rows)
    unit = flights.head(rows) if copies == 1 else flights
    work = tempfile.mkdtemp(prefix="parka-bench-lake-")
    tables = {BASE: os.path.join(work, "baseline"), PARKA: os.path.join(work, "parka")}
    topic: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        topic = _produce(broker, unit, copies, run_id)
        total = topic["rows"]
        sums = column_sums(pa.concat_tables([unit.table] * copies), unit.table.schema)
        progress(
            f"lake: {total:,} flight rows produced ({topic['segments']:,} segments) in {time.perf_counter() - t0:.0f} s"
        )
        ingest_side = _ingest_vs_floor(broker, topic, repeats, seed, tables[PARKA], progress)
        os.sync()
        os.makedirs(tables[BASE])
        base_run = row_baseline(broker.bootstrap, topic["avro_topic"], tables[BASE], unit, total, kdi_files=True)
        baseline = run_rates(base_run, total)
        progress(f"lake: row baseline {total:,} rows in {base_run.span.wall_s:.0f} s")
        for label in (PARKA, BASE):
            _check_table(tables[label], label, total, sums, unit, checks)
        optimize = _optimize(tables[PARKA], os.path.join(work, "parka-optimized"))
        if optimize["status"] == "ok":
            tables[OPTIMIZED] = os.path.join(work, "parka-optimized")
            _check_table(tables[OPTIMIZED], OPTIMIZED, total, sums, unit, checks)
        progress(f"lake: parka optimize {optimize['status']}")
        shapes = {label: table_shape(uri) for label, uri in tables.items()}
        scans = _scans(
            unit,
            tables,
            repeats=scan_repeats,
            seed=seed,
            checks=checks,
            out_dir=out_dir,
            spark_timeout_s=spark_timeout_s,
        )
        parka_files = shapes[PARKA]["files"]
        return {
            "dataset": flights.name,
            "rows": total,
            "copies": copies,
            "segment_rows": SEGMENT_ROWS,
            "codec": "zstd",
            "segments": topic["segments"],
            "segment_bytes": topic["bytes"],
            "segments_per_file": topic["segments"] / parka_files if parka_files else None,
            "tables": shapes,
            "ingest": ingest_side,
            "row_baseline": {**baseline, "commits": base_run.commits, "file_bytes_target": KDI_FILE_BYTES},
            "optimize": optimize,
            "scans": scans,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
        broker.delete_topics([t for t in (topic.get("topic"), topic.get("avro_topic")) if t])
