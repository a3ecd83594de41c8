"""The benchmark suite: ``python -m benchmarks.suite --mode full|quick|encodings|dropin|encryption --out DIR``.

``make bench`` runs the full suite (about 25 minutes on 2 cores), ``make bench-quick`` a reduced
one (a few minutes), ``make bench-encodings`` (``--mode encodings``) the encoding matrix alone at
10,000 rows per batch and zstd on the full mode's data (about 3 minutes). Sections, in order: the
encoding matrix (bytes per row, producer and consumer CPU; at 10,000 rows per batch also Parquet
with pyarrow's default encodings and, for GPS, segments sorted by device), end to end into Delta,
ingest throughput, the Spark paths, the lake for its readers (10M flight rows: files,
DuckDB/Spark/pyarrow scans, after ``parka optimize``), the cost of column encryption (``--mode
encryption`` runs it alone, ``make bench-encryption``: about 2 minutes), and freshness
(``parka ingest -l 1`` under a paced producer, :mod:`benchmarks.freshness`; about 4 minutes). Each run
writes ``results.json``, ``report.md`` and PNG plots into DIR; any failed check stops the run
with a non-zero exit and no report.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shlex
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import datasets as data
from .broker import Broker
from .checks import CheckFailed, Checks
from .encodings import CODECS
from .encryption import run_encryption
from .endtoend import run_end_to_end
from .freshness import run as run_freshness
from .ingest_throughput import run as run_ingest_throughput
from .machine import machine_info
from .matrix import MatrixPlan, run_matrix, warm_up
from .measure import settle
from .objectstore import add_s3_arguments, masked_command, s3_root
from .readers import run_readers
from .report import write_report
from .row_ingest import run_rows
from .spark import run_spark
from .targets import evaluate
from .upsert import UpsertRun, run_upsert

__all__ = ["PLANS", "SECTIONS", "Plan", "main"]

log = logging.getLogger("parka.bench")

SECTIONS = ("matrix", "e2e", "ingest", "spark", "lake", "encryption", "freshness", "upsert", "rows")


@dataclass(frozen=True)
class Plan:
    """How much a mode runs: ``rows`` per data set (``None``: all of it) for the end-to-end runs,
    the first ``matrix_rows`` of them for the encoding matrix."""

    rows: dict[str, int | None]
    matrix_rows: int
    batch_sizes: tuple[int, ...]
    codecs: tuple[str, ...]
    repeats: int
    consumer_rows: int
    per_record_batch: int
    ingest_copies: dict[int, int]  # rows per segment -> copies of the flights in its topic
    spark_records: int
    spark_timeout_s: float
    lake_rows: int = 0  # flight rows in the lake section's table (the flights repeated, or the first ones)
    lake_scan_repeats: int = 0
    encryption_rows: int = 100_000  # the first rows of each data set, in 10,000-row segments
    encryption_rounds: int = 5  # paired rounds of plain and encrypted encode/decode
    # the freshness section: rows/s into partitions for seconds (the freshness goals are at
    # 100,000 rows/s into 4 partitions), scanned half-way and at the end
    freshness_rate: int = 100_000
    freshness_partitions: int = 4
    freshness_duration_s: float = 60.0
    freshness_scan_repeats: int = 5
    freshness_spark: bool = True
    # the upsert section (benchmarks/upsert.py): every arm on upsert_keys keys (parka takes
    # upsert_events events, each anchor upsert_anchor_events in batches of upsert_batch), then
    # the daemon at upsert_rate events/s for upsert_duration_s on each of upsert_daemon_keys
    # (the cost per commit of the largest against the smallest's)
    upsert_keys: int = 10_000_000
    upsert_events: int = 1_000_000
    upsert_anchor_events: int = 30_000
    upsert_batch: int = 10_000
    upsert_daemon_keys: tuple[int, ...] = (1_000_000, 10_000_000)
    upsert_rate: int = 50_000
    upsert_duration_s: float = 45.0
    # the rows section (benchmarks/row_ingest.py): parka ingest on web_requests as JSON, Avro and
    # Protobuf records beside the rows as segments and the row baseline; needs a schema registry
    row_topic_rows: int = 500_000
    sections: tuple[str, ...] = (
        "matrix", "e2e", "ingest", "spark", "lake", "encryption", "freshness", "upsert", "rows",
    )  # fmt: skip


PLANS = {
    "full": Plan(
        rows={"flights": None, "web_requests": 200_000, "gps": 200_000, "github_events": 200_000},
        matrix_rows=100_000,
        batch_sizes=(100, 1_000, 10_000, 100_000),
        codecs=CODECS,
        repeats=3,
        consumer_rows=20_000,
        per_record_batch=10_000,
        # 48 copies (~270 MB): with 12 an ingest took about a second and its fixed costs (table,
        # first commit) set the ratio to its floor (0.62 against 0.94 with 48, 2026-11-26)
        ingest_copies={1_000: 4, 10_000: 48, 100_000: 48},
        spark_records=2_000_000,  # spark_gps.py's own default: fixed per-query costs fade
        spark_timeout_s=900,
        lake_rows=10_000_000,
        lake_scan_repeats=7,
    ),
    "quick": Plan(
        rows={"flights": 50_000, "web_requests": 50_000, "gps": 50_000, "github_events": 50_000},
        matrix_rows=20_000,
        batch_sizes=(100, 1_000, 10_000),
        codecs=("none", "lz4", "zstd"),
        repeats=1,
        consumer_rows=5_000,
        per_record_batch=10_000,
        ingest_copies={10_000: 4},
        spark_records=20_000,
        spark_timeout_s=240,
        lake_rows=200_000,
        lake_scan_repeats=3,
        encryption_rows=20_000,
        encryption_rounds=2,
        freshness_rate=10_000,
        freshness_duration_s=10.0,
        freshness_scan_repeats=3,
        freshness_spark=False,
        upsert_keys=20_000,
        upsert_events=20_000,
        upsert_anchor_events=4_000,
        upsert_batch=2_000,
        upsert_daemon_keys=(10_000, 20_000),
        upsert_rate=5_000,
        upsert_duration_s=10.0,
        row_topic_rows=50_000,
    ),
    # The encoding matrix alone at 10,000 rows per batch and zstd, on the full mode's data: bytes
    # per row of JSON, Avro and Parquet segments (tuned, pyarrow's defaults, sorted); a few minutes.
    "encodings": Plan(
        rows={"flights": None, "web_requests": 200_000, "gps": 200_000, "github_events": 200_000},
        matrix_rows=100_000,
        batch_sizes=(10_000,),
        codecs=("zstd",),
        repeats=1,
        consumer_rows=20_000,
        per_record_batch=0,
        ingest_copies={},
        spark_records=0,
        spark_timeout_s=0,
        sections=("matrix",),
    ),
    # The drop-in's per-record CPU: the encoding matrix at 10,000 rows per batch and zstd, with
    # produce() per dict and the shim's consume()/poll() against Avro + zstd, three repeats; and
    # the end-to-end section, for the producer plus parka ingest per million rows.
    "dropin": Plan(
        rows={"flights": None, "web_requests": 200_000, "gps": 200_000, "github_events": 200_000},
        matrix_rows=100_000,
        batch_sizes=(10_000,),
        codecs=("zstd",),
        repeats=3,
        consumer_rows=20_000,
        per_record_batch=10_000,
        ingest_copies={},
        spark_records=0,
        spark_timeout_s=0,
        sections=("matrix", "e2e"),
    ),
    # Column encryption alone: encode+encrypt vs encode, decode+decrypt vs decode, side by side
    # on the first 300,000 rows of each data set, median of 11 paired rounds; about 2 minutes.
    "encryption": Plan(
        rows={"flights": 300_000, "web_requests": 300_000, "gps": 300_000, "github_events": 300_000},
        matrix_rows=100_000,
        batch_sizes=(),
        codecs=("zstd",),
        repeats=1,
        consumer_rows=0,
        per_record_batch=0,
        ingest_copies={},
        spark_records=0,
        spark_timeout_s=0,
        encryption_rows=300_000,
        encryption_rounds=11,
        sections=("encryption",),
    ),
}


def run_upsert_section(bootstrap: str, plan: Plan, seed: int) -> dict[str, Any]:
    """``parka ingest --upsert`` against the anchors on the plan's keys, then the daemon on each
    of its key counts (:func:`benchmarks.upsert.run_upsert`)."""
    cpu = run_upsert(
        bootstrap,
        UpsertRun(plan.upsert_keys, plan.upsert_events, plan.upsert_anchor_events, plan.upsert_batch, seed=seed),
    )
    daemon = {
        str(keys): run_upsert(
            bootstrap,
            UpsertRun(
                keys, 0, 0, plan.upsert_batch, seed=seed, arms=(), freshness_rate=plan.upsert_rate,
                freshness_duration_s=plan.upsert_duration_s,
            ),
        )["freshness"]
        for keys in plan.upsert_daemon_keys
    }  # fmt: skip
    return {"keys": plan.upsert_keys, "arms": cpu["arms"], "daemon": daemon, "rate": plan.upsert_rate}


def _cleanup(broker: Broker, run_id: str) -> None:
    try:
        broker.delete_topics(broker.topics_with_prefix(f"bench-{run_id}-") + broker.topics_with_prefix("parka-bench-"))
    except Exception as exc:  # cleanup must not hide the run's own outcome
        log.warning("could not delete leftover topics of run %s: %s", run_id, exc)


def run_suite(args: argparse.Namespace) -> dict[str, Any]:
    """Run every section of the mode's plan; returns the results document."""
    plan = PLANS[args.mode]
    skip = set(args.skip) | {name for name in SECTIONS if name not in plan.sections}
    started = time.perf_counter()
    started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    run_id = uuid.uuid4().hex[:6]
    broker = Broker(args.bootstrap, args.kafka_data_dir)
    checks = Checks()
    timings: dict[str, float] = {}
    results: dict[str, Any] = {
        "schema_version": 1,
        "suite": {
            "mode": args.mode,
            "command": args.command,
            "started_at": started_at,
            "run_id": run_id,
            "seed": args.seed,
            "load_average_at_start": os.getloadavg(),
        },
        "machine": machine_info(broker),
        "config": {**asdict(plan), "dataset_seed": data.DEFAULT_SEED},
    }
    try:
        t0 = time.perf_counter()
        sets = [data.load(name, plan.rows[name]) for name in data.DATASET_NAMES]
        matrix_sets = [ds.head(plan.matrix_rows) for ds in sets]
        flights = next(ds for ds in sets if ds.name == "flights")
        settle()
        timings["datasets_s"] = time.perf_counter() - t0
        results["datasets"] = [
            {
                "name": ds.name,
                "rows": ds.rows,
                "matrix_rows": min(ds.rows, plan.matrix_rows),
                "columns": ds.table.num_columns,
                "source": ds.source,
                "seed": ds.seed,
                "arrow_bytes_per_row": ds.table.nbytes / ds.rows,
                "scan_query": ds.scan.describe(),
            }
            for ds in sets
        ]
        log.info("data sets: %s", ", ".join(f"{ds.name} ({ds.rows:,} rows)" for ds in sets))
        log.info("matrix: the first %d rows of each", plan.matrix_rows)
        t0 = time.perf_counter()
        warm_up(broker, matrix_sets[0], run_id)
        timings["warm_up_s"] = time.perf_counter() - t0

        if "matrix" not in skip:
            t0 = time.perf_counter()
            matrix_plan = MatrixPlan(
                plan.batch_sizes, plan.codecs, plan.repeats, plan.consumer_rows, plan.per_record_batch, args.seed
            )
            results["matrix"] = run_matrix(broker, matrix_sets, matrix_plan, run_id, checks)
            timings["matrix_s"] = time.perf_counter() - t0
        if "e2e" not in skip:
            t0 = time.perf_counter()
            results["end_to_end"] = run_end_to_end(broker, sets, plan.repeats, run_id, checks, args.seed)
            timings["end_to_end_s"] = time.perf_counter() - t0
        if "ingest" not in skip:
            t0 = time.perf_counter()
            results["ingest_throughput"] = run_ingest_throughput(
                broker,
                flights,
                copies=plan.ingest_copies,
                repeats=plan.repeats,
                run_id=run_id,
                checks=checks,
                seed=args.seed,
                s3=args.s3,
                profile_path=os.path.join(args.out, "profile_ingest.txt"),
                profile_if_missed=True,
            )
            timings["ingest_throughput_s"] = time.perf_counter() - t0
        if "spark" not in skip:
            t0 = time.perf_counter()
            log.info("spark: %d GPS records", plan.spark_records)
            results["spark"] = run_spark(
                broker, plan.spark_records, os.path.join(args.out, "spark"), timeout_s=plan.spark_timeout_s
            )
            timings["spark_s"] = time.perf_counter() - t0
        else:
            why = "skipped (--skip spark)" if "spark" in args.skip else f"not part of mode {args.mode}"
            results["spark"] = {"status": "not run", "reason": why}
        if "lake" not in skip:
            t0 = time.perf_counter()
            log.info("lake: %d flight rows for the readers", plan.lake_rows)
            # all of the flights, whatever the mode loaded: the section repeats or cuts them itself
            results["lake"] = run_readers(
                broker,
                flights if plan.rows["flights"] is None else data.load("flights", None),
                rows=plan.lake_rows,
                repeats=plan.repeats,
                scan_repeats=plan.lake_scan_repeats,
                run_id=run_id,
                checks=checks,
                seed=args.seed,
                out_dir=args.out,
                spark_timeout_s=plan.spark_timeout_s,
            )
            timings["lake_s"] = time.perf_counter() - t0
        if "encryption" not in skip:
            t0 = time.perf_counter()
            results["encryption"] = run_encryption(
                [ds.head(plan.encryption_rows) for ds in sets], plan.encryption_rounds, checks
            )
            timings["encryption_s"] = time.perf_counter() - t0
        if "freshness" not in skip:
            t0 = time.perf_counter()
            log.info("freshness: %d rows/s into %d partitions", plan.freshness_rate, plan.freshness_partitions)
            results["freshness"] = run_freshness(
                broker,
                flights,
                [plan.freshness_rate],
                partitions=plan.freshness_partitions,
                duration_s=plan.freshness_duration_s,
                scan_repeats=plan.freshness_scan_repeats,
                seed=args.seed,
                out_dir=args.out,
                spark=plan.freshness_spark,
                spark_timeout_s=plan.spark_timeout_s,
            )
            for run in results["freshness"]["runs"]:  # run_rate raised CheckFailed on any mismatch
                checks.passed_elsewhere(f"freshness {run['rate']} rows/s: table and scans", **run["checks"])
            timings["freshness_s"] = time.perf_counter() - t0
        if "upsert" not in skip:
            t0 = time.perf_counter()
            log.info("upsert: %d keys; the daemon at %d events/s", plan.upsert_keys, plan.upsert_rate)
            results["upsert"] = run_upsert_section(broker.bootstrap, plan, args.seed)
            timings["upsert_s"] = time.perf_counter() - t0
        if "rows" not in skip:
            t0 = time.perf_counter()
            log.info("rows: web_requests as row records, %d rows", plan.row_topic_rows)
            out = Path(args.out) / "rows"
            rows = run_rows(
                broker, args.registry_url, ["web_requests"], plan.row_topic_rows, plan.repeats, args.seed, out
            )
            results["rows"] = {**rows, "registry": bool(args.registry_url)}
            timings["rows_s"] = time.perf_counter() - t0
    finally:
        _cleanup(broker, run_id)
    results["targets"] = evaluate(results)
    results["checks"] = {"passed": len(checks.passed), "all": checks.passed}
    results["suite"]["wall_s"] = time.perf_counter() - started
    results["suite"]["load_average_at_end"] = os.getloadavg()
    results["suite"]["section_wall_s"] = timings
    return results


def main(argv: list[str] | None = None) -> int:
    from parka.ops.settings import SettingsParser

    argv = sys.argv[1:] if argv is None else argv
    # no abbreviated flags: masked_command must find every storage option
    parser = SettingsParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--mode", choices=sorted(PLANS), default="quick")
    parser.add_argument("--out", required=True, help="output folder for results.json, report.md and plots")
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument(
        "--kafka-data-dir",
        default=os.environ.get("PARKA_KAFKA_DATA_DIR"),
        help="the broker's log.dirs, for bytes on disk (scripts/kafka-local.sh data-dir)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the run order shuffles")
    parser.add_argument("--skip", action="append", default=[], choices=list(SECTIONS), help="skip a section")
    add_s3_arguments(parser)  # the ingest section's object-store arms
    parser.add_argument(
        "--registry-url",
        default=os.environ.get("PARKA_SCHEMA_REGISTRY_URL"),
        help="a schema registry (Confluent's API) for the rows section's Avro and Protobuf arms; without it, JSON only",
    )
    args = parser.parse_args(argv)
    args.s3 = s3_root(parser, args)
    if not args.kafka_data_dir:
        parser.error("--kafka-data-dir is required: bytes per row are read from the broker's log dir")
    args.command = shlex.join(["python", "-m", "benchmarks.suite", *masked_command(argv)])
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    log.setLevel(logging.INFO)
    os.makedirs(args.out, exist_ok=True)
    try:
        results = run_suite(args)
    except CheckFailed as exc:
        log.error("correctness check failed, no report written: %s", exc)
        return 1
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    write_report(results, args.out)
    log.info("done in %.0f s: %s", results["suite"]["wall_s"], os.path.join(args.out, "report.md"))
    for target in results["targets"]:
        ratio = target.get("ratio") or {}
        median = f"{ratio['median']:.2f}" if ratio.get("median") is not None else "-"
        log.info("target %s: %s (%s)", target["name"], target["status"], median)
    return 0


if __name__ == "__main__":
    sys.exit(main())
