"""Resolve a decoded segment to a reader schema, Avro-style, for the messaging shim.

A topic's segments may carry several writer schemas (the producer evolved between them). A
consumer that gives :meth:`~parka.consumer.ParquetConsumer.set_reader_schema` gets every record
in that schema instead of its writer's: fields are matched by name at any depth (struct fields,
list elements, map values); a field the writer lacks is ``None``, a field the reader lacks is
dropped, and a type that differs is cast safely (an int32 writer to an int64 reader; a value
that does not fit, or types with no cast, fail the segment). Done once per segment on its Arrow
table, before records are built; the reserved columns (key, timestamp, headers) pass through.
"""

from __future__ import annotations

import pyarrow as pa

from parka.schema import RESERVED_PREFIX

__all__ = ["resolve_table"]


def resolve_table(table: pa.Table, reader: pa.Schema) -> pa.Table:
    """``table`` (a decoded segment) with its user columns resolved to ``reader``'s.

    Raises:
        ValueError: a field whose type cannot become the reader's (names the path).
    """
    columns: list[pa.ChunkedArray] = []
    fields: list[pa.Field] = []
    for f in reader:
        if f.name in table.column_names:
            column = table.column(f.name)
            chunks = [_resolve(chunk, f.type, f.name) for chunk in column.chunks]
            columns.append(pa.chunked_array(chunks, type=f.type))
        else:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, f.type)], type=f.type))
        fields.append(f.with_nullable(True))
    for name in table.column_names:
        if name.startswith(RESERVED_PREFIX):
            columns.append(table.column(name))
            fields.append(table.schema.field(name))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=table.schema.metadata))


def _resolve(arr: pa.Array, target: pa.DataType, path: str) -> pa.Array:
    if arr.type == target:
        return arr
    if isinstance(arr, pa.DictionaryArray):
        arr = arr.dictionary_decode()
    if arr.offset and pa.types.is_nested(arr.type):
        arr = pa.concat_arrays([arr])  # Arrow builds lists with a null mask from unsliced offsets only
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(arr.type):
        present = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        children = [
            _resolve(arr.field(present[f.name]), f.type, f"{path}.{f.name}")
            if f.name in present
            else pa.nulls(len(arr), f.type)
            for f in target
        ]
        return pa.StructArray.from_arrays(children, fields=[f.with_nullable(True) for f in target], mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(arr.type):
        keys = _resolve(arr.keys, target.key_type, f"{path}.key")
        items = _resolve(arr.items, target.item_type, f"{path}.value")
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=mask)
    if _is_list(target) and _is_list(arr.type):
        values = _resolve(arr.values, target.value_type, f"{path}.element")
        return type(arr).from_arrays(arr.offsets, values, type=target, mask=mask)
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"field '{path}' is {arr.type} in the segment, {target} in the reader schema: {exc}") from exc


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)
