"""The write of a compaction's output, shared by Delta's (:mod:`.delta._rewrite`) and Iceberg's
(:mod:`.iceberg._optimize`): input after input into one Parquet file, in row groups of exactly
``row_group_rows`` rows, holding one input's rows and the rest of a row group at a time, the file
kept as the writer's chunks (:class:`Chunks`), which the storage layer writes one after the other.

A compaction into a target-sized file (128 MiB by default) had held every input's decoded rows
together before writing any, several times the new file's compressed size: the daemon's memory
peaked at each merge into a large file."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["Chunks", "Written", "write_row_groups"]


class Chunks:
    """A file the Parquet writer writes to, kept as the chunks it wrote (``parts``): handed to
    :func:`parka.lake._storage.write_data_file` as they are, not joined into one buffer first (a
    copy of the whole file)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        chunk = bytes(data)  # the writer reuses its buffer
        self.parts.append(chunk)
        self.size += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class Written:
    """What :func:`write_row_groups` wrote: each input's row count, and the file's footer."""

    counts: list[int]
    metadata: pq.FileMetaData


def write_row_groups(
    tables: Iterable[pa.Table], schema: pa.Schema, row_group_rows: int, sink: Any, **writer_options: Any
) -> Written:
    """Write ``tables`` one after the other as one Parquet file of ``schema`` on ``sink`` (a
    ``pyarrow.parquet.ParquetWriter`` sink, e.g. :class:`Chunks`), in row groups of exactly
    ``row_group_rows`` rows (the last one fewer). ``writer_options`` go to the writer
    (compression...). An input whose schema is not ``schema`` is cast to it.

    Raises:
        pyarrow.ArrowException: an input cannot be cast or written (as the writer raises it).
    """
    counts: list[int] = []
    pending: list[pa.Table] = []  # the rows of the next row group, fewer than row_group_rows
    count = 0
    with pq.ParquetWriter(sink, schema, **writer_options) as writer:
        for table in tables:
            if not table.schema.equals(schema):
                table = table.cast(schema)
            counts.append(table.num_rows)
            pending.append(table)
            count += table.num_rows
            if count < row_group_rows:
                continue
            whole = pa.concat_tables(pending)
            cut = count - count % row_group_rows
            writer.write_table(whole.slice(0, cut), row_group_size=row_group_rows)
            # a copy of the rest: a slice would keep the whole input's buffers alive
            rest = whole.take(np.arange(cut, count)) if cut < count else None
            pending, count = ([rest] if rest is not None else []), count - cut
        if count:
            writer.write_table(pa.concat_tables(pending), row_group_size=row_group_rows)
    # the footer the writer made (pyarrow's write_table hands its metadata_collector the same)
    return Written(counts, writer.writer.metadata)
