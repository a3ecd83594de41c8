"""End to end into Delta, per data set: ``parka ingest`` against the row baseline, each next to
the raw fetch of the same topic (the physical reference), interleaved over repeats; and
``parka ingest`` of the same segments into an Iceberg table (the embedded SQLite catalog), whose
CPU per row and scan time are reported as ratios to the Delta run of the same repeat.

Per data set two topics are produced once: the rows as zstd Parquet segments of 10,000 rows
(for ``parka ingest``) and as Confluent Avro in zstd record batches of 10,000 records (for the
row baseline). Then, per repeat, in a shuffled order: ``parka ingest`` into a fresh table, the
row baseline into a fresh table, and a raw fetch of each topic. Each table is checked (rows and
content fingerprint equal the data set), measured (file count, mean file size, a group-by
scan) and deleted.
"""

from __future__ import annotations

import logging
import math
import os
import random
import shutil
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from . import encodings as enc
from .broker import Broker
from .checks import CheckFailed, Checks, fingerprint
from .clients import fetch_raw, produce_parquet, produce_values
from .datasets import Dataset
from .lake import LakeRun, ingest, row_baseline, table_stats
from .measure import summarize

__all__ = ["SEGMENT_ROWS", "rates", "run_end_to_end", "run_rates"]

log = logging.getLogger("parka.bench")

SEGMENT_ROWS = 10_000
VARIANTS = ("parka ingest", "parka ingest (Iceberg)", "row baseline", "raw fetch (segments)", "raw fetch (Avro)")


def rates(
    rows: int, nbytes: int, wall_s: float, cpu_s: float, steady_wall_s: float, first_bytes: int
) -> dict[str, float]:
    """The throughput measures of one run, named with their units."""
    steady_bytes = max(nbytes - first_bytes, 0)
    return {
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "rows_per_s": rows / wall_s,
        "mb_per_s": nbytes / wall_s / 1e6,
        # no steady window (everything came in the first fetch): not measured, not 0
        "steady_mb_per_s": steady_bytes / steady_wall_s / 1e6 if steady_wall_s > 0 else math.nan,
        "rows_per_cpu_s": rows / cpu_s if cpu_s > 0 else 0.0,
        "cpu_s_per_million_rows": cpu_s / rows * 1e6,
    }


def run_rates(run: LakeRun, rows: int) -> dict[str, float]:
    """:func:`rates` of a run into a table."""
    return rates(rows, run.bytes, run.span.wall_s, run.span.cpu_s, run.steady_wall_s, run.first_bytes)


def _produce_topics(broker: Broker, ds: Dataset, run_id: str) -> dict[str, Any]:
    max_bytes = broker.max_message_bytes_cached()
    seg_topic = f"bench-{run_id}-e2e-{ds.name}-parquet-{uuid.uuid4().hex[:6]}"
    avro_topic = f"bench-{run_id}-e2e-{ds.name}-avro-{uuid.uuid4().hex[:6]}"
    broker.create_topic(seg_topic)
    broker.create_topic(avro_topic)
    _, stats, _ = produce_parquet(
        enc.parka_producer_conf(broker.bootstrap, "zstd", SEGMENT_ROWS, max_bytes), seg_topic, ds.avro_schema, ds.table
    )
    values = enc.serialize(ds, "avro", enc.rows_for(ds, "avro"))
    produce_values(enc.row_producer_conf(broker.bootstrap, "zstd", SEGMENT_ROWS, max_bytes), avro_topic, values)
    seg_disk, avro_disk = broker.log_stats(seg_topic), broker.log_stats(avro_topic)
    if seg_disk.records != stats["segments"] or avro_disk.records != ds.rows:
        raise CheckFailed(f"{ds.name}: the broker's logs hold {seg_disk.records} / {avro_disk.records} records")
    return {
        "segments_topic": seg_topic,
        "segments": stats["segments"],
        "segment_bytes": stats["segment_bytes"],
        "segments_bytes_per_row_on_disk": seg_disk.bytes / ds.rows,
        "avro_topic": avro_topic,
        "avro_bytes": sum(map(len, values)),
        "avro_zstd_bytes_per_row_on_disk": avro_disk.bytes / ds.rows,
    }


def _run_variant(
    broker: Broker, ds: Dataset, expected_fp: str, variant: str, topics: dict[str, Any], checks: Checks
) -> dict[str, float]:
    os.sync()  # clean page cache first: an fsync can write out other files' dirty data too
    if variant.startswith("raw fetch"):
        segments = variant == "raw fetch (segments)"
        topic = topics["segments_topic"] if segments else topics["avro_topic"]
        messages = topics["segments"] if segments else ds.rows
        # Segments are polled one by one as parka ingest does; Avro in batches as the baseline does.
        fetched = fetch_raw(broker.bootstrap, topic, messages, batch_size=1 if segments else 10_000)
        expected_bytes = topics["segment_bytes"] if segments else topics["avro_bytes"]
        if fetched.value_bytes != expected_bytes:
            raise CheckFailed(
                f"{ds.name} {variant}: fetched {fetched.value_bytes:,} bytes, produced {expected_bytes:,}"
            )
        s = fetched.span
        return rates(ds.rows, fetched.value_bytes, s.wall_s, s.cpu_s, fetched.steady_wall_s, fetched.first_bytes)
    folder = tempfile.mkdtemp(prefix=f"parka-bench-{ds.name}-")
    iceberg = variant == "parka ingest (Iceberg)"
    warehouse = folder if iceberg else None
    table_uri = f"bench.{ds.name}" if iceberg else folder
    try:
        if variant.startswith("parka ingest"):
            run = ingest(broker.bootstrap, topics["segments_topic"], table_uri, warehouse=warehouse)
        else:
            run = row_baseline(broker.bootstrap, topics["avro_topic"], table_uri, ds, ds.rows)
        sample = run_rates(run, ds.rows)
        sample["commits"] = run.commits
        stats = table_stats(table_uri, ds, warehouse=warehouse)
        checks.expect(
            f"{ds.name} {variant}: {'Iceberg' if iceberg else 'Delta'} table",
            rows=stats.rows,
            expected_rows=ds.rows,
            got=stats.fingerprint,
            expected=expected_fp,
        )
        sample["files"] = stats.files
        sample["mean_file_bytes"] = stats.mean_file_bytes
        sample["scan_s"] = stats.scan_s
        return sample
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_end_to_end(
    broker: Broker,
    datasets: list[Dataset],
    repeats: int,
    run_id: str,
    checks: Checks,
    seed: int,
    progress: Callable[[str], None] = log.info,
) -> dict[str, Any]:
    """The ``end_to_end`` section of results.json."""
    topics = {}
    fps = {}
    from parka.lake import IcebergEngine  # noqa: F401  (imported once here: not a cost of the first run)

    try:
        for ds in datasets:
            topics[ds.name] = _produce_topics(broker, ds, run_id)
            fps[ds.name] = fingerprint(ds.table, ds.table.schema)
        runs = [(ds, v) for ds in datasets for v in VARIANTS]
        samples: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
        for rep in range(repeats):
            order = list(runs)
            random.Random(seed + 1000 + rep).shuffle(order)
            for ds, variant in order:
                samples[(ds.name, variant)].append(
                    _run_variant(broker, ds, fps[ds.name], variant, topics[ds.name], checks)
                )
            progress(f"end to end repeat {rep + 1}/{repeats} done")
    finally:
        broker.delete_topics([t[k] for t in topics.values() for k in ("segments_topic", "avro_topic")])
    out = []
    for ds in datasets:
        per_variant = {}
        for variant in VARIANTS:
            reps = samples[(ds.name, variant)]
            per_variant[variant] = {
                name: summarize([r[name] for r in reps], name) for name in reps[0] if name != "commits"
            }
            if "commits" in reps[0]:
                per_variant[variant]["commits"] = summarize([r["commits"] for r in reps], "commits")
        ingest_reps = samples[(ds.name, "parka ingest")]
        base_reps = samples[(ds.name, "row baseline")]
        raw_reps = samples[(ds.name, "raw fetch (segments)")]
        ice_reps = samples[(ds.name, "parka ingest (Iceberg)")]
        ratios = {
            "ingest_over_baseline_rows_per_cpu_s": summarize(
                [i["rows_per_cpu_s"] / b["rows_per_cpu_s"] for i, b in zip(ingest_reps, base_reps, strict=True)],
                "ratio",
            ),
            # the same topic into Iceberg and into Delta, per repeat: CPU per row, and the scan query
            "iceberg_over_delta_cpu_s_per_row": summarize(
                [c["cpu_s"] / d["cpu_s"] for c, d in zip(ice_reps, ingest_reps, strict=True)], "ratio"
            ),
            "iceberg_over_delta_scan_s": summarize(
                [c["scan_s"] / d["scan_s"] for c, d in zip(ice_reps, ingest_reps, strict=True)], "ratio"
            ),
            # Small topics: the group join dominates both, so this compares whole runs.
            "ingest_over_raw_fetch_rows_per_s": summarize(
                [i["rows_per_s"] / r["rows_per_s"] for i, r in zip(ingest_reps, raw_reps, strict=True)],
                "ratio",
            ),
        }
        out.append(
            {
                "dataset": ds.name,
                "rows": ds.rows,
                "segment_rows": SEGMENT_ROWS,
                "segments": topics[ds.name]["segments"],
                "segment_bytes": topics[ds.name]["segment_bytes"],
                "avro_bytes": topics[ds.name]["avro_bytes"],
                "segments_bytes_per_row_on_disk": topics[ds.name]["segments_bytes_per_row_on_disk"],
                "avro_zstd_bytes_per_row_on_disk": topics[ds.name]["avro_zstd_bytes_per_row_on_disk"],
                "variants": per_variant,
                "ratios": ratios,
            }
        )
    return {"datasets": out}
