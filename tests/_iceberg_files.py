"""A check the unit and integration tests of Iceberg partitions share: every data file of a
table holds only rows whose partition, as pyiceberg's own transforms compute it from each row's
source values, is the file's partition record."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.table import Table


def _iceberg_values(column: pa.ChunkedArray) -> list[Any]:
    """Values as pyiceberg's transforms take them: timestamps in microseconds, dates in days."""
    t = column.type
    if pa.types.is_timestamp(t):
        return list(column.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64()).to_pylist())
    if pa.types.is_date(t):
        return list(column.cast(pa.date32()).cast(pa.int32()).to_pylist())
    return list(column.to_pylist())


def assert_files_hold_their_partitions(table: Table) -> int:
    """Check every data file of ``table``'s current snapshot (local files); returns how many."""
    spec, schema = table.spec(), table.schema()
    checked = 0
    for task in table.scan().plan_files():
        data_file = task.file
        rows = pq.read_table(data_file.file_path.removeprefix("file://"))
        for position, field in enumerate(spec.fields):
            source = schema.find_field(field.source_id)
            transform = field.transform.transform(source.field_type)
            values = {transform(v) for v in _iceberg_values(rows[source.name])}
            assert values == {data_file.partition[position]}, (data_file.file_path, field.name, values)
        checked += 1
    return checked
