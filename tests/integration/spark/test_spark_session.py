"""Session set-up: jar coordinates follow the installed packages; no Java is a clear error."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
from parka.spark_ext import packages

from ._util import SPARK

pytestmark = SPARK

PROBE = """
from parka.spark_ext import SparkSetupError, session
try:
    session()
except SparkSetupError as exc:
    print("SparkSetupError:", exc)
"""


def test_jars_match_the_installed_pyspark_and_delta_spark() -> None:
    spark, delta = importlib.metadata.version("pyspark"), importlib.metadata.version("delta-spark")
    coords = packages(["org.apache.spark:spark-avro_2.13:" + spark])
    assert coords[0].startswith("io.delta:delta-spark") and coords[0].endswith(":" + delta)
    assert coords[1] == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark}"
    assert coords[2].startswith("org.apache.spark:spark-avro")


@pytest.mark.parametrize("java_home", [None, "/nonexistent/jdk"])
def test_no_java_is_a_parka_error_naming_the_fix(java_home: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_PYTHON")}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's bin: python, no java
    if java_home:
        env["JAVA_HOME"] = java_home
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "SparkSetupError: Java not found" in proc.stdout
    assert "Java 17 or 21" in proc.stdout
    if java_home:
        assert f"JAVA_HOME={java_home} has no bin/java" in proc.stdout
