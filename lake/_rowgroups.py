"""The write of a compaction's output, shared by Delta's (:mod:`.delta._rewrite`) and Iceberg's
(:mod:`.iceberg._optimize`): input after input into one Parquet file, in row groups of exactly
``row_group_rows`` rows, holding one input's rows and the rest of a row group at a time.

A compaction into a target-sized file (128 MiB by default) had held every input's decoded rows
together before writing any, several times the new file's compressed size: the daemon's memory
peaked at each merge into a large file."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["write_row_groups"]


def write_row_groups(
    tables: Iterable[pa.Table], schema: pa.Schema, row_group_rows: int, sink: Any, **writer_options: Any
) -> list[int]:
    """Write ``tables`` one after the other as one Parquet file of ``schema`` on ``sink`` (a
    ``pyarrow.parquet.ParquetWriter`` sink), in row groups of exactly ``row_group_rows`` rows (the
    last one fewer), and return each input's row count. ``writer_options`` go to the writer
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
    return counts
