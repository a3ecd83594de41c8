"""Where the per-record path's CPU goes: ``produce()`` per dict to segments, and segments to
``consume()``, for each data set, split by stage.

For each data set of ``--datasets``, its first ``--rows`` rows as Python dicts (made before any
clock starts) go through, on a fresh one-partition topic of a real broker:

* **produce**: ``ParquetProducer.produce(topic, row)`` per dict (zstd segments of
  ``columnar.batch.records`` rows, parka's default), then ``flush()``;
* **consume**: ``ParquetConsumer.consume(10,000)`` until every row came back.

Each is run twice: once plain, for its CPU per row (``time.process_time``, every thread of the
process), and once under :mod:`cProfile`, whose self time per function is summed by stage
(:data:`STAGES`: a function's module or name decides). cProfile slows the Python calls it counts
more than the C ones, so the stages' shares are of the profiled run; the plain run's CPU is the
figure to compare with other benchmarks. The 25 functions with the most self time, per data set
and path, go to ``profiles.txt``::

    python -m benchmarks.profile_path --bootstrap 127.0.0.1:9092 --rows 100000 --out DIR
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from . import encodings as enc
from .datasets import DATASET_NAMES, load

__all__ = ["STAGES", "main", "stage_of"]

# (stage, test on "file:function") for each path, first match wins. A C function (a builtin, a
# method of a C type) counts in the stage of the caller that spent the most time in it: a
# list.append in produce()'s loop is produce()'s cost.
STAGES: dict[str, list[tuple[str, Callable[[str], bool]]]] = {
    "produce": [
        ("librdkafka (produce, poll, flush)", lambda f: "cimpl" in f or "confluent_kafka" in f),
        ("Parquet encode and zstd", lambda f: "parquet" in f or "segment.py" in f),
        ("dict to Arrow (parka/records.py, pyarrow)", lambda f: "parka/records.py" in f or "pyarrow" in f),
        ("buffering and cutting segments (parka)", lambda f: "producer/_buffer" in f or "producer/_segmenter" in f),
        ("validation (parka)", lambda f: "_validate" in f or "parka/schema.py" in f),
        ("the application's loop (this benchmark)", lambda f: "benchmarks/" in f),
        ("produce() per call, placement, delivery (parka)", lambda f: "producer/" in f or "parka/" in f),
    ],
    "consume": [
        ("librdkafka (consume)", lambda f: "cimpl" in f or "confluent_kafka" in f),
        ("Parquet decode", lambda f: "parquet" in f or "segment.py" in f),
        ("Arrow to Python values (consumer/_rows.py, pyarrow)", lambda f: "consumer/_rows" in f or "as_py" in f),
        ("message objects (parka/message.py)", lambda f: "parka/message.py" in f or f.startswith("<string>")),
        ("pyarrow, other", lambda f: "pyarrow" in f),
        ("the application's loop (this benchmark)", lambda f: "benchmarks/" in f),
        ("consume() per call (parka)", lambda f: "consumer/" in f or "parka/" in f),
    ],
}
_OTHER = "other (the interpreter's own)"


def stage_of(path: str, where: str) -> str:
    for name, test in STAGES[path]:
        if test(where):
            return name
    return _OTHER


def _where(func: tuple[str, int, str]) -> str:
    return f"{func[0]}:{func[2]}"


def _by_stage(profile: cProfile.Profile, path: str) -> tuple[dict[str, float], str]:
    stats = pstats.Stats(profile)
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    for func, (_cc, _nc, tottime, _ct, callers) in table.items():
        owner = func
        if func[0] == "~" and callers:  # a C function: its main caller's stage
            owner = max(callers.items(), key=lambda item: item[1][2])[0]
        stage = stage_of(path, _where(owner))
        totals[stage] = totals.get(stage, 0.0) + tottime
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
    return totals, text.getvalue()


def _produce(bootstrap: str, topic: str, rows: list[dict[str, Any]], schema: Any) -> None:
    producer = ParquetProducer(
        {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.encoding.compression": "zstd"}
    )
    producer.set_schema(topic, schema)
    for row in rows:
        producer.produce(topic, row)
    assert producer.flush(120) == 0
    producer.close()


def _consume(bootstrap: str, topic: str, rows: int) -> None:
    consumer = ParquetConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"profile-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 300
    while seen < rows:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {seen} of {rows} rows came back from {topic}")
        for msg in consumer.consume(10_000, timeout=1.0):
            if msg.error() is not None:
                raise SystemExit(f"consume error on {topic}: {msg.error()}")
            seen += 1
    consumer.close()


def _measured(run: Callable[[], None], profiled: bool) -> tuple[float, cProfile.Profile | None]:
    profile = cProfile.Profile(time.process_time) if profiled else None  # CPU, not waits
    start = time.process_time()
    if profile is not None:
        profile.enable()
    run()
    if profile is not None:
        profile.disable()
    return time.process_time() - start, profile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--datasets", default=",".join(DATASET_NAMES))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    results: dict[str, Any] = {
        "command": " ".join(["python -m benchmarks.profile_path", *(argv if argv is not None else sys.argv[1:])]),
        "datasets": {},
    }
    listings = []
    for name in args.datasets.split(","):
        data = load(name, args.rows)
        rows = enc.rows_for(data, "parquet")  # maps as dicts, as applications hold them
        entry: dict[str, Any] = {"rows": len(rows)}
        for profiled in (False, True):
            topic = f"profile-{name}-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
            for path, run in (
                ("produce", lambda t=topic, r=rows, s=data.table.schema: _produce(args.bootstrap, t, r, s)),
                ("consume", lambda t=topic, r=rows: _consume(args.bootstrap, t, len(r))),
            ):
                cpu, profile = _measured(run, profiled)
                if profile is None:
                    entry[f"{path}_cpu_us_per_row"] = round(cpu / len(rows) * 1e6, 3)
                    continue
                totals, listing = _by_stage(profile, path)
                whole = sum(totals.values())
                entry[f"{path}_profiled_cpu_us_per_row"] = round(cpu / len(rows) * 1e6, 3)
                entry[f"{path}_stages_share"] = {k: round(v / whole, 3) for k, v in sorted(totals.items())}
                listings.append(f"=== {name}, {path} (cProfile, self time, top 25) ===\n{listing}")
        results["datasets"][name] = entry
        print(name, json.dumps(entry), flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "profiles.txt").write_text("\n".join(listings))
    lines = [f"# Where the per-record path's CPU goes (`{results['command']}`)", ""]
    for path in ("produce", "consume"):
        stages = sorted({s for e in results["datasets"].values() for s in e[f"{path}_stages_share"]})
        names = list(results["datasets"])
        lines += [
            f"## {path}: CPU per row (plain run, µs) and each stage's share of the profiled run's self time",
            "",
        ]
        lines += ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        lines.append(
            "| CPU per row, µs | "
            + " | ".join(str(results["datasets"][n][f"{path}_cpu_us_per_row"]) for n in names)
            + " |"
        )
        for stage in stages:
            shares = [results["datasets"][n][f"{path}_stages_share"].get(stage, 0.0) for n in names]
            lines.append(f"| {stage} | " + " | ".join(f"{s:.0%}" for s in shares) + " |")
        lines.append("")
    (args.out / "report.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
