"""Spark and Iceberg tables: Spark (with Iceberg's Spark runtime) reads what ``parka ingest``
landed, and ``parka spark-ingest --catalog`` lands raw segments in an Iceberg table of Iceberg's
REST catalog server through the same committer, after which ``parka ingest`` continues on the
same table where Spark stopped."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
from parka.spark_ext import SparkIngestSettings, ingest
from pyiceberg.catalog import load_catalog

from .._ingest_util import EVENTS, assert_segments_stored_byte_for_byte, events, produce_events, run_ingest
from ._util import SPARK

pytestmark = SPARK

COLUMNS = EVENTS.names


def spark_rows(spark: Any, metadata_location: str) -> list[dict[str, Any]]:
    """The table's rows as Spark's Iceberg source reads them (from the metadata file: no catalog
    configuration in the session), sorted by id."""
    df = spark.read.format("iceberg").load(metadata_location)
    return sorted((r.asDict() for r in df.select(*COLUMNS).collect()), key=lambda r: r["id"])


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
