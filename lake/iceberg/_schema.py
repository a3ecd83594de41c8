"""Iceberg's types, as parka's rules see them: an Iceberg schema in plain Arrow types
(:func:`iceberg_arrow_schema`), Arrow fields without what pyiceberg would misread
(:func:`plain_field`, :func:`plain_schema`), and which Arrow columns an Iceberg table can
store (:func:`check_columns`, pyiceberg's own conversion: the check of the columns a segment
would add, :meth:`parka.lake.LogEngine.check_columns`)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.io.pyarrow import UnsupportedPyArrowTypeException, schema_to_pyarrow

from parka.errors import SchemaMismatchError

__all__ = ["check_columns", "iceberg_arrow_schema", "plain_field", "plain_schema"]


def iceberg_arrow_schema(schema: Any) -> pa.Schema:
    """An Iceberg schema in the Arrow types parka's rules use (as the Delta engines give them):
    ``string``/``binary``/``list<element>`` rather than pyiceberg's large types, no field ids."""
    arrow = schema_to_pyarrow(schema, include_field_ids=False)
    return pa.schema([plain_field(f) for f in arrow])


def plain_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, _plain(f.type), nullable=f.nullable)


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", _plain(t.value_type), nullable=t.value_field.nullable))
    if pa.types.is_map(t):
        value = pa.field("value", _plain(t.item_type), nullable=t.item_field.nullable)
        return pa.map_(pa.field("key", _plain(t.key_type), nullable=False), value)
    if pa.types.is_struct(t):
        return pa.struct([plain_field(t.field(i)) for i in range(t.num_fields)])
    return t


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` without metadata (pyiceberg would read field ids from it)."""
    return pa.schema([plain_field(f) for f in schema])


def check_columns(schema: pa.Schema) -> None:
    """Whether an Iceberg table can store these columns: pyiceberg's own conversion of each, the
    one its schema update (``union_by_name``) and a new table make, so that a ``time64[us]``
    column passes (Iceberg's ``time``) and a ``time64[ns]`` does not; and no unsigned integers,
    which pyiceberg maps to signed types they can overflow (the files are added as they are).

    Raises:
        SchemaMismatchError: a column Iceberg cannot store (``field`` names it).
    """
    for f in schema:
        unsigned = _unsigned(f.type)
        if unsigned is not None:
            raise SchemaMismatchError(
                f"Iceberg has no unsigned integers ({unsigned}); store a signed type wide enough", field=f.name
            )
        try:
            Catalog._convert_schema_if_needed(plain_schema(pa.schema([f])))
        except (UnsupportedPyArrowTypeException, TypeError, ValueError) as exc:
            raise SchemaMismatchError(
                f"Iceberg has no type for {f.type}: {str(exc).splitlines()[0]}", field=f.name
            ) from exc


def _unsigned(t: pa.DataType) -> pa.DataType | None:
    """The first unsigned integer type inside ``t`` (``t`` itself included), else ``None``."""
    if pa.types.is_unsigned_integer(t):
        return t
    if pa.types.is_dictionary(t):
        return _unsigned(t.value_type)
    children = [t.field(i).type for i in range(t.num_fields)]
    return next((u for u in map(_unsigned, children) if u is not None), None)
