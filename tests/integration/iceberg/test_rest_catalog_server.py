"""Iceberg's own REST catalog server (``scripts/iceberg-rest.sh``) as pyiceberg sees it: tables
round-trip through its file:// warehouse, and a commit made from a stale snapshot is refused, which
is what parka's Iceberg engine will rely on to detect that another commit won.

Every writer here sets ``commit.retry.num-retries=0``, so pyiceberg does not refresh and retry
after a conflict: the outcome of each commit is the server's answer."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import parquet_file_to_data_file, schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, TableProperties

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
NO_RETRY = {TableProperties.COMMIT_NUM_RETRIES: "0"}


@pytest.fixture
def connect(iceberg_rest_url: str) -> Callable[[], Catalog]:
    """A new client of the server each call: concurrent writers do not share one HTTP session."""
    return lambda: load_catalog("rest", type="rest", uri=iceberg_rest_url)


@pytest.fixture
def namespace(connect: Callable[[], Catalog]) -> str:
    name = f"ns_{uuid.uuid4().hex[:12]}"
    connect().create_namespace(name)
    return name


def _rows(start: int, count: int, label: str) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"{label}-{i}"} for i in range(start, start + count)]


def _scan(table: Table) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda row: row["id"])


def _local(uri: str) -> Path:
    assert uri.startswith("file:"), uri
    return Path(uri.removeprefix("file:").removeprefix("//"))


def _data_file(table: Table, rows: list[dict[str, Any]]) -> DataFile:
    """A Parquet file written beside the table's data (with Iceberg's field ids), not committed:
    what parka's committer will hold when it asks the catalog to add existing files."""
    path = f"{table.location()}/data/{uuid.uuid4().hex}.parquet"
    with table.io.new_output(path).create() as stream:
        pq.write_table(pa.Table.from_pylist(rows, schema=schema_to_pyarrow(table.schema())), stream)
    return parquet_file_to_data_file(table.io, table.metadata, path)


def _fast_append(table: Table, data_file: DataFile, writer: str) -> None:
    """One commit adding ``data_file``, from the snapshot ``table`` was loaded at."""
    with table.transaction() as tx, tx.update_snapshot(snapshot_properties={"writer": writer}).fast_append() as append:
        append.append_data_file(data_file)


def _new_table(catalog: Catalog, namespace: str, base: list[dict[str, Any]]) -> str:
    name = f"{namespace}.t_{uuid.uuid4().hex[:8]}"
    table = catalog.create_table(name, schema=SCHEMA, properties=NO_RETRY)
    table.append(pa.Table.from_pylist(base, schema=SCHEMA))
    return name


def test_namespace_and_table_round_trip(connect: Callable[[], Catalog], namespace: str) -> None:
    catalog = connect()
    assert (namespace,) in catalog.list_namespaces()
    name = f"{namespace}.events"
    table = catalog.create_table(name, schema=SCHEMA)
    assert (namespace, "events") in catalog.list_tables(namespace)
    assert table.current_snapshot() is None
    data = pa.Table.from_pylist(_rows(0, 100, "a"), schema=SCHEMA)

    table.append(data)

    back = table.scan().to_arrow()
    assert back.schema.names == SCHEMA.names
    assert back.sort_by("id").to_pylist() == data.to_pylist()
    # another client sees the commit through the server, and the server wrote the table's
    # metadata to the local warehouse (HadoopFileIO), where this client wrote the data files
    again = connect().load_table(name)
    assert again.metadata.current_snapshot_id == table.metadata.current_snapshot_id
    assert _scan(again) == data.to_pylist()
    assert _local(again.metadata_location).is_file()
    assert all(_local(task.file.file_path).is_file() for task in again.scan().plan_files())


def test_commit_from_a_stale_snapshot_is_refused(connect: Callable[[], Catalog], namespace: str) -> None:
    base = _rows(0, 3, "base")
    name = _new_table(connect(), namespace, base)
    first, second = connect().load_table(name), connect().load_table(name)
    start = first.metadata.current_snapshot_id
    assert start is not None and second.metadata.current_snapshot_id == start
    assert second.properties[TableProperties.COMMIT_NUM_RETRIES] == "0"
    first_file, second_file = _data_file(first, _rows(10, 2, "first")), _data_file(second, _rows(20, 2, "second"))

    _fast_append(first, first_file, "first")
    # the assert-ref-snapshot-id requirement's own message: a server that skipped the requirement
    # would still refuse this commit (its sequence number is stale) but with another message
    with pytest.raises(CommitFailedException, match="branch main has changed"):
        _fast_append(second, second_file, "second")

    after = connect().load_table(name)
    head = after.current_snapshot()
    assert head is not None and head.parent_snapshot_id == start
    assert head.summary is not None and head.summary["writer"] == "first"
    assert len(after.snapshots()) == 2
    assert _scan(after) == base + _rows(10, 2, "first")


def test_concurrent_commits_exactly_one_wins(connect: Callable[[], Catalog], namespace: str) -> None:
    base = _rows(0, 3, "base")
    name = _new_table(connect(), namespace, base)
    writers = {"left": connect().load_table(name), "right": connect().load_table(name)}
    start = writers["left"].metadata.current_snapshot_id
    assert start is not None and writers["right"].metadata.current_snapshot_id == start
    files = {w: _data_file(t, _rows(100 if w == "left" else 200, 2, w)) for w, t in writers.items()}
    ready = threading.Barrier(len(writers), timeout=60)
    outcome: dict[str, BaseException | None] = {}

    def commit(writer: str) -> None:
        ready.wait()  # both commits leave together, each from the same snapshot
        try:
            _fast_append(writers[writer], files[writer], writer)
            outcome[writer] = None
        except BaseException as exc:  # recorded, judged below
            outcome[writer] = exc

    threads = [threading.Thread(target=commit, args=(w,)) for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)

    winners = [w for w, exc in outcome.items() if exc is None]
    losers = {w: exc for w, exc in outcome.items() if exc is not None}
    assert len(winners) == 1 and len(losers) == 1, outcome
    assert all(isinstance(exc, CommitFailedException) for exc in losers.values()), losers
    (winner,) = winners
    after = connect().load_table(name)
    head = after.current_snapshot()
    assert head is not None and head.parent_snapshot_id == start
    assert head.summary is not None and head.summary["writer"] == winner
    assert len(after.snapshots()) == 2
    assert _scan(after) == base + _rows(100 if winner == "left" else 200, 2, winner)
