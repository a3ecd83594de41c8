"""The ingest-floor and freshness targets in the benchmark suite's table (benchmarks/targets.py), read from the
checked-in runs of 2026-11-26: the ingest floors (disk and s3proxy) and the freshness figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.targets import evaluate

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((RESULTS / name / "results.json").read_text())
    return loaded


def _by_name(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in evaluate(results)}


def test_the_floor_targets_read_the_ingest_sections_ratios_at_10000_rows_per_segment() -> None:
    floor = _load("2026-11-26-ingest-floor")
    targets = _by_name({"ingest_throughput": floor["ingest_throughput"]})
    disk, s3 = targets["ingest_vs_fetch_write_sync"], targets["ingest_vs_fetch_put_s3"]
    assert (
        disk["ratio"]["median"]
        == floor["ingest_throughput"]["segment_sizes"][0]["ratio_to_fetch_and_write_steady_mb_per_s"]["median"]
    )
    assert (disk["status"], disk["comparison"], disk["threshold"]) == ("met", ">=", 0.8)
    assert s3["status"] == "met" and "4 PUTs in flight" in s3["description"]
    assert s3["ratio"]["median"] > 0.9  # 0.978 in that run


def test_without_an_object_store_there_is_no_s3_target() -> None:
    section = _load("2026-11-26-ingest-floor")["ingest_throughput"]
    for size in section["segment_sizes"]:
        size.pop("ratio_to_fetch_and_put_steady_mb_per_s")
    names = set(_by_name({"ingest_throughput": section}))
    assert "ingest_vs_fetch_write_sync" in names and "ingest_vs_fetch_put_s3" not in names


def test_the_freshness_targets_are_one_per_figure_and_point() -> None:
    quiet = _load("2026-11-26-freshness-quiet")  # written before the section kept its settings
    section = {"settings": quiet["settings"], "runs": quiet["freshness"]["runs"]}
    targets = {n: t for n, t in _by_name({"freshness": section}).items() if n.startswith("freshness")}
    assert targets["freshness_p99_s[100000]"]["status"] == "met"  # 1.34 s
    assert targets["freshness_p99_s[100000]"]["ratio"]["median"] == quiet["freshness"]["runs"][0]["latency_s"]["p99"]
    assert targets["freshness_write_amplification[100000]"]["status"] == "met"  # 1.90
    assert targets["freshness_duckdb_scan[100000, 0.5 of the run]"]["status"] == "not met"  # 1.74
    assert targets["freshness_duckdb_scan[100000, end]"]["status"] == "met"  # 1.199
    assert targets["freshness_spark_scan[100000, end]"]["status"] == "met"  # 1.14
    assert "22 files, 179 row groups" in targets["freshness_duckdb_scan[100000, 0.5 of the run]"]["description"]
    assert len(targets) == 5  # Spark scans only where they ran (the end point)


def test_a_spark_scan_that_did_not_run_is_a_target_not_run_with_its_reason() -> None:
    quiet = _load("2026-11-26-freshness-quiet")
    run = quiet["freshness"]["runs"][0]
    run["scans"][1]["spark"] = {"status": "not run", "reason": "no Java"}
    targets = _by_name({"freshness": {"settings": quiet["settings"], "runs": [run]}})
    spark = targets["freshness_spark_scan[100000, end]"]
    assert (spark["status"], spark["note"]) == ("not run", "no Java")


def test_the_upsert_targets_read_the_arms_and_the_daemon_runs() -> None:
    """The upsert section as the suite writes it, built from the checked-in runs of 2026-11-30
    (the arms at 10 million keys; the daemon at 1 million keys, with its purge threshold at parka's
    default and at a twentieth, standing in for two key counts)."""
    arms = _load("2026-11-30-upsert-spark-merge/uniform")["arms"]
    low = _load("2026-11-30-upsert-purge-fraction/purge-0.2")["freshness"]
    high = _load("2026-11-30-upsert-purge-fraction/purge-0.05")["freshness"]
    section = {"keys": 10_000_000, "arms": arms, "rate": 20_000, "daemon": {"1000000": low, "10000000": high}}
    targets = _by_name({"upsert": section})
    best = targets["upsert_cpu_per_event_best_anchor_over_parka"]
    assert best["ratio"]["median"] == (arms["delta-rs MERGE"]["cpu_s"] / 30_000) / (arms["parka"]["cpu_s"] / 1_000_000)
    assert (best["status"], best["comparison"]) == ("met", ">=") and "(delta-rs MERGE)" in best["description"]
    cost = targets["upsert_cost_per_commit_large_over_small"]
    assert cost["ratio"]["median"] == high["cpu_per_commit_ms"] / low["cpu_per_commit_ms"]
    assert cost["status"] == "not met"  # 482.5 / 267.9 ms
    assert targets["upsert_p99_s[1000000]"]["status"] == "met"  # 1.16 s
    scan = targets["upsert_scan[1000000]"]
    assert scan["ratio"] == low["scan_ratio"] and scan["status"] == "not met"  # 4.06
    assert not _by_name({}).get("upsert_scan[1000000]")


def test_the_row_topic_targets_read_the_rows_sections_samples() -> None:
    """The checked-in suite run of the rows section (2026-11-30): JSON's CPU per million rows, the
    median of its samples, and the paired ratios' medians from the same samples."""
    results = _load("2026-11-30-suite-rows")
    targets = _by_name(results)
    samples = results["rows"]["web_requests"]["samples"]
    json_cpu = targets["row_topics_json_cpu_s_per_million_rows"]
    assert json_cpu["ratio"]["median"] == sorted(samples["json"])[1] and json_cpu["threshold"] == 6.0
    paired = sorted(a / b for a, b in zip(samples["avro"], samples["json"], strict=True))
    assert targets["row_topics_avro_over_json"]["ratio"]["median"] == paired[1]
    assert {t["status"] for n, t in targets.items() if n.startswith("row_topics_")} == {"met"}
    assert "row_topics_json_cpu_s_per_million_rows" not in _by_name({"rows": {}})  # no section, no target
