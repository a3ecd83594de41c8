"""The jars of the tests' Spark session, and their fetch ahead of the tests; and a class archive
that the tests' Spark JVMs start from when it is there.

``python -m tests.integration.spark._jars`` resolves the jars (Ivy, into Ivy's cache as the
session does) through ``spark-submit --packages`` with a Python program that does nothing, so no
SparkContext starts, from the files ``session-jars.lock`` names, fetched at once from Maven
Central first (:data:`LOCK`); and fetches parquet-mr's KMS jar. ``make test`` runs it in the
background from the tests' start, and every Spark test waits for it (:func:`fetch`): on a fresh
machine it took 12-15 s (benchmarks/results/2026-12-01-spark-jars-mirror/), beside the workers'
start and the first tests.
``python -m tests.integration.spark._jars --lock`` writes that list again, after a change of the
session's packages (a unit test says when).

``python -m tests.integration.spark._jars --write-archive`` (``make spark-class-archive``) starts
the tests' session once (:func:`session_for_tests`), runs a few Delta writes, reads and a stream
through it, and has its JVM write the classes it loaded to a class-data-sharing archive at exit
(``-XX:ArchiveClassesAtExit``, JDK 13 and up). :data:`SPARK_JVM` is
:data:`~tests.integration._servers.SHORT_JVM` and :data:`VFORK`, plus ``-XX:SharedArchiveFile`` of that archive when
it is there: a JVM then maps Spark's, Scala's and Delta's classes, already parsed and verified,
instead of loading them from the jars. The JVM checks the archive against its own build and class
path, and starts without it, silently, when they differ (another JDK, a Spark daemon's class
path). Writing it costs some 54 CPU-s, about what it saved in one run of the suite, so ``make
test`` does not write it (CI starts from an empty cache every time); see docs/development.md."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyspark
from parka.spark_ext import packages
from parka.spark_ext._session import SQLITE_JDBC, hadoop_version, iceberg_packages, s3a_jars

from .._servers import SHORT_JVM

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


# The session's queries run interpreted: Spark compiles each plan's expressions to Java (Janino)
# and then to bytecode, which on a JVM limited to its first compiler tier (SHORT_JVM) costs more
# than running the tests' few rows through the interpreted expressions. NO_CODEGEN is Spark's own
# setting for its tests. The drivers that parka spark-ingest starts (test_spark_faults.py,
# test_spark_cluster.py, the docs' commands) compile as users' do.
INTERPRETED = {
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}
_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "parka")


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _java() -> str:
    """The JDK the JVMs start from, told apart by its binary's path and time."""
    java = shutil.which("java")
    return f"{os.path.realpath(java)}:{os.stat(java).st_mtime_ns}" if java else "no java"


def _archive() -> Path:
    """Where the class archive of this package list, pyspark and JDK goes."""
    return _CACHE / f"spark-classes-{_digest(*SESSION_PACKAGES, pyspark.__version__, _java())}.jsa"


ARCHIVE = _archive()
# Without Hadoop's native library its local file system runs a process for each chmod and each
# readlink: one Spark session running the Spark tests started 10,691 (JFR's jdk.ProcessStart), a
# few per file a micro-batch or a Delta commit writes or renames. With vfork a JVM starts one for
# 0.6 of the CPU of its default, posix_spawn through a helper program (1.33 against 2.12 ms:
# benchmarks/results/2026-11-30-suite-cold/).
VFORK = "-Djdk.lang.Process.launchMechanism=VFORK"
# The code cache at the size it has with both compilers (240 MB, reserved and filled as needed)
# instead of the client JIT's 48 MB, which the tests' Spark session filled: its sweeper then
# flushed compiled methods that the session compiled again. 24 of the session's tests took its JVM
# 100 CPU-s instead of 111-121 (benchmarks/results/2026-12-01-spark-code-cache/). The brokers and
# the other servers keep the default: no run measured them.
CODE_CACHE = "-XX:ReservedCodeCacheSize=240m"
# And without those processes: Hadoop's local file system with chmod and the link status in Java
# (NioLocalFileSystem.java), compiled by fetch() into this folder with a core-site.xml that names
# it, which the tests' Spark JVMs find on their class path (conftest.py: SPARK_DIST_CLASSPATH).
# 23 of the session's tests took its JVM and the processes it started 94 CPU-s instead of 106-109
# (benchmarks/results/2026-12-01-spark-local-fs/).
LOCAL_FS_SOURCE = Path(__file__).with_name("NioLocalFileSystem.java")
CORE_SITE = """<?xml version="1.0"?>
<configuration>
  <property><name>fs.file.impl</name><value>parka.testing.NioLocalFileSystem$Checksummed</value></property>
  <property><name>fs.AbstractFileSystem.file.impl</name><value>parka.testing.NioLocalFileSystem$Context</value></property>
</configuration>
"""
LOCAL_FS = _CACHE / f"spark-local-fs-{_digest(LOCAL_FS_SOURCE.read_text(), CORE_SITE, pyspark.__version__, _java())}"
SPARK_JVM = f"{SHORT_JVM} {CODE_CACHE} {VFORK}" + (f" -XX:SharedArchiveFile={ARCHIVE}" if ARCHIVE.exists() else "")


def session_for_tests(java_options: str = SPARK_JVM) -> Any:
    """The tests' SparkSession: local, 2 cores, 2 shuffle partitions, no UI, its queries
    interpreted, with the object stores', Iceberg's and the KMS jars."""
    from parka.spark_ext import session

    return session(
        "local[2]",
        "parka-tests",
        extra_packages=[*OBJECT_STORE_PACKAGES, *ICEBERG_SPARK],
        extra_conf={
            **S3A_CONF,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.sql.streaming.stopTimeout": "30s",
            "spark.driver.extraJavaOptions": java_options,
            # parquet-mr's InMemoryKMS for the encryption tests (test_spark_encryption.py): a
            # jar added to a running session was not seen by delta-spark's Parquet reader
            "spark.jars": kms_jar(),
            **INTERPRETED,
        },
    )


def kms_jar() -> str:
    """parquet-mr's tests jar (``InMemoryKMS``), fetched once by ``scripts/parquet-kms-jar.sh``."""
    script = str(REPO / "scripts" / "parquet-kms-jar.sh")
    return subprocess.run(
        [script, sys.executable], capture_output=True, text=True, check=True, timeout=300
    ).stdout.strip()


def fetch() -> None:
    """Resolve :data:`SESSION_PACKAGES` into Ivy's cache, and the KMS jar into parka's; once per
    package list (a stamp in parka's cache folder: Spark's JVM costs some 12 CPU-s even when Ivy
    has everything), and compile :data:`LOCAL_FS`, once. Callers take turns on a lock in that
    folder: ``make test`` runs this in the background from the tests' start, and every Spark
    test waits here for it (``tests/integration/spark/conftest.py``), since two resolutions at
    once into one Ivy cache can leave a jar half written for both. The three run at once: the
    resolution (its files' fetch, then Ivy's JVM), the KMS jar's fetch and javac's compile."""
    stamp = _CACHE / f"spark-jars-{_digest(*SESSION_PACKAGES, *S3A_CONF.values())}"
    if stamp.exists() and LOCAL_FS.exists():
        return
    _CACHE.mkdir(parents=True, exist_ok=True)
    with open(_CACHE / "spark-jars.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        work = [_resolve, kms_jar] if not stamp.exists() else []
        if not LOCAL_FS.exists():
            work.append(_compile_local_fs)
        if work:
            with ThreadPoolExecutor(len(work)) as pool:
                for done in [pool.submit(step) for step in work]:
                    done.result()
        stamp.touch()


def _compile_local_fs() -> None:
    """Compile ``NioLocalFileSystem.java`` against pyspark's Hadoop jars into :data:`LOCAL_FS`,
    with a ``core-site.xml`` that names its classes as the ``file:`` scheme's file systems (whole,
    or not at all: a folder renamed into place). The JDK's ``javac``, which the registry's Maven
    build needs too."""
    javac = Path(os.environ["JAVA_HOME"], "bin", "javac") if os.environ.get("JAVA_HOME") else None
    javac = str(javac) if javac and javac.exists() else shutil.which("javac")
    if javac is None:
        raise RuntimeError(
            "javac not found: the tests need a Java 17 JDK (e.g. apt-get install openjdk-17-jdk-headless)"
        )
    with tempfile.TemporaryDirectory(dir=_CACHE) as folder:
        classes = Path(folder, "classes")
        jars = Path(pyspark.__file__).parent / "jars" / "*"
        run = subprocess.run(
            [javac, "-nowarn", "-cp", str(jars), "-d", str(classes), str(LOCAL_FS_SOURCE)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if run.returncode != 0:
            raise RuntimeError(f"compiling {LOCAL_FS_SOURCE.name} failed ({run.returncode}):\n{run.stderr[-4000:]}")
        (classes / "core-site.xml").write_text(CORE_SITE)
        classes.rename(LOCAL_FS)


def local_fs_class_path() -> str | None:
    """``SPARK_DIST_CLASSPATH`` with :data:`LOCAL_FS` added (Spark's launcher appends that
    variable to every JVM's class path it builds: drivers, standalone daemons, executors), or None
    when it was not compiled."""
    if not LOCAL_FS.exists():
        return None
    present = [entry for entry in os.environ.get("SPARK_DIST_CLASSPATH", "").split(os.pathsep) if entry]
    return os.pathsep.join([*present, str(LOCAL_FS)] if str(LOCAL_FS) not in present else present)


def _resolve() -> None:
    """Ivy's resolution of :data:`SESSION_PACKAGES` into its cache, from a folder of the files
    :data:`LOCK` names when they could be fetched (:func:`_mirror`), else from Maven Central."""
    with tempfile.TemporaryDirectory(dir=_CACHE) as folder:
        mirror = _mirror(Path(folder, "mirror"))
        run = _submit(folder, mirror)
        if run.returncode != 0 and mirror is not None:
            print(
                f"resolving from the fetched files failed, resolving from {_root()}:\n{run.stderr[-2000:]}",
                file=sys.stderr,
            )
            run = _submit(folder, None)
    if run.returncode != 0:
        raise RuntimeError(f"resolving the Spark session's jars failed ({run.returncode}):\n{run.stderr[-4000:]}")


def _submit(folder: str, mirror: str | None, *conf: str) -> subprocess.CompletedProcess[str]:
    """``spark-submit --packages`` of a program that does nothing, in ``folder``: Ivy's resolution
    alone, from ``mirror`` (a URL) as Spark's central repository when given."""
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    noop = Path(folder, "noop.py")
    noop.write_text("")
    command = [str(submit), "--master", "local[1]", "--packages", ",".join(SESSION_PACKAGES)]
    command += [arg for key, value in S3A_CONF.items() for arg in ("--conf", f"{key}={value}")]
    command += [arg for setting in conf for arg in ("--conf", setting)]
    # the JVM of a short run (the launcher gives SPARK_SUBMIT_OPTS to the driver's JVM)
    env = {**os.environ, "SPARK_SUBMIT_OPTS": SHORT_JVM}
    if mirror is not None:
        env["DEFAULT_ARTIFACT_REPOSITORY"] = mirror
    return subprocess.run([*command, str(noop)], capture_output=True, text=True, timeout=900, cwd=folder, env=env)


# Ivy resolves one module after another, a round trip for each POM and each jar: on a fresh
# machine, with the session's 123 POMs and 76 jars from Maven Central, the fetch took 55-56 s;
# fetched by curl 16 at a time into a folder first, 12-15 s with Ivy's resolution from there
# (benchmarks/results/2026-12-01-spark-jars-mirror/). LOCK names those files with
# their SHA-1 (``python -m tests.integration.spark._jars --lock`` writes it); the fetch gets them
# into a folder laid out as Maven Central is, and Ivy resolves from there (Spark's
# DEFAULT_ARTIFACT_REPOSITORY replaces Central's URL), into its cache as from Central. When
# the file is out of date (another package list, pyspark or resolver setting) or a file cannot
# be fetched or does not match, Ivy resolves from Central as before, and the fetch says why.
LOCK = Path(__file__).with_name("session-jars.lock")
CENTRAL = "https://repo1.maven.org/maven2/"


def _root() -> str:
    """Where the jars come from: Spark's own variable when set (a mirror of Central), else Central."""
    root = os.environ.get("DEFAULT_ARTIFACT_REPOSITORY") or CENTRAL
    return root if root.endswith("/") else f"{root}/"


def _lock_digest() -> str:
    """What the resolution depends on: the packages, the resolver settings, pyspark's version."""
    return _digest(*SESSION_PACKAGES, *(f"{k}={v}" for k, v in S3A_CONF.items()), pyspark.__version__)


def _locked() -> list[tuple[str, str]] | None:
    """(SHA-1, path under the repository's root) of every file in :data:`LOCK`, or None when the
    file is missing or was written for other packages or settings."""
    if not LOCK.exists():
        return None
    lines = LOCK.read_text().splitlines()
    digest = next((line.split()[-1] for line in lines if line.startswith("# digest ")), None)
    if digest != _lock_digest():
        return None
    return [(sha1, path) for sha1, path in (line.split() for line in lines if line and not line.startswith("#"))]


def _mirror(folder: Path) -> str | None:
    """Fetch the files :data:`LOCK` names into ``folder`` in Maven's layout, each checked against
    its SHA-1 (``scripts/fetch-central.sh``); the folder's URL, or None (and why, on stderr) when
    that cannot be done."""
    if _locked() is None:
        print(f"{LOCK.name} is not of the session's packages: resolving from {_root()}", file=sys.stderr)
        return None
    run = subprocess.run(
        [str(REPO / "scripts" / "fetch-central.sh"), "--tree", str(folder)],
        input=LOCK.read_text(),  # fetch-central.sh skips its comment lines
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PARKA_MAVEN_CENTRAL": _root()},
    )
    if run.returncode != 0:
        print(f"{run.stderr.strip()[-2000:]}\nresolving from {_root()}", file=sys.stderr)
        return None
    return f"{folder.as_uri()}/"


def write_lock() -> None:
    """Write :data:`LOCK`: resolve the session's packages from Central into an empty Ivy home,
    take the URL of every file Ivy fetched from its cache's records, and fetch each one again for
    its SHA-1."""
    import urllib.request

    def _sha1_of(url: str) -> str:
        with urllib.request.urlopen(url, timeout=300) as response:
            return hashlib.sha1(response.read()).hexdigest()

    root = _root()
    with tempfile.TemporaryDirectory() as folder:
        run = _submit(folder, None, f"spark.jars.ivy={folder}/ivy")
        if run.returncode != 0:
            raise SystemExit(f"resolving the Spark session's jars failed ({run.returncode}):\n{run.stderr[-4000:]}")
        urls = {
            line.split(".location=", 1)[1].replace("\\:", ":")
            for record in Path(folder, "ivy", "cache").rglob("ivydata-*.properties")
            for line in record.read_text().splitlines()
            if ".location=" in line
        }
        if any(not url.startswith(root) for url in urls):
            raise SystemExit(
                f"Ivy fetched files from outside {root}: {sorted(u for u in urls if not u.startswith(root))}"
            )
        paths = sorted(url.removeprefix(root) for url in urls)
        with ThreadPoolExecutor(16) as pool:
            lines = list(pool.map(lambda path: f"{_sha1_of(root + path)} {path}", paths))
    header = [
        "# The files Ivy fetches from Maven Central to resolve the tests' Spark session's packages",
        "# (SHA-1, path): tests/integration/spark/_jars.py fetches them at once before Ivy resolves.",
        "# Written by `python -m tests.integration.spark._jars --lock`; the digest is of the packages,",
        "# the resolver settings and pyspark's version.",
        f"# digest {_lock_digest()}",
    ]
    LOCK.write_text("\n".join([*header, *lines]) + "\n")


def write_archive() -> None:
    """Write :data:`ARCHIVE` (``make spark-class-archive``), once: a session of its own
    (:func:`_archive_classes`) in a child interpreter, whose JVM writes the archive at exit."""
    if ARCHIVE.exists():
        return
    kms_jar()
    _CACHE.mkdir(parents=True, exist_ok=True)
    partial = ARCHIVE.with_name(f"{ARCHIVE.name}.{os.getpid()}")
    with tempfile.TemporaryDirectory() as folder:
        run = subprocess.run(
            [sys.executable, "-m", "tests.integration.spark._jars", "--archive", str(partial), folder],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=REPO,
        )
    if run.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        raise SystemExit(f"starting the tests' Spark session failed ({run.returncode}):\n{run.stderr[-4000:]}")
    partial.rename(ARCHIVE)


def _archive_classes(into: str, folder: str) -> None:
    """Start the session with ``-XX:ArchiveClassesAtExit``, run what most Spark tests run (Delta
    writes, a partitioned one, a merge, reads with a filter, a stream with a foreachBatch), then
    stop its JVM and wait for it to exit, which is when the JVM writes the archive."""
    from delta.tables import DeltaTable
    from pyspark import SparkContext

    spark = session_for_tests(f"{SHORT_JVM} -XX:ArchiveClassesAtExit={into}")
    table = str(Path(folder, "t"))
    rows = spark.range(100).selectExpr("id", "cast(id % 3 as string) as p", "named_struct('a', id) as s")
    rows.write.format("delta").partitionBy("p").save(table)
    DeltaTable.forPath(spark, table).alias("t").merge(rows.alias("r"), "t.id = r.id").whenMatchedUpdateAll().execute()
    spark.read.format("delta").load(table).where("id > 50").groupBy("p").count().collect()
    stream = (
        spark.readStream.format("delta")
        .load(table)
        .writeStream.option("checkpointLocation", str(Path(folder, "checkpoint")))
        .foreachBatch(lambda batch, _: batch.write.format("delta").mode("append").save(f"{table}-copy"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination()
    spark.stop()
    gateway = SparkContext._gateway
    assert gateway is not None
    gateway.proc.stdin.close()  # the JVM exits when its stdin closes
    gateway.proc.wait(timeout=300)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--archive"]:
        _archive_classes(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["--write-archive"]:
        write_archive()
    elif sys.argv[1:2] == ["--lock"]:
        write_lock()
    else:
        try:
            fetch()
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None
