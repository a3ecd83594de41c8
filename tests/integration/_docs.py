"""Runs the code blocks of the README and the docs pages, in order, one namespace per page, through
sybil (:func:`run_page`).

A page's ``python`` blocks run in the test's process. Its ``sh`` blocks run in a fresh working
directory with the virtualenv's ``bin`` (``parka``, ``python``) first on ``PATH``: a block of
plain ``parka`` commands as processes forked from the tests' fork server (:mod:`reliability.forkserver`), any
other block in bash.

What a page addresses as a reader's own is the test's instead (:class:`Page`):

- the broker (``localhost:9092``, ``broker:9092``, and ``PARKA_KAFKA`` for a command without ``-k``) is the
  test broker;
- ``/data/...`` is under the test's temporary directory, ``s3://lake/...`` under a folder of its own;
- the topic ``gps`` (also ``events`` on a command line, ``readings`` in Python, whose registry
  subject ``readings-value`` becomes the topic's) is a unique topic, created before the first
  block; the consumer group ``app`` a unique group;
- ``--metrics-port 9464`` is 0 (a free port);
- a server's address in the docs (``servers``: the Iceberg REST catalog's ``http://catalog:8181``,
  s3proxy's ``http://127.0.0.1:19180``, ...) is the run's server's, and its credentials are in
  the shell's environment (``env``);
- a ``parka ingest`` line without ``--end-at-latest`` is a daemon: it runs with
  ``--end-at-latest``, so it lands what the topic holds and exits.

A block that cannot run here is preceded by sybil's skip marker with the reason,
``<!-- skip: next "needs a SASL_SSL broker" -->``. Output blocks (``text``, or no language) are
not code.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from unittest import SkipTest

import pyarrow as pa
from sybil import Example, Sybil
from sybil.parsers.markdown.codeblock import CodeBlockParser
from sybil.parsers.markdown.skip import SkipParser

from reliability import forkserver

REPO = Path(__file__).resolve().parents[2]
# Every fenced block's language on these pages: the first two are code and run, the others are not
CODE_LANGUAGES = ("python", "sh")
OUTPUT_LANGUAGES = ("text", "")  # "": a plain block, output or a listing
_FENCE = re.compile(r"^ *```(\S*)", re.MULTILINE)
_PAGE = "_docs_page"  # the page's Page in its namespace
# these run in the Spark session's worker (tests/integration/spark/test_docs_spark.py)
SPARK_PAGES = ("README.md", "docs/spark.md", "docs/reading-tables.md")
# pages whose blocks produce what they read: the others find a few segments in the topic (seed())
PRODUCING_PAGES = ("README.md", "docs/client.md", "docs/upserts.md")


def pages() -> list[Path]:
    """The README and every docs page: what a reader sees."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]


def name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def languages(path: Path) -> list[str]:
    """The languages of ``path``'s fenced blocks, in order (the opening fences only)."""
    found, inside = [], False
    for m in _FENCE.finditer(path.read_text()):
        if not inside:
            found.append(m.group(1))
        inside = not inside
    return found


@dataclass
class Page:
    """One page's run: what its blocks' placeholders become, and what they printed."""

    path: Path
    bootstrap: str
    tmp: Path
    topic: str
    group: str
    servers: dict[str, str] = field(default_factory=dict)  # a server's address in the docs -> the test's
    env: dict[str, str] = field(default_factory=dict)  # for the shell blocks
    printed: list[str] = field(default_factory=list)
    ran: list[int] = field(default_factory=list)  # the line of each block that ran
    skipped: list[int] = field(default_factory=list)
    namespace: dict[str, Any] = field(default_factory=dict)  # the blocks' names after the last one

    def substitute(self, text: str, *, shell: bool = False) -> str:
        text = text.replace("localhost:9092", self.bootstrap).replace("broker:9092", self.bootstrap)
        text = text.replace("/data/", f"{self.tmp}/data/")
        if shell:
            text = re.sub(r"(?<=\s)(gps|events)(?=\s)", self.topic, text)  # an argument
            text = text.replace("s3://lake/", f"s3://lake/{self.topic}/")
        else:
            text = re.sub(r"""(["'])(gps|readings)\1""", rf"\g<1>{self.topic}\g<1>", text)  # a string
            text = text.replace('"readings-value"', f'"{self.topic}-value"')  # a registry subject
        text = re.sub(r"""("group\.id":\s*)"app\"""", rf'\g<1>"{self.group}"', text)
        text = text.replace("--metrics-port 9464", "--metrics-port 0")
        for address, server in self.servers.items():
            text = text.replace(address, server)
        return text

    def shell(self, script: str) -> str:
        lines = []
        for line in re.sub(r"\\\n\s*", " ", self.substitute(script, shell=True)).splitlines():
            line = re.sub(r"\s+#\s.*$", "", line)  # the trailing comment
            if re.match(r"\s*parka ingest\b", line) and "--end-at-latest" not in line:
                line += " --end-at-latest"
            lines.append(line)
        return "\n".join(lines) + "\n"


def _page(example: Example) -> Page:
    page = example.namespace[_PAGE]
    assert isinstance(page, Page)
    return page


def run_python(example: Example) -> None:
    page = _page(example)
    # the block's own line numbers in a traceback: its first line is the one after the fence
    code = compile("\n" * example.line + page.substitute(str(example.parsed)), str(page.path), "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, example.namespace)
    page.printed.append(out.getvalue())
    sys.stdout.write(out.getvalue())


def _commands(script: str) -> list[list[str]] | None:
    """``script``'s lines as ``parka`` commands, or None when a line is anything else (a pipe,
    a variable, another program): then bash runs the block."""
    commands = []
    for line in script.splitlines():
        if not line.strip():
            continue
        if re.search(r"[|&;<>$`(){}*?~]", line):
            return None
        argv = shlex.split(line)
        if argv[0] != "parka":
            return None
        commands.append(argv[1:])
    return commands


def run_shell(example: Example) -> None:
    """A block of ``parka`` commands runs them one after the other, each a process forked from
    the tests' fork server (:mod:`reliability.forkserver`: parka imported once, not once a command); any other
    block runs in bash."""
    page = _page(example)
    script = page.shell(str(example.parsed))
    # a command without -k means the reader's broker at parka's default address: the test's here
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PARKA_KAFKA": page.bootstrap, **page.env, "PATH": path}
    work = page.tmp / "work"
    work.mkdir(exist_ok=True)
    commands = _commands(script)
    runs = (
        [[sys.executable, "-m", "parka.cli", *argv] for argv in commands]
        if commands is not None
        else [["bash", "-e", "-o", "pipefail", "-c", script]]
    )
    for argv in runs:
        proc = forkserver.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=240)
        if proc.returncode != 0:
            raise AssertionError(
                f"{page.path.name}:{example.line}: exit {proc.returncode}: {shlex.join(argv)}\n"
                f"{script}\n{proc.stdout}\n{proc.stderr}"
            )
        page.printed.append(proc.stdout)


_SYBIL = Sybil(
    parsers=[
        SkipParser(),
        CodeBlockParser(language="python", evaluator=run_python),
        CodeBlockParser(language="sh", evaluator=run_shell),
    ]
)


SEED_SCHEMA = pa.schema(
    [("device", pa.string()), ("ts", pa.timestamp("ms", tz="UTC")), ("lat", pa.float64()), ("lon", pa.float64())]
)


def seed(bootstrap: str, topic: str, *, segments: int = 3, rows: int = 100) -> None:
    """``segments`` Parquet segments of ``rows`` positions each into ``topic``, for the pages
    that read a topic they do not fill themselves."""
    from parka.producer import ParquetProducer

    producer = ParquetProducer(
        {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": rows}
    )
    producer.set_schema(topic, SEED_SCHEMA)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for s in range(segments):
        n = range(s * rows, (s + 1) * rows)
        producer.produce_batch(
            topic,
            pa.table(
                {
                    "device": [f"d{i % 7}" for i in n],
                    "ts": [start + timedelta(minutes=i) for i in n],
                    "lat": [52.0 + i / 1e4 for i in n],
                    "lon": [4.0 + i / 1e4 for i in n],
                },
                schema=SEED_SCHEMA,
            ),
            key_column="device",  # over the topic's partitions
        )
        producer.flush()
    assert producer.flush(30) == 0


def run_page(
    path: Path,
    *,
    bootstrap: str,
    tmp: Path,
    make_topic: Callable[[str], None],
    seeded: bool = False,
    servers: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> Page:
    """Run ``path``'s code blocks in order in one namespace; returns what ran, what was skipped
    (the lines of their fences) and what they printed. ``seeded``: the topic holds a few segments
    first (:func:`seed`).

    Raises:
        AssertionError: a block failed (its page and line, the script and its output).
    """
    unique = uuid.uuid4().hex[:8]
    page = Page(path, bootstrap, tmp, f"docs-gps-{unique}", f"docs-app-{unique}", servers or {}, env or {})
    make_topic(page.topic)
    if seeded:
        seed(bootstrap, page.topic)
    document = _SYBIL.parse(path)
    document.namespace[_PAGE] = page
    page.namespace = document.namespace
    for example in document.examples():
        is_code = example.region.evaluator in (run_python, run_shell)
        try:
            example.evaluate()
        except SkipTest:
            page.skipped.append(example.line)
            continue
        if is_code:
            page.ran.append(example.line)
    return page


def count_code_blocks(path: Path) -> int:
    return sum(1 for lang in languages(path) if lang in CODE_LANGUAGES)


def describe(page: Page) -> dict[str, Any]:
    return {"page": page.path.relative_to(REPO).as_posix(), "ran": len(page.ran), "skipped": len(page.skipped)}
