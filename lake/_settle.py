"""One commit attempt settled against the table as it was just read, in pure decisions the
committer (:mod:`._committer`) acts on: where a refused message stops its partition when there
is no dead-letter table (:func:`stop_at_refused`), which segments and refused messages are new
and which the table's ``txn`` already covers (:func:`split_covered`), which data files are
committed as they are, rewritten or deleted (:func:`settle_files`), and the columns the table
must change to take the new files (:func:`evolved_columns`, of the table's schema carrying its
type-widening rule: :func:`with_widening`). No I/O: a stitched file's rewrite
is the caller's ``trim``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from parka.errors import SchemaMismatchError
from parka.evolution import TYPE_WIDENING_KEY, merge_schemas

from ._log import DataFile
from ._plan import LandedSegment, Refused

__all__ = ["Split", "cut_run", "evolved_columns", "settle_files", "split_covered", "stop_at_refused", "with_widening"]


def stop_at_refused(
    landed: Sequence[LandedSegment], refused: Sequence[Refused]
) -> tuple[Refused, list[LandedSegment], list[LandedSegment]]:
    """Without a dead-letter table: the refused message to raise (the first by partition and
    offset), the segments before each partition's first refused message (to commit) and those
    at or after it (to delete)."""
    first_bad: dict[int, int] = {}
    for r in refused:
        first_bad[r.partition] = min(r.offset, first_bad.get(r.partition, r.offset))
    keep = [s for s in landed if s.offset < first_bad.get(s.partition, s.offset + 1)]
    stopped = [s for s in landed if s.offset >= first_bad.get(s.partition, s.offset + 1)]
    return min(refused, key=lambda r: (r.partition, r.offset)), keep, stopped


@dataclass(frozen=True)
class Split:
    """What the table's ``txn`` versions make of an attempt's input: ``fresh`` segments and
    ``dead`` letters (new), ``stale`` segments (covered: deleted, never committed), and ``last``:
    partition -> the highest new offset, its ``txn`` after the commit."""

    fresh: list[LandedSegment]
    stale: list[LandedSegment]
    dead: list[Refused]
    last: dict[int, int]


def split_covered(
    table_txn: Mapping[int, int | None], landed: Sequence[LandedSegment], refused: Sequence[Refused]
) -> Split:
    """Split ``landed`` and ``refused`` by ``table_txn`` (partition -> its ``txn`` version,
    ``None``: nothing of it yet): what is at an offset ``<=`` its partition's version is covered."""

    def covered(partition: int, offset: int) -> bool:
        v = table_txn[partition]
        return v is not None and offset <= v

    fresh: list[LandedSegment] = []
    stale: list[LandedSegment] = []
    for s in landed:
        if covered(s.partition, s.offset):
            stale.append(s)
        elif s.offsets is None or not covered(s.partition, s.first_offset):
            fresh.append(s)
        else:  # a run of row records whose first rows are in: the rest is new
            kept, dropped = cut_run(s, table_txn[s.partition])
            fresh.append(kept)
            stale.append(dropped)
    dead = [r for r in refused if not covered(r.partition, r.offset)]
    last: dict[int, int] = {}
    for p, off in [(s.partition, s.offset) for s in fresh] + [(r.partition, r.offset) for r in dead]:
        last[p] = max(off, last.get(p, -1))
    return Split(fresh, stale, dead, last)


def cut_run(s: LandedSegment, txn: int | None) -> tuple[LandedSegment, LandedSegment]:
    """A run of row records ``s`` (``offsets`` set) cut after ``txn``: its part above (new)
    and its part at or below (covered), two segments of its file(s) with their
    ``rows``, so that :func:`settle_files` writes the file again with the new part only."""
    assert s.offsets is not None and txn is not None
    at = int(np.searchsorted(s.offsets, txn, side="right"))
    if not 0 < at < len(s.offsets):
        raise ValueError(f"txn {txn} does not cut the run {s.first_offset}..{s.offset}")
    start = 0 if s.rows is None else s.rows[0]
    kept = replace(s, offsets=s.offsets[at:], rows=(start + at, len(s.offsets) - at), records=len(s.offsets) - at)
    dropped = replace(s, offset=int(s.offsets[at - 1]), offsets=s.offsets[:at], rows=(start, at), records=at)
    return kept, dropped


def settle_files(
    keep: Sequence[LandedSegment],
    drop: Sequence[LandedSegment],
    trim: Callable[[DataFile, list[LandedSegment]], DataFile],
) -> tuple[list[DataFile], list[str]]:
    """The files to commit for ``keep`` and the paths to delete for ``drop``.

    A file holds one segment, or several stitched ones. One whose segments are all kept is
    committed as is, one whose segments are all dropped is deleted. A stitched file holding
    both (another writer with this app id committed part of it, or a refused message stops
    its partition half way) is replaced by ``trim``'s new file with the kept segments' row
    groups (:func:`parka.lake._files.trim_stitched`); the old one is deleted.
    """
    files: dict[str, tuple[DataFile, list[LandedSegment], list[LandedSegment]]] = {}
    for s in keep:
        for f in s.files:
            files.setdefault(f.path, (f, [], []))[1].append(s)
    for s in drop:
        for f in s.files:
            files.setdefault(f.path, (f, [], []))[2].append(s)
    commit: list[DataFile] = []
    doomed: list[str] = []
    for path, (f, kept, dropped) in files.items():
        if not dropped:
            commit.append(f)
            continue
        doomed.append(path)
        if kept:
            commit.append(trim(f, kept))
    return commit, doomed


def evolved_columns(current: pa.Schema, fresh: Sequence[LandedSegment]) -> list[pa.Field]:
    """The columns of ``current`` (the table's schema, re-read, so another writer's evolution
    is built on, not undone) that must be added or changed to take ``fresh``: each segment's
    changed columns merged into it, at any depth (:func:`parka.evolution.merge_schemas`).

    Raises:
        SchemaMismatchError: the table no longer takes a segment (another writer changed it).
    """
    target = current
    for s in fresh:
        if not s.new_fields:
            continue
        merge = merge_schemas(target, pa.schema(list(s.new_fields)), absent_ok=target.names)
        if merge.problems:
            p = merge.problems[0]
            raise SchemaMismatchError(
                f"the table cannot take {s.topic}[{s.partition}]@{s.offset}: column {p}", field=p.path
            )
        target = merge.schema
    return [f for f in target if f.name not in current.names or not f.equals(current.field(f.name))]


def with_widening(schema: pa.Schema, configuration: Mapping[str, Any]) -> pa.Schema:
    """``schema`` carrying the type-widening property of the table's ``configuration`` in its
    metadata, so that the rule (:func:`parka.evolution.merge_schemas`) travels with it, to
    Spark's executors too."""
    enabled = str(configuration.get(TYPE_WIDENING_KEY, "")).lower() == "true"
    return schema.with_metadata({**(schema.metadata or {}), TYPE_WIDENING_KEY: "true"}) if enabled else schema
