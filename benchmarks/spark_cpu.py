"""Where one Spark query's CPU goes: ``python -m benchmarks.spark_cpu --path parka_raw``.

For Spark raw mode's fixed cost per micro-batch. One path of
:mod:`benchmarks.spark_gps` (``from_avro``, ``parka_raw`` or ``parka_decode``) over a fresh topic of
``--records`` GPS fixes, in one Spark session made as ``spark_gps`` makes it (``--conf KEY=VALUE``
adds settings): ``--warmups`` queries unmeasured, then ``--runs`` measured ones, each a new table
and one ``availableNow`` query. Printed, per query (the mean over the measured runs): the CPU
seconds of each kind of JVM thread (``/proc/<jvm>/task/*``, grouped by thread name without its
number: the JIT's compiler threads, Spark's executor task threads, GC, ...), of the JVM's
processes that ended and were waited for (Hadoop's local file system runs ``chmod`` and
``readlink`` as processes), of the live Python workers, and of this Python driver. With
``--processes``, ``strace -f -e trace=execve`` on the JVM over the measured runs also counts the
programs it ran, per query (strace slows the JVM: the CPU figures of such a run are not the ones
to quote).

Not a benchmark: nothing is compared and no goal is checked; it says where to look.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from . import spark_gps as gps

PATHS = tuple(gps.QUERIES)
_TICK = os.sysconf("SC_CLK_TCK")


def _jiffies(fields: list[str], first: int) -> float:
    return (int(fields[first]) + int(fields[first + 1])) / _TICK


def cpu_by_kind(jvm: Any, driver: Any) -> collections.Counter[str]:
    """CPU seconds so far of each kind of thread of ``jvm`` (psutil processes), of its waited-for
    children, of its live children (Python workers), and of ``driver``."""
    out: collections.Counter[str] = collections.Counter()
    tasks = f"/proc/{jvm.pid}/task"
    for tid in os.listdir(tasks):
        try:
            with open(f"{tasks}/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"{tasks}/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[re.sub(r"[-#\s\d]+$", "", name) or name] += _jiffies(fields, 11)
    with open(f"/proc/{jvm.pid}/stat") as f:
        out["(processes the JVM ran, ended)"] = _jiffies(f.read().rsplit(")", 1)[1].split(), 13)
    workers = 0.0
    for child in jvm.children(recursive=True):
        try:
            t = child.cpu_times()
        except Exception:  # ended between listing and reading: counted once waited for
            continue
        workers += t.user + t.system + t.children_user + t.children_system
    out["(Python workers, live)"] = workers
    t = driver.cpu_times()
    out["(this Python driver)"] = t.user + t.system
    return out


def programs_run(trace_path: str) -> collections.Counter[str]:
    """Programs an ``strace -f -e trace=execve`` log shows started (successful execve only), by
    program and first argument's kind."""
    out: collections.Counter[str] = collections.Counter()
    call = re.compile(r'execve\("([^"]+)", \["[^"]*"(?:, "([^"]*)")?')
    with open(trace_path) as f:
        for line in f:
            if not line.rstrip().endswith("= 0"):
                continue
            m = call.search(line)
            if m is None:
                continue
            program = os.path.basename(m.group(1))
            if program == "jspawnhelper":  # Java's launcher of every process: counted by what it runs
                continue
            arg = m.group(2) or ""
            where = "_delta_log" if "_delta_log" in arg else "checkpoint" if "checkpoint" in arg else ""
            out[f"{program} {arg if program == 'chmod' else where}".strip()] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("PARKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--path", choices=PATHS, default="parka_raw")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    parser.add_argument("--processes", action="store_true", help="count the programs the JVM runs (strace)")
    args = parser.parse_args(argv)
    conf = dict(c.split("=", 1) for c in args.conf)
    if args.processes and shutil.which("strace") is None:
        parser.error("--processes needs strace on PATH")

    import psutil

    data = gps.gps_tracks(args.records)
    topic = gps._new_topic(args.bootstrap, "gps-cpu")
    work = tempfile.mkdtemp(prefix="parka-spark-cpu-")
    try:
        (gps.produce_parka if gps.TOPIC_OF[args.path] == "parka" else gps.produce_avro)(args.bootstrap, topic, data)
        spark = gps.benchmark_session("parka spark_cpu", conf)
        query = gps.QUERIES[args.path]

        def one(i: int) -> None:
            table = os.path.join(work, f"t{i}")
            query(spark, args.bootstrap, topic, table)
            shutil.rmtree(table, ignore_errors=True)

        for i in range(args.warmups):
            one(i)
        driver = psutil.Process()
        jvm = next(c for c in driver.children(recursive=True) if c.name() == "java")
        spark.sparkContext._jvm.java.lang.System.gc()
        trace = os.path.join(work, "execve.txt")
        tracer = None
        if args.processes:
            tracer = subprocess.Popen(
                ["strace", "-f", "-qq", "-s", "512", "-e", "trace=execve", "-p", str(jvm.pid), "-o", trace]
            )
            time.sleep(2)  # strace attaches to every thread before the first measured query
        # the JVM writes to the same stdout: what it prints after this line (-XX:+PrintCompilation's
        # methods, with --conf spark.driver.extraJavaOptions=...) is the measured queries'
        print("-- the measured queries start", flush=True)
        before, wall0 = cpu_by_kind(jvm, driver), time.perf_counter()
        for i in range(args.runs):
            one(args.warmups + i)
        after, wall = cpu_by_kind(jvm, driver), time.perf_counter() - wall0
        if tracer is not None:
            tracer.terminate()
            tracer.wait()
    finally:
        gps._delete_topics(args.bootstrap, [topic])
    per_query = {k: (after[k] - before.get(k, 0.0)) / args.runs for k in after}
    print(
        f"{args.path}: {args.records:,} records per query, {args.runs} queries after {args.warmups} warm-ups;"
        f" per query: {sum(per_query.values()):.2f} CPU-s, {wall / args.runs:.2f} s wall"
        f"{' (under strace)' if args.processes else ''}"
    )
    for kind, seconds in sorted(per_query.items(), key=lambda kv: -kv[1]):
        if seconds >= 0.005:
            print(f"  {seconds:6.3f}  {kind}")
    if args.processes:
        print("programs the JVM ran, per query:")
        for program, n in programs_run(trace).most_common():
            print(f"  {n / args.runs:6.1f}  {program}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
