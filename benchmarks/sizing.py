"""Sizing a ``parka ingest`` worker: its peak memory and its CPU per MB, as an operator runs it.

Each case is a topic of copies of the flights as zstd segments of 10,000 rows, with 1 or 4
partitions, ingested by ``parka ingest --end-at-latest`` started as a process of its own (the
command line an operator runs, defaults but the memory settings the case names) into a fresh
Delta table on local disk, with a fresh app id and consumer group. The process's own resource
usage: peak resident memory (``VmHWM`` of ``/proc/<pid>/status``, read every 50 ms while it
runs: :func:`high_water_bytes`) and user + system CPU seconds from ``os.wait4`` when it exits
(every thread: librdkafka's, delta-rs', the writers'). The whole run is billed,
start-up (imports, the group join) and the final compaction of a run-once included; the
``startup`` case (one copy) shows that fixed part. Figures: CPU-s per MB of Kafka values
(10^6 bytes), MB/s one core keeps up with (its inverse), peak RSS in MiB; each the median of
the repeats (min-max). The cases of a repeat run in a shuffled order.

Checks on every run: exit 0, and the rows the daemon reports committed and the rows of the
table's files (Parquet footers) both equal the rows produced.

Run alone (writes results.json and report.md; ``python -c "from benchmarks.sizing import rerender;
rerender('DIR')"`` writes DIR/report.md again from DIR/results.json):
``python -m benchmarks.sizing --bootstrap 127.0.0.1:9092 --kafka-data-dir "$(scripts/kafka-local.sh data-dir)"
--out bench-out/sizing``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow.parquet as pq
from deltalake import DeltaTable

from .broker import Broker
from .checks import CheckFailed, Checks
from .datasets import load
from .ingest_throughput import produce_copies
from .measure import summarize
from .report import _spread, save_run

__all__ = ["CASES", "main", "rerender", "report", "run_case"]

log = logging.getLogger("parka.bench")

SEGMENT_ROWS = 10_000
MIB = 2**20

SMALL_BUFFER = ("--min-bytes-per-commit", "32MiB", "--max-buffered-bytes", "64MiB")

CASES: dict[str, dict[str, Any]] = {
    # name -> partitions, flights copies, extra flags
    "startup": {"partitions": 1, "copies": 1, "flags": []},
    "1 partition, defaults": {"partitions": 1, "copies": 32, "flags": []},
    "4 partitions, defaults": {"partitions": 4, "copies": 32, "flags": []},
    "4 partitions, defaults, no compaction": {
        "partitions": 4,
        "copies": 32,
        "flags": ["--compact-min-files", "0"],
    },
    "4 partitions, 64 MiB buffered": {"partitions": 4, "copies": 32, "flags": [*SMALL_BUFFER]},
    "4 partitions, 64 MiB buffered, no compaction": {
        "partitions": 4,
        "copies": 32,
        "flags": [*SMALL_BUFFER, "--compact-min-files", "0"],
    },
    "4 partitions, 64 MiB buffered, no compaction, a quarter of the data": {
        "partitions": 4,
        "copies": 8,
        "flags": [*SMALL_BUFFER, "--compact-min-files", "0"],
    },
}
"""The defaults buffer up to 256 MiB of segments (twice --target-file-size's 128 MiB) and compact
in the background (a run-once compacts what is due before it exits). The other cases turn
compaction off, bound the buffer at 64 MiB, or both, and ingest a quarter of the data (whether
memory grows with the topic)."""


POLL_S = 0.05


def high_water_bytes(pid: int) -> int:
    """The process's peak resident set so far (``VmHWM``: of its memory map, which begins at its
    ``exec``), 0 once it has exited. Not ``ru_maxrss`` from ``wait4``: Linux carries a process's
    high-water mark across ``exec``, so a child spawned by this process reported this process's
    RSS (a ``true`` spawned by a Python holding 500 MB reported 513 MB)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_case(bootstrap: str, topic: str, table: str, flags: Sequence[str]) -> dict[str, Any]:
    """One ``parka ingest --end-at-latest`` of ``topic`` into ``table`` (several topics: ``a,b``,
    ``table`` holding ``{topic}``); its wall
    seconds, CPU seconds, peak RSS bytes, the stats line it printed last (``stats``) and every
    one (``lines``: one per topic).

    Raises:
        CheckFailed: it did not exit 0 or printed no stats.
    """
    app = f"sizing-{uuid.uuid4().hex[:8]}" + ("-{topic}" if "{topic}" in table else "")
    parka = os.path.join(os.path.dirname(sys.executable), "parka")
    argv = [parka, "ingest", topic, table, "-k", bootstrap, "--end-at-latest", "-q", "--app-id", app, *flags]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        peak = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, high_water_bytes(proc.pid))
            time.sleep(POLL_S)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise CheckFailed(f"{' '.join(argv)} exited {proc.returncode}: {stderr[-2000:]}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise CheckFailed(f"{topic}: parka ingest printed no stats: {stdout[-500:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_bytes": peak,
        "stats": json.loads(lines[-1]),
        "lines": [json.loads(line) for line in lines],
    }


def repeated(
    cases: list[str], repeats: int, seed: int, measure: Callable[[str, int], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """``measure(case, repeat)`` (a :func:`run_case` sample) for each case, ``repeats`` times, the
    cases of a repeat in a shuffled order; each sample gains ``peak_rss_mib`` and is logged."""
    rng = random.Random(seed)
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
    for repeat in range(repeats):
        order = list(cases)
        rng.shuffle(order)
        for name in order:
            sample = measure(name, repeat)
            sample["peak_rss_mib"] = sample["peak_rss_bytes"] / MIB
            samples[name].append(sample)
            cpu, rss = sample["cpu_s"], sample["peak_rss_mib"]
            log.info("repeat %d %s: %.1f s, %.2f CPU-s, peak RSS %.0f MiB", repeat, name, sample["wall_s"], cpu, rss)
    return samples


def table_rows(table: str) -> int:
    """Rows of the table's current files, from their Parquet footers."""
    return sum(pq.read_metadata(path).num_rows for path in DeltaTable(table).file_uris())


def run(broker: Broker, *, repeats: int, seed: int, checks: Checks, workdir: str) -> dict[str, Any]:
    ds = load("flights", None)
    run_id = uuid.uuid4().hex[:6]
    topics: dict[str, dict[str, Any]] = {}
    for name, case in CASES.items():
        topic = f"sizing-{run_id}-{case['partitions']}p-{case['copies']}c"
        if topic not in {t["topic"] for t in topics.values()}:
            made = produce_copies(broker, ds, case["copies"], SEGMENT_ROWS, topic, partitions=case["partitions"])
            made.pop("digests")
            log.info("%s: %d segments, %.1f MB", topic, made["segments"], made["bytes"] / 1e6)
        else:
            made = next(t for t in topics.values() if t["topic"] == topic)
        topics[name] = made

    def measure(name: str, repeat: int) -> dict[str, Any]:
        topic = topics[name]
        table = os.path.join(workdir, f"t-{repeat}-{uuid.uuid4().hex[:6]}")
        sample = run_case(broker.bootstrap, topic["topic"], table, CASES[name]["flags"])
        checks.expect(
            f"repeat {repeat}, {name}",
            rows=table_rows(table),
            expected_rows=topic["rows"],
            got=f"{sample['stats']['records']} records committed",
            expected=f"{topic['rows']} records committed",
        )
        shutil.rmtree(table)
        mb = topic["bytes"] / 1e6
        sample.update(
            cpu_s_per_mb=sample["cpu_s"] / mb, mb_per_cpu_s=mb / sample["cpu_s"], mb_per_s=mb / sample["wall_s"]
        )
        return sample

    try:
        samples = repeated(list(CASES), repeats, seed, measure)
    finally:
        broker.delete_topics(sorted({t["topic"] for t in topics.values()}))
    results = {}
    for name, runs in samples.items():
        topic = topics[name]
        results[name] = {
            "partitions": CASES[name]["partitions"],
            "flags": CASES[name]["flags"],
            "segments": topic["segments"],
            "rows": topic["rows"],
            "mb": topic["bytes"] / 1e6,
            **{
                key: summarize([r[key] for r in runs], key)
                for key in ("wall_s", "cpu_s", "cpu_s_per_mb", "mb_per_cpu_s", "mb_per_s", "peak_rss_mib")
            },
        }
    return results


def report(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        "# Sizing a parka ingest worker",
        "",
        f"`{doc['command']}`, {doc['wall_s']:.0f} s; {m['cpu_model']}, {m['logical_cores']} cores, "
        f"{m['memory_bytes'] / 2**30:.1f} GiB, Kafka {m['kafka'].get('version', '?')}, "
        f"deltalake {m['versions']['deltalake']}, pyarrow {m['versions']['pyarrow']}; "
        f"checks passed: {len(doc['checks'])}",
        "",
        f"Each figure: the median of {doc['repeats']} runs (min-max). One `parka ingest --end-at-latest` "
        "process per run; its peak RSS (VmHWM, read while it runs) and its CPU from `os.wait4`, "
        "the whole run billed (start-up and the "
        "final compaction included).",
        "",
        "| case | partitions | MB | wall s | CPU-s | CPU-s per MB | MB/s per core | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in doc["sizing"].items():
        lines.append(
            f"| {name} | {r['partitions']} | {r['mb']:.1f} | {_spread(r['wall_s'])} | {_spread(r['cpu_s'])} | "
            f"{_spread(r['cpu_s_per_mb'])} | {_spread(r['mb_per_cpu_s'])} | {_spread(r['peak_rss_mib'])} |"
        )
    return "\n".join(lines) + "\n"


def rerender(out: str) -> None:
    """``out``/report.md again from ``out``/results.json."""
    with open(os.path.join(out, "results.json")) as f:
        doc = json.load(f)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(report(doc))


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(
        "benchmarks.sizing",
        argv,
        description=__doc__,
        out="bench-out/sizing",
        repeats=3,
        key="sizing",
        run=lambda broker, args, checks, workdir: run(
            broker, repeats=args.repeats, seed=args.seed, checks=checks, workdir=workdir
        ),
        report=report,
    )


def run_benchmark(
    module: str,
    argv: list[str] | None,
    *,
    description: str | None,
    out: str,
    repeats: int,
    key: str,
    run: Callable[[Broker, argparse.Namespace, Checks, str], dict[str, Any]],
    report: Callable[[dict[str, Any]], str],
    arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None,
) -> int:
    """The command line of a benchmark of ``parka ingest`` processes (this one, and
    :mod:`benchmarks.fleet_memory`): ``--bootstrap``, ``--kafka-data-dir``, ``--repeats``,
    ``--seed``, ``--out`` and the ``arguments`` it adds; ``run(broker, args, checks, workdir)``
    gives the results saved under ``key`` with the command, the machine and the checks."""
    from .machine import machine_info

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--kafka-data-dir", default=os.environ.get("PARKA_KAFKA_DATA_DIR"))
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=out)
    arguments(parser)
    args = parser.parse_args(argv)
    if not args.kafka_data_dir:
        parser.error("--kafka-data-dir is required (scripts/kafka-local.sh data-dir)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("parka").setLevel(logging.WARNING)
    logging.getLogger("parka.bench").setLevel(logging.INFO)  # the benchmarks' own lines
    os.makedirs(args.out, exist_ok=True)
    broker = Broker(args.bootstrap, args.kafka_data_dir)
    checks = Checks()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="parka-bench-") as workdir:
        results = run(broker, args, checks, workdir)
    doc = {
        "command": " ".join([os.path.basename(sys.executable), "-m", module, *argv]),
        "wall_s": time.perf_counter() - started,
        "repeats": args.repeats,
        "machine": machine_info(broker),
        key: results,
        "checks": checks.passed,
    }
    save_run(args.out, doc, report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
