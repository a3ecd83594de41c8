"""Run confluent-kafka-python's own unit tests on parka's classes, and on the plain ones.

confluent-kafka's tests are the spec for ``ParquetProducer``/``ParquetConsumer`` (and their
asyncio counterparts). Their files are not copied into this repository: this program takes a
checkout of confluent-kafka-python (a work tree or a bare git directory), lays its ``tests/``
out in a temporary folder, and runs the chosen test files twice with pytest:

* ``plain``: as they are, on confluent-kafka's classes;
* ``parka``: with ``confluent_kafka.Producer``/``Consumer`` (and ``confluent_kafka.aio``'s
  ``AIOProducer``/``AIOConsumer``) replaced by parka's before any test module is imported,
  ``columnar.encoding`` left at its default, ``none``.

It prints every test that passes plainly and fails on parka's classes, and the counts; with
``--json`` it writes the per-test outcomes. Exit status 1 when such a test exists.

    python scripts/confluent_spec.py /path/to/confluent-kafka-python [--ref v2.16.1]

Use the tag of the installed confluent-kafka version when the checkout has it. The tests need
confluent-kafka's test requirements: ``pip install -e '.[spec]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from io import BytesIO
from pathlib import Path

DEFAULT_FILES = (
    "test_Producer.py",
    "test_Consumer.py",
    "test_misc.py",
    "test_threads.py",
    "test_log.py",
    "test_kafka_error.py",
    "test_AIOProducer.py",
    "test_AIOConsumer.py",
)

# Written as the temporary tree's root conftest: pytest imports it before any test module, so
# `from confluent_kafka import Producer` in a test file gets parka's class.
SWAP = """
import os

if os.environ.get("PARKA_SPEC_SWAP") == "1":
    import confluent_kafka
    from parka.consumer import ParquetConsumer
    from parka.producer import ParquetProducer

    confluent_kafka.Producer = ParquetProducer
    confluent_kafka.Consumer = ParquetConsumer
    if os.environ.get("PARKA_SPEC_AIO") == "1":
        import confluent_kafka.aio
        import confluent_kafka.aio._AIOConsumer as _aio_consumer_module
        import confluent_kafka.aio.producer._AIOProducer as _aio_producer_module
        from parka.consumer import AIOParquetConsumer
        from parka.producer import AIOParquetProducer

        confluent_kafka.aio.AIOProducer = _aio_producer_module.AIOProducer = AIOParquetProducer
        confluent_kafka.aio.AIOConsumer = _aio_consumer_module.AIOConsumer = AIOParquetConsumer
"""


def _lay_out(checkout: Path, ref: str, into: Path) -> None:
    git_dir = checkout / ".git" if (checkout / ".git").exists() else checkout
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", ref, "tests"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "conftest.py").write_text(SWAP)


def _outcomes(junit: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314 (pytest wrote it, here)
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            out[name] = "failed"
        elif case.find("skipped") is not None:
            out[name] = "skipped"
        else:
            out[name] = "passed"
    return out


def _run(root: Path, files: list[str], *, swap: bool, timeout_s: int) -> tuple[dict[str, str], str]:
    """One pytest process per file: a test that ends its process (some of confluent's provoke a
    fatal librdkafka error) must not take the later files' tests with it."""
    kind = "parka" if swap else "plain"
    outcomes: dict[str, str] = {}
    logs = []
    for name in files:
        junit = root / f"junit-{kind}-{name}.xml"
        env = dict(os.environ, PARKA_SPEC_SWAP="1" if swap else "0", PARKA_SPEC_AIO="1" if "AIO" in name else "0")
        cmd = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
            "-o", "filterwarnings=", "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function",
            f"--timeout={timeout_s}", f"--junitxml={junit}", f"tests/{name}",
        ]  # fmt: skip
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
        logs.append(proc.stdout)
        if not junit.exists():
            raise SystemExit(f"pytest wrote no report ({kind} run of {name}):\n{proc.stdout}\n{proc.stderr}")
        outcomes.update(_outcomes(junit))
    return outcomes, "\n".join(logs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="confluent-kafka-python: a work tree or a bare git directory")
    parser.add_argument("--ref", default="HEAD", help="the tag or commit whose tests to run (default HEAD)")
    parser.add_argument("--files", nargs="+", default=list(DEFAULT_FILES), help="test files under tests/")
    parser.add_argument("--timeout", type=int, default=60, help="pytest-timeout per test, seconds")
    parser.add_argument("--json", type=Path, help="write the per-test outcomes here")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the parka run's pytest output")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="parka-spec-") as tmp:
        root = Path(tmp)
        _lay_out(args.checkout, args.ref, root)
        plain, _ = _run(root, args.files, swap=False, timeout_s=args.timeout)
        parka, parka_log = _run(root, args.files, swap=True, timeout_s=args.timeout)
    if args.verbose:
        print(parka_log)
    passed_plain = sorted(name for name, outcome in plain.items() if outcome == "passed")
    regressions = [name for name in passed_plain if parka.get(name) != "passed"]
    for name in regressions:
        print(f"FAILS ON PARKA  {name}  ({parka.get(name, 'not run')})")
    print(
        f"confluent-kafka tests ({', '.join(args.files)}) at {args.ref}: {len(plain)} collected, "
        f"{len(passed_plain)} pass on confluent-kafka's classes; of those "
        f"{len(passed_plain) - len(regressions)} pass on parka's, {len(regressions)} fail"
    )
    if args.json:
        args.json.write_text(json.dumps({"ref": args.ref, "plain": plain, "parka": parka}, indent=1, sort_keys=True))
    return 1 if regressions else 0


if __name__ == "__main__":
    raise SystemExit(main())
