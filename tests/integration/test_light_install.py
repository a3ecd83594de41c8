"""`pip install parka` (no extra) produces segments and reads them back with the shim; the lake
needs its extra and says so (issue 20, light installs).

The program runs in a fresh interpreter in which deltalake, obstore, fastparquet, pyspark and
delta-spark cannot be imported (``sys.modules[name] = None``: ``import`` raises and
``importlib.util.find_spec`` answers None, as when a package is not installed)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

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
        lake_error = {{"type": type(exc).__name__, "extra": getattr(exc, "extra", None), "text": str(exc)}}

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
    assert "pip install 'parka[lake]'" in out["lake_error"]["text"]
    assert out["ingest_code"] == 2
    assert (
        "parka ingest: parka.lake (parka ingest, parka optimize, Spark raw mode) needs parka's 'lake' extra"
        in run.stderr
    )
    assert not (tmp_path / "table").exists()
