"""A ``parka ingest`` of many topics in one process (a lane per topic): its peak memory and CPU
as the number of topics grows.

Each case is ``topics`` topics of ``partitions`` partitions, each holding ``--copies`` copies of
the first ``--rows`` rows of the gps data set as zstd segments of 10,000 rows, landed by one
``parka ingest a,b,... DIR/{topic} --end-at-latest`` started as a process of its own (what an
operator runs), each topic into a fresh Delta table. Measured as :mod:`benchmarks.sizing`
measures one worker (:func:`benchmarks.sizing.run_case`): peak resident memory (``VmHWM``, read
every 50 ms), user + system CPU seconds of every thread, wall seconds; each the median of the
repeats (min-max). Checks on every run: exit 0, one closing line per topic, and each table's
rows (Parquet footers) equal to the rows produced::

    python -m benchmarks.fleet_memory --bootstrap 127.0.0.1:9092 \
        --kafka-data-dir "$(scripts/kafka-local.sh data-dir)" --out bench-out/fleet-memory
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import uuid
from typing import Any

from .broker import Broker
from .checks import Checks
from .datasets import load
from .ingest_throughput import produce_copies
from .measure import summarize
from .sizing import SEGMENT_ROWS, repeated, run_benchmark, run_case, table_rows

log = logging.getLogger("parka.bench")

BOUNDED = ("--max-buffered-bytes", "16MiB", "--min-bytes-per-commit", "8MiB", "-K", "queued.max.messages.kbytes=8192")
CASES: dict[str, dict[str, Any]] = {
    # name -> topics, extra flags
    "1 topic": {"topics": 1, "flags": []},
    "10 topics": {"topics": 10, "flags": []},
    "50 topics": {"topics": 50, "flags": []},
    "50 topics, 16 MiB buffered and 8 MiB fetched a topic": {"topics": 50, "flags": [*BOUNDED]},
}
"""parka's defaults, and the bounds an operator sets for many topics: a lane buffers at most
--max-buffered-bytes of segments and librdkafka queues at most queued.max.messages.kbytes."""


def run(
    broker: Broker, *, rows: int, copies: int, partitions: int, repeats: int, seed: int, checks: Checks, workdir: str
) -> dict[str, Any]:
    ds = load("gps", rows)
    run_id = uuid.uuid4().hex[:6]
    most = max(c["topics"] for c in CASES.values())
    made = [
        produce_copies(broker, ds, copies, SEGMENT_ROWS, f"fleet-{run_id}-{i:02d}", partitions=partitions)
        for i in range(most)
    ]
    mb_a_topic = made[0]["bytes"] / 1e6
    log.info("%d topics of %d partitions, %.2f MB each", most, partitions, mb_a_topic)

    def measure(name: str, repeat: int) -> dict[str, Any]:
        topics = [t["topic"] for t in made[: CASES[name]["topics"]]]
        lake = os.path.join(workdir, f"r{repeat}-{uuid.uuid4().hex[:6]}")
        sample = run_case(broker.bootstrap, ",".join(topics), os.path.join(lake, "{topic}"), CASES[name]["flags"])
        landed = {line.get("topic", topics[0]): line["records"] for line in sample["lines"]}
        checks.expect(
            f"repeat {repeat}, {name}",
            rows=sum(table_rows(os.path.join(lake, t)) for t in topics),
            expected_rows=rows * copies * len(topics),
            got=str(sorted(landed.items())),
            expected=str(sorted((t, rows * copies) for t in topics)),
        )
        shutil.rmtree(lake)
        sample["cpu_s_per_topic"] = sample["cpu_s"] / len(topics)
        return sample

    try:
        samples = repeated(list(CASES), repeats, seed, measure)
    finally:
        broker.delete_topics([t["topic"] for t in made])
    return {
        name: {
            "topics": CASES[name]["topics"],
            "partitions": partitions,
            "rows_a_topic": rows * copies,
            "mb_a_topic": mb_a_topic,
            "flags": CASES[name]["flags"],
            **{
                key: summarize([r[key] for r in runs], key)
                for key in ("wall_s", "cpu_s", "cpu_s_per_topic", "peak_rss_mib")
            },
        }
        for name, runs in samples.items()
    }


def report(doc: dict[str, Any]) -> str:
    lines = [
        f"# One parka ingest, many topics (`{doc['command']}`)",
        "",
        "Each figure: the median of the repeats (min-max).",
        "",
        "| case | flags | peak RSS (MiB) | CPU-s | CPU-s a topic | wall (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in doc["fleet"].items():
        cells = [_cell(r[k]) for k in ("peak_rss_mib", "cpu_s", "cpu_s_per_topic", "wall_s")]
        lines.append(f"| {name} | {' '.join(r['flags']) or 'defaults'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(s: dict[str, float]) -> str:
    return f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"


def main(argv: list[str] | None = None) -> int:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--rows", type=int, default=200_000)
        parser.add_argument("--copies", type=int, default=5)
        parser.add_argument("--partitions", type=int, default=4)

    return run_benchmark(
        "benchmarks.fleet_memory",
        argv,
        description=__doc__,
        out="bench-out/fleet-memory",
        repeats=2,
        key="fleet",
        run=lambda broker, args, checks, workdir: run(
            broker,
            rows=args.rows,
            copies=args.copies,
            partitions=args.partitions,
            repeats=args.repeats,
            seed=args.seed,
            checks=checks,
            workdir=workdir,
        ),
        report=report,
        arguments=arguments,
    )


if __name__ == "__main__":
    sys.exit(main())
