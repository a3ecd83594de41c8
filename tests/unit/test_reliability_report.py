"""The fault suite's verdict (``reliability/report.py``) on the times SIGTERM'd workers took to
exit: within the stop bound is met, past it is not (a requirement not met fails the run)."""

from __future__ import annotations

from typing import Any

from reliability.report import STOP_BOUND_S, summarize


def verdict(stop_seconds: list[float]) -> dict[str, Any]:
    results = {"ingest": {"faults": {"SIGTERM (leave)": len(stop_seconds)}, "stop_seconds": stop_seconds}}
    summary = summarize(results, mode="custom", seed=1, bootstrap="127.0.0.1:9092", command="test", wall_s=1.0)
    (stops,) = [r for r in summary["requirements"] if "SIGTERM'd" in r["what"]]
    return {"met": stops["met"], "what": stops["what"]}


def test_workers_that_stopped_within_the_bound_meet_it() -> None:
    got = verdict([0.8, 2.5, 31.0])
    assert got["met"]
    assert f"exited within {STOP_BOUND_S:.0f} s (max 31.0 s of 3)" in got["what"]


def test_one_worker_past_the_bound_fails_the_run() -> None:
    got = verdict([0.8, STOP_BOUND_S + 0.1])
    assert not got["met"]
