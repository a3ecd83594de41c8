"""Consumer CPU per row of the ``ParquetConsumer`` shim against confluent-kafka + fastavro.

For each data set, two fresh one-partition topics hold its first ``--rows`` rows: Confluent-
framed Avro, one record per message, in Kafka zstd batches of ``--segment-rows`` records; and
parka zstd segments of ``--segment-rows`` rows. Each consumer is created and assigned before
its clock starts, then reads every row (``benchmarks.clients``):

* ``fastavro``: a plain ``confluent_kafka.Consumer``, ``consume(10,000)``, fastavro per value;
* ``shim consume``: ``ParquetConsumer.consume(10,000)``;
* ``shim poll``: ``ParquetConsumer.poll()``, one record per call;
* ``shim poll_table``: ``ParquetConsumer.poll_table()``, one Arrow table per segment (no
  Python object per record; for reference).

CPU is ``time.process_time`` (every thread of the process), with the data sets frozen out of
the garbage collector (:func:`benchmarks.measure.settle`). One warm-up run of each variant,
then ``--repeats`` runs in a rotating order; medians with min-max. Every run's rows are checked
against the produced rows (count and content fingerprint). Goals: ``shim consume`` at most 0.5x
and ``shim poll`` at most 1.0x the ``fastavro`` CPU per row.

``python -m benchmarks.shim_cpu --bootstrap 127.0.0.1:9092 [--rows 100000] [--repeats 5] [--out DIR]``
prints the report and, with ``--out``, writes ``results.json`` and ``report.md`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from . import encodings as enc
from .checks import CheckFailed, fingerprint, to_table
from .clients import (
    consume_decoded,
    consume_shim,
    consume_shim_poll,
    consume_shim_tables,
    produce_parquet,
    produce_values,
)
from .datasets import DATASET_NAMES, Dataset, load
from .machine import _cpu_model, _version
from .measure import Span, settle, summarize

__all__ = ["GOALS", "main"]

VARIANTS = ("fastavro", "shim consume", "shim poll", "shim poll_table")
# variant -> most CPU per row allowed, as a fraction of fastavro's
GOALS = {"shim consume": 0.5, "shim poll": 1.0}


def _machine() -> dict[str, Any]:
    import confluent_kafka

    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "versions": {
            "parka": _version("parka"),
            "pyarrow": _version("pyarrow"),
            "confluent-kafka": _version("confluent-kafka"),
            "librdkafka": confluent_kafka.libversion()[0],
            "fastavro": _version("fastavro"),
        },
    }


def _create_topic(admin: AdminClient, name: str) -> int:
    """Create a one-partition topic, wait for its leader; returns its ``max.message.bytes``."""
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
            resource = ConfigResource(ResourceType.TOPIC, name)
            configs = admin.describe_configs([resource])[resource].result(timeout=30)
            return int(configs["max.message.bytes"].value)
        time.sleep(0.05)
    raise TimeoutError(f"topic {name} has no leader after 30 s")


def _prepare(admin: AdminClient, bootstrap: str, ds: Dataset, segment_rows: int) -> tuple[str, str]:
    """The Avro topic and the segment topic of ``ds``, produced. Raises CheckFailed on a short count."""
    run = uuid.uuid4().hex[:8]
    avro_topic, parka_topic = f"shim-cpu-{ds.name}-avro-{run}", f"shim-cpu-{ds.name}-parquet-{run}"
    max_bytes = _create_topic(admin, avro_topic)
    _create_topic(admin, parka_topic)
    values = enc.serialize(ds, "avro", enc.rows_for(ds, "avro"))
    produce_values(enc.row_producer_conf(bootstrap, "zstd", segment_rows, max_bytes), avro_topic, values)
    conf = enc.parka_producer_conf(bootstrap, "zstd", segment_rows, max_bytes)
    _, stats, _ = produce_parquet(conf, parka_topic, ds.avro_schema, ds.table)
    if stats["records"] != ds.rows:
        raise CheckFailed(f"{parka_topic}: produced {stats['records']:,} records, expected {ds.rows:,}")
    return avro_topic, parka_topic


def _runner(variant: str, bootstrap: str, ds: Dataset, topics: tuple[str, str]) -> Callable[[], tuple[Span, pa.Table]]:
    avro_topic, parka_topic = topics
    schema = ds.table.schema

    def run() -> tuple[Span, pa.Table]:
        if variant == "fastavro":
            span, rows = consume_decoded(bootstrap, avro_topic, ds.rows, enc.decode_values(ds, "avro"))
        elif variant == "shim consume":
            span, rows = consume_shim(bootstrap, parka_topic, ds.rows)
        elif variant == "shim poll":
            span, rows = consume_shim_poll(bootstrap, parka_topic, ds.rows)
        else:
            span, tables = consume_shim_tables(bootstrap, parka_topic, ds.rows)
            return span, pa.concat_tables([t.select(schema.names) for t in tables])
        return span, to_table(rows, schema)

    return run


def run(bootstrap: str, names: list[str], rows: int, segment_rows: int, repeats: int) -> dict[str, Any]:
    """Measure every variant on every data set; returns the results (raises CheckFailed)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    results: dict[str, Any] = {}
    for name in names:
        ds = load(name, rows)
        expected = fingerprint(ds.table, ds.table.schema)
        topics = _prepare(admin, bootstrap, ds, segment_rows)
        settle()
        samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
        try:
            for attempt in range(repeats + 1):  # attempt 0 is the warm-up
                order = VARIANTS[attempt % len(VARIANTS) :] + VARIANTS[: attempt % len(VARIANTS)]
                for variant in order:
                    span, table = _runner(variant, bootstrap, ds, topics)()
                    got = fingerprint(table, ds.table.schema)
                    if table.num_rows != ds.rows or got != expected:
                        raise CheckFailed(f"{name} {variant}: {table.num_rows:,} rows, fingerprint {got} != {expected}")
                    if attempt:
                        samples[variant].append(span.cpu_s / ds.rows * 1e6)
                    del table
        finally:
            admin.delete_topics(list(topics), operation_timeout=30)
        summary = {v: summarize(samples[v], "consumer_cpu_us_per_row") for v in VARIANTS}
        base = summary["fastavro"]["median"]
        ratios = {v: summary[v]["median"] / base for v in VARIANTS if v != "fastavro"}
        results[name] = {
            "rows": ds.rows,
            "consumer_cpu_us_per_row": summary,
            "ratio_to_fastavro": ratios,
            "goals_met": {v: ratios[v] <= goal for v, goal in GOALS.items()},
        }
        print(_table({name: results[name]}), flush=True)
    return results


def _table(results: dict[str, Any]) -> str:
    lines = [
        "| data set | variant | CPU µs/row, median (min-max) | x fastavro | goal |",
        "|---|---|---|---|---|",
    ]
    for name, res in results.items():
        for variant in VARIANTS:
            s = res["consumer_cpu_us_per_row"][variant]
            ratio = res["ratio_to_fastavro"].get(variant)
            goal = GOALS.get(variant)
            verdict = "" if goal is None else f"≤ {goal}x: {'met' if ratio <= goal else 'NOT met'}"
            lines.append(
                f"| {name} | {variant} | {s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f}) | "
                f"{'' if ratio is None else f'{ratio:.2f}'} | {verdict} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("PARKA_BOOTSTRAP", "localhost:9092"))
    parser.add_argument("--datasets", default=",".join(DATASET_NAMES), help="comma-separated")
    parser.add_argument("--rows", type=int, default=100_000, help="rows per data set (default 100,000)")
    parser.add_argument("--segment-rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="folder for results.json and report.md")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    load_before = os.getloadavg()
    results = run(args.bootstrap, names, args.rows, args.segment_rows, args.repeats)
    # Other jobs on the machine inflate every figure; the interleaved ratios suffer least.
    load_average = {"before": load_before, "after": os.getloadavg()}
    command = "python -m benchmarks.shim_cpu " + " ".join(argv if argv is not None else sys.argv[1:])
    loads = ", ".join(f"{when} {v[0]:.1f}" for when, v in load_average.items())
    report = (
        f"# ParquetConsumer CPU per row\n\n`{command}`\n\n{_table(results)}\n\n"
        f"1-minute load average ({os.cpu_count()} cores): {loads}.\n"
    )
    print("\n" + report)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        doc = {"command": command, "machine": _machine(), "load_average": load_average, "settings": vars(args)}
        doc["results"] = results
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(doc, f, indent=2)
        with open(os.path.join(args.out, "report.md"), "w") as f:
            f.write(report)
    return 0 if all(all(r["goals_met"].values()) for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
