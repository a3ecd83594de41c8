"""parka installed without an extra produces segments and reads them back with the shim; the lake
needs its extra, and says how to install it with a command that works.

:data:`PROGRAM` is that light round trip, run twice: in a fresh interpreter of this environment
in which deltalake, obstore, fastparquet, pyspark and delta-spark cannot be imported
(``sys.modules[name] = None``: ``import`` raises and ``importlib.util.find_spec`` answers None,
as when a package is not installed), which shows the producer and the shim never load them; and
in a fresh virtualenv with the wheel ``python -m build`` makes, installed as a user installs it.
That virtualenv then gets the lake extra from the very command the missing-extra message gave,
and ``parka ingest`` lands the topic in a Delta table."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable

from parka.extras import install_command

from ._wheel import built_wheel

REPO = Path(__file__).resolve().parents[2]
LAKE_AND_SPARK = ("deltalake", "obstore", "fastparquet", "pyspark", "delta")

PROGRAM = textwrap.dedent(
    """
    import json, sys
    for name in {blocked!r}:
        sys.modules[name] = None

    import pyarrow as pa
    from parka.consumer import ParquetConsumer
    from parka.producer import ParquetProducer

    topic, table = sys.argv[1], sys.argv[2]
    conf = {{"bootstrap.servers": {bootstrap!r}}}
    producer = ParquetProducer(
        {{**conf, "columnar.encoding": "parquet", "columnar.batch.records": 50, "linger.ms": 60000}}
    )
    producer.set_schema(topic, pa.schema([("id", pa.int64(), False), ("name", pa.string())]))
    for i in range(200):
        producer.produce(topic, {{"id": i, "name": f"n{{i}}"}})
    assert producer.flush(30) == 0
    producer.close()

    consumer = ParquetConsumer({{**conf, "group.id": topic, "auto.offset.reset": "earliest"}})
    consumer.subscribe([topic])
    seen = []
    while len(seen) < 200:
        msg = consumer.poll(30)
        assert msg is not None, f"only {{len(seen)}} records came back"
        assert msg.error() is None, msg.error()
        seen.append(msg.value())
    consumer.close()

    try:
        import parka.lake  # noqa: F401
        lake_error = None
    except ImportError as exc:
        lake_error = {{
            "type": type(exc).__name__,
            "extra": getattr(exc, "extra", None),
            "install": getattr(exc, "install", None),
            "text": str(exc),
        }}

    from parka.cli import main
    ingest_code = main(["ingest", topic, table, "-k", conf["bootstrap.servers"], "--end-at-latest"])
    loaded = sorted(m for m in sys.modules if sys.modules[m] is not None and m.split(".")[0] in {blocked!r})
    print(json.dumps({{"seen": seen, "lake_error": lake_error, "ingest_code": ingest_code, "loaded": loaded}}))
    """
)


def test_producer_and_shim_without_the_lake_or_spark(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    program = PROGRAM.format(blocked=LAKE_AND_SPARK, bootstrap=bootstrap)
    run = subprocess.run(
        [sys.executable, "-c", program, topic, str(tmp_path / "table")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert sorted(r["id"] for r in out["seen"]) == list(range(200))
    assert {r["name"] for r in out["seen"]} == {f"n{i}" for i in range(200)}
    assert out["loaded"] == []
    assert out["lake_error"]["type"] == "MissingExtraError"
    assert out["lake_error"]["extra"] == "lake"
    assert out["lake_error"]["install"] == install_command("lake")
    assert out["lake_error"]["text"].endswith(install_command("lake"))
    assert out["ingest_code"] == 2
    assert (
        "parka ingest: parka.lake (parka ingest, parka optimize, Spark raw mode) needs parka's 'lake' extra"
        in run.stderr
    )
    assert not (tmp_path / "table").exists()


def _run(
    command: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    assert run.returncode == 0, f"{shlex.join(command)} exited {run.returncode}: {run.stderr[-3000:]}"
    return run


def new_virtualenv(venv: Path) -> list[str]:
    """The command that makes a virtualenv with pip in it: uv's (``uv venv --seed``, pip from uv's
    cache), when uv is installed beside this interpreter (``make setup`` installs it), else
    ``python -m venv``, whose ensurepip runs pip to install pip (5.0 CPU-s against 0.1, one run each)."""
    uv = Path(sys.executable).with_name("uv")
    if uv.exists():
        return [str(uv), "venv", "--quiet", "--seed", "--python", sys.executable, str(venv)]
    return [sys.executable, "-m", "venv", str(venv)]


@pytest.mark.long(90)
@pytest.mark.timeout(600)
def test_the_built_wheel_in_a_fresh_virtualenv_light_then_with_the_lake_extra(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    # neither this environment's PYTHONPATH (if any) nor the clone (the working directory, first on
    # sys.path of `python -c`) may reach the virtualenv's interpreter
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    # the wheel alone (build's default makes an sdist first and builds the wheel from it, twice
    # the work), built once per run: the Spark cluster's test ships the same one
    wheel = built_wheel()
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    try:
        _run(new_virtualenv(venv), env=env, cwd=tmp_path)
        # --no-compile: pip byte-compiles every module it installs (pyarrow's, pandas'...), which no
        # test here needs; the interpreter compiles what it imports
        _run([python, "-m", "pip", "install", "--quiet", "--no-compile", str(wheel)], env=env, cwd=tmp_path)

        topic = new_topic(partitions=1)
        table = tmp_path / "table"
        program = PROGRAM.format(blocked=(), bootstrap=bootstrap)
        run = _run([python, "-c", program, topic, str(table)], env=env, cwd=tmp_path, timeout=240)
        out = json.loads(run.stdout.strip().splitlines()[-1])
        assert sorted(r["id"] for r in out["seen"]) == list(range(200))
        assert out["lake_error"]["type"] == "MissingExtraError"
        assert out["ingest_code"] == 2
        assert not table.exists()
        # pip recorded where parka came from (PEP 610): the message names this wheel and this pip
        install = out["lake_error"]["install"]
        assert shlex.split(install) == [python, "-m", "pip", "install", f"{wheel}[lake]"]
        assert (
            "parka ingest: parka.lake (parka ingest, parka optimize, Spark raw mode) needs parka's 'lake' extra"
            in run.stderr
        )

        _run([*shlex.split(install), "--quiet", "--no-compile"], env=env, cwd=tmp_path)
        _run(
            [str(venv / "bin" / "parka"), "ingest", topic, str(table), "-k", bootstrap, "--end-at-latest"],
            env=env,
            cwd=tmp_path,
        )
        rows = DeltaTable(str(table)).to_pyarrow_table(columns=["id", "name"]).sort_by("id").to_pylist()
        assert rows == [{"id": i, "name": f"n{i}"} for i in range(200)]
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # some 500 MB; the table and the wheel stay for a look
