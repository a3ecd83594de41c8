"""The targets the report states as met or not met, computed from one run's results.

Every ratio pairs the two variants of the same repeat (they ran interleaved in that repeat),
then takes the median and the min-max over repeats.
"""

from __future__ import annotations

import statistics
from typing import Any

from parka.lake import DEFAULT_COMPACT_MAX_REWRITES

from .measure import paired_ratio, summarize

WRITE_AMPLIFICATION_BUDGET = 1.0 + DEFAULT_COMPACT_MAX_REWRITES
"""Background compaction's bound: a row is written once, then rewritten at most
``--compact-max-rewrites`` times (``parka.lake._compaction``)."""

__all__ = ["end_to_end_arms", "evaluate"]


def _cell(results: dict[str, Any], dataset: str, name: str, batch: int) -> dict[str, Any] | None:
    for cell in results.get("matrix", {}).get("cells", []):
        if cell["dataset"] == dataset and cell["encoding"]["name"] == name and cell["batch_rows"] == batch:
            return dict(cell["measures"])
    return None


def _target(
    name: str, description: str, ratio: dict[str, Any] | None, threshold: float, *, at_most: bool, note: str = ""
) -> dict[str, Any]:
    if ratio is None or ratio.get("median") is None:
        # run, but no repeat could take the measure (a steady rate with no steady window): say so
        status = "not run" if ratio is None else "not measured"
        return {"name": name, "description": description, "threshold": threshold, "status": status, "note": note}
    value = ratio["median"]
    met = value <= threshold if at_most else value >= threshold
    return {
        "name": name,
        "description": description,
        "threshold": threshold,
        "comparison": "<=" if at_most else ">=",
        "ratio": ratio,
        "status": "met" if met else "not met",
        "note": note,
    }


def _one(value: float) -> dict[str, Any]:
    """A figure the run measured once, as :func:`_target` takes a spread."""
    return {"median": value, "min": value, "max": value, "n": 1}


def _bytes_target(results: dict[str, Any]) -> dict[str, Any]:
    seg = _cell(results, "flights", "parquet-zstd", 10_000)
    avro = _cell(results, "flights", "avro+zstd", 10_000)
    ratio = _paired(seg, avro, "bytes_per_row")
    return _target(
        "segments_vs_avro_zstd_bytes",
        "flights, 10k rows per batch: broker bytes of zstd Parquet segments / Avro + Kafka zstd",
        ratio,
        0.8,
        at_most=True,
    )


def _layout_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Tuned segments (parka's default layout) at most 0.7 x Avro + zstd, 10k rows, per data set;
    and the same with segments sorted by the data set's key column, where one was run."""
    out = []
    cells = results.get("matrix", {}).get("cells", [])
    for ds in sorted({c["dataset"] for c in cells}):
        avro = _cell(results, ds, "avro+zstd", 10_000)
        out.append(
            _target(
                f"segments_tuned_vs_avro_zstd_bytes[{ds}]",
                f"{ds}, 10k rows per batch: broker bytes of tuned zstd segments / Avro + Kafka zstd",
                _paired(_cell(results, ds, "parquet-zstd", 10_000), avro, "bytes_per_row"),
                0.7,
                at_most=True,
            )
        )
        for c in cells:
            sort_by = c["encoding"].get("sort_by")
            if c["dataset"] == ds and sort_by and c["batch_rows"] == 10_000:
                out.append(
                    _target(
                        f"segments_sorted_vs_avro_zstd_bytes[{ds}]",
                        f"{ds}, 10k rows per batch, columnar.sort.by={sort_by}: tuned zstd segments / Avro + zstd",
                        _paired(c["measures"], avro, "bytes_per_row"),
                        0.7,
                        at_most=True,
                    )
                )
    return out


def _paired(a: dict[str, Any] | None, b: dict[str, Any] | None, measure: str) -> dict[str, Any] | None:
    """The per-repeat ratios a/b of ``measure`` (the two cells ran interleaved in each repeat)."""
    if not a or not b or measure not in a or measure not in b:
        return None
    return paired_ratio(a[measure]["values"], b[measure]["values"])


def _within(cell: dict[str, Any] | None, measure: str, base: str) -> dict[str, Any] | None:
    """The per-repeat ratios ``measure``/``base`` of one cell (both measured in each repeat)."""
    if not cell or measure not in cell or base not in cell:
        return None
    return paired_ratio(cell[measure]["values"], cell[base]["values"])


# The per-record path's goals. Ratios are medians of paired repeats against the row encoding the
# path replaces (Avro + zstd produced, or a plain consumer + fastavro), at 10,000 rows per batch;
# github_events is the nested data set, held to looser ratios. The end-to-end goals are absolute:
# CPU-seconds per million web_requests rows, the producer plus parka ingest.
PRODUCE_VS_AVRO = {"flat": 0.2, "nested": 0.3}
PRODUCE_VS_FLOOR = 1.3
CONSUME_VS_FASTAVRO = {"flat": 0.25, "nested": 0.4}
POLL_VS_FASTAVRO_FLAT = 0.5
NESTED_DATASETS = frozenset({"github_events"})
END_TO_END_DATASET = "web_requests"
END_TO_END_PER_DICT_CPU_S = 2.3  # produce() per dict + parka ingest, per million rows
END_TO_END_BATCH_CPU_S = 1.1  # produce_batch of a table + parka ingest, per million rows


def _drop_in_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The drop-in goals: the per-record APIs against the row encoding they replace, 10k rows, zstd."""
    out = []
    datasets = sorted({c["dataset"] for c in results.get("matrix", {}).get("cells", [])})
    for ds in datasets:
        shape = "nested" if ds in NESTED_DATASETS else "flat"
        avro = _cell(results, ds, "avro+zstd", 10_000)
        per_record = _cell(results, ds, "parquet-zstd (per record: produce, poll)", 10_000)
        segments = _cell(results, ds, "parquet-zstd", 10_000)
        out.append(
            _target(
                f"produce_per_record_vs_avro_zstd_cpu[{ds}]",
                f"{ds}: ParquetProducer.produce() per dict CPU per row / Avro + zstd (serialization included)",
                _paired(per_record, avro, "producer_cpu_us_per_row"),
                PRODUCE_VS_AVRO[shape],
                at_most=True,
            )
        )
        out.append(
            _target(
                f"produce_per_record_vs_floor_cpu[{ds}]",
                f"{ds}: ParquetProducer.produce() per dict CPU per row / its floor (the dicts appended, "
                "Table.from_pylist, a zstd Parquet write; measured in the same cell)",
                _within(per_record, "producer_cpu_us_per_row", "floor_cpu_us_per_row"),
                PRODUCE_VS_FLOOR,
                at_most=True,
            )
        )
        out.append(
            _target(
                f"consume_vs_fastavro_cpu[{ds}]",
                f"{ds}: ParquetConsumer.consume() CPU per row / plain consumer + fastavro",
                _paired(segments, avro, "consumer_cpu_us_per_row"),
                CONSUME_VS_FASTAVRO[shape],
                at_most=True,
            )
        )
        if shape == "flat":
            out.append(
                _target(
                    f"poll_vs_fastavro_cpu[{ds}]",
                    f"{ds}: ParquetConsumer.poll() per record CPU per row / plain consumer + fastavro",
                    _paired(per_record, avro, "consumer_cpu_us_per_row"),
                    POLL_VS_FASTAVRO_FLAT,
                    at_most=True,
                )
            )
    return out


def end_to_end_arms(results: dict[str, Any], dataset: str) -> dict[str, float] | None:
    """CPU-seconds per million rows of ``dataset`` from producer to table: the median of
    ``produce()`` per dict (the encoding matrix's per-record cell), of ``produce_batch`` of a table
    (its segments cell) and of ``parka ingest`` (the end-to-end section), and the two sums. The
    producer's µs per row is its CPU-seconds per million rows. ``None`` unless the run has all three."""
    per_record = _cell(results, dataset, "parquet-zstd (per record: produce, poll)", 10_000)
    batch = _cell(results, dataset, "parquet-zstd", 10_000)
    e2e = next((d for d in (results.get("end_to_end") or {}).get("datasets", []) if d["dataset"] == dataset), None)
    if not per_record or not batch or e2e is None:
        return None
    medians = {
        "produce() per dict": per_record["producer_cpu_us_per_row"]["median"],
        "produce_batch": batch["producer_cpu_us_per_row"]["median"],
        "parka ingest": e2e["variants"]["parka ingest"]["cpu_s_per_million_rows"]["median"],
    }
    if any(v is None for v in medians.values()):
        return None
    return {
        **medians,
        "produce() per dict + parka ingest": medians["produce() per dict"] + medians["parka ingest"],
        "produce_batch + parka ingest": medians["produce_batch"] + medians["parka ingest"],
    }


def _end_to_end_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The producer plus ``parka ingest`` per million web_requests rows, both arms: each figure the
    sum of two medians (the arms ran in two sections of one run, so they are not paired)."""
    if not results.get("end_to_end") or not results.get("matrix"):
        return []
    arms = end_to_end_arms(results, END_TO_END_DATASET)

    def one(key: str) -> dict[str, Any] | None:
        return None if arms is None else _one(arms[key])

    ds = END_TO_END_DATASET
    return [
        _target(
            f"end_to_end_per_dict_cpu_s_per_million[{ds}]",
            f"{ds}: produce() per dict + parka ingest, CPU-seconds per million rows (sum of the two medians)",
            one("produce() per dict + parka ingest"),
            END_TO_END_PER_DICT_CPU_S,
            at_most=True,
        ),
        _target(
            f"end_to_end_batch_cpu_s_per_million[{ds}]",
            f"{ds}: produce_batch of a table + parka ingest, CPU-seconds per million rows (sum of the two medians)",
            one("produce_batch + parka ingest"),
            END_TO_END_BATCH_CPU_S,
            at_most=True,
        ),
    ]


def _ingest_cpu_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for ds in results.get("end_to_end", {}).get("datasets", []):
        out.append(
            _target(
                f"ingest_vs_row_baseline_rows_per_cpu_s[{ds['dataset']}]",
                f"{ds['dataset']}: parka ingest rows per CPU-second / the row baseline's",
                ds["ratios"]["ingest_over_baseline_rows_per_cpu_s"],
                10.0,
                at_most=False,
            )
        )
    return out


def _raw_fetch_target(results: dict[str, Any]) -> dict[str, Any]:
    section = results.get("ingest_throughput") or {}
    sizes = {s["segment_rows"]: s for s in section.get("segment_sizes", [])}
    chosen = sizes.get(10_000) or (next(iter(sizes.values())) if sizes else None)
    ratio = chosen["ratio_steady_mb_per_s"] if chosen else None
    rows = chosen["segment_rows"] if chosen else 10_000
    copies = chosen["copies"] if chosen else "?"
    return _target(
        "ingest_vs_raw_fetch_throughput",
        f"flights x {copies}, {rows:,} rows per segment: parka ingest MB/s / raw fetch MB/s (steady)",
        ratio,
        0.8,
        at_most=False,
        note="no steady window: parka ingest took every segment in its first fetch (too few segments)"
        if ratio is not None and ratio.get("median") is None
        else "",
    )


def _floor_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """``parka ingest`` against its floor at 10,000 rows per segment, on local disk
    (fetch + write + one sync) and, when the section ran its object-store arms, on the store
    (fetch + parallel PUTs of the same bytes)."""
    section = results.get("ingest_throughput") or {}
    chosen = {s["segment_rows"]: s for s in section.get("segment_sizes", [])}.get(10_000)
    if chosen is None:
        return []
    where = f"flights x {chosen['copies']}, 10,000 rows per segment"
    threads = (section.get("object_store") or {}).get("write_threads", "parallel")
    out = [
        _target(
            "ingest_vs_fetch_write_sync",
            f"{where}: parka ingest MB/s / fetch + write + one sync MB/s, local disk (steady)",
            chosen.get("ratio_to_fetch_and_write_steady_mb_per_s"),
            0.8,
            at_most=False,
        )
    ]
    if "ratio_to_fetch_and_put_steady_mb_per_s" in chosen:
        out.append(
            _target(
                "ingest_vs_fetch_put_s3",
                f"{where}: parka ingest MB/s / fetch + {threads} PUTs in flight MB/s, object store (steady)",
                chosen["ratio_to_fetch_and_put_steady_mb_per_s"],
                0.8,
                at_most=False,
            )
        )
    return out


def _freshness_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The freshness figures for each rate the section ran: p99 produce-to-visible
    latency, write amplification, and the scan ratios against the row baseline's table at each
    measurement point (DuckDB; Spark where it ran). Latency and write amplification are one
    value per run, shown as such."""
    section = results.get("freshness") or {}
    partitions = (section.get("settings") or {}).get("partitions")
    out = []
    for run in section.get("runs", []):
        where = f"freshness, {run['rate']} rows/s into {partitions} partitions"
        for key, what, value, limit in (
            ("p99_s", "p99 produce-to-visible latency over every row, seconds", run["latency_s"]["p99"], 2.0),
            (
                "write_amplification",
                "write amplification (bytes of every data file written / segment bytes)",
                run["write_amplification"]["ratio"],
                WRITE_AMPLIFICATION_BUDGET,
            ),
        ):
            one = {"median": value, "min": value, "max": value, "n": 1}  # one value per run
            out.append(_target(f"freshness_{key}[{run['rate']}]", f"{where}: {what}", one, limit, at_most=True))
        for point in run["scans"]:
            out.append(
                _target(
                    f"freshness_duckdb_scan[{run['rate']}, {point['point']}]",
                    f"{where}, {point['point']} ({point['parka']['files']} files, {point['parka']['row_groups']}"
                    " row groups): DuckDB scan time, parka's table / the row baseline's",
                    point["duckdb_ratio"],
                    1.2,
                    at_most=True,
                )
            )
            spark = point.get("spark")
            if spark is not None:
                out.append(
                    _target(
                        f"freshness_spark_scan[{run['rate']}, {point['point']}]",
                        f"{where}, {point['point']}: Spark scan time, parka's table / the row baseline's",
                        spark.get("ratio") if spark.get("status") == "ok" else None,
                        1.2,
                        at_most=True,
                        note="" if spark.get("status") == "ok" else str(spark.get("reason", "not run")),
                    )
                )
    return out


def _spark_target(results: dict[str, Any]) -> dict[str, Any]:
    spark = results.get("spark") or {}
    ratio = spark.get("ratio_parka_over_from_avro_rows_per_cpu_s")
    note = "" if spark.get("status") == "ok" else spark.get("reason", "not run")
    return _target(
        "spark_parka_vs_from_avro_rows_per_cpu_s",
        f"gps, {spark.get('n_records', 2_000_000):,} records per query: parka's Spark path (raw mode) rows per"
        " CPU-second / Structured Streaming with from_avro (goal: 3.5 at 2M)",
        ratio,
        3.5,
        at_most=False,
        note=note,
    )


def _lake_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The lake for its readers: files, scans against the row baseline's table, ingest vs its floor."""
    lake = results.get("lake")
    if not lake:
        return []
    where = f"flights, {lake['rows']:,} rows, {lake['segment_rows']:,} rows per segment"
    ratio = lake.get("segments_per_file")
    out = [
        _target(
            "lake_segments_per_file",
            f"{where}: segments / data files of the parka ingest table",
            summarize([ratio], "ratio") if ratio is not None else None,
            50.0,
            at_most=False,
        )
    ]
    optimize = lake.get("optimize") or {}
    optimize_note = ""
    if optimize.get("status") != "ok":
        optimize_note = f"parka optimize {optimize.get('status')}: {optimize.get('reason', '')}"
    engines = lake["scans"]["engines"]
    for engine in ("duckdb", "spark"):
        result = engines.get(engine) or {}
        note = "" if result.get("status") == "ok" else str(result.get("reason", "not run"))
        out.append(
            _target(
                f"lake_scan_{engine}_vs_row_baseline",
                f"{where}: {engine} scan query time, parka ingest table / row baseline table",
                result.get("ratio_parka_over_baseline"),
                1.2,
                at_most=True,
                note=note,
            )
        )
        out.append(
            _target(
                f"lake_scan_{engine}_after_optimize_vs_row_baseline",
                f"{where}: {engine} scan query time, parka ingest table after `parka optimize` / row baseline table",
                result.get("ratio_optimized_over_baseline"),
                1.05,
                at_most=True,
                note=note or optimize_note,
            )
        )
    out.append(
        _target(
            "lake_ingest_vs_fetch_write_sync",
            f"{where}: parka ingest MB/s / fetch + write + one sync MB/s on the same topic (steady)",
            lake["ingest"]["ratio_steady_mb_per_s"],
            0.8,
            at_most=False,
        )
    )
    return out


def _upsert_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The upsert goals: CPU per event against the best anchor, the daemon's cost per commit on
    its largest key count against its smallest, and for each key count its p99
    produce-to-visible and its table's scan against the same rows written compact. One value
    per run each (the scan: the median of its paired rounds)."""
    section = results.get("upsert")
    if not section:
        return []
    out = []
    arms = section["arms"]

    def per_event(arm: dict[str, Any]) -> float:
        return float(arm["cpu_s"]) / float(arm["events"])

    anchors = {name: per_event(arm) for name, arm in arms.items() if not name.startswith("parka")}
    if "parka" in arms and anchors:
        best = min(anchors, key=anchors.__getitem__)
        out.append(
            _target(
                "upsert_cpu_per_event_best_anchor_over_parka",
                f"upserts into {section['keys']:,} keys: CPU per event of the best anchor ({best}) / parka ingest "
                "--upsert's (at least)",
                _one(anchors[best] / per_event(arms["parka"])),
                10.0,
                at_most=False,
            )
        )
    daemon = section.get("daemon") or {}
    if len(daemon) >= 2:
        small, large = sorted(daemon, key=int)[0], sorted(daemon, key=int)[-1]
        out.append(
            _target(
                "upsert_cost_per_commit_large_over_small",
                f"the upsert daemon at {section['rate']:,} events/s: CPU per commit with {int(large):,} keys / with "
                f"{int(small):,}",
                _one(daemon[large]["cpu_per_commit_ms"] / daemon[small]["cpu_per_commit_ms"]),
                1.3,
                at_most=True,
            )
        )
    for keys, run in sorted(daemon.items(), key=lambda kv: int(kv[0])):
        where = f"the upsert daemon on {int(keys):,} keys at {section['rate']:,} events/s"
        out.append(
            _target(
                f"upsert_p99_s[{keys}]", f"{where}: p99 produce-to-visible, seconds", _one(run["p99_s"]), 5.0,
                at_most=True,
            )
        )  # fmt: skip
        out.append(
            _target(
                f"upsert_scan[{keys}]",
                f"{where}: scan of its table / the same rows written compact (delta-rs' query engine)",
                run["scan_ratio"],
                1.5,
                at_most=True,
            )
        )
    return out


def _row_topic_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The row topics' goals on web_requests: ``parka ingest`` at most 6 CPU-seconds per million
    JSON rows (the median over repeats), Avro no dearer than JSON and Protobuf no dearer than Avro
    (medians of the paired ratios)."""
    section = (results.get("rows") or {}).get("web_requests")
    if not section:
        return []
    samples = section["samples"]

    def stat(values: list[float]) -> dict[str, Any] | None:
        if not values:
            return None
        return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}

    def paired(arm: str, base: str) -> dict[str, Any] | None:
        if arm not in samples or base not in samples:
            return None
        return stat([a / b for a, b in zip(samples[arm], samples[base], strict=True)])

    return [
        _target(
            "row_topics_json_cpu_s_per_million_rows",
            "parka ingest --value-format json on web_requests: CPU-seconds per million rows, Kafka fetch included "
            "(at most; a value, not a ratio)",
            stat(samples.get("json", [])),
            6.0,
            at_most=True,
        ),
        _target(
            "row_topics_avro_over_json",
            "parka ingest on web_requests: CPU of Avro records / of JSON records (at most)",
            paired("avro", "json"),
            1.0,
            at_most=True,
        ),
        _target(
            "row_topics_protobuf_over_avro",
            "parka ingest on web_requests: CPU of Protobuf records / of Avro records (at most)",
            paired("protobuf", "avro"),
            1.0,
            at_most=True,
        ),
    ]


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """All targets, in the order the report lists them."""
    return [
        _bytes_target(results),
        *_layout_targets(results),
        *_drop_in_targets(results),
        *_end_to_end_targets(results),
        *_ingest_cpu_targets(results),
        _raw_fetch_target(results),
        *_floor_targets(results),
        _spark_target(results),
        *_lake_targets(results),
        *_freshness_targets(results),
        *_upsert_targets(results),
        *_row_topic_targets(results),
    ]
