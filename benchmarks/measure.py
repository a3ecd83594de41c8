"""Clocks and statistics.

CPU is the process's CPU time (``time.process_time``: user + system time of every thread of the
process, so librdkafka's and delta-rs' threads are included); the broker runs in another
process and is not counted. Wall time is ``time.perf_counter``. A measure is named with its
unit (``bytes_per_row``, ``cpu_us_per_row``, ``rows_per_s``, ``cpu_s_per_million_rows``) and
summarized over repeats as median, min and max, with every value kept.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "STATISTIC",
    "UNITS",
    "Span",
    "local_listener",
    "measured",
    "median_s",
    "paired_ratio",
    "process_cpu_s",
    "settle",
    "summarize",
]

STATISTIC = "median of the paired per-repeat ratios (min-max)"  # of every ratio a target reads

UNITS: dict[str, str] = {
    "bytes_per_row": "bytes/row",
    "value_bytes_per_row": "bytes/row",
    "rows_per_batch": "rows/batch",
    "cpu_us_per_row": "µs/row",
    "cpu_s_per_million_rows": "CPU-s/1M rows",
    "rows_per_s": "rows/s",
    "rows_per_cpu_s": "rows/CPU-s",
    "mb_per_s": "MB/s (10^6 bytes)",
    "wall_s": "s",
    "cpu_s": "CPU-s",
    "ratio": "ratio",
    "files": "files",
    "mean_file_bytes": "bytes",
    "scan_s": "s",
    "commits": "commits",
}


@dataclass
class Span:
    """Wall and CPU seconds of a measured block (filled in when the block ends)."""

    wall_s: float = 0.0
    cpu_s: float = 0.0


def settle() -> None:
    """Collect garbage, then exempt every object alive now (modules, data sets, payloads) from
    later collections, so that the collection :func:`measured` starts with costs nothing."""
    gc.collect()
    gc.freeze()


@contextmanager
def measured() -> Iterator[Span]:
    """Time a block; garbage from earlier work is collected first so it is not billed here."""
    gc.collect()
    span = Span()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        yield span
    finally:
        span.wall_s = time.perf_counter() - wall0
        span.cpu_s = time.process_time() - cpu0


def median_s(fn: Callable[[], Any], repeats: int, *, warmups: int = 0) -> float:
    """The median wall seconds of ``repeats`` calls of ``fn``, after ``warmups`` unmeasured ones
    (a diagnostic's timing of one step; the suite's rounds are :func:`benchmarks.scans.rounds`)."""
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def process_cpu_s(proc: Any) -> float:
    """User + system CPU seconds a process (a ``psutil.Process``: all its threads) used so far;
    NaN for None (a process that could not be found)."""
    if proc is None:
        return float("nan")
    t = proc.cpu_times()
    return float(t.user + t.system)


def tree_cpu_s() -> float:
    """User + system CPU seconds of this process and of its descendants so far (a Spark driver's
    JVM and Python workers included), and of the children each has waited for."""
    import psutil

    root = psutil.Process()
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # exited between listing and reading: its parent counts it once waited
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def local_listener(address: str) -> Any:
    """The process of this machine listening on ``address`` (``host:port``, the first of a
    comma-separated list; a URL's ``http://host:port`` too), as a ``psutil.Process``; None for
    a remote host or when it cannot be found (no permission)."""
    import psutil

    first = address.split(",")[0].split("://")[-1].split("/")[0]
    host, _, port = first.rpartition(":")
    if host not in ("localhost", "127.0.0.1", "::1", "[::1]") or not port.isdigit():
        return None
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr.port == int(port) and conn.pid:
                return psutil.Process(conn.pid)
    except psutil.Error:
        return None
    return None


def unit_of(measure: str) -> str:
    """The unit of a measure from its name's suffix (``producer_cpu_us_per_row`` -> ``µs/row``)."""
    for suffix in sorted(UNITS, key=len, reverse=True):
        if measure == suffix or measure.endswith("_" + suffix):
            return UNITS[suffix]
    return ""


def summarize(values: list[float], measure: str) -> dict[str, Any]:
    """Median, min and max of the repeats of one measure, with its unit and the raw values.
    A repeat that could not take the measure holds NaN (a steady rate with no steady window) and
    is left out; ``n`` counts what is left, and with none left every figure is None ("-" in the
    report), never a number."""
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return {"unit": unit_of(measure), "n": 0, "median": None, "min": None, "max": None, "values": []}
    return {
        "unit": unit_of(measure),
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": values,
    }


def paired_ratio(numerators: list[float], denominators: list[float]) -> dict[str, Any]:
    """:func:`summarize` of the per-repeat ratios ``numerators[i] / denominators[i]``: the two
    variants ran interleaved in each repeat, so repeat ``i`` of one pairs with repeat ``i`` of
    the other (:data:`STATISTIC`). A zero denominator gives NaN, left out like any unmeasured
    repeat. Raises ``ValueError`` when the lists differ in length."""
    return summarize([n / d if d else math.nan for n, d in zip(numerators, denominators, strict=True)], "ratio")
