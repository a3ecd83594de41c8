"""The fleet-load benchmark's measuring aids (benchmarks/named_threads.py) and the pure parts of
benchmarks/fleet_load.py: OS thread names from Python's, CPU by thread, the arms' names, the
ratios and the report."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.fleet_load import _arms, report

REPO = Path(__file__).resolve().parents[2]

_SPIN = """
import json, os, threading, time
from benchmarks import named_threads
named_threads._name_os_threads()
done = threading.Event()
def spin():
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    done.set()
    threading.Event().wait()  # alive until the process exits, after the main thread read /proc
threading.Thread(target=spin, name="spin-worker-12", daemon=True).start()
done.wait()
print(json.dumps(named_threads.thread_cpu_s(os.getpid())))
"""


def test_a_python_thread_is_counted_under_its_own_name_with_digits_folded() -> None:
    out = subprocess.run([sys.executable, "-c", _SPIN], cwd=REPO, capture_output=True, text=True, check=True)
    by_name = json.loads(out.stdout)
    assert by_name["spin-worker-#"] >= 0.15  # the spinning thread's own CPU, not the main thread's
    assert "spin-worker-12" not in by_name


def _arm(topics: int, partitions: int, cpu_us: float, threads: dict[str, float]) -> dict[str, object]:
    return {
        "topics": topics,
        "partitions": partitions,
        "produced": {"rows_per_s": 100_000.0},
        "cpu_us_per_row": cpu_us,
        "cpu_s": sum(threads.values()),
        "p99_s_largest_topic": 1.0,
        "p99_s_median_topic": 1.0,
        "rss_bytes_max": 2**30,
        "threads_cpu_s": threads,
    }


def test_the_report_gives_both_ratios_and_each_arms_split_by_thread() -> None:
    arms = {
        "one topic": _arm(1, 4, 2.0, {"python": 6.0, "parka-write_#": 4.0}),
        "wide topic": _arm(1, 200, 6.0, {"python": 10.0, "parka-write_#": 30.0}),
        "fleet": _arm(50, 4, 9.0, {"parka-lane": 15.0, "parka-write_#": 45.0}),
    }
    arms["fleet"]["cpu_per_row_against_one_topic"] = 4.5
    arms["fleet"]["cpu_per_row_against_wide_topic"] = 1.5
    doc = {"command": "x", "load": {"arms": arms, "batch_ms": 100, "latency_s": 1.0, "ingest_args": []}}
    text = report(doc)
    assert "fleet against the one topic: 4.50x" in text
    assert "fleet against the wide topic: 1.50x" in text
    assert "| `parka-write_#` | 40.0% | 75.0% | 75.0% |" in text
    assert "| `parka-lane` | 0.0% | 0.0% | 25.0% |" in text


def test_the_report_of_the_fleet_arm_alone_has_no_ratio() -> None:
    doc = {
        "command": "x",
        "load": {"arms": {"fleet": _arm(50, 4, 9.0, {"parka-lane": 1.0})}, "batch_ms": 100, "latency_s": 1.0},
    }
    assert "against" not in report(doc)


def test_an_unknown_arm_is_refused_by_name() -> None:
    assert _arms("one,fleet") == {"one", "fleet"}
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape("unknown arm(s) flet: of one,wide,fleet")):
        _arms("one,flet")
