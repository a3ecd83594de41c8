"""The targets in the benchmark suite's table (benchmarks/targets.py), read from the
checked-in runs of 2026-11-26: the ingest floors (disk and s3proxy), the freshness figures, the per-record
and end-to-end CPU goals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.report import render
from benchmarks.targets import end_to_end_arms, evaluate

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


def test_the_per_record_goals_are_looser_for_the_nested_data_set_and_poll_has_one_for_flat_ones() -> None:
    suite = _load("2026-11-26-suite")
    targets = _by_name({"matrix": suite["matrix"]})
    for ds in ("flights", "web_requests", "gps"):
        assert targets[f"produce_per_record_vs_avro_zstd_cpu[{ds}]"]["threshold"] == 0.2
        assert targets[f"consume_vs_fastavro_cpu[{ds}]"]["threshold"] == 0.25
        assert targets[f"poll_vs_fastavro_cpu[{ds}]"]["threshold"] == 0.5
    assert targets["produce_per_record_vs_avro_zstd_cpu[github_events]"]["threshold"] == 0.3
    assert targets["consume_vs_fastavro_cpu[github_events]"]["threshold"] == 0.4
    assert "poll_vs_fastavro_cpu[github_events]" not in targets
    assert {targets[f"produce_per_record_vs_floor_cpu[{ds}]"]["threshold"] for ds in ("gps", "github_events")} == {1.3}


def test_the_end_to_end_arms_add_the_producers_median_to_parka_ingests() -> None:
    suite = _load("2026-11-26-suite")
    cells = {(c["dataset"], c["encoding"]["name"], c["batch_rows"]): c["measures"] for c in suite["matrix"]["cells"]}
    per_dict = cells[("web_requests", "parquet-zstd (per record: produce, poll)", 10_000)]["producer_cpu_us_per_row"]
    batch = cells[("web_requests", "parquet-zstd", 10_000)]["producer_cpu_us_per_row"]
    [web] = [d for d in suite["end_to_end"]["datasets"] if d["dataset"] == "web_requests"]
    ingest = web["variants"]["parka ingest"]["cpu_s_per_million_rows"]
    arms = end_to_end_arms(suite, "web_requests")
    assert arms is not None
    assert arms["produce() per dict + parka ingest"] == per_dict["median"] + ingest["median"]
    assert arms["produce_batch + parka ingest"] == batch["median"] + ingest["median"]
    targets = _by_name(suite)
    by_dict = targets["end_to_end_per_dict_cpu_s_per_million[web_requests]"]
    by_batch = targets["end_to_end_batch_cpu_s_per_million[web_requests]"]
    assert by_dict["ratio"]["median"] == arms["produce() per dict + parka ingest"]
    # that run: 2.14 + 0.19 CPU-s per dict against 2.3, 0.83 + 0.19 with produce_batch against 1.1
    assert (by_dict["threshold"], by_dict["status"]) == (2.3, "not met")
    assert (by_batch["threshold"], by_batch["status"]) == (1.1, "met")


def test_a_run_without_the_end_to_end_section_has_no_end_to_end_goal() -> None:
    suite = _load("2026-11-26-suite")
    names = set(_by_name({"matrix": suite["matrix"]}))
    assert not {n for n in names if n.startswith("end_to_end_")}
    assert end_to_end_arms({"matrix": suite["matrix"]}, "web_requests") is None


def test_the_report_shows_both_producer_arms_beside_parka_ingest(tmp_path: Path) -> None:
    suite = _load("2026-11-26-suite")
    text = render(suite, str(tmp_path))
    table = text[text.index("### Producer to table: CPU-seconds per million rows") :]
    web = next(line for line in table.splitlines() if line.startswith("| web_requests"))
    arms = end_to_end_arms(suite, "web_requests")
    assert arms is not None
    cells = [c.strip() for c in web.strip("|").split("|")]
    assert len(cells) == 6 and float(cells[4]) == round(arms["produce() per dict + parka ingest"], 2)
