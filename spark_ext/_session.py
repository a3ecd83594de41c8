"""A SparkSession with delta-spark and the Kafka source, and the translation of Spark's errors.

The jars come from Maven Central through Spark's own resolver (``spark.jars.packages``, Ivy),
at the versions of the installed Python packages, as ``delta.configure_spark_with_delta_pip``
does: ``io.delta:delta-spark_2.13:<delta-spark>`` and
``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark>``. The first session on a machine
downloads them (about 70 MB, into Ivy's cache, ``~/.ivy2.5.2`` unless ``spark.jars.ivy`` says
otherwise). Ivy's resolution from its cache still cost each JVM start some 3 CPU-s
(benchmarks/results/2026-12-01-spark-remembered-jars/): the jar files a resolution gave are
remembered (:func:`remembered_jars`), and a later session that asks for the same packages with
the same resolver settings starts with those files (``spark.jars``) instead of resolving again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from parka.encryption import KmsSettings, spark_hadoop_conf
from parka.errors import ParkaError, SchemaMismatchError, SegmentDecodeError, SegmentError
from parka.extras import install_command

__all__ = [
    "AWS_SDK_VERSION",
    "ICEBERG_VERSION",
    "SQLITE_JDBC",
    "SparkSetupError",
    "encryption_conf",
    "find_java",
    "hadoop_version",
    "iceberg_packages",
    "jvm_cause",
    "packages",
    "remembered_jars",
    "s3a_jars",
    "session",
    "translate",
]

SCALA = "2.13"


def _install_hint() -> str:
    return f"the Spark path needs pyspark and delta-spark, parka's 'spark' extra: {install_command('spark')}"


class SparkSetupError(ParkaError):
    """Spark cannot start: no Java, a Java too old, pyspark missing, or its jars unresolvable."""


def find_java() -> Path:
    """The ``java`` Spark will run: ``$JAVA_HOME/bin/java``, else the first on ``PATH``.

    Raises:
        SparkSetupError: no Java, or one older than 17 (Spark 4 needs 17 or 21).
    """
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    if candidate is None or not candidate.exists():
        found = shutil.which("java")
        if found is None:
            where = f"JAVA_HOME={home} has no bin/java and " if home else ""
            raise SparkSetupError(
                f"Java not found: {where}no 'java' on PATH. Spark needs a Java 17 or 21 runtime "
                "(e.g. apt-get install openjdk-17-jre-headless), on PATH or in JAVA_HOME"
            )
        candidate = Path(found)
    try:
        probe = subprocess.run([str(candidate), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkSetupError(f"cannot run {candidate}: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', probe.stderr)
    if match is None:
        raise SparkSetupError(f"cannot tell the version of {candidate}: {probe.stderr.strip()[:200]!r}")
    major = int(match.group(1)) if match.group(1) != "1" else int(match.group(2) or 0)
    if major < 17:
        raise SparkSetupError(f"Spark 4 needs Java 17 or newer; {candidate} is Java {major}")
    return candidate


def packages(extra: Sequence[str] = ()) -> list[str]:
    """Maven coordinates for the installed pyspark and delta-spark, plus ``extra``.

    Raises:
        SparkSetupError: pyspark or delta-spark is not installed.
    """
    try:
        spark_version = importlib.metadata.version("pyspark")
        delta_version = importlib.metadata.version("delta-spark")
    except importlib.metadata.PackageNotFoundError as exc:
        raise SparkSetupError(f"{exc.name} is not installed; {_install_hint()}") from exc
    major = int(delta_version.split(".")[0])
    # delta-spark >= 4.1 publishes one artifact per Spark minor (delta-spark_4.0_2.13), as its pip_utils says.
    minor = "" if major < 4 or delta_version.startswith("4.0.") else "_" + ".".join(spark_version.split(".")[:2])
    return [
        f"io.delta:delta-spark{minor}_{SCALA}:{delta_version}",
        f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{spark_version}",
        *extra,
    ]


ICEBERG_VERSION = "1.11.0"
"""The Iceberg release whose Spark runtime decode mode writes Iceberg tables with."""
SQLITE_JDBC = "org.xerial:sqlite-jdbc:3.53.0.0"
"""The SQLite JDBC driver (the version Iceberg's own build uses), for the embedded SQL catalog."""


def iceberg_packages(catalog_conf: Mapping[str, str] | None = None) -> list[str]:
    """Maven coordinates of Iceberg's Spark runtime for the installed pyspark, and what the
    Spark catalog settings ``catalog_conf`` (:func:`._options.iceberg_catalog_conf`) need
    besides: the SQLite JDBC driver for a ``jdbc:sqlite:`` catalog, Iceberg's AWS bundle for
    ``S3FileIO``.

    Raises:
        SparkSetupError: pyspark is not installed.
    """
    try:
        minor = ".".join(importlib.metadata.version("pyspark").split(".")[:2])
    except importlib.metadata.PackageNotFoundError as exc:
        raise SparkSetupError(f"{exc.name} is not installed; {_install_hint()}") from exc
    values = list((catalog_conf or {}).values())
    out = [f"org.apache.iceberg:iceberg-spark-runtime-{minor}_{SCALA}:{ICEBERG_VERSION}"]
    if any(v.startswith("jdbc:sqlite:") for v in values):
        out.append(SQLITE_JDBC)
    if any(v.endswith(".S3FileIO") for v in values):
        out.append(f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}")
    return out


AWS_SDK_VERSION = "2.57.8"
"""The AWS SDK v2 release whose individual modules s3a (hadoop-aws) runs on here."""
# the modules s3a uses, 19 MB, instead of the ~600 MB bundle hadoop-aws names (excluded)
_AWS_SDK_MODULES = ("s3", "s3-transfer-manager", "sts", "apache-client", "netty-nio-client")
_AWS_SDK_BUNDLE = "software.amazon.awssdk:bundle"


def hadoop_version() -> str:
    """The Hadoop release the installed pyspark ships (its ``jars/hadoop-client-api-<version>.jar``).

    Raises:
        SparkSetupError: pyspark is not installed, or ships no Hadoop client.
    """
    try:
        import pyspark
    except ImportError as exc:
        raise SparkSetupError(_install_hint()) from exc
    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar"))
    if not found:
        raise SparkSetupError(f"pyspark ships no Hadoop client in {jars}: cannot pick the hadoop-aws for s3a://")
    return found[-1].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def s3a_jars(given: Sequence[str] = (), conf: Mapping[str, Any] | None = None) -> tuple[list[str], dict[str, str]]:
    """What a session needs to write ``s3a://`` (Hadoop's S3 FileSystem): Maven coordinates of
    ``org.apache.hadoop:hadoop-aws`` at the installed pyspark's Hadoop version and the AWS SDK's
    individual modules, and the setting that keeps out the SDK's ~600 MB bundle hadoop-aws
    depends on (``spark.jars.excludes``). None of it when ``given`` (coordinates) already names
    hadoop-aws; no exclusion when ``conf`` already has one.

    Raises:
        SparkSetupError: see :func:`hadoop_version`.
    """
    if any(c.startswith("org.apache.hadoop:hadoop-aws:") for c in given):
        return [], {}
    coords = [
        f"org.apache.hadoop:hadoop-aws:{hadoop_version()}",
        *(f"software.amazon.awssdk:{module}:{AWS_SDK_VERSION}" for module in _AWS_SDK_MODULES),
    ]
    excludes = {} if "spark.jars.excludes" in (conf or {}) else {"spark.jars.excludes": _AWS_SDK_BUNDLE}
    return coords, excludes


def spark_version() -> str:
    """The installed pyspark's version (for companion jars such as ``spark-avro``)."""
    return importlib.metadata.version("pyspark")


# The settings that decide what Ivy resolves (what it fetches, from where, into where, what it
# leaves out), with the pyspark whose Ivy resolves them: the key of a remembered resolution
_RESOLVER_SETTINGS = (
    "spark.jars.packages",
    "spark.jars.excludes",
    "spark.jars.repositories",
    "spark.jars.ivy",
    "spark.jars.ivySettings",
)


def _jars_memo(conf: Mapping[str, Any]) -> Path | None:
    """Where the jar files of ``conf``'s resolution are remembered, or ``None`` when they are
    not to be: no packages, a ``-SNAPSHOT`` among them (Ivy may find a newer one), or
    ``PARKA_SPARK_REMEMBER_JARS=0``."""
    coordinates = str(conf.get("spark.jars.packages") or "")
    if not coordinates or "-SNAPSHOT" in coordinates or os.environ.get("PARKA_SPARK_REMEMBER_JARS") == "0":
        return None
    key = json.dumps([spark_version(), *(str(conf.get(k) or "") for k in _RESOLVER_SETTINGS)])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "parka" / "spark-jars"
    return cache / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.txt"


def remembered_jars(conf: Mapping[str, Any]) -> list[str] | None:
    """The jar files (``file:`` URIs) an earlier session's resolution of ``conf``'s packages gave,
    when every one of them is still there; ``None`` otherwise (Ivy resolves, as Spark does)."""
    memo = _jars_memo(conf)
    try:
        jars = memo.read_text().split() if memo is not None else []
    except OSError:
        return None
    if not jars or not all(Path(urlparse(jar).path).is_file() for jar in jars):
        return None
    return jars


def _remember_jars(conf: Mapping[str, Any], spark: Any) -> None:
    """Remember the jar files the running session's resolution of ``conf``'s packages added to
    ``spark.jars`` (the files ``conf`` named itself left out, by name). A failure to write is no
    error: the next session resolves again."""
    memo = _jars_memo(conf)
    if memo is None:
        return
    own = {os.path.basename(jar) for jar in str(conf.get("spark.jars") or "").split(",")}
    given = spark.sparkContext.getConf().get("spark.jars", "").split(",")
    resolved = [jar for jar in given if jar and os.path.basename(jar) not in own]
    if not resolved or not all(jar.startswith("file:") for jar in resolved):
        return
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        partial = memo.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text("\n".join(resolved) + "\n")
        partial.replace(memo)
    except OSError:
        pass


def session(
    master: str | None = None,
    app_name: str = "parka",
    *,
    extra_conf: Mapping[str, Any] | None = None,
    extra_packages: Sequence[str] = (),
) -> Any:
    """Get or create a SparkSession with Delta Lake and the Kafka source.

    ``master`` defaults to ``$PARKA_SPARK_MASTER``, else spark-submit's ``--master`` (a driver
    it launched), else ``local[*]``. ``extra_conf`` is applied
    last (it may override anything here, ``spark.jars.packages`` included). A JVM started here
    takes the jar files an earlier start resolved for the same packages and resolver settings
    (:func:`remembered_jars`; ``PARKA_SPARK_REMEMBER_JARS=0`` has Ivy resolve every time).
    Python workers run this interpreter unless ``PYSPARK_PYTHON`` says otherwise, forked (local
    masters) from :mod:`._daemon`. With a local master, shuffles and Delta log replays use as many partitions
    as cores (Spark's 200 and Delta's 50 cost seconds per small batch). When a session is already active (a notebook, a
    test run), it is returned as is: static settings cannot change in a running JVM.

    Raises:
        SparkSetupError: see :func:`find_java` and :func:`packages`; also when the JVM does
            not start (its own output, above, says why: often a jar Maven Central lacks).
    """
    try:
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkSetupError(_install_hint()) from exc
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    find_java()
    master = master or os.environ.get("PARKA_SPARK_MASTER") or _submitted_master() or "local[*]"
    conf: dict[str, Any] = {
        "spark.jars.packages": ",".join(packages(extra_packages)),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.session.timeZone": "UTC",
        # Spark's own pattern misses an Iceberg REST catalog's ``credential`` (decode mode sets it)
        "spark.redaction.regex": _REDACTION,
    }
    if not os.environ.get("PYSPARK_PYTHON"):
        # pyspark starts workers with the 'python3' on PATH (it reads this variable, not the
        # spark.pyspark.python setting, when not launched by spark-submit); that one need not
        # have parka installed.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    if master.startswith("local"):
        # workers fork from a daemon that has the decoder imported. Local executors run this
        # interpreter, so parka is there; on a cluster it may come with --py-files, which the
        # daemon cannot see, so there it is opt-in (-c spark.python.daemon.module=...).
        conf["spark.python.daemon.module"] = "parka.spark_ext._daemon"
        cores = os.cpu_count() or 2
        conf.update(
            {
                "spark.sql.shuffle.partitions": str(cores),
                "spark.databricks.delta.snapshotPartitions": str(cores),
                "spark.ui.showConsoleProgress": "false",
            }
        )
    conf.update(extra_conf or {})
    asked = dict(conf)
    launched = "PYSPARK_GATEWAY_PORT" not in os.environ  # else spark-submit resolved them already
    jars = remembered_jars(conf) if launched else None
    if jars is not None:
        conf["spark.jars"] = ",".join(str(jar) for jar in [conf.get("spark.jars"), *jars] if jar)
        del conf["spark.jars.packages"]
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    try:
        spark = builder.getOrCreate()
    except PySparkException as exc:
        raise SparkSetupError(
            f"Spark did not start ({exc}); if Ivy reported an unresolved dependency above, the "
            f"jars {asked['spark.jars.packages']} are not all on Maven Central: {_install_hint()} "
            "installs a pair that resolves"
        ) from exc
    if launched and jars is None:
        _remember_jars(asked, spark)
    return spark


# Spark's default spark.redaction.regex, plus the setting that holds the local KMS's master keys
# and an Iceberg catalog's ``credential`` (client id:secret of a REST catalog), so that they never
# show in the UI, the event log or a printed conf.
_REDACTION = r"(?i)secret|password|token|access[.]?key|credential|parquet[.]encryption[.]key[.]list"


def encryption_conf(kms: KmsSettings, *, kms_jar: str | None = None) -> dict[str, str]:
    """Spark settings with which parquet-mr (delta-spark's reads, ``spark.read.parquet``) decrypts
    files that parka wrote with ``kms`` (:func:`parka.encryption.spark_hadoop_conf`), for
    :func:`session`'s ``extra_conf``. ``kms_jar``: a jar holding the KMS client class (for the
    local KMS, parquet-mr's tests jar: ``scripts/parquet-kms-jar.sh`` fetches it).

    Raises:
        ConfigError: ``kms`` is not the local KMS.
    """
    conf = {f"spark.hadoop.{k}": v for k, v in spark_hadoop_conf(kms).items()}
    conf["spark.redaction.regex"] = _REDACTION
    if kms_jar:
        conf["spark.jars"] = kms_jar
    return conf


def _submitted_master() -> str | None:
    """The ``--master`` spark-submit gave, when it launched this driver (it passes the JVM's
    gateway in the environment); ``None`` otherwise, so that a job run with
    ``spark-submit --master yarn ... job.py`` is not forced onto ``local[*]``."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    master = SparkConf().get("spark.master", None)
    return str(master) if master else None


# "parka.errors.SegmentDecodeError: <message> at <topic>[<partition>]@<offset>" in a Python
# worker's traceback, as Spark relays it to the driver.
_WORKER_ERROR = re.compile(
    r"parka\.errors\.(SegmentDecodeError|SegmentError|SchemaMismatchError): (.*?) at (\S+)\[(\d+)\]@(\d+)\s*$",
    re.MULTILINE,
)
_CLASSES: dict[str, type[ParkaError]] = {
    "SegmentDecodeError": SegmentDecodeError,
    "SegmentError": SegmentError,
    "SchemaMismatchError": SchemaMismatchError,
}


def _texts(exc: BaseException) -> str:
    """Everything a Spark exception says: its message, the JVM stack trace and its causes'."""
    texts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts.append(str(current))
        # pyspark's captured exceptions keep the JVM stack trace (every "Caused by", the Python
        # worker's traceback among them) apart from their message.
        texts.append(str(getattr(current, "_stackTrace", "") or ""))
        current = getattr(current, "_cause", None) or current.__cause__
    return "\n".join(texts)


def jvm_cause(exc: BaseException, classes: Sequence[str]) -> str | None:
    """The first line of ``exc`` (a Spark or py4j exception) that names one of the JVM exception
    ``classes`` (fully qualified), or ``None`` when none of them is in it."""
    for line in _texts(exc).splitlines():
        if any(name in line for name in classes):
            return line.strip().lstrip(": ")  # py4j starts the JVM's message with ": "
    return None


def translate(exc: BaseException) -> ParkaError | None:
    """The parka error a Python worker raised inside ``exc`` (a Spark exception), rebuilt on the
    driver with its coordinates, or ``None`` when ``exc`` holds none. The raw bytes stay behind
    on the executor."""
    found = _WORKER_ERROR.findall(_texts(exc))
    if not found:
        return None
    name, message, topic, partition, offset = found[-1]
    cls = _CLASSES[name]
    where: dict[str, Any] = {"topic": topic, "partition": int(partition), "offset": int(offset)}
    if cls is SchemaMismatchError:
        field = re.match(r"field '([^']*)': ", message)
        if field:
            message = message[field.end() :]
        return SchemaMismatchError(message, field=field.group(1) if field else None, **where)
    return cls(message, **where)
