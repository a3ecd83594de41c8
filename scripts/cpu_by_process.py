"""Where a command's CPU goes, by kind of process, machine-wide: the test servers (started with
``nohup``, outside pytest's process tree), Spark's JVMs, the daemons the tests start and kill, the
pytest workers. ``scripts/pytest_cpu.py`` counts per test what a worker's process tree used and
misses all of those that leave the tree or are killed before they are reaped; on 2 cores the
suite's wall time follows the machine's total, so this counts everything. Linux (``/proc``).

    python3 scripts/cpu_by_process.py --out cpu.json -- make test   # the standard library only
    python3 scripts/cpu_by_process.py --report cpu.json

Every second it reads each process's own CPU (utime + stime of ``/proc/<pid>/stat``) and keeps the
last value per process (pid and start time); a process that was running before the command
started counts from its first reading. A process that lives less than a second between two
readings is missed (its CPU shows in no kind).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")

# (kind, test on the command line), first match wins
KINDS: list[tuple[str, str]] = [
    ("Kafka brokers", "kafka.Kafka"),
    ("Kafka tools", "kafka.tools"),
    ("Spark drivers (JVM)", "SparkSubmit"),
    ("Spark cluster daemons and executors (JVM)", "org.apache.spark"),
    ("s3proxy", "s3proxy"),
    ("schema registry (Apicurio)", "apicurio"),
    ("Iceberg REST catalog", "org.apache.iceberg.rest"),
    ("Azurite", "azurite"),
    # pyspark's daemon and the workers it forks: `python -m <spark.python.daemon.module>
    # pyspark.worker` (parka's own daemon module, spark_ext/_daemon.py, or pyspark.daemon)
    ("pyspark Python workers", "pyspark.worker"),
    ("parka spark-ingest (Python)", "parka.cli spark-ingest"),
    ("parka ingest daemons", "parka.cli ingest"),
    ("parka, other commands", "parka.cli"),
    # the tests' and the quick fault suite's parka commands, forked from reliability/_zygote.py:
    # its command line
    ("parka commands forked by the tests' fork server", "reliability._zygote"),
    ("fault suite (reliability)", "-m reliability"),
    ("pytest-xdist workers", "import sys;exec(eval(sys.stdin.readline()))"),
    ("pytest", "pytest"),
    ("mypy", "mypy"),
    ("mkdocs", "mkdocs"),
    ("pip", "pip"),
    ("other Java", "java"),
    ("other Python", "python"),
]


def kind_of(cmdline: str) -> str:
    if cmdline.strip() == "npm":  # npm's title alone: scripts/azurite.sh's install, from a package.json
        return "Azurite"
    for kind, mark in KINDS:
        if mark in cmdline:
            return kind
    return "other"


# a secret on a command line (the test SASL broker's SCRAM user, set by kafka-storage's
# --add-scram) stays out of the file, which results folders keep
_SECRET = re.compile(r"((?:password|secret|token)=)[^\s,\]]+", re.IGNORECASE)


def _sample(seen: dict[str, list[object]], first: dict[str, float]) -> None:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / _TICK
            key = f"{entry.name}:{fields[19]}"  # pid and start time: pids are reused
            if key not in seen:
                cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if not cmdline.strip():
                    continue  # a kernel thread
                seen[key] = [cpu, _SECRET.sub(r"\1<redacted>", cmdline)]
                first.setdefault(key, cpu)
            else:
                seen[key][0] = cpu
        except (OSError, IndexError, ValueError):
            continue


def measure(command: list[str]) -> tuple[int, dict[str, list[object]]]:
    """Run ``command``; per process its CPU-s over the run and its command line."""
    seen: dict[str, list[object]] = {}
    first: dict[str, float] = {}
    _sample(seen, first)
    before = set(seen)
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        _sample(seen, first)
        time.sleep(1)
    _sample(seen, first)
    for key in before:  # what ran before counts from then
        seen[key][0] = float(seen[key][0]) - first[key]  # type: ignore[arg-type]
    me = str(os.getpid())
    return proc.returncode, {k: v for k, v in seen.items() if not k.startswith(me + ":")}


def report(processes: dict[str, list[object]]) -> str:
    cpu: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for used, cmdline, *_ in processes.values():
        kind = kind_of(str(cmdline))
        cpu[kind] += float(used)  # type: ignore[arg-type]
        count[kind] += 1
    lines = [f"{sum(cpu.values()):.0f} CPU-s in all", "  CPU-s  processes  kind"]
    lines += [f"{used:7.0f} {count[kind]:10d}  {kind}" for kind, used in cpu.most_common() if used >= 0.5]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write every process's CPU-s and command line here (JSON)")
    parser.add_argument("--report", metavar="JSON", help="only print the report of an earlier --out")
    parser.add_argument("command", nargs="*", help="the command to run and measure (after --)")
    args = parser.parse_args(argv)
    if args.report:
        print(report(json.loads(Path(args.report).read_text())))
        return 0
    if not args.command:
        parser.error("give a command to measure after --, or --report JSON")
    code, processes = measure(args.command)
    if args.out:  # the command's own output stays last (make test's ends with pytest's summary)
        Path(args.out).write_text(json.dumps(processes))
    else:
        print(report(processes), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
