"""Decode mode into Iceberg without Spark: a pyiceberg catalog's properties as a Spark catalog of
Iceberg's Spark runtime, the jars that takes, the settings that allow it, and a batch's commit
through the committer's retry."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from parka.lake import Committer, IcebergEngine, LandingSession
from parka.spark_ext import SparkIngestSettings
from parka.spark_ext._decode_iceberg import IcebergBatches, spark_table_name
from parka.spark_ext._options import iceberg_catalog_conf
from parka.spark_ext._query import LandingRun
from parka.spark_ext._session import SQLITE_JDBC, iceberg_packages

from parka.errors import ConfigError

from ._tables import SCHEMA, SteppingClock, conflicting, landed

PREFIX = "spark.sql.catalog.lake"


def test_the_embedded_catalog_is_a_jdbc_catalog_on_the_same_sqlite_file(tmp_path: Path) -> None:
    properties = IcebergEngine("lake", {"warehouse": str(tmp_path)}).properties  # pyiceberg's, as parka opens it
    conf = iceberg_catalog_conf("lake", properties)
    assert conf == {
        PREFIX: "org.apache.iceberg.spark.SparkCatalog",
        f"{PREFIX}.type": "jdbc",
        f"{PREFIX}.uri": f"jdbc:sqlite:{tmp_path}/catalog.db",
        f"{PREFIX}.warehouse": f"file://{tmp_path}",
        f"{PREFIX}.cache-enabled": "false",
    }
    runtime, driver = iceberg_packages(conf)
    assert runtime.startswith("org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:")
    assert driver == SQLITE_JDBC


def test_a_rest_catalog_keeps_its_properties_and_s3_settings_take_java_names() -> None:
    properties = {
        "uri": "http://catalog:8181",
        "credential": "id:secret",
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
        "s3.region": "eu-west-1",
        "s3.endpoint": "http://minio:9000",
    }
    conf = iceberg_catalog_conf("lake", properties)
    assert conf == {
        PREFIX: "org.apache.iceberg.spark.SparkCatalog",
        f"{PREFIX}.type": "rest",
        f"{PREFIX}.uri": "http://catalog:8181",
        f"{PREFIX}.credential": "id:secret",
        f"{PREFIX}.client.region": "eu-west-1",
        f"{PREFIX}.s3.endpoint": "http://minio:9000",
        f"{PREFIX}.cache-enabled": "false",
    }
    assert len(iceberg_packages(conf)) == 1  # the runtime alone
    s3 = iceberg_catalog_conf("lake", {"type": "sql", "uri": "sqlite:////c.db", "warehouse": "s3://lake/wh"})
    assert s3[f"{PREFIX}.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert iceberg_packages(s3)[-1] == "org.apache.iceberg:iceberg-aws-bundle:1.11.0"


@pytest.mark.parametrize(
    ("properties", "says"),
    [
        ({"type": "glue"}, "no Spark mapping for a catalog of type 'glue'"),
        ({"uri": "thrift://metastore:9083"}, "no Spark mapping for a catalog of type 'hive'"),
        ({"uri": "postgresql+psycopg2://u:p@db/iceberg"}, "on SQLite only"),
        ({"py-catalog-impl": "my.Catalog"}, "a Python catalog implementation has no Spark one"),
    ],
)
def test_a_catalog_without_a_mapping_is_refused_with_what_to_do(properties: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says) as info:
        iceberg_catalog_conf("lake", properties)
    assert f"-c {PREFIX}=org.apache.iceberg.spark.SparkCatalog" in str(info.value)


def test_decode_mode_takes_a_catalog() -> None:
    base = {"topic": "gps", "table_uri": "db.gps", "bootstrap_servers": "b:9092", "mode": "decode"}
    settings = SparkIngestSettings(**base, catalog="lake", checkpoint_location="/cp", reserved="drop")
    assert (settings.mode, settings.catalog) == ("decode", "lake")
    with pytest.raises(ConfigError, match="'checkpoint_location'"):
        SparkIngestSettings(**base, catalog="lake")
    with pytest.raises(ConfigError, match=r"'dlq_table_uri'.*a dead-letter table needs mode raw"):
        SparkIngestSettings(**base, catalog="lake", checkpoint_location="/cp", dlq_table_uri="db.dlq")
    assert spark_table_name("lake", "a.b.t`x") == "`lake`.`a`.`b`.`t``x`"


def test_the_command_adds_the_jars_decode_mode_into_iceberg_writes_with(tmp_path: Path) -> None:
    from parka.spark_ext._cli import _iceberg_packages, build_parser, settings_from_args

    def jars(*argv: str, spark_conf: dict[str, str] | None = None) -> list[str]:
        args = build_parser().parse_args(["gps", "db.gps", "--checkpoint-location", str(tmp_path / "cp"), *argv])
        return _iceberg_packages(settings_from_args(args), spark_conf or {})

    embedded = ("--catalog", "lake", "--catalog-option", f"warehouse={tmp_path}")
    assert jars(*embedded) == []  # raw mode commits with pyiceberg: no Spark catalog
    assert jars(*embedded, "--mode", "decode") == [*iceberg_packages(), SQLITE_JDBC]
    glue = ("--mode", "decode", "--catalog", "lake", "--catalog-option", "type=glue")
    with pytest.raises(ConfigError, match="no Spark mapping for a catalog of type 'glue'"):
        jars(*glue)
    assert jars(*glue, spark_conf={f"{PREFIX}": "org.apache.iceberg.spark.SparkCatalog"}) == iceberg_packages()


def test_a_rest_catalogs_credential_is_redacted_by_the_sessions_pattern() -> None:
    """Spark's default ``spark.redaction.regex`` does not cover ``credential``; parka's sessions
    use a pattern that does, for every secret decode mode hands Spark."""
    import re

    from parka.spark_ext._session import _REDACTION

    conf = iceberg_catalog_conf("lake", {"uri": "http://127.0.0.1:8181", "credential": "id:s3cr3t", "token": "t"})
    secret_keys = {k for k in conf if k.endswith((".credential", ".token"))}
    assert secret_keys == {f"{PREFIX}.credential", f"{PREFIX}.token"}
    assert all(re.search(_REDACTION, k) for k in secret_keys)
    assert not re.search(_REDACTION, f"{PREFIX}.uri")


class _Written(IcebergBatches):
    """Iceberg's Spark writer stood in for, without Spark: a batch of 2 segments, 20 records,
    whose commit carries the batch's ``txns`` (as the snapshot summary Spark's write makes),
    through the table."""

    def _append(self, rows: Any, committer: Committer, txns: Mapping[str, int], batch_id: int) -> tuple[int, int]:
        assert committer.table is not None
        committer.table.commit_add_files([], txns=txns, commit_info={"parka.spark_batch": batch_id})
        return 2, 20


def test_a_decode_batch_into_iceberg_commits_through_the_committers_retry(tmp_path: Path) -> None:
    """Spark's write of a batch loses twice: another writer commits below the batch meanwhile,
    then one more conflict; each attempt re-reads the table, backs off through the committer's
    ``sleep``, and the third lands. The committer counts the conflicts and the commit, and times
    it by its clock. A batch the table already has commits nothing."""
    warehouse = {"warehouse": str(tmp_path / "warehouse")}
    slept: list[float] = []
    timed: list[float] = []
    c = Committer(
        IcebergEngine("test", warehouse),
        table_uri="db.t",
        topic="t",
        app_id="app",
        sleep=slept.append,
        clock=SteppingClock(0.25),
        on_commit=timed.append,
    )
    c.ensure_table(SCHEMA)
    other = Committer(IcebergEngine("test", warehouse), table_uri="db.t", topic="t", app_id="app")
    settings = SparkIngestSettings(
        topic="t",
        table_uri="db.t",
        bootstrap_servers="b:9092",
        mode="decode",
        catalog="test",
        catalog_options=warehouse,
        checkpoint_location=str(tmp_path / "cp"),
    )
    batches = _Written(LandingRun(LandingSession(c)), spark_table_name("test", "db.t"), SCHEMA, settings)
    table = conflicting(c, lambda: other.commit([landed(other, 0, 3, [1])]), lambda: None)
    batches.land_ranges(None, {0: (5, 9), 1: (0, 4)}, batch_id=7)
    assert (table.attempts, slept, timed) == (3, [0.05, 0.1], [0.25])
    assert c.txn_versions([0, 1]) == {0: 9, 1: 4}
    assert (c.stats.conflicts, c.stats.commits, c.stats.segments, c.stats.records) == (2, 1, 2, 20)

    batches.land_ranges(None, {0: (6, 9)}, batch_id=8)  # a replay: in the table already
    assert (table.attempts, c.stats.commits, timed) == (3, 1, [0.25])
