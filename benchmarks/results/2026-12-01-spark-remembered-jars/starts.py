"""The JVM's CPU from its start to a SparkSession that answered one query, with Ivy resolving the
packages from its cache (``PARKA_SPARK_REMEMBER_JARS=0``) and with the jar files an earlier
resolution gave (parka's default since this run), alternated in pairs, each start a new
interpreter and JVM. The packages and options of the tests' session (SPARK_JVM: C1 only, the
class archive).

    .venv/bin/python benchmarks/results/2026-12-01-spark-remembered-jars/starts.py 4
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ONE_START = """
import os, sys
sys.path.insert(0, {repo!r})
from tests.integration.spark._jars import ICEBERG_SPARK, OBJECT_STORE_PACKAGES, SPARK_JVM
os.environ["SPARK_SUBMIT_OPTS"] = SPARK_JVM
from parka.spark_ext import session
spark = session("local[2]", "starts", extra_packages=[*OBJECT_STORE_PACKAGES, *ICEBERG_SPARK],
                extra_conf={{"spark.ui.enabled": "false"}})
assert spark.range(10).count() == 10
tick = os.sysconf("SC_CLK_TCK")
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            stat = open(f"/proc/{{d}}/stat").read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and "(java)" in stat:
            print("JVM", (int(fields[11]) + int(fields[12])) / tick)
resolved = "spark.jars.packages" in dict(spark.sparkContext.getConf().getAll())
print("RESOLVED", resolved)
spark.stop()
"""


def start(remember: bool) -> tuple[float, bool]:
    env = {**os.environ, "PARKA_SPARK_REMEMBER_JARS": "1" if remember else "0"}
    out = subprocess.run(
        [sys.executable, "-c", ONE_START.format(repo=str(REPO))], env=env, capture_output=True, text=True, check=True
    ).stdout
    cpu = next(float(line.split()[1]) for line in out.splitlines() if line.startswith("JVM"))
    return cpu, "RESOLVED True" in out


def main(pairs: int) -> None:
    start(True)  # a first resolution, remembered (and Ivy's cache filled)
    rows = []
    print("pair  resolving (CPU-s)  remembered (CPU-s)")
    for i in range(pairs):
        resolving, did = start(False)
        remembered, did_not = start(True)
        assert did and not did_not, (did, did_not)
        rows.append((resolving, remembered))
        print(f"{i + 1:4d}  {resolving:17.2f}  {remembered:18.2f}", flush=True)
    print(f"median  {statistics.median(r for r, _ in rows):.2f}  {statistics.median(m for _, m in rows):.2f}")
    print(f"median of the paired differences {statistics.median(r - m for r, m in rows):.2f} CPU-s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
