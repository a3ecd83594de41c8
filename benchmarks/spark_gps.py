"""Seed 003 as a real case: GPS positions from Kafka into Delta with Spark Structured Streaming.

Three paths over the same synthetic fleet, in one Spark session, one after the other:

``from_avro``     the row baseline of the seed's blog post: one Avro record per Kafka message,
                  behind Confluent's 5-byte schema-registry prefix (magic byte + schema id),
                  ``from_avro(substring(value, 6, length(value)-5), schema)``, flattened,
                  written to Delta by the streaming Delta sink.
``parka_raw``     the same records as parka segments (zstd Parquet, 10,000 records each), landed
                  by ``parka.spark_ext.ingest`` in raw mode: each segment becomes a data file
                  unchanged (executors), committed with a txn per partition (driver). The
                  headline: this is the KIP's point.
``parka_decode``  the same segments decoded by ``parka.spark_ext`` (``mapInArrow``) and written
                  by the same Delta sink as from_avro (``mode="decode"``, reserved columns
                  dropped).

Each run of a path is one ``availableNow`` query over its whole topic into a new table.
``warmups`` unmeasured runs of each path come first (the JVM's JIT, Kafka consumers, Python
workers: the first from_avro run costs 4x a warm one, the second 2x), then ``repeats``
measured runs, alternating paths, each after a full GC of the JVM; the median is reported,
every value kept (the result's ``paths["parka"]`` is ``parka_raw``, under the key
``benchmarks/spark.py`` reads). Measured per run: wall seconds and CPU seconds of the Spark process tree
(psutil: this Python driver, the JVM it started, the Python workers, plus the CPU of those
that already exited and were waited for). The Kafka broker is not in it; when the broker runs
on this machine, its CPU over the same run is reported apart. Then the tables are read back
with deltalake, sorted by (deviceId, timestamp), and must equal the generated data; a
mismatch fails the run.

The fleet: seeded per-device tracks, one fix per second per device, with smoothly varying
heading, speed and altitude (random walks on their rates), around Clermont-Ferrand; not
white noise, so columns compress as real telemetry does. Messages are keyed by deviceId in
both topics, each with 2 partitions; the Avro topic uses no Kafka compression (the cheapest
case for the baseline's consumer). The topics are deleted at the end.

``run(bootstrap, n_records, out_dir) -> dict`` is what ``benchmarks/spark.py`` calls;
``python -m benchmarks.spark_gps [--quick]`` runs it standalone and prints a report.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import math
import os
import shutil
import statistics
import struct
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.datasets import GPS_AVRO
from benchmarks.measure import STATISTIC, local_listener, process_cpu_s, tree_cpu_s  # the suite's statistic
from parka.rowdecode import avro_long

COLUMNS = [f["name"] for f in GPS_AVRO["fields"]]
SCHEMA_ID = 42  # what the registry would have assigned; only its 4 bytes matter here
SEED = 3
PARTITIONS = 2
CPU_MEASURE = (
    "psutil over the driver's process tree: user+system CPU of this Python driver, the Spark JVM "
    "and its Python workers, plus children_user/children_system of exited, waited-for children; "
    "the Kafka broker is not counted (its CPU is reported apart, broker_cpu_s_per_million_rows, when it "
    "runs on this machine; other clients of a shared broker add to it)"
)
GOAL_RATIO = 3.0

__all__ = ["GPS_AVRO", "gps_tracks", "run"]


def gps_tracks(n_records: int, seed: int = SEED) -> pa.Table:
    """``n_records`` GPS fixes from per-device tracks, in timestamp order (a fleet's stream)."""
    rng = np.random.default_rng(seed)
    devices = max(1, min(1000, n_records // 600))
    steps = math.ceil(n_records / devices)
    start_ms = 1_717_200_000_000  # 2024-06-01T00:00:00Z
    device_ids = 860_000_000_000_000 + rng.choice(10_000_000, size=devices, replace=False)
    offsets_ms = rng.integers(0, 1000, size=devices)
    t = start_ms + offsets_ms[:, None] + 1000 * np.arange(steps)[None, :]
    # speed (m/s) and heading (rad) drift smoothly; position integrates them, one fix a second
    cruise = rng.uniform(8, 33, size=devices)[:, None]
    speed = np.clip(cruise + np.cumsum(rng.normal(0, 0.4, size=(devices, steps)), axis=1), 0, 45)
    turn_rate = np.cumsum(rng.normal(0, 0.004, size=(devices, steps)), axis=1)
    heading = rng.uniform(0, 2 * np.pi, size=devices)[:, None] + np.cumsum(turn_rate, axis=1)
    lat0 = 45.7772 + rng.uniform(-1, 1, size=devices)[:, None]
    lon0 = 3.0870 + rng.uniform(-1.5, 1.5, size=devices)[:, None]
    lat = lat0 + np.cumsum(speed * np.cos(heading), axis=1) / 111_320
    lon = lon0 + np.cumsum(speed * np.sin(heading), axis=1) / (111_320 * np.cos(np.radians(lat)))
    climb = np.cumsum(rng.normal(0, 0.05, size=(devices, steps)), axis=1)
    altitude = np.clip(rng.uniform(300, 1200, size=devices)[:, None] + np.cumsum(climb, axis=1), 0, 1900)
    table = pa.table(
        {
            "timestamp": t.ravel(),
            "deviceId": np.repeat(device_ids, steps).astype(np.int64),
            "latitude": np.round(lat, 7).ravel(),
            "longitude": np.round(lon, 7).ravel(),
            "altitude": np.round(altitude, 2).ravel(),
            "speed": np.round(speed * 3.6, 2).ravel(),  # km/h, as trackers report
        }
    )
    order = pc.sort_indices(table, [("timestamp", "ascending"), ("deviceId", "ascending")])
    return table.take(order).slice(0, n_records)


def confluent_avro_values(table: pa.Table) -> list[bytes]:
    """Each row as Confluent's wire format: 0x00, the schema id (4 bytes, big-endian), Avro binary."""
    prefix = b"\x00" + struct.pack(">I", SCHEMA_ID)
    doubles = struct.Struct("<dddd")
    cols = [table.column(c).to_numpy() for c in COLUMNS]
    return [
        prefix + avro_long(int(ts)) + avro_long(int(dev)) + doubles.pack(la, lo, al, sp)
        for ts, dev, la, lo, al, sp in zip(*cols, strict=True)
    ]


def _check_avro_encoding(values: list[bytes], table: pa.Table) -> None:
    import fastavro

    parsed = fastavro.parse_schema(GPS_AVRO)
    for i in range(min(50, len(values))):
        record = fastavro.schemaless_reader(io.BytesIO(values[i][5:]), parsed, None)
        expected = {c: table.column(c)[i].as_py() for c in COLUMNS}
        if record != expected:
            raise AssertionError(f"Avro encoding of row {i} is wrong: {record} != {expected}")


def _new_topic(bootstrap: str, prefix: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)], operation_timeout=30)[name].result(timeout=30)
    for _ in range(100):
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and all(p.leader >= 0 for p in md.partitions.values()):
            return name
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} not ready")


def _delete_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    if names:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
        for future in admin.delete_topics(names, operation_timeout=30).values():
            future.result(timeout=60)


def produce_avro(bootstrap: str, topic: str, table: pa.Table) -> dict[str, float]:
    from confluent_kafka import Producer

    values = confluent_avro_values(table)
    _check_avro_encoding(values, table)
    keys = [str(d).encode() for d in table.column("deviceId").to_pylist()]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "compression.type": "none",
            "partitioner": "murmur2_random",
        }
    )
    for key, value in zip(keys, values, strict=True):
        while True:
            try:
                producer.produce(topic, value=value, key=key)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(120) != 0:
        raise RuntimeError(f"Avro records to {topic} not delivered")
    return {"messages": len(values), "value_bytes": float(sum(len(v) for v in values))}


def produce_parka(bootstrap: str, topic: str, table: pa.Table) -> dict[str, float]:
    from parka.producer import ParquetProducer

    sizes: list[int] = []

    def delivered(err: Any, msg: Any, records: int) -> None:
        if err is None:
            sizes.append(len(msg.value()))

    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
        "columnar.batch.records": 10_000,
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, GPS_AVRO)
        producer.produce_batch(topic, table, key_column="deviceId", on_delivery=delivered)
        if producer.flush(120) != 0:
            raise RuntimeError(f"segments to {topic} not delivered")
    return {"messages": len(sizes), "value_bytes": float(sum(sizes))}


def _measure(spark: Any, step: Callable[[], None], broker: Any = None) -> tuple[float, float, float]:
    """(wall s, Spark tree CPU s, broker CPU s) of ``step``."""
    # the previous run's garbage is collected first, so that its GC is not billed to this run
    spark.sparkContext._jvm.java.lang.System.gc()
    gc.collect()
    time.sleep(1.0)
    cpu0, broker0, wall0 = tree_cpu_s(), process_cpu_s(broker), time.perf_counter()
    step()
    wall = time.perf_counter() - wall0
    return wall, tree_cpu_s() - cpu0, process_cpu_s(broker) - broker0


def _from_avro_query(spark: Any, bootstrap: str, topic: str, table_dir: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    # as in the seed: skip the 5-byte schema-registry prefix; FAILFAST, as a corrupt record
    # must not turn into a silent null row
    decoded = raw.select(
        from_avro(F.expr("substring(value, 6, length(value)-5)"), json.dumps(GPS_AVRO), {"mode": "FAILFAST"}).alias(
            "value"
        )
    ).select(*(f"value.{c}" for c in COLUMNS))
    query = (
        decoded.writeStream.format("delta")
        .outputMode("append")
        .option("checkpointLocation", f"{table_dir}/_checkpoints/kafka")
        .trigger(availableNow=True)
        .start(table_dir)
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"from_avro query failed: {query.exception()}")


def _parka_query(spark: Any, bootstrap: str, topic: str, table_dir: str, *, mode: str) -> None:
    from parka.spark_ext import SparkIngestSettings, ingest

    settings = SparkIngestSettings(
        topic=topic,
        table_uri=table_dir,
        bootstrap_servers=bootstrap,
        schema=GPS_AVRO,
        reserved="drop" if mode == "decode" else "keep",  # raw keeps segments whole
        trigger="available-now",
        mode=mode,
    )
    stats = ingest(spark, settings)
    if stats.mode != mode:
        raise AssertionError(f"asked for {mode} mode, ran {stats.mode}")


QUERIES: dict[str, Callable[[Any, str, str, str], None]] = {
    "from_avro": _from_avro_query,
    "parka_raw": partial(_parka_query, mode="raw"),
    "parka_decode": partial(_parka_query, mode="decode"),
}
"""Each path's query: ``(spark, bootstrap, topic, table_dir)``, one ``availableNow`` run."""
TOPIC_OF = {"from_avro": "from_avro", "parka_raw": "parka", "parka_decode": "parka"}
"""Which topic each path reads: the Avro records', or the parka segments'."""


def benchmark_session(app_name: str = "parka spark_gps benchmark", extra_conf: dict[str, str] | None = None) -> Any:
    """The session the paths run in: delta-spark, the Kafka source and spark-avro, no UI, Spark's
    log at ERROR; ``extra_conf`` on top."""
    from parka.spark_ext import session
    from parka.spark_ext._session import spark_version

    spark = session(
        app_name=app_name,
        extra_packages=[f"org.apache.spark:spark-avro_2.13:{spark_version()}"],
        extra_conf={"spark.ui.enabled": "false", **(extra_conf or {})},
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _sorted_table(path: str) -> pa.Table:
    from deltalake import DeltaTable

    table = DeltaTable(path).to_pyarrow_table(columns=COLUMNS)
    order = pc.sort_indices(table, [("deviceId", "ascending"), ("timestamp", "ascending")])
    return pa.table({c: table.column(c).take(order).combine_chunks() for c in COLUMNS})


def _path_result(n: int, runs: list[tuple[float, float, float]], produced: dict[str, float]) -> dict[str, Any]:
    """Medians over the measured runs (wall_s, cpu_s, broker_cpu_s), with every run kept."""
    wall_s = statistics.median(r[0] for r in runs)
    cpu_s = statistics.median(r[1] for r in runs)
    broker_cpu_s = statistics.median(r[2] for r in runs)
    return {
        "rows": n,
        "wall_s": wall_s,
        "rows_per_s": n / wall_s,
        "cpu_s": cpu_s,
        "cpu_s_per_million_rows": cpu_s / n * 1e6,
        "rows_per_cpu_s": n / cpu_s,
        "kafka_messages": produced["messages"],
        "kafka_value_bytes_per_row": produced["value_bytes"] / n,
        "broker_cpu_s_per_million_rows": broker_cpu_s / n * 1e6,
        "runs_wall_s": [r[0] for r in runs],
        "runs_cpu_s": [r[1] for r in runs],
        "runs_broker_cpu_s": [r[2] for r in runs],
    }


def run(
    bootstrap: str,
    n_records: int,
    out_dir: str,
    *,
    seed: int = SEED,
    repeats: int = 5,
    warmups: int = 2,
    spark: Any = None,
) -> dict[str, Any]:
    """Run both paths over ``n_records`` GPS fixes; returns the result (also ``out_dir/spark_gps.json``).

    ``spark``: a session to use; it must have spark-avro besides delta-spark and the Kafka
    source (by default one is made with all three). Raises AssertionError when a table differs
    from the generated data.
    """
    started = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "tables", ignore_errors=True)
    data = gps_tracks(n_records, seed)
    topics: dict[str, str] = {}
    try:
        return _run(spark, bootstrap, n_records, out, data, topics, seed, repeats, warmups, started)
    finally:
        try:
            _delete_topics(bootstrap, list(topics.values()))
        except Exception as exc:  # must not hide the run's own outcome
            print(f"spark_gps: could not delete topics {sorted(topics.values())}: {exc}", file=sys.stderr)


def _run(
    spark: Any,
    bootstrap: str,
    n_records: int,
    out: Path,
    data: pa.Table,
    topics: dict[str, str],
    seed: int,
    repeats: int,
    warmups: int,
    started: float,
) -> dict[str, Any]:
    import importlib.metadata

    work = out / "tables"
    produced: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    for kind, producer in (("from_avro", produce_avro), ("parka", produce_parka)):
        topics[kind] = _new_topic(bootstrap, f"gps-{kind.replace('_', '-')}")
        produced[kind] = producer(bootstrap, topics[kind], data)
    produce_s = time.perf_counter() - t0

    if spark is None:
        spark = benchmark_session()
    queries, topic_of = QUERIES, TOPIC_OF
    produced_by = {name: produced[topic_of[name]] for name in queries}
    for i in range(warmups):  # not measured
        for name, query in queries.items():
            query(spark, bootstrap, topics[topic_of[name]], str(work / f"warm_{name}_{i}"))
            shutil.rmtree(work / f"warm_{name}_{i}", ignore_errors=True)
    broker = local_listener(bootstrap)
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in queries}
    for i in range(repeats):
        for name, query in queries.items():
            table_dir = str(work / f"{name}_{i}")
            if i > 0:
                shutil.rmtree(work / f"{name}_{i - 1}", ignore_errors=True)
            step = partial(query, spark, bootstrap, topics[topic_of[name]], table_dir)
            runs[name].append(_measure(spark, step, broker))
    paths = {name: _path_result(n_records, runs[name], produced_by[name]) for name in queries}

    expected = pa.table({c: data.column(c) for c in COLUMNS})
    order = pc.sort_indices(expected, [("deviceId", "ascending"), ("timestamp", "ascending")])
    expected = pa.table({c: expected.column(c).take(order).combine_chunks() for c in COLUMNS})
    tables = {name: _sorted_table(str(work / f"{name}_{repeats - 1}")) for name in queries}
    for name, table in tables.items():
        if table.num_rows != n_records:
            raise AssertionError(f"{name} table holds {table.num_rows} rows, expected {n_records}")
        for c in COLUMNS:
            if not table.column(c).equals(expected.column(c)):
                raise AssertionError(f"{name} table differs from the generated data in column {c}")
    avro = paths["from_avro"]
    cpu_ratio = {name: paths[name]["rows_per_cpu_s"] / avro["rows_per_cpu_s"] for name in ("parka_raw", "parka_decode")}
    wall_ratio = {name: paths[name]["rows_per_s"] / avro["rows_per_s"] for name in ("parka_raw", "parka_decode")}
    # paired per repeat (the paths alternate), as benchmarks/spark.py pairs them
    paired = {
        name: [a / p for a, p in zip(avro["runs_cpu_s"], paths[name]["runs_cpu_s"], strict=True)]
        for name in ("parka_raw", "parka_decode")
    }
    ratio = statistics.median(paired["parka_raw"])  # the headline: the suite's statistic for every target
    result: dict[str, Any] = {
        "benchmark": "spark_gps",
        "n_records": n_records,
        "repeats": repeats,
        "warmups": warmups,
        "seed": seed,
        "devices": int(pc.count_distinct(data.column("deviceId")).as_py()),
        "kafka_partitions": PARTITIONS,
        "pyspark": importlib.metadata.version("pyspark"),
        "delta_spark": importlib.metadata.version("delta-spark"),
        "spark_master": spark.sparkContext.master,
        "cpu_count": os.cpu_count(),
        "cpu_measure": CPU_MEASURE,
        "headline_path": "parka_raw",
        "paths": {**paths, "parka": paths["parka_raw"]},  # "parka": the headline, for benchmarks/spark.py
        "from_avro_rows_per_s": avro["rows_per_s"],
        "from_avro_cpu_s_per_million_rows": avro["cpu_s_per_million_rows"],
        "from_avro_rows_per_cpu_s": avro["rows_per_cpu_s"],
        "parka_raw_rows_per_s": paths["parka_raw"]["rows_per_s"],
        "parka_raw_cpu_s_per_million_rows": paths["parka_raw"]["cpu_s_per_million_rows"],
        "parka_raw_rows_per_cpu_s": paths["parka_raw"]["rows_per_cpu_s"],
        "parka_decode_rows_per_s": paths["parka_decode"]["rows_per_s"],
        "parka_decode_cpu_s_per_million_rows": paths["parka_decode"]["cpu_s_per_million_rows"],
        "parka_decode_rows_per_cpu_s": paths["parka_decode"]["rows_per_cpu_s"],
        "parka_raw_over_from_avro_rows_per_cpu_s": cpu_ratio["parka_raw"],
        "parka_decode_over_from_avro_rows_per_cpu_s": cpu_ratio["parka_decode"],
        "parka_raw_over_from_avro_rows_per_s": wall_ratio["parka_raw"],
        "parka_decode_over_from_avro_rows_per_s": wall_ratio["parka_decode"],
        "parka_raw_over_from_avro_rows_per_cpu_s_per_repeat": paired["parka_raw"],
        "parka_decode_over_from_avro_rows_per_cpu_s_per_repeat": paired["parka_decode"],
        "statistic": STATISTIC,
        # the keys before raw mode existed, now meaning the headline path (parka_raw)
        "parka_rows_per_s": paths["parka_raw"]["rows_per_s"],
        "parka_cpu_s_per_million_rows": paths["parka_raw"]["cpu_s_per_million_rows"],
        "parka_over_from_avro_rows_per_cpu_s": ratio,
        "parka_over_from_avro_rows_per_s": wall_ratio["parka_raw"],
        "goal_rows_per_cpu_s_ratio": GOAL_RATIO,
        "goal_met": ratio >= GOAL_RATIO,
        "content_equal": True,
        "produce_s": produce_s,
        "total_wall_s": time.perf_counter() - started,
    }
    (out / "spark_gps.json").write_text(json.dumps(result, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return result


def report(result: dict[str, Any]) -> str:
    """A readable table of ``result``."""
    lines = [
        f"spark_gps: {result['n_records']:,} GPS records, {result['devices']} devices, median of "
        f"{result['repeats']} runs after {result['warmups']} warm-ups, pyspark "
        f"{result['pyspark']}, delta-spark {result['delta_spark']}, {result['spark_master']}, "
        f"{result['cpu_count']} cores",
        "",
        f"{'path':<12} {'rows/s':>10} {'CPU-s/1M rows':>14} {'rows/CPU-s':>11} {'wall s':>7} {'CPU s':>7} "
        f"{'messages':>9} {'value bytes/row':>16} {'broker CPU-s/1M':>15}",
    ]
    for name, p in result["paths"].items():
        if name == "parka":  # the alias of parka_raw
            continue
        rates = f"{p['rows_per_s']:>10,.0f} {p['cpu_s_per_million_rows']:>14.1f} {p['rows_per_cpu_s']:>11,.0f}"
        sizes = f"{p['kafka_messages']:>9,.0f} {p['kafka_value_bytes_per_row']:>16.1f}"
        broker = f"{p['broker_cpu_s_per_million_rows']:>15.1f}"
        lines.append(f"{name:<12} {rates} {p['wall_s']:>7.1f} {p['cpu_s']:>7.1f} {sizes} {broker}")
    verdict = "met" if result["goal_met"] else "NOT met"
    paired = {n: result[f"parka_{n}_over_from_avro_rows_per_cpu_s_per_repeat"] for n in ("raw", "decode")}
    spread = {n: f"{statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})" for n, r in paired.items()}
    lines += [
        "",
        f"rows per CPU-second over from_avro's, {STATISTIC}:",
        f"  parka raw {spread['raw']} (goal {result['goal_rows_per_cpu_s_ratio']:.0f}x: {verdict}); "
        f"ratio of medians {result['parka_raw_over_from_avro_rows_per_cpu_s']:.2f}x",
        f"  parka decode {spread['decode']}; ratio of medians "
        f"{result['parka_decode_over_from_avro_rows_per_cpu_s']:.2f}x",
        f"rows per second, ratio of medians: parka raw {result['parka_raw_over_from_avro_rows_per_s']:.2f}x, "
        f"parka decode {result['parka_decode_over_from_avro_rows_per_s']:.2f}x",
        "all three Delta tables equal the generated data (sorted by deviceId, timestamp)",
        "CPU s per run: "
        + "; ".join(
            f"{n} " + ", ".join(f"{c:.2f}" for c in p["runs_cpu_s"]) for n, p in result["paths"].items() if n != "parka"
        ),
        f"CPU: {result['cpu_measure']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_gps", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=os.environ.get("PARKA_BOOTSTRAP", "localhost:9092"))
    parser.add_argument("--records", type=int, default=2_000_000, help="GPS records per path (default 2,000,000)")
    parser.add_argument("--quick", action="store_true", help="200,000 records")
    parser.add_argument("--out", default="bench-out/spark_gps")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--repeats", type=int, default=5, help="measured runs per path (median reported)")
    parser.add_argument("--warmups", type=int, default=2, help="unmeasured runs per path first")
    args = parser.parse_args(argv)
    n = 200_000 if args.quick else args.records
    result = run(args.bootstrap, n, args.out, seed=args.seed, repeats=args.repeats, warmups=args.warmups)
    print(report(result))
    print(f"\nresult: {os.path.join(args.out, 'spark_gps.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
