"""``parka spark-ingest --upsert`` (raw mode, committed by delta-rs): the executors write the
segments' files and pass the tombstones to the driver, whose one committer makes the table the
latest row per key, exactly as ``parka ingest --upsert`` does; ``--cdc debezium`` unwraps
Debezium envelopes on the executors. delta-spark and delta-rs' query engine read the same rows
(the first test's table partitioned by a column its updates change). And ``parka ingest
--upsert`` killed at each crash point of its commit: the table it leaves, read by every Delta
reader that applies deletion vectors, delta-spark among them (so the test is in the Spark
session's group)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from parka.spark_ext._cli import main
from parka.spark_ext._ingest import CHECKPOINTS_DIR

from .._ingest_util import assert_no_orphans, run_ingest
from ..test_cdc import Event, produce_envelopes
from ..test_cdc import apply as apply_changes
from ..test_cdc import table_rows as cdc_rows
from ..test_upsert import BY_VERSION, UPSERT_POINTS, apply, crash_at_each_point, crash_round, land, produce, table_rows
from ._util import SPARK, committed_batches

pytestmark = SPARK


def spark_rows(spark: Any, table: Path, columns: str) -> list[dict[str, Any]]:
    return sorted(spark.read.format("delta").load(str(table)).selectExpr(*columns.split(",")).toArrow().to_pylist(),
                  key=lambda r: r["id"])  # fmt: skip


def test_spark_ingest_upsert_holds_the_latest_row_per_key_across_runs(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    flags = [topic, str(table), "-k", bootstrap, "--end-at-latest", "-q", *BY_VERSION]
    flags += ["--commit-engine", "delta-rs", "--upsert"]
    model: dict[int, int] = {}
    rounds: list[list[tuple[int, int | None]]] = [
        [(k, 1) for k in range(50)] + [(k, 2) for k in range(0, 50, 3)] + [(k, None) for k in range(40, 50)],
        [(k, 3) for k in range(0, 20)] + [(5, None), (5, 4), (7, None), (1000, None)],
    ]
    for events in rounds:
        produce(bootstrap, topic, events)
        apply(model, events)
        assert main(flags) == 0
        assert table_rows(table) == model
        assert {r["id"]: r["version"] for r in spark_rows(spark, table, "id,version")} == model
    assert DeltaTable(str(table)).metadata().partition_columns == ["version"]  # an update moves a row
    capsys.readouterr()
    assert main([*flags[:-3], "--upsert"]) == 2  # delta-spark commits no deletion vectors of parka's
    assert "'commit_engine'" in capsys.readouterr().err


def test_spark_ingest_cdc_unwraps_debezium_envelopes_on_the_executors(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    row = lambda k, v: {"id": k, "name": f"n{k}-{v}", "qty": v}  # noqa: E731
    events: list[Event] = [("r", k, 10 + k, row(k, 0)) for k in range(20)]
    events += [("u", k, 100 + k, row(k, 1)) for k in range(0, 20, 2)]
    events += [("d", 3, 200, row(3, 0)), ("", 3, 200, None), ("u", 4, 50, row(4, 9)), ("d", 6, 60, row(6, 0))]
    produce_envelopes(bootstrap, topic, events)
    model: dict[int, tuple[int, dict[str, Any]]] = {}
    apply_changes(model, events)
    flags = [topic, str(table), "-k", bootstrap, "--end-at-latest", "-q", "--commit-engine", "delta-rs"]
    assert main([*flags, "--cdc", "debezium"]) == 0
    expected = {k: v for k, (_, v) in model.items()}
    assert {k: {c: r[c] for c in ("id", "name", "qty")} for k, r in cdc_rows(table).items()} == expected
    assert {r["id"]: r for r in spark_rows(spark, table, "id,name,qty")} == expected


def new_files_of_batch(table: Path, batch: int) -> int:
    """The data files micro-batch ``batch``'s commit added (not those it gave a deletion vector)."""
    for commit in (table / "_delta_log").glob("[0-9]*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        if next(a["commitInfo"] for a in actions if "commitInfo" in a).get("parka.spark_batch") == batch:
            return sum("add" in a and a["add"].get("deletionVector") is None for a in actions)
    raise AssertionError(f"no commit of batch {batch}")


def test_a_replayed_upsert_batch_whose_commit_landed_neither_lands_nor_deletes_again(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--upsert`` (delta-rs commits, deletion vectors, partitioned by a column updates change):
    the state a driver killed after its Delta commit and before Spark marked the micro-batch done
    leaves, made by removing the last batch's mark from the checkpoint (a real kill at that point,
    in append mode, is test_spark_faults.py's). The next run replays that batch, finds its commit,
    deletes the replay's copies, and lands the rest. Updates, tombstones and keys created again
    span the batches, so a replay that deleted again or landed again would show."""
    import polars as pl

    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    flags = [topic, str(table), "-k", bootstrap, "--end-at-latest", "--max-offsets-per-trigger", "4", "-q"]
    flags += ["--commit-engine", "delta-rs", "--upsert", *BY_VERSION]
    checkpoint = table / CHECKPOINTS_DIR / f"parka-{topic}"
    model: dict[int, int] = {}
    for events in ([(k, 1) for k in range(40)] + crash_round(0), crash_round(1) + crash_round(2)):
        produce(bootstrap, topic, events)  # 7 records a segment
        apply(model, events)
        if (checkpoint / "commits").exists():
            last = max(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))
            assert last in committed_batches(table)
            for mark in (str(last), f".{last}.crc"):  # committed to the table, not marked done
                (checkpoint / "commits" / mark).unlink()
        capsys.readouterr()
        assert main(flags) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    batches = committed_batches(table)  # raises if a batch committed twice
    assert result["covered_files"] == new_files_of_batch(table, last)  # the replay's, deleted uncommitted
    assert last + 1 in batches and list(batches) == list(range(max(batches) + 1))
    assert table_rows(table) == model  # delta-rs' query engine, deletion vectors applied
    rows = pl.read_delta(str(table)).select("id", "version").to_dicts()
    assert len(rows) == len(model) and {r["id"]: r["version"] for r in rows} == model
    assert {r["id"]: r["version"] for r in spark_rows(spark, table, "id,version")} == model
    assert_no_orphans(table)


def test_kill_9_at_each_crash_point_then_restart_holds_the_latest_row_per_key(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``parka ingest --upsert`` SIGKILLed at each crash point in turn on one table, then a run to
    the end: the table is the model, read by delta-rs' query engine, polars and delta-spark (each
    applies the deletion vectors). The table is partitioned, so a commit writes a file per
    partition of its segments (the fault suite's upsert scenario kills workers around commits
    of an unpartitioned one)."""
    import polars as pl

    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    model: dict[int, int] = {}
    land(bootstrap, topic, table, model, [(k, 1) for k in range(40)], *BY_VERSION)
    flags = ("--upsert", "--end-at-latest", "--max-segments-per-commit", "1", *BY_VERSION)
    crash_at_each_point(bootstrap, topic, table, model, UPSERT_POINTS, *flags)
    run_ingest(topic, table, bootstrap, *flags)
    assert table_rows(table) == model
    rows = pl.read_delta(str(table)).select("id", "version").to_dicts()
    assert len(rows) == len(model) and {r["id"]: r["version"] for r in rows} == model
    by_spark = spark_rows(spark, table, "id,version")
    assert len(by_spark) == len(model) and {r["id"]: r["version"] for r in by_spark} == model
