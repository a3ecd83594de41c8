"""The soak benchmark's pure parts: the start of the run against its end (medians over simulated
hours), and the flatness of the second half of the run against the first."""

from __future__ import annotations

import pytest

from benchmarks.soak import summary


def test_summary_compares_the_medians_of_the_first_and_last_hours_after_hour_1() -> None:
    cpu = [30.0, 10.0, 12.0, 11.0, 11.0, 13.0, 14.0, 15.0]  # hour 1 (the table's creation) left out
    logs = [5, 40, 50, 50, 45, 60, 55, 52]
    got = summary([{"cpu_ms_per_commit": c, "log_files": n} for c, n in zip(cpu, logs, strict=True)], span=3)
    assert got["cpu_ms_per_commit"]["start"] == 11.0  # median of hours 2-4
    assert got["cpu_ms_per_commit"]["end"] == 14.0  # median of the last 3 hours
    assert got["cpu_ms_per_commit"]["end_over_start"] == pytest.approx(14 / 11)
    # the second half's largest (60) over the first half's after hour 1 (50)
    assert got["log_files"]["late_max_over_early_max"] == pytest.approx(60 / 50)


def test_a_measure_taken_in_some_hours_only_is_compared_where_it_was_taken() -> None:
    spark = [None, 2.0, None, None, 1.0, None]
    got = summary([{"open_delta_spark_s": v} for v in spark], span=2)
    assert got["open_delta_spark_s"]["start"] == 2.0
    assert got["open_delta_spark_s"]["end_over_start"] == pytest.approx(0.5)
    assert "p99_visible_s" not in got  # never taken
