"""What a run checks in its tables, Delta or Iceberg: the ids in the table against the ids
produced (lost, duplicated, unexpected), the dead-letter rows against the bad messages sent,
the ``txn`` state the workers caught up to, and orphan files.

A :class:`Target` is one table as the suite sees it: what ``parka ingest`` is told
(:attr:`~Target.name`, its table argument or ``--dlq-table``, and :attr:`~Target.flags`, what
else it needs to find it) and a few reads, each made with the table format's own library
(deltalake, pyiceberg), never through parka. The checks (ids, dead letters, ``txn`` versions,
caught up, orphans) are written once, on those reads. :func:`target` makes one of either
format in a scenario's folder.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from parka.lake import IcebergEngine, default_app_id, table_identity
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.snapshots import ancestors_of

__all__ = ["FORMATS", "DeltaTarget", "IcebergTarget", "Tally", "Target", "target", "tally"]

FORMATS = ("delta", "iceberg")


def _without_views(t: pa.DataType) -> pa.DataType:
    """``t`` with string_view and binary_view (at any depth) as string and binary."""
    if t == pa.string_view():
        return pa.string()
    if t == pa.binary_view():
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _without_views(f.type), f.nullable) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = pa.field(t.value_field.name, _without_views(t.value_type), t.value_field.nullable)
        return pa.list_(item) if pa.types.is_list(t) else pa.large_list(item)
    return t


# parka's snapshot-summary key of the txn state in an Iceberg table (parka.lake.iceberg.TXNS_KEY)
ICEBERG_TXNS_KEY = "parka.txns"


class Target(ABC):
    """One table a scenario's workers write and its checks read."""

    name: str
    """What ``parka ingest`` takes as its table argument (or ``--dlq-table``)."""
    flags: tuple[str, ...] = ()
    """What else ``parka ingest`` needs to find the table (Iceberg: its catalog)."""
    catalog_name: str | None = None
    """The Iceberg catalog's name; ``None`` for a Delta table."""

    def app_id(self, topic: str) -> str:
        """The app id ``parka ingest`` lands ``topic`` into this table under by default."""
        return default_app_id(topic, table_identity(self.name, self.catalog_name))

    # -- what each format reads ---------------------------------------------------------------

    @abstractmethod
    def exists(self) -> bool:
        """Whether the table was created (Delta: a committed version, not just a folder;
        Iceberg: in the catalog, maybe without a snapshot yet)."""

    @abstractmethod
    def read(self, columns: Sequence[str]) -> pa.Table:
        """``columns`` of the table's current rows (the table exists)."""

    @abstractmethod
    def schema(self) -> pa.Schema:
        """The table's current schema (the table exists)."""

    @abstractmethod
    def txns(self, app_ids: Sequence[str]) -> dict[str, int | None]:
        """Each ``txn`` app id's version (the last offset in), ``None`` for none (the table exists)."""

    @abstractmethod
    def files_on_disk(self) -> set[str]:
        """Every file under the table's data folder, relative to it: data files, and the
        temporary files a write killed half way leaves (``.<name>.<id>.tmp``)."""

    @abstractmethod
    def referenced_files(self) -> set[str]:
        """The data files the current version references, relative to the data folder (the
        table exists)."""

    @abstractmethod
    def logged_files(self) -> set[str]:
        """The data files any version still in the table's history names, relative to the data
        folder (the table exists): a file a compaction removed stays on disk for readers of older
        versions until VACUUM (Delta) or snapshot expiry (Iceberg) deletes it."""

    @abstractmethod
    def append(self, rows: pa.Table) -> None:
        """Append ``rows`` (in :meth:`schema`) as another application would, with the format's
        own writer: no ``txn`` of parka's."""

    def keep_history_short(self) -> None:  # noqa: B027  (most formats have nothing to shorten)
        """Make the table's history expire during the run where the workers expire it (Iceberg's
        snapshots); Delta's log retention is days, and its cleanup is not parka's."""

    # -- the checks, on those reads -----------------------------------------------------------

    def ids(self) -> list[int]:
        if not self.exists():
            return []
        ids: list[int] = self.read(["id"])["id"].to_pylist()
        return ids

    def dead_letters(self) -> list[dict[str, Any]]:
        """The dead-letter table's rows, without the raw bytes (coordinates, error, value size)."""
        if not self.exists():
            return []
        table = self.read(["topic", "partition", "offset", "error", "value"])
        sizes = pc.binary_length(table["value"]).to_pylist()
        rows = table.drop_columns(["value"]).to_pylist()
        for row, size in zip(rows, sizes, strict=True):
            row["value_bytes"] = size
        return rows

    def orphans(self) -> list[str]:
        """Files under the table's data folder that no version in its history names (sorted):
        not the current version's, nor one a compaction removed and VACUUM or expiry will delete."""
        on_disk = self.files_on_disk()
        if not self.exists():
            return sorted(on_disk)
        unreferenced = on_disk - self.referenced_files()
        return sorted(unreferenced - self.logged_files()) if unreferenced else []

    def compacted_files(self) -> int:
        """Data files in the table's history that ``parka ingest``'s background compaction wrote
        (named ``compacted-g<generation>-...``): whether it ran during a scenario."""
        return sum(1 for f in self.logged_files() if Path(f).name.startswith("compacted-g")) if self.exists() else 0

    def txn_versions(self, app_id: str, partitions: int) -> dict[int, int | None]:
        """The table's ``txn`` version (last offset in) per partition for ``app_id``."""
        if not self.exists():
            return dict.fromkeys(range(partitions))
        done = self.txns([f"{app_id}-{p}" for p in range(partitions)])
        return {p: done[f"{app_id}-{p}"] for p in range(partitions)}

    def caught_up(self, app_id: str, highs: dict[int, int]) -> bool:
        """Whether the table's ``txn`` versions reach every partition's last offset (high - 1)."""
        done = self.txn_versions(app_id, len(highs))
        return all(high == 0 or (done[p] or -1) >= high - 1 for p, high in highs.items())


class DeltaTarget(Target):
    """A Delta table at ``path`` (deltalake)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)

    def __str__(self) -> str:
        return self.name

    def exists(self) -> bool:
        return any((self.path / "_delta_log").glob("[0-9]*.json"))

    def version(self) -> int:
        return DeltaTable(self.name).version() if self.exists() else -1

    def read(self, columns: Sequence[str]) -> pa.Table:
        # delta-rs' own query engine: to_pyarrow_table() aborts this process at its exit now and
        # then ("terminate called without an active exception", delta-io/delta-rs#2184; seen here
        # as the fault suite's exit -6 after a passing run); the engine gives string_view and
        # binary_view columns, read here as plain strings and bytes
        table = pa.table(QueryBuilder().register("t", DeltaTable(self.name)).execute("SELECT * FROM t").read_all())
        table = table.select(list(columns))
        return table.cast(pa.schema([pa.field(f.name, _without_views(f.type), f.nullable) for f in table.schema]))

    def schema(self) -> pa.Schema:
        return pa.schema(DeltaTable(self.name).schema().to_arrow())

    def txns(self, app_ids: Sequence[str]) -> dict[str, int | None]:
        table = DeltaTable(self.name)
        return {a: table.transaction_version(a) for a in app_ids}

    def files_on_disk(self) -> set[str]:
        # but the log and Spark checkpoints (``_*`` folders)
        if not self.path.exists():
            return set()
        return {
            str(p.relative_to(self.path))
            for p in self.path.rglob("*")
            if p.is_file() and not any(part.startswith("_") for part in p.relative_to(self.path).parts[:-1])
        }

    def referenced_files(self) -> set[str]:
        actions = DeltaTable(self.name).get_add_actions(flatten=True)
        return {unquote(p) for p in pa.table(actions)["path"].to_pylist()}

    def logged_files(self) -> set[str]:
        """The ``add`` and ``remove`` paths of every commit file and checkpoint in ``_delta_log``
        (read as the protocol writes them: JSON lines, Parquet checkpoints)."""
        log = self.path / "_delta_log"
        paths: set[str] = set()
        for commit in log.glob("[0-9]*.json"):
            for line in commit.read_text().splitlines():
                action = json.loads(line) if line.strip() else {}
                for kind in ("add", "remove"):
                    if kind in action:
                        paths.add(unquote(action[kind]["path"]))
        for checkpoint in log.glob("[0-9]*.checkpoint*.parquet"):
            actions = pq.read_table(checkpoint, columns=["add", "remove"])
            for kind in ("add", "remove"):
                paths |= {unquote(a["path"]) for a in actions[kind].to_pylist() if a is not None}
        return paths

    def append(self, rows: pa.Table) -> None:
        write_deltalake(self.name, rows, mode="append")


class IcebergTarget(Target):
    """The Iceberg table ``identifier`` (``namespace.name``) in the embedded SQL catalog of
    ``warehouse`` (SQLite at ``<warehouse>/catalog.db``, as ``parka ingest --catalog NAME
    --catalog-option warehouse=DIR`` makes it), read with pyiceberg. The data files are under
    ``<table location>/data``."""

    CATALOG = "reliability"  # the SQL catalog keys its rows by the catalog's name: parka's and ours agree

    def __init__(self, warehouse: Path, identifier: str) -> None:
        self.warehouse = warehouse
        self.identifier = identifier
        self.name = identifier
        self.flags = ("--catalog", self.CATALOG, "--catalog-option", f"warehouse={warehouse}")
        self.catalog_name = self.CATALOG

    def __str__(self) -> str:
        return f"{self.identifier} (Iceberg, warehouse {self.warehouse})"

    @cached_property
    def catalog(self) -> Catalog:
        # as parka opens it: the workers may be creating it now
        return IcebergEngine(self.CATALOG, {"warehouse": str(self.warehouse)}).catalog

    def table(self) -> Table | None:
        """The table as its catalog has it now; ``None`` before parka created it."""
        if not (self.warehouse / "catalog.db").exists():
            return None  # no catalog yet: opening one would create it
        try:
            return self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None

    def _current(self) -> Table:
        table = self.table()
        if table is None:
            raise RuntimeError(f"no Iceberg table {self.identifier} in {self.warehouse}")
        return table

    def _data_root(self, table: Table) -> str:
        return table.location().rstrip("/") + "/data"

    def exists(self) -> bool:
        return self.table() is not None

    def read(self, columns: Sequence[str]) -> pa.Table:
        return self._current().scan(selected_fields=tuple(columns)).to_arrow()

    def schema(self) -> pa.Schema:
        return self._current().schema().as_arrow()

    def txns(self, app_ids: Sequence[str]) -> dict[str, int | None]:
        """Each app id's offset in the ``parka.txns`` summary of the latest snapshot in the
        current one's ancestry that has one (another application's appends have none)."""
        table = self._current()
        state: dict[str, int] = {}
        for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
            text = snapshot.summary.additional_properties.get(ICEBERG_TXNS_KEY) if snapshot.summary else None
            if text is not None:
                state = json.loads(text)
                break
        return {a: state.get(a) for a in app_ids}

    def files_on_disk(self) -> set[str]:
        table = self.table()
        if table is None:
            return set()  # parka writes no file before the table exists: it learns where from it
        root = Path(self._data_root(table).removeprefix("file://"))
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()

    def referenced_files(self) -> set[str]:
        table = self._current()
        prefix = self._data_root(table) + "/"
        paths: list[str] = table.inspect.files()["file_path"].to_pylist()
        return {p.removeprefix(prefix) for p in paths}

    def logged_files(self) -> set[str]:
        table = self._current()
        prefix = self._data_root(table) + "/"
        paths: list[str] = table.inspect.all_files()["file_path"].to_pylist()
        return {p.removeprefix(prefix) for p in paths}

    def append(self, rows: pa.Table) -> None:
        self._current().append(rows)

    def keep_history_short(self) -> None:
        """Snapshots older than 20 s expire at the workers' checkpoints (all but the latest 3 and
        the one holding the offsets), so that expiry runs, and deletes files, amid the chaos.
        The workers commit meanwhile: a change that loses to one of them is made again on the
        table as it is then (pyiceberg's own retries ran out under load once)."""
        short = {"history.expire.max-snapshot-age-ms": "20000", "history.expire.min-snapshots-to-keep": "3"}
        for _ in range(100):
            try:
                with self._current().transaction() as tx:
                    tx.set_properties(short)
                return
            except CommitFailedException:
                continue  # read the table again and retry: the race is the condition, not time
        raise RuntimeError(f"could not set {short} on {self.identifier}: 100 commits lost to the workers'")


def target(table_format: str, folder: Path, name: str) -> Target:
    """The table ``name`` of a scenario whose files go under ``folder``: a Delta table at
    ``folder/name``, or the Iceberg table ``chaos.<name>`` in the warehouse ``folder/warehouse``."""
    if table_format == "delta":
        return DeltaTarget(folder / name)
    if table_format == "iceberg":
        return IcebergTarget(folder / "warehouse", f"chaos.{name}")
    raise ValueError(f"table format {table_format!r}: one of {', '.join(FORMATS)}")


@dataclass(frozen=True)
class Tally:
    """Ids in a table against the ids acknowledged to the producer.

    ``lost``: acknowledged, not in the table. ``duplicated``: extra copies of ids in the table.
    ``unexpected``: ids in the table nobody acknowledged (``unacknowledged_ok`` excepted: records
    whose delivery the producer could not confirm may land at most once).
    """

    produced: int
    in_table: int
    lost: int
    duplicated: int
    unexpected: int
    lost_sample: tuple[int, ...]
    duplicated_sample: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "records_produced": self.produced,
            "records_in_table": self.in_table,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "unexpected": self.unexpected,
            "lost_sample": list(self.lost_sample),
            "duplicated_sample": list(self.duplicated_sample),
        }


def tally(ids: Iterable[int], acknowledged: Collection[int], unacknowledged_ok: Collection[int] = ()) -> Tally:
    counts = Counter(ids)
    expected = set(acknowledged)
    lost = sorted(expected - counts.keys())
    dupes = sorted(i for i, n in counts.items() if n > 1)
    unexpected = [i for i in counts if i not in expected and i not in unacknowledged_ok]
    return Tally(
        produced=len(expected),
        in_table=sum(counts.values()),
        lost=len(lost),
        duplicated=sum(n - 1 for n in counts.values() if n > 1),
        unexpected=len(unexpected),
        lost_sample=tuple(lost[:10]),
        duplicated_sample=tuple(dupes[:10]),
    )
