"""The Iceberg tests' catalog (:class:`Lake`, the ``lake`` fixture's, in ``conftest.py``),
``parka ingest --catalog`` into it, and an upsert table read as ``{id: version}`` by pyiceberg
and by DuckDB."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import duckdb_extension_avro
import duckdb_extension_iceberg
import pyarrow as pa
from parka.lake import IcebergEngine
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError

from .._ingest_util import run_ingest


class Lake:
    """An Iceberg catalog for one test: the embedded SQL catalog in a temporary warehouse, or the
    session's REST catalog server (``rest_url``), where the test's tables get a namespace of
    their own."""

    def __init__(self, warehouse: Path, rest_url: str | None = None) -> None:
        self.warehouse = warehouse
        self.rest_url = rest_url
        if rest_url is None:
            self.namespace = "db"
            self.flags: tuple[str, ...] = ("--catalog", "test", "--catalog-option", f"warehouse={warehouse}")
        else:
            self.namespace = f"t{uuid.uuid4().hex[:12]}"
            self.flags = ("--catalog", "rest", "--catalog-option", f"uri={rest_url}")

    def name(self, table: str) -> str:
        return f"{self.namespace}.{table}"

    def catalog(self) -> Catalog:
        if self.rest_url is not None:
            return load_catalog("rest", type="rest", uri=self.rest_url)
        return self.engine().catalog  # as parka opens it: a daemon may be creating it now

    def engine(self) -> IcebergEngine:
        options = {"warehouse": str(self.warehouse)} if self.rest_url is None else {"uri": self.rest_url}
        return IcebergEngine("test" if self.rest_url is None else "rest", options)

    def data_root(self, identifier: str) -> str:
        """The table's data folder: where parka writes (``<location>/data``)."""
        location: str = self.catalog().load_table(identifier).location()
        return location.rstrip("/").removeprefix("file://") + "/data"

    def files(self, identifier: str) -> set[str]:
        """The current snapshot's data files, relative to the data folder."""
        root = "file://" + self.data_root(identifier) + "/"
        paths = self.catalog().load_table(identifier).inspect.files()["file_path"].to_pylist()
        assert all(p.startswith(root) for p in paths), paths
        return {p.removeprefix(root) for p in paths}

    def logged(self, identifier: str) -> set[str]:
        """The data files any snapshot still in the metadata names (a compaction's removed ones
        stay there, and on disk, until snapshot expiry)."""
        root = "file://" + self.data_root(identifier) + "/"
        paths = self.catalog().load_table(identifier).inspect.all_files()["file_path"].to_pylist()
        return {p.removeprefix(root) for p in paths}

    def on_disk(self, identifier: str) -> set[str]:
        root = Path(self.data_root(identifier))
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}

    def delete_files_left(self, identifier: str) -> Callable[[str], None]:
        """A check for ``crash_at_each_point``'s ``left``: a kill at ``after-deletes`` (the
        delete files written, the snapshot not) left delete files no snapshot names."""

        def left(point: str) -> None:
            if point == "after-deletes":
                unnamed = self.on_disk(identifier) - self.logged(identifier)
                assert any(p.startswith("deletes/") for p in unnamed), unnamed

        return left

    def rows(self, identifier: str) -> pa.Table:
        return self.catalog().load_table(identifier).scan().to_arrow()

    def txns(self, identifier: str) -> dict[str, int]:
        snapshot = self.catalog().load_table(identifier).current_snapshot()
        assert snapshot is not None and snapshot.summary is not None
        state: dict[str, int] = json.loads(snapshot.summary.additional_properties["parka.txns"])
        return state


def ingest(lake: Lake, topic: str, table: str, bootstrap: str, *extra: str, **kwargs: Any) -> Any:
    return run_ingest(topic, table, bootstrap, *lake.flags, *extra, **kwargs)


def race(lake: Lake, topic: str, table: str, bootstrap: str, *flags: str) -> list[Any]:
    """Two run-once ``parka ingest`` runs with ``flags`` (one app id, given there) started
    together in consumer groups of their own (named after the topic: no other test's runs join
    them), so both read every partition and race to commit; both must exit 0. Their completed
    processes."""
    results: dict[str, Any] = {}
    start = threading.Barrier(2)

    def run(group: str) -> None:
        start.wait()
        results[group] = ingest(lake, topic, table, bootstrap, *flags, "-g", f"{group}-{topic}", check=False)

    threads = [threading.Thread(target=run, args=(g,)) for g in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert all(r.returncode == 0 for r in results.values()), [r.stderr[-2000:] for r in results.values()]
    return list(results.values())


def table_rows(lake: Lake, identifier: str) -> dict[int, int]:
    """The table through pyiceberg's scan (position deletes applied); no key twice. A table not
    created yet is empty (the embedded catalog's database too)."""
    if lake.rest_url is None and not (lake.warehouse / "catalog.db").exists():
        return {}
    try:
        rows = lake.rows(identifier).select(["id", "version"]).to_pylist()
    except NoSuchTableError:
        return {}
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a key holds more than one row"
    return {r["id"]: r["version"] for r in rows}


def duckdb_rows(lake: Lake, identifier: str) -> dict[int, int]:
    """The table through DuckDB's iceberg extension (``iceberg_scan`` of the current metadata
    file, which applies position deletes); no key twice."""
    table = lake.catalog().load_table(identifier)
    with duckdb.connect(config={"autoinstall_known_extensions": False}) as con:
        for package in (duckdb_extension_avro, duckdb_extension_iceberg):  # iceberg reads manifests with avro
            name = package.__name__.removeprefix("duckdb_extension_")
            folder = Path(package.__file__).parent / "extensions" / f"v{duckdb.__version__}"
            con.execute(f"LOAD '{folder / f'{name}.duckdb_extension'}'")
        rows = con.execute("SELECT id, version FROM iceberg_scan(?)", [table.metadata_location]).fetchall()
    ids = [i for i, _ in rows]
    assert len(ids) == len(set(ids)), "a key holds more than one row"
    return dict(rows)
