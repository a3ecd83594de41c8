"""What a run checks in the Delta tables: the ids in the table against the ids produced (lost,
duplicated, unexpected), the dead-letter rows against the bad messages sent, and orphan files."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

__all__ = ["Tally", "caught_up", "dead_letters", "exists", "orphans", "table_ids", "tally", "txn_versions", "version"]


def exists(path: Path) -> bool:
    """Whether a committed table version exists at ``path`` (not just a log folder)."""
    return any((path / "_delta_log").glob("[0-9]*.json"))


def version(path: Path) -> int:
    return DeltaTable(str(path)).version() if exists(path) else -1


def table_ids(path: Path) -> list[int]:
    if not exists(path):
        return []
    ids: list[int] = DeltaTable(str(path)).to_pyarrow_table(columns=["id"])["id"].to_pylist()
    return ids


def dead_letters(path: Path) -> list[dict[str, Any]]:
    """The dead-letter table's rows, without the raw bytes (coordinates, error, value size)."""
    if not exists(path):
        return []
    table = DeltaTable(str(path)).to_pyarrow_table(columns=["topic", "partition", "offset", "error", "value"])
    sizes = pc.binary_length(table["value"]).to_pylist()
    rows = table.drop_columns(["value"]).to_pylist()
    for row, size in zip(rows, sizes, strict=True):
        row["value_bytes"] = size
    return rows


def files_on_disk(path: Path) -> set[str]:
    """Every file under the table but its log and Spark checkpoints (``_*`` folders): data files,
    and the temporary files a write killed half way leaves (``.<name>.<id>.tmp``)."""
    return {
        str(p.relative_to(path))
        for p in path.rglob("*")
        if p.is_file() and not any(part.startswith("_") for part in p.relative_to(path).parts[:-1])
    }


def referenced_files(path: Path) -> set[str]:
    actions = DeltaTable(str(path)).get_add_actions(flatten=True)
    return {unquote(p) for p in pa.table(actions)["path"].to_pylist()}


def orphans(path: Path) -> list[str]:
    """Files under the table that no add action references (sorted)."""
    if not exists(path):
        return sorted(files_on_disk(path)) if path.exists() else []
    return sorted(files_on_disk(path) - referenced_files(path))


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


def txn_versions(path: Path, app_id: str, partitions: int) -> dict[int, int | None]:
    """The table's ``txn`` version (last offset in) per partition for ``app_id``."""
    if not exists(path):
        return dict.fromkeys(range(partitions))
    table = DeltaTable(str(path))
    return {p: table.transaction_version(f"{app_id}-{p}") for p in range(partitions)}


def caught_up(path: Path, app_id: str, highs: dict[int, int]) -> bool:
    """Whether the table's ``txn`` versions reach every partition's last offset (high - 1)."""
    done = txn_versions(path, app_id, len(highs))
    return all(high == 0 or (done[p] or -1) >= high - 1 for p, high in highs.items())
