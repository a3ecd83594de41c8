"""Iceberg tables in an S3-compatible store (s3proxy): the SQL catalog's warehouse in the bucket,
parka's data files and pyiceberg's metadata through one set of credentials (``--storage-option``),
exactly once after kill -9, then compacted and expired by ``parka optimize --catalog``."""

from __future__ import annotations

import json
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from parka.lake import IcebergEngine
from parka.lake._storage import list_files

from reliability import forkserver

from .._ingest_util import assert_segments_stored_byte_for_byte, last_json, produce_events, run_ingest
from .._objectstores import ObjectStoreServer


def test_an_iceberg_table_in_s3_exactly_once_after_kill_9_then_optimized(
    bootstrap: str, new_topic: Callable[..., str], s3proxy: ObjectStoreServer, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    segments = produce_events(bootstrap, topic, 0, 1500, batch=100)
    catalog = {"uri": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": f"{s3proxy.root}/wh-{uuid.uuid4().hex[:8]}"}
    flags = [a for k, v in catalog.items() for a in ("--catalog-option", f"{k}={v}")]
    flags += [a for k, v in s3proxy.storage_options.items() for a in ("--storage-option", f"{k}={v}")]
    flags += ["--catalog", "s3"]
    once = ("--end-at-latest", "--max-segments-per-commit", "3")
    crashed = run_ingest(
        topic, "db.events", bootstrap, *once, *flags,
        env={"PARKA_TEST_CRASH_AT": "after-write", "PARKA_TEST_CRASH_AFTER": "4"}, check=False,
    )  # fmt: skip
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    last_json(run_ingest(topic, "db.events", bootstrap, *once, *flags))

    engine = IcebergEngine("s3", catalog, s3proxy.storage_options)
    table = engine.open("db.events", s3proxy.storage_options)
    assert table is not None and table.uri.startswith("s3://")
    rows = engine.catalog.load_table("db.events").scan().to_arrow()
    assert sorted(rows["id"].to_pylist()) == list(range(1500))  # each once
    files = table.referenced_files()
    assert {f.path for f in list_files(table.uri, s3proxy.storage_options)} == files  # no orphans
    assert_segments_stored_byte_for_byte(
        bootstrap, topic, segments, table.uri, dict(s3proxy.storage_options), files=files
    )

    cmd = [sys.executable, "-m", "parka.cli", "optimize", "db.events", *flags, "--vacuum-retention-hours", "0"]
    proc = forkserver.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert (result["files_removed"], result["files_added"]) == (len(files), 1)
    table.refresh()
    assert {f.path for f in list_files(table.uri, s3proxy.storage_options)} == table.referenced_files()
    assert sorted(engine.catalog.load_table("db.events").scan().to_arrow()["id"].to_pylist()) == list(range(1500))
