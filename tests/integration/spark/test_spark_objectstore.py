"""Spark on an S3 table that `parka ingest` writes, in a real S3-compatible server (s3proxy):
Spark raw mode continues the table (executors write data files through obstore, the driver
commits through delta-rs with a conditional put) and delta-spark reads it through s3a. Spark
raw mode into an ``s3://`` table keeps its default checkpoint in the table, through s3a; a
checkpoint Hadoop cannot write is refused before the query starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parka.spark_ext import SparkIngestSettings, ingest
from parka.spark_ext._options import hadoop_storage_options

from parka.errors import ConfigError

from .._ingest_util import assert_segments_stored_byte_for_byte, produce_events, run_ingest, table_ids
from .._objectstores import ObjectStoreServer
from ._util import SPARK

pytestmark = SPARK


def _flags(options: dict[str, str]) -> list[str]:
    return [arg for key, value in options.items() for arg in ("--storage-option", f"{key}={value}")]


def _parka_spark_parka(
    spark: Any, bootstrap: str, topic: str, uri: str, spark_uri: str, options: dict[str, str], tmp_path: Path
) -> None:
    """parka ingest creates the table, Spark raw mode continues it (same app id: from the
    table's txn; files through obstore, commits through delta-rs), parka ingest again; then
    every record is in once and every segment's row groups byte for byte (read by deltalake)."""
    segments = produce_events(bootstrap, topic, 0, 200, batch=50)
    run_ingest(topic, uri, bootstrap, "--end-at-latest", *_flags(options))
    second = produce_events(bootstrap, topic, 200, 300, batch=50)
    segments += second
    settings = SparkIngestSettings(
        topic=topic,
        table_uri=spark_uri,
        bootstrap_servers=bootstrap,
        storage_options=options,
        commit_engine="delta-rs",
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    stats = ingest(spark, settings)
    assert (stats.records, stats.segments) == (300, second)
    segments += produce_events(bootstrap, topic, 500, 100, batch=50)
    run_ingest(topic, uri, bootstrap, "--end-at-latest", *_flags(options))
    ids = table_ids(uri, options)
    assert sorted(ids) == list(range(600)), f"{len(ids) - len(set(ids))} duplicates"
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, uri, options)


def test_spark_writes_and_delta_spark_reads_an_s3_table_parka_ingest_writes(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], s3proxy: ObjectStoreServer, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    uri = s3proxy.table_uri("spark")
    s3a = "s3a://" + uri.removeprefix("s3://")
    options = s3proxy.storage_options
    _parka_spark_parka(spark, bootstrap, topic, uri, s3a, options, tmp_path)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop_storage_options(options).items():
        conf.set(key, value)
    by_spark = [r.id for r in spark.read.format("delta").load(s3a).select("id").collect()]
    assert sorted(by_spark) == list(range(600))


def test_spark_writes_and_delta_spark_reads_an_azure_table_parka_ingest_writes(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], azurite: ObjectStoreServer, tmp_path: Path
) -> None:
    """The same on Azure Blob Storage as Azurite serves it: parka ingest and Spark raw mode write
    through abfss:// (obstore and delta-rs), delta-spark reads through wasb:// (hadoop-azure in
    emulator mode: Azurite serves no ADLS Gen2 endpoint for abfs, Azure/Azurite#409)."""
    topic = new_topic(partitions=2)
    uri = azurite.table_uri("spark")
    _parka_spark_parka(spark, bootstrap, topic, uri, uri, azurite.storage_options, tmp_path)
    # hadoop-azure's emulator account is Azurite on 127.0.0.1:10000 (its default port)
    spark.sparkContext._jsc.hadoopConfiguration().set(
        "fs.azure.storage.emulator.account.name", "devstoreaccount1.blob.core.windows.net"
    )
    wasb = "wasb://lake@devstoreaccount1.blob.core.windows.net/" + uri.rsplit("/", 1)[1]
    by_spark = [r.id for r in spark.read.format("delta").load(wasb).select("id").collect()]
    assert sorted(by_spark) == list(range(600))


def test_spark_ingest_into_s3_keeps_its_default_checkpoint_in_the_table(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], s3proxy: ObjectStoreServer
) -> None:
    """An ``s3://`` table, delta-rs commits, no checkpoint location: the checkpoint is the table's
    ``_parka_checkpoints/<app id>`` through s3a, every record lands once, and a second run
    continues from that checkpoint."""
    topic = new_topic(partitions=2)
    uri = s3proxy.table_uri("spark-ckpt")
    options = s3proxy.storage_options
    settings = SparkIngestSettings(
        topic=topic, table_uri=uri, bootstrap_servers=bootstrap, storage_options=options, commit_engine="delta-rs"
    )
    assert settings.checkpoint == f"s3a://{uri.removeprefix('s3://')}/_parka_checkpoints/parka-{topic}"
    produce_events(bootstrap, topic, 0, 40, batch=10)
    assert ingest(spark, settings).records == 40
    produce_events(bootstrap, topic, 40, 20, batch=10)
    assert ingest(spark, settings).records == 20
    assert sorted(table_ids(uri, options)) == list(range(60))
    # the checkpoint is in the bucket, where the table is: s3proxy keeps objects as files
    checkpoint = s3proxy.data_dir() / uri.removeprefix("s3://") / "_parka_checkpoints" / f"parka-{topic}"
    assert sorted(p.name for p in (checkpoint / "commits").iterdir()) == ["0", "1"]


def test_a_checkpoint_the_session_cannot_write_is_refused_before_the_query(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Hadoop has no FileSystem for the checkpoint's scheme in this session (as s3a:// in a
    session without hadoop-aws): a ConfigError naming the setting, and nothing written."""
    settings = SparkIngestSettings(
        topic=new_topic(),
        table_uri=str(tmp_path / "t"),
        bootstrap_servers=bootstrap,
        checkpoint_location="nosuch://x/ck",
    )
    with pytest.raises(ConfigError, match=r"'nosuch://x/ck' for 'checkpoint_location'.*cannot write it.*No FileSystem"):
        ingest(spark, settings)
    assert not (tmp_path / "t").exists()
