"""Spark and Iceberg tables: Spark (with Iceberg's Spark runtime) reads what ``parka ingest``
landed; ``parka spark-ingest --catalog`` lands raw segments in an Iceberg table of Iceberg's
REST catalog server through the same committer, after which ``parka ingest`` continues on the
same table where Spark stopped; and decode mode writes records with Iceberg's Spark writer, on
the embedded catalog and on the REST server, exactly once across restarts and taking turns with
``parka ingest`` on one table."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from parka.lake import Committer, IcebergEngine, LandingSession
from parka.producer import ParquetProducer
from parka.spark_ext import SparkIngestSettings, ingest, start_ingest
from parka.spark_ext._cli import main as spark_main
from parka.spark_ext._decode_iceberg import IcebergBatches, spark_table_name
from parka.spark_ext._query import LandingRun
from pyiceberg.catalog import Catalog, load_catalog

from parka.errors import CommitConflict

from .._ingest_util import (
    EVENTS,
    app_id_of,
    assert_segments_stored_byte_for_byte,
    events,
    produce_events,
    run_ingest,
    wait_for,
)
from .._objectstores import ObjectStoreServer
from ..iceberg._lake import Lake, duckdb_rows, table_rows
from ..test_upsert import ICEBERG_UPSERT_POINTS, apply, crash_at_each_point
from ..test_upsert import produce as produce_keyed
from ._util import SPARK, wait_until_idle

pytestmark = SPARK

COLUMNS = EVENTS.names


def spark_rows(spark: Any, source: str, columns: list[str] = COLUMNS) -> list[dict[str, Any]]:
    """The table's rows as Spark's Iceberg source reads them, sorted by id: from a metadata file
    (no catalog configuration in the session) or by name in a Spark catalog."""
    df = spark.read.format("iceberg").load(source) if "/" in source else spark.table(source)
    return sorted((r.asDict() for r in df.select(*columns).collect()), key=lambda r: r["id"])


def naive_utc(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``at`` as Spark's collect() gives it: naive, in the session's time zone (UTC)."""
    return [{**r, "at": r["at"].astimezone(timezone.utc).replace(tzinfo=None)} for r in rows]


def expected(start: int, n: int) -> list[dict[str, Any]]:
    return sorted(events(start, n).to_pylist(), key=lambda r: r["id"])


def test_spark_reads_the_iceberg_table_parka_ingest_landed(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 600, batch=100)
    warehouse = tmp_path / "warehouse"
    run_ingest(topic, "db.events", bootstrap, "--end-at-latest", "--catalog", "local", "--catalog-option",
               f"warehouse={warehouse}")  # fmt: skip
    catalog = load_catalog(
        "local", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    table = catalog.load_table("db.events")
    assert spark_rows(spark, table.metadata_location) == naive_utc(expected(0, 600))


def test_spark_raw_mode_lands_segments_in_iceberg_and_parka_ingest_continues_there(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, iceberg_rest_url: str
) -> None:
    topic = new_topic(partitions=2)
    segments = produce_events(bootstrap, topic, 0, 400, batch=40)
    identifier = f"s{uuid.uuid4().hex[:12]}.events"  # the REST catalog outlives a run: a namespace of its own
    settings = SparkIngestSettings(
        topic=topic,
        table_uri=identifier,
        bootstrap_servers=bootstrap,
        catalog="rest",
        catalog_options={"uri": iceberg_rest_url},
        checkpoint_location=str(tmp_path / "checkpoint"),
        max_offsets_per_trigger=6,
    )
    stats = ingest(spark, settings)
    assert (stats.records, stats.segments) == (400, segments)
    assert stats.batches >= 2
    catalog = load_catalog("rest", type="rest", uri=iceberg_rest_url)
    table = catalog.load_table(identifier)
    root = table.location().removeprefix("file://").rstrip("/") + "/data"
    files = {p.removeprefix(f"file://{root}/") for p in table.inspect.files()["file_path"].to_pylist()}
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, root, files=files)
    rows = table.scan().to_arrow().select(COLUMNS).sort_by("id")
    assert rows.cast(EVENTS).equals(pa.Table.from_pylist(expected(0, 400), schema=EVENTS))

    # parka ingest takes over with the same app id (parka-<topic>): it resumes after Spark's offsets
    produce_events(bootstrap, topic, 400, 400, batch=40)
    run_ingest(topic, identifier, bootstrap, "--end-at-latest", "--catalog", "rest", "--catalog-option",
               f"uri={iceberg_rest_url}")  # fmt: skip
    table = catalog.load_table(identifier)
    assert spark_rows(spark, table.metadata_location) == naive_utc(expected(0, 800))  # each once, read by Spark


# decode mode ---------------------------------------------------------------------------------------

WIDER = EVENTS.append(pa.field("note", pa.string()))


def produce_wider(bootstrap: str, topic: str, start: int, n: int) -> None:
    """Events with a new field, ``note``, as segments of 50 records."""
    table = events(start, n).append_column(WIDER.field("note"), pa.array([f"n{i}" for i in range(start, start + n)]))
    conf = {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 50}
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, WIDER)
        producer.produce_batch(topic, table, key_column="device")
        assert producer.flush(30) == 0


def iceberg_rows(catalog: Catalog, identifier: str, columns: list[str] = COLUMNS) -> list[dict[str, Any]]:
    """The table's rows as pyiceberg reads them, sorted by id."""
    rows = catalog.load_table(identifier).scan(selected_fields=tuple(columns)).to_arrow().select(columns)
    return sorted(rows.to_pylist(), key=lambda r: r["id"])


def test_decode_mode_into_the_embedded_catalog_takes_turns_with_parka_ingest_and_evolves(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 300, batch=50)
    warehouse = tmp_path / "warehouse"
    # the catalog's name is the Spark catalog's too, and a session keeps a catalog's settings:
    # this test's embedded catalog has a name of its own
    name, identifier = "embedded_decode", "db.events"
    base: dict[str, Any] = {
        "topic": topic,
        "table_uri": identifier,
        "bootstrap_servers": bootstrap,
        "mode": "decode",
        "catalog": name,
        "catalog_options": {"warehouse": str(warehouse)},
    }
    first = ingest(
        spark, SparkIngestSettings(**base, checkpoint_location=str(tmp_path / "cp1"), max_offsets_per_trigger=4)
    )
    assert (first.records, first.schema_source, first.mode) == (300, "topic's segments", "decode")
    assert first.batches >= 2  # maxOffsetsPerTrigger split the backlog: one commit each
    catalog = load_catalog(name, type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    summary = catalog.load_table(identifier).current_snapshot().summary  # type: ignore[union-attr]
    assert summary.operation.value == "append"
    app = app_id_of(topic, identifier, name)
    assert set(json.loads(summary["parka.txns"])) == {f"{app}-0", f"{app}-1"}
    stale = Committer(IcebergEngine(name, base["catalog_options"]), table_uri=identifier, topic=topic)

    # parka ingest continues from the offsets in the summaries (same app id, the table's default)
    produce_events(bootstrap, topic, 300, 100, batch=50)
    run_ingest(topic, identifier, bootstrap, "--end-at-latest", "--catalog", name, "--catalog-option",
               f"warehouse={warehouse}")  # fmt: skip
    # a write made from a snapshot that another commit has passed is refused, and leaves nothing
    kafka = spark.read.format("kafka").options(
        **{"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "includeHeaders": "true"}
    )
    a_segment = kafka.load().where("partition = 0 AND offset = 0")
    batches = IcebergBatches(LandingRun(LandingSession(stale)), spark_table_name(name, identifier), EVENTS,
                             SparkIngestSettings(**base, checkpoint_location=str(tmp_path / "cp1")))  # fmt: skip
    with pytest.raises(CommitConflict, match="ValidationException: Found conflicting files"):
        batches._append(a_segment, stale, {f"{app}-0": 10**9}, batch_id=99)

    # decode mode continues after parka ingest (a new checkpoint starts after the table's offsets)
    # and the table takes the new field
    produce_wider(bootstrap, topic, 400, 100)
    settings = SparkIngestSettings(
        **base, checkpoint_location=str(tmp_path / "cp2"), schema=WIDER, schema_evolution="merge"
    )
    assert ingest(spark, settings).records == 100
    want = [{**r, "note": f"n{r['id']}" if r["id"] >= 400 else None} for r in expected(0, 500)]
    assert iceberg_rows(catalog, identifier, WIDER.names) == want
    assert spark_rows(spark, spark_table_name(name, identifier), WIDER.names) == naive_utc(want)


def test_decode_mode_into_a_rest_catalog_is_exactly_once_across_a_restart(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, iceberg_rest_url: str
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 400, batch=40)
    identifier = f"s{uuid.uuid4().hex[:12]}.events"  # the REST catalog outlives a run: a namespace of its own
    settings = SparkIngestSettings(
        topic=topic,
        table_uri=identifier,
        bootstrap_servers=bootstrap,
        mode="decode",
        catalog="rest",
        catalog_options={"uri": iceberg_rest_url},
        checkpoint_location=str(tmp_path / "checkpoint"),
        trigger="processing-time=200ms",
        max_offsets_per_trigger=3,
    )
    catalog = load_catalog("rest", type="rest", uri=iceberg_rest_url)

    def count() -> int:
        return catalog.load_table(identifier).scan().to_arrow().num_rows

    query = start_ingest(spark, settings)
    try:
        wait_for(lambda: count() > 0, "the first commit", timeout_s=120)
    finally:
        query.stop()  # mid-backlog, possibly mid-batch
    assert count() < 400
    produce_events(bootstrap, topic, 400, 200, batch=40)
    query = start_ingest(spark, settings)
    try:
        wait_for(lambda: count() >= 600, "600 rows", timeout_s=180)
        wait_until_idle(query)  # a duplicate batch would have landed by then
    finally:
        query.stop()
    want = expected(0, 600)
    assert iceberg_rows(catalog, identifier) == want
    assert spark_rows(spark, spark_table_name("rest", identifier)) == naive_utc(want)


def test_spark_raw_mode_continues_an_iceberg_table_in_s3_that_parka_ingest_started(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], s3proxy: ObjectStoreServer, tmp_path: Path
) -> None:
    """The warehouse in an S3-compatible store (s3proxy) and the SQL catalog on SQLite: parka
    ingest creates the table, Spark raw mode continues it (executors write the data files through
    obstore with the same ``--storage-option`` credentials, the driver commits through pyiceberg),
    parka ingest again; every record once, every segment's bytes in the bucket, no orphan."""
    from parka.lake._storage import list_files

    topic = new_topic(partitions=2)
    options = dict(s3proxy.storage_options)
    catalog_options = {
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": f"{s3proxy.root}/wh-{uuid.uuid4().hex[:8]}",
    }
    flags = [a for k, v in catalog_options.items() for a in ("--catalog-option", f"{k}={v}")]
    flags += [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]
    segments = produce_events(bootstrap, topic, 0, 200, batch=50)
    run_ingest(topic, "db.events", bootstrap, "--end-at-latest", "--catalog", "s3", *flags)
    second = produce_events(bootstrap, topic, 200, 300, batch=50)
    segments += second
    settings = SparkIngestSettings(
        topic=topic,
        table_uri="db.events",
        bootstrap_servers=bootstrap,
        catalog="s3",
        catalog_options=catalog_options,
        storage_options=options,
        checkpoint_location=str(tmp_path / "checkpoint"),
        max_offsets_per_trigger=4,
    )
    stats = ingest(spark, settings)
    assert (stats.records, stats.segments) == (300, second) and stats.batches >= 2
    segments += produce_events(bootstrap, topic, 500, 100, batch=50)
    run_ingest(topic, "db.events", bootstrap, "--end-at-latest", "--catalog", "s3", *flags)

    engine = IcebergEngine("s3", catalog_options, options)
    table = engine.open("db.events", options)
    assert table is not None and table.uri.startswith("s3://")
    rows = engine.catalog.load_table("db.events").scan().to_arrow().select(COLUMNS).sort_by("id")
    assert rows.cast(EVENTS).equals(pa.Table.from_pylist(expected(0, 600), schema=EVENTS))  # each once
    files = table.referenced_files()
    assert {f.path for f in list_files(table.uri, options)} == files  # no orphans
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, table.uri, options, files=files)


def test_spark_reads_an_iceberg_upsert_table_as_the_latest_row_per_key(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``parka ingest --upsert`` into the embedded SQL catalog, SIGKILLed at each crash point of
    a commit in turn (data files written, delete files written, a commit whose changes the key
    index never took); then ``parka spark-ingest --upsert`` continues the table, cleaning what
    the last kill left (raw mode, the same committer). The table is the model, read by Iceberg's
    Spark runtime, pyiceberg and DuckDB (each applies the position-delete files), and no file on
    disk is one no snapshot names. (The REST catalog's kills:
    tests/integration/iceberg/test_iceberg_upsert.py.)"""
    topic = new_topic(partitions=2)
    lake = Lake(tmp_path / "warehouse")
    identifier = lake.name("kv")
    model: dict[int, int] = {}
    flags = ("--upsert", "--end-at-latest", *lake.flags)
    first = [(k, 1) for k in range(40)]
    produce_keyed(bootstrap, topic, first)
    apply(model, first)
    run_ingest(topic, identifier, bootstrap, *flags)
    one_at_a_time = ("--max-segments-per-commit", "1", "--compact-min-files", "0")

    crash_at_each_point(
        bootstrap,
        topic,
        identifier,
        model,
        ICEBERG_UPSERT_POINTS,
        *flags,
        *one_at_a_time,
        left=lake.delete_files_left(identifier),
    )
    later = [(k, 3) for k in range(0, 40, 5)] + [(7, None), (3, 4)]
    produce_keyed(bootstrap, topic, later)
    apply(model, later)
    checkpoint = str(tmp_path / "checkpoint")
    assert spark_main(["-k", bootstrap, "-q", "--checkpoint-location", checkpoint, topic, identifier, *flags]) == 0
    table = lake.catalog().load_table(identifier)
    rows = spark.read.format("iceberg").load(table.metadata_location).select("id", "version").collect()
    assert sorted((r.id, r.version) for r in rows) == sorted(model.items())
    assert table_rows(lake, identifier) == model
    assert duckdb_rows(lake, identifier) == model
    assert lake.on_disk(identifier) <= lake.logged(identifier)  # no orphans
