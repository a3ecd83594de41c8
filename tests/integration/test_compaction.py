"""`parka ingest`'s background compaction (on by default) against a real broker, into Delta and
Iceberg (pyiceberg's SQL catalog) tables: while a producer produces and the daemon commits
every fraction of a second, the compaction thread keeps the small files within their budget,
racing the commits, and every record is in the table exactly once, in every version a reader
sees on the way."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from parka.lake import FileName, IcebergEngine
from pyiceberg.catalog import Catalog

from ._ingest_util import last_json, produce_events, run_ingest, start_ingest, wait_for

TOTAL = 2400
ROUND = 200
MIN_FILES = 4


class Table:
    """The table under test as a reader sees it: its current data files (absolute local paths)
    and ids."""

    def __init__(self, table_format: str, tmp_path: Path) -> None:
        self.format = table_format
        if table_format == "delta":
            self.name = str(tmp_path / "t")
            self.flags: tuple[str, ...] = ()
        else:
            self.warehouse = tmp_path / "warehouse"
            self.name = "db.t"
            self.flags = ("--catalog", "test", "--catalog-option", f"warehouse={self.warehouse}")

    def exists(self) -> bool:
        if self.format == "delta":
            return any((Path(self.name) / "_delta_log").glob("[0-9]*.json"))
        if not (self.warehouse / "catalog.db").exists():
            return False
        return self._catalog().table_exists(self.name)

    def _catalog(self) -> Catalog:
        """The daemon's catalog, opened as parka opens it: the daemon may be creating it now."""
        return IcebergEngine("test", {"warehouse": str(self.warehouse)}).catalog

    def files(self) -> list[str]:
        if self.format == "delta":
            return [u.removeprefix("file://") for u in DeltaTable(self.name).file_uris()]
        paths = self._catalog().load_table(self.name).inspect.files()["file_path"].to_pylist()
        return [p.removeprefix("file://") for p in paths]

    def ids(self) -> list[int]:
        if self.format == "delta":
            return DeltaTable(self.name).to_pyarrow_table(columns=["id"])["id"].to_pylist()
        return self._catalog().load_table(self.name).scan(selected_fields=("id",)).to_arrow()["id"].to_pylist()

    def small_ingestion_files(self) -> int:
        """Live files ingestion wrote (generation 0: the ones the budget counts)."""
        return sum(1 for f in self.files() if FileName.parse(f) is not None)


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_background_compaction_keeps_small_files_in_budget_while_ingesting_every_record_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, table_format: str
) -> None:
    topic = new_topic(partitions=2)
    table = Table(table_format, tmp_path)
    log = tmp_path / "ingest.log"
    flags = ("-l", "0.3", "--compact-min-files", str(MIN_FILES), *table.flags)
    proc = start_ingest(topic, table.name, bootstrap, *flags, log=log)
    most = 0
    try:
        for start in range(0, TOTAL, ROUND):  # each round committed before the next: many small files
            produce_events(bootstrap, topic, start, ROUND, batch=25)

            def landed(n: int = start + ROUND) -> bool:
                if not table.exists():
                    return False
                ids = table.ids()
                duplicated = [i for i, k in Counter(ids).items() if k > 1]
                assert not duplicated, f"ids twice in a version a reader saw: {duplicated[:10]}"
                return len(ids) >= n

            wait_for(landed, f"{start + ROUND} rows in the table", 60)
            most = max(most, table.small_ingestion_files())
        wait_for(lambda: table.small_ingestion_files() < MIN_FILES, "the last small files compacted", 60)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    stats = json.loads([ln for ln in text.splitlines() if ln.startswith("{")][-1])
    assert stats["records"] == TOTAL and stats["commits"] >= TOTAL // ROUND
    assert stats["compactions"] >= 2 and stats["files_compacted"] >= 2 * MIN_FILES, stats
    assert stats["compaction_failures"] == 0, text[-3000:]
    assert sorted(table.ids()) == list(range(TOTAL))
    # Between compactions a round adds two files (one per Kafka partition); a compaction lands
    # within a commit or two of being due.
    assert most <= 2 * MIN_FILES, f"{most} small files live at once (budget {MIN_FILES})"
    compacted = [f for f in table.files() if Path(f).name.startswith("compacted-g1-")]
    assert compacted and all(pq.read_metadata(f).num_row_groups == 1 for f in compacted)
    conflicts = text.count("conflict")
    print(f"{table_format}: {stats['compactions']} compactions, at most {most} small files live, {conflicts} conflicts")


def test_a_run_once_compacts_what_is_due_before_it_exits(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``--end-at-latest`` ends by finishing the compaction that is due rather than cancelling it:
    otherwise a job run every few minutes would never compact."""
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 1200, batch=25)
    table = Table("delta", tmp_path)
    flags = ("--end-at-latest", "--max-segments-per-commit", "4", "--compact-min-files", str(MIN_FILES))
    stats = last_json(run_ingest(topic, table.name, bootstrap, *flags))
    assert stats["records"] == 1200 and stats["commits"] >= 6
    assert stats["compactions"] >= 1 and stats["compaction_failures"] == 0, stats
    assert table.small_ingestion_files() < MIN_FILES  # the last commit's files included
    assert sorted(table.ids()) == list(range(1200))
