"""The Spark paths, (c) Structured Streaming with ``from_avro`` and (d) parka's Spark path, from
``benchmarks/spark_gps.py`` (``run(bootstrap, n_records, out_dir) -> dict``).

It runs in a child process, so the JVM and its memory leave with it and a failure cannot take
the suite down. CPU is what ``spark_gps.py`` measures itself (psutil over the Spark process
tree: driver, JVM, Python workers); the ratio for the target pairs its two paths per repeat.
Topics it leaves behind are deleted. When the module is missing or fails, the section says
"not run" and why.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from typing import Any

from .broker import Broker
from .measure import summarize

__all__ = ["child_json", "run_spark"]

_MARK = "PARKA_BENCH_SPARK_RESULT "
_CHILD = (
    "import json, sys\n"
    "from benchmarks.spark_gps import run\n"
    "result = run(sys.argv[1], int(sys.argv[2]), sys.argv[3])\n"
    f"print({_MARK!r} + json.dumps(result, default=str), flush=True)\n"
)
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# spark_gps.py names its topics gps-from-avro-<hex> and gps-parka-<hex> and leaves them behind
_TOPIC_PREFIXES = ("gps-from-avro-", "gps-parka-")


def _ratio(result: dict[str, Any]) -> dict[str, Any] | None:
    """parka over from_avro rows per CPU-second, paired per repeat (the paths alternate)."""
    try:
        avro = result["paths"]["from_avro"]["runs_cpu_s"]
        parka = result["paths"]["parka"]["runs_cpu_s"]
    except (KeyError, TypeError):
        return None
    return summarize([a / p for a, p in zip(avro, parka, strict=True) if p > 0], "ratio")


def run_spark(broker: Broker, n_records: int, out_dir: str, *, timeout_s: float) -> dict[str, Any]:
    """Run ``benchmarks.spark_gps.run`` in a child process and delete the topics it left; never raises."""
    if importlib.util.find_spec("benchmarks.spark_gps") is None:
        return {"status": "not run", "reason": "benchmarks/spark_gps.py does not exist (yet)"}
    before = {t for p in _TOPIC_PREFIXES for t in broker.topics_with_prefix(p)}
    try:
        return _run(broker.bootstrap, n_records, out_dir, timeout_s)
    finally:
        left = [t for p in _TOPIC_PREFIXES for t in broker.topics_with_prefix(p) if t not in before]
        broker.delete_topics(left)


def child_json(argv: list[str], *, mark: str, timeout_s: float, log_path: str, what: str) -> dict[str, Any]:
    """Run ``python argv...`` from the repository and read the JSON it prints after ``mark``;
    the child's output goes to ``log_path``. Returns ``{"status": "ok", "wall_s", "result"}``
    or ``{"status": "not run", "reason"}`` (timeout, non-zero exit, no marked line); never raises
    for the child's failures."""
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_REPO, os.environ.get("PYTHONPATH")) if p)}
    try:
        proc = subprocess.run(
            [sys.executable, *argv], capture_output=True, text=True, timeout=timeout_s, cwd=_REPO, env=env
        )
    except subprocess.TimeoutExpired:
        return {"status": "not run", "reason": f"{what} did not finish within {timeout_s:.0f} s"}
    wall = time.perf_counter() - started
    with open(log_path, "w") as f:
        f.write(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(mark)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"status": "not run", "reason": f"{what} failed (exit {proc.returncode}): " + " | ".join(tail)}
    return {"status": "ok", "wall_s": wall, "result": json.loads(lines[-1][len(mark) :])}


def _run(bootstrap: str, n_records: int, out_dir: str, timeout_s: float) -> dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    child = child_json(
        ["-c", _CHILD, bootstrap, str(n_records), out_dir],
        mark=_MARK,
        timeout_s=timeout_s,
        log_path=os.path.join(out_dir, "spark_gps.log"),
        what="benchmarks/spark_gps.py",
    )
    if child["status"] != "ok":
        return child
    result = child["result"]
    return {
        "status": "ok",
        "n_records": n_records,
        "wall_s": child["wall_s"],
        "ratio_parka_over_from_avro_rows_per_cpu_s": _ratio(result),
        "result": result,
    }
