"""Session set-up: jar coordinates follow the installed packages; no Java is a clear error."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def test_the_sessions_local_file_system_answers_as_hadoops_own_without_its_processes(
    spark: Any, tmp_path: Path
) -> None:
    """The tests' Spark JVMs run Hadoop's local file system with chmod and the link status in
    Java (``NioLocalFileSystem.java``, ``_jars.LOCAL_FS``): the session's ``file:`` file systems
    are those classes, and side by side with Hadoop's own they leave a folder, a new file and a
    changed file with the same permissions, and give a folder, a file and a symbolic link the
    same link status."""
    jvm = spark._jvm
    hadoop = jvm.org.apache.hadoop.fs
    conf = spark._jsc.hadoopConfiguration()
    local = jvm.java.net.URI("file:///")
    fs = hadoop.FileSystem.get(local, conf)
    assert fs.getClass().getName() == "parka.testing.NioLocalFileSystem$Checksummed"
    context = hadoop.FileContext.getFileContext(local, conf).getDefaultFileSystem()
    assert context.getClass().getName() == "parka.testing.NioLocalFileSystem$Context"

    hadoops = hadoop.RawLocalFileSystem()
    hadoops.initialize(local, conf)
    systems = {"ours": fs.getRaw(), "hadoop's": hadoops}
    mode = hadoop.permission.FsPermission.createImmutable
    for name, system in systems.items():
        base = tmp_path / name
        assert system.mkdirs(hadoop.Path(f"file://{base}/dir"), mode(0o750))
        system.create(hadoop.Path(f"file://{base}/new"), mode(0o640), False, 4096, 1, 1 << 20, None).close()
        (base / "changed").touch()
        system.setPermission(hadoop.Path(f"file://{base}/changed"), mode(0o604))
        (base / "link").symlink_to(base / "new")
    modes = {
        name: {entry: (tmp_path / name / entry).stat().st_mode & 0o7777 for entry in ("dir", "new", "changed")}
        for name in systems
    }
    assert modes["ours"] == modes["hadoop's"] == {"dir": 0o750, "new": 0o640, "changed": 0o604}

    for entry in ("dir", "new", "link"):
        statuses = {
            name: system.getFileLinkStatus(hadoop.Path(str(tmp_path / name / entry)))
            for name, system in systems.items()
        }
        kinds = {name: (s.isFile(), s.isDirectory(), s.isSymlink(), s.getLen()) for name, s in statuses.items()}
        assert kinds["ours"] == kinds["hadoop's"], entry
    assert statuses["ours"].isSymlink()
    assert statuses["ours"].getSymlink().toUri().getPath() == str(tmp_path / "ours" / "new")
