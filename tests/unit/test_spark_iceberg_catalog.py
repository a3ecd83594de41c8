"""Decode mode into Iceberg without Spark: a pyiceberg catalog's properties as a Spark catalog of
Iceberg's Spark runtime, the jars that takes, and the settings that allow it."""

from __future__ import annotations

from pathlib import Path

import pytest
from parka.lake import IcebergEngine
from parka.spark_ext import SparkIngestSettings
from parka.spark_ext._decode_iceberg import spark_table_name
from parka.spark_ext._options import iceberg_catalog_conf
from parka.spark_ext._session import SQLITE_JDBC, iceberg_packages

from parka.errors import ConfigError

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
