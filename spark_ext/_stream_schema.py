"""The stream's schema of a decode-mode query, into Delta (:mod:`._decode`) or Iceberg
(:mod:`._decode_iceberg`) alike: the given one, the table's, or the one that holds every segment
in the topic at start, checked against the table before the query starts
(:func:`stream_decoder`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from parka.lake import check_partitioning, given_schema_refused

from parka.errors import SchemaMismatchError
from parka.schema import RESERVED_PREFIX, to_arrow_schema

from ._arrow import METADATA_COLUMNS, SegmentDecoder, type_shape
from ._reader import topic_schema

if TYPE_CHECKING:
    from ._settings import SparkIngestSettings

__all__ = ["stream_decoder"]

log = logging.getLogger("parka.spark_ingest")

_METADATA_NAMES = frozenset(f.name for f in METADATA_COLUMNS.values())


def _resolve_schema(
    spark: Any, s: SparkIngestSettings, options: Mapping[str, str], table: pa.Schema | None
) -> tuple[pa.Schema, str]:
    """The stream's user schema and where it came from: the given schema, else the table's, else
    the one that holds every segment in the topic now (:func:`._reader.topic_schema`). Checked
    against the table before anything runs.

    Raises:
        SchemaMismatchError: the schema has columns the table lacks (without merge) or types
            the table cannot take.
    """
    if s.schema is not None:
        schema, source = to_arrow_schema(s.schema), "given"
    elif table is not None:
        user = [f for f in table if not f.name.startswith(RESERVED_PREFIX) and f.name not in _METADATA_NAMES]
        schema, source = pa.schema(user), "table"
    else:
        schema, source = topic_schema(spark, s.topic, options), "topic's segments"
    if table is not None:
        probe = SegmentDecoder(schema)
        for f in probe.schema:
            if f.name not in table.names:
                if s.schema_evolution != "merge":
                    raise SchemaMismatchError(
                        "the table has no such column; rerun with --schema-evolution merge to add it", field=f.name
                    )
                continue
            have = probe.schema.field(f.name).type
            want = SegmentDecoder(pa.schema([table.field(f.name)])).schema.field(0).type
            if type_shape(have) != type_shape(want):
                raise SchemaMismatchError(f"the schema says {have}, the table has {want}", field=f.name)
    return schema, source


def stream_decoder(
    spark: Any, s: SparkIngestSettings, options: Mapping[str, str], table: pa.Schema | None
) -> tuple[SegmentDecoder, pa.Schema, str]:
    """The decoder of a decode-mode query into a table whose schema is ``table`` (``None``: no
    table yet), the stream's user schema, and where it came from (:func:`_resolve_schema`).

    Raises:
        ConfigError: ``partition_by`` names no output column, or one it cannot partition by;
            the given schema (``--schema``) does not fit the table.
        SchemaMismatchError: the topic's segments' schema does not fit the table.
    """
    try:
        schema, source = _resolve_schema(spark, s, options, table)
    except SchemaMismatchError as exc:
        if s.schema is None or table is None:
            raise
        raise given_schema_refused(exc, s.table_uri, table) from exc
    decoder = SegmentDecoder(schema, reserved=s.reserved, metadata=s.metadata)
    origin = {"given": "the given schema", "topic's segments": "the topic's segments"}.get(source, "the table")
    check_partitioning(decoder.output_schema, s.partition_by, where=f"the decoded rows' schema (from {origin})")
    log.info("stream schema from the %s: %s", source, ", ".join(f"{f.name} {f.type}" for f in decoder.schema))
    return decoder, schema, source
