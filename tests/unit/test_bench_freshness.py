"""The pure parts of the freshness benchmark (benchmarks/freshness.py): per-row latency from
version times and produce times, percentiles, per-hour scaling, the version at a time."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.freshness import latencies_s, parse_rates, per_hour, percentiles, version_at


def _a(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_latency_is_visible_minus_produced_per_row() -> None:
    # rows 0-2 produced at 1.0, 1.1, 1.2 s; rows 0-1 seen in a version at 2.0 s, row 2 at 3.5 s
    got = latencies_s(_a(0, 1, 2), _a(1_000_000, 1_100_000, 1_200_000), _a(2_000_000, 2_000_000, 3_500_000))
    assert got.tolist() == pytest.approx([1.0, 0.9, 2.3])


def test_a_rewritten_row_counts_once_at_its_first_visibility() -> None:
    # row 7 first in a file seen at 2.0 s, then again in a compacted file seen at 9.0 s
    got = latencies_s(_a(7, 8, 7), _a(1_000_000, 1_000_000, 1_000_000), _a(9_000_000, 3_000_000, 2_000_000))
    assert sorted(got.tolist()) == pytest.approx([1.0, 2.0])


def test_latency_refuses_impossible_inputs() -> None:
    with pytest.raises(ValueError, match="before they were produced"):
        latencies_s(_a(0), _a(2_000_000), _a(1_000_000))
    with pytest.raises(ValueError, match="two different produce times"):
        latencies_s(_a(0, 0), _a(1_000_000, 1_500_000), _a(2_000_000, 3_000_000))
    with pytest.raises(ValueError, match="arrays of 2, 1 and 1"):
        latencies_s(_a(0, 1), _a(1), _a(2))
    assert len(latencies_s(_a(), _a(), _a())) == 0


def test_percentiles_of_known_values() -> None:
    got = percentiles(np.arange(1, 101, dtype=np.float64))  # 1..100 s
    assert got["n"] == 100
    assert got["p50"] == pytest.approx(50.5)
    assert got["p99"] == pytest.approx(99.01)
    assert got["max"] == 100.0
    assert percentiles(np.empty(0))["p99"] is None


def test_per_hour_scales_a_window() -> None:
    assert per_hour(26, 30.0) == pytest.approx(3120.0)
    assert per_hour(52, 60.0) == pytest.approx(3120.0)
    with pytest.raises(ValueError, match="more than 0 s"):
        per_hour(5, 0.0)


def test_version_at_takes_the_last_version_seen_by_then() -> None:
    seen = [(0, 10.0), (1, 11.0), (2, 12.5)]
    assert version_at(seen, 12.0) == 1
    assert version_at(seen, 12.5) == 2
    assert version_at(seen, 5.0) == 0
    with pytest.raises(ValueError, match="no versions"):
        version_at([], 1.0)


def test_parse_rates() -> None:
    assert parse_rates("10000, 100000,max") == [10000, 100000, None]
    with pytest.raises(ValueError, match="'fast' is neither"):
        parse_rates("10000,fast")
    with pytest.raises(ValueError, match="at least 1"):
        parse_rates("0")
