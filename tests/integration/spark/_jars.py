"""The jars of the tests' Spark session, and their fetch ahead of the tests.

``python -m tests.integration.spark._jars`` resolves them (Ivy, from Maven Central, into Ivy's
cache as the session does) through ``spark-submit --packages`` with a Python program that does
nothing, so no SparkContext starts; and fetches parquet-mr's KMS jar. ``make test`` runs it beside
lint, while on a fresh machine the two sessions' workers would otherwise each wait for the same
downloads before their first test."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyspark
from parka.spark_ext import packages
from parka.spark_ext._session import SQLITE_JDBC, hadoop_version, iceberg_packages, s3a_jars

REPO = Path(__file__).resolve().parents[3]
# test_spark_objectstore.py: s3a (hadoop-aws at pyspark's Hadoop version, and the AWS SDK's
# individual modules instead of the ~600 MB bundle hadoop-aws names: what parka spark-ingest adds
# for a checkpoint in S3) and wasb (hadoop-azure, 6 jars)
S3A_PACKAGES, S3A_CONF = s3a_jars()
OBJECT_STORE_PACKAGES = [*S3A_PACKAGES, f"org.apache.hadoop:hadoop-azure:{hadoop_version()}"]
# Iceberg's Spark runtime, for reading the Iceberg tables parka lands and for decode mode's writes,
# and the SQLite JDBC driver of the embedded catalog (test_spark_iceberg.py)
ICEBERG_SPARK = [*iceberg_packages(), SQLITE_JDBC]
SESSION_PACKAGES = packages([*OBJECT_STORE_PACKAGES, *ICEBERG_SPARK])


def kms_jar() -> str:
    """parquet-mr's tests jar (``InMemoryKMS``), fetched once by ``scripts/parquet-kms-jar.sh``."""
    script = str(REPO / "scripts" / "parquet-kms-jar.sh")
    return subprocess.run(
        [script, sys.executable], capture_output=True, text=True, check=True, timeout=300
    ).stdout.strip()


def fetch() -> None:
    """Resolve :data:`SESSION_PACKAGES` into Ivy's cache, and the KMS jar into parka's; once per
    package list (a stamp in parka's cache folder: Spark's JVM costs some 12 CPU-s even when Ivy
    has everything)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "parka")
    digest = hashlib.sha256("\n".join([*SESSION_PACKAGES, *S3A_CONF.values()]).encode()).hexdigest()[:16]
    stamp = cache / f"spark-jars-{digest}"
    if stamp.exists():
        return
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    with tempfile.TemporaryDirectory() as folder:
        noop = Path(folder, "noop.py")
        noop.write_text("")
        command = [str(submit), "--master", "local[1]", "--packages", ",".join(SESSION_PACKAGES)]
        command += [arg for key, value in S3A_CONF.items() for arg in ("--conf", f"{key}={value}")]
        run = subprocess.run([*command, str(noop)], capture_output=True, text=True, timeout=900, cwd=folder)
    if run.returncode != 0:
        raise SystemExit(f"resolving the Spark session's jars failed ({run.returncode}):\n{run.stderr[-4000:]}")
    kms_jar()
    cache.mkdir(parents=True, exist_ok=True)
    stamp.touch()


if __name__ == "__main__":
    fetch()
