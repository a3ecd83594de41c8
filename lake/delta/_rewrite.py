"""The rewrite core of Delta maintenance and of copy-on-write upserts: files' live rows (those
their deletion vectors, and any rows asked, leave out) written as new data files. Both callers
(:mod:`._optimize`'s compactions, :mod:`._cow`'s upsert commits) commit what it wrote; this
module writes files and reads none of the log, so it imports none of the engine's modules."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from parka.errors import CommitError

from .._log import DataFile
from .._plan import partition_path
from .._rowgroups import Chunks, write_row_groups
from .._stats import StatsConfig, data_file_stats
from .._stitch import encrypted_columns
from .._storage import read_file, write_data_file
from .._zorder import z_order_indices
from ._dv import Descriptor
from ._dv import load as load_vector

__all__ = ["Encrypted", "RewriteInput", "conform", "rewrite_files"]


class RewriteInput(Protocol):
    """A live data file to rewrite (:class:`parka.lake.delta._rs_maintenance.LiveFile` is one):
    its path under the table root, size, partition values and deletion vector descriptor."""

    @property
    def path(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def partition_values(self) -> Mapping[str, str | None]: ...
    @property
    def deletion_vector(self) -> Mapping[str, Any] | None: ...


def rewrite_files(
    uri: str,
    files: Sequence[RewriteInput],
    *,
    table_schema: pa.Schema,
    partitions: Sequence[str],
    stats_config: StatsConfig,
    z_order: Sequence[str],
    target_size: int,
    row_group_rows: int,
    storage_options: Mapping[str, str],
    name: str | None = None,
    use_threads: bool = True,
    layout: list[tuple[str, np.ndarray | None, int]] | None = None,
    drop: Mapping[str, np.ndarray] | None = None,
) -> list[DataFile]:
    """Write the rows of ``files`` (one table partition) as new data files: one file in row
    groups of ``row_group_rows`` (compaction; named ``name`` when given), or sorted by the
    Z-order of ``z_order`` in files of about ``target_size`` bytes. ``layout`` (compaction)
    gets each input's path, the rows its deletion vector deleted (sorted; ``None``: none) and
    its physical rows, in the order the new file holds them (:class:`parka.lake._keys.Rewritten`).
    ``drop`` (path -> row positions) leaves those rows of a file out too, as its deletion vector's
    (a copy-on-write upsert: :mod:`._cow`).
    Partition columns stay out of the files (their values are in the add actions, where readers
    take them), as Delta writers do.

    Raises:
        CommitError: a file cannot be read, converted to the table schema, or written.
    """
    data_schema = pa.schema([f for f in table_schema if f.name not in partitions])
    values = dict(files[0].partition_values)
    directory = partition_path(values) + "/" if partitions else ""

    def read(f: RewriteInput) -> pa.Table:
        raw = read_file(uri, f.path, storage_options)
        # The new file is built in memory and written once whole, so a bin with an encrypted file
        # leaves nothing.
        if raw[-4:] == b"PARE" or encrypted_columns(raw):
            raise Encrypted(f.path)
        try:
            # the file's reader, not read_table's dataset: ~1 ms less per file (half a small file's read)
            rows = conform(pq.ParquetFile(pa.BufferReader(raw)).read(use_threads=use_threads), data_schema)
        except (pa.ArrowException, ValueError) as exc:
            raise CommitError(f"cannot read {f.path} as the table schema: {exc}") from exc
        extra = None if drop is None else drop.get(f.path)
        if f.deletion_vector is None and extra is None:
            if layout is not None:
                layout.append((f.path, None, rows.num_rows))
            return rows
        deleted = np.empty(0, dtype=np.int64)
        if f.deletion_vector is not None:
            try:
                vector = Descriptor.from_json(f.deletion_vector)
            except ValueError as exc:
                raise CommitError(f"{f.path}: {exc}") from exc
            deleted = np.asarray(load_vector(uri, vector, storage_options), dtype=np.int64)  # sorted
        if extra is not None:
            deleted = np.union1d(deleted, np.asarray(extra, dtype=np.int64))
        if layout is not None:
            layout.append((f.path, deleted, rows.num_rows))
        keep = np.ones(rows.num_rows, dtype=bool)
        keep[deleted] = False  # the rows its deletion vector deletes
        return rows.filter(pa.array(keep))

    def put(tables: Iterable[pa.Table]) -> DataFile:
        sink = Chunks()
        written = write_row_groups(tables, data_schema, row_group_rows, sink, compression="zstd", compression_level=3)
        path = directory + (name or f"part-00000-{uuid.uuid4()}-c000.zstd.parquet")
        size = write_data_file(uri, path, sink.parts, storage_options)
        stats = data_file_stats(written.metadata, table_schema, partition_by=partitions, stats_config=stats_config)
        return DataFile(path=path, size=size, stats=stats, partition_values=values)

    if z_order:
        rows = pa.concat_tables([read(f) for f in files])
        rows = rows.take(z_order_indices(rows, z_order))
        per_file = max(1, rows.num_rows * target_size // max(1, sum(f.size for f in files)))
        return [put([rows.slice(i, per_file)]) for i in range(0, rows.num_rows, per_file)]
    # Compaction: the files streamed into row groups of exactly row_group_rows (the last one less).
    return [put(map(read, files))]


class Encrypted(Exception):
    """A file of a bin is encrypted (column encryption): the bin is left alone."""


def conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` as ``schema``: its columns cast (safely), the columns it lacks (added after it was
    written) as nulls, columns outside the schema dropped (readers skip them too). A file of
    the table's schema (most are) is taken as it is, with one comparison."""
    if t.schema.equals(schema):  # the columns as they are, under the schema's metadata
        return pa.Table.from_arrays(t.columns, schema=schema)
    have = {name: i for i, name in enumerate(t.column_names)}

    def column(f: pa.Field) -> pa.ChunkedArray | pa.Array:
        i = have.get(f.name)
        if i is None:
            return pa.nulls(t.num_rows, f.type)
        present = t.column(i)
        # a column of the type already is taken as it is (the casts took ~0.4 ms a file of 20 columns)
        return present if present.type == f.type else present.cast(f.type)

    return pa.Table.from_arrays([column(f) for f in schema], schema=schema)
