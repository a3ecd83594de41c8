"""Reading parka topics in Spark: ``format("kafka")`` plus a columnar decoder (``mapInArrow``).

Why not a ``format("parka")`` data source: Spark 4's Python Data Source API could register one,
but its streaming reader would have to re-implement what the Kafka source already does well:
offset ranges per micro-batch, the offset log in the checkpoint, partition discovery, rate
limits (``maxOffsetsPerTrigger``), retention checks (``failOnDataLoss``), security settings.
Those are what make a Delta sink exactly-once. So parka reads through the Kafka source and
decodes its ``value`` column with :class:`._arrow.SegmentDecoder`; every Kafka source option
works unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias

import pyarrow as pa

from parka.encryption import KmsSettings
from parka.errors import ConfigError, SchemaError
from parka.evolution import merge_schemas
from parka.schema import RESERVED_PREFIX, to_arrow_schema
from parka.segment import FORMAT_HEADER, decode_segment

from ._arrow import KAFKA_COLUMNS, SegmentDecoder

__all__ = ["SchemaInput", "decode", "kafka_options", "read", "read_stream", "spark_schema", "topic_schema"]

SchemaInput: TypeAlias = "str | Mapping[str, Any] | pa.Schema"


def spark_schema(schema: pa.Schema) -> Any:
    """The Spark ``StructType`` of an Arrow schema (timestamps without a zone as TIMESTAMP_NTZ)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def kafka_options(
    topic: str,
    bootstrap_servers: str | None,
    options: Mapping[str, Any] | None,
) -> dict[str, str]:
    """Kafka source options: ``subscribe`` (unless ``options`` has ``assign`` or a pattern),
    headers on, and ``kafka.bootstrap.servers``.

    Raises:
        ConfigError: no bootstrap servers, or ``includeHeaders`` set to false (segments are
            recognised by their headers).
    """
    out = {str(k): str(v) for k, v in (options or {}).items()}
    if bootstrap_servers:
        out["kafka.bootstrap.servers"] = bootstrap_servers
    if not out.get("kafka.bootstrap.servers"):
        raise ConfigError("kafka.bootstrap.servers", None, "host:port[,host:port...]")
    if out.get("includeHeaders", "true").lower() != "true":
        raise ConfigError("includeHeaders", out["includeHeaders"], "true", reason="segments are told by their headers")
    out["includeHeaders"] = "true"
    if not any(k in out for k in ("subscribe", "subscribePattern", "assign")):
        out["subscribe"] = topic
    return out


def decode(
    df: Any,
    schema: SchemaInput | None = None,
    *,
    reserved: str = "keep",
    metadata: Sequence[str] = (),
    kms: KmsSettings | None = None,
) -> Any:
    """Decode a DataFrame of Kafka rows (as the Kafka source gives them, with headers) into records.

    Works on batch and streaming DataFrames. ``schema``: the topic's schema, Avro (JSON text or
    dict) or Arrow; when omitted, a batch DataFrame's segments give it, the union of their
    schemas (:func:`_schema_of_all`: a pass over the rows before the decoding one; a streaming
    DataFrame raises). ``reserved``: ``"keep"`` (``__parka_key``, ``__parka_timestamp``,
    ``__parka_headers`` as columns, null where unused; the layout ``parka ingest`` writes) or
    ``"drop"``. ``metadata``: any of ``topic``, ``partition``, ``offset``, ``index``,
    ``timestamp``, added as ``kafka_<name>`` columns. ``kms``: the KMS settings that decrypt
    encrypted segments (:func:`parka.encryption.parse_kms_config`).

    Every row must be a readable segment that fits the schema; when one is not, the Spark job
    fails with :class:`~parka.errors.SegmentError`, ``SegmentDecodeError`` or
    ``SchemaMismatchError`` in its message, naming topic, partition and offset (use
    :func:`._session.translate` to get it back as a parka error).

    Raises:
        ConfigError: the DataFrame lacks a Kafka column, or a bad ``reserved``/``metadata``.
        SchemaError: a schema Spark cannot hold; no schema for a streaming DataFrame; no
            segment to take one from.
    """
    missing = [c for c in KAFKA_COLUMNS if c not in df.columns]
    if missing:
        hint = " (read Kafka with includeHeaders=true)" if "headers" in missing else ""
        raise ConfigError("columns", df.columns, ", ".join(KAFKA_COLUMNS), reason=f"missing {missing}{hint}")
    if schema is None:
        if df.isStreaming:
            raise SchemaError("a streaming DataFrame needs an explicit schema (Avro or Arrow)")
        arrow_schema = _schema_of_all(df, kms)
    else:
        arrow_schema = to_arrow_schema(schema)
    decoder = SegmentDecoder(arrow_schema, reserved=reserved, metadata=metadata, kms=kms)
    return df.select(*KAFKA_COLUMNS).mapInArrow(decoder, spark_schema(decoder.output_schema))


class _SegmentSchemas:
    """``mapInArrow`` over Kafka rows: each segment's user schema, serialized, with its Kafka
    timestamp (for :func:`_schema_of_all`). Runs in the executors' Python workers."""

    OUTPUT = "schema binary, timestamp timestamp"

    def __init__(self, kms: KmsSettings | None) -> None:
        self.kms = kms

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            schemas = []
            for row in batch.select(["value", "headers", "topic", "partition", "offset"]).to_pylist():
                headers = [(h["key"], h["value"]) for h in row["headers"] or ()]
                table = decode_segment(
                    row["value"],
                    headers,
                    topic=row["topic"],
                    partition=row["partition"],
                    offset=row["offset"],
                    kms=self.kms,
                )
                schemas.append(_user_schema(table.schema).serialize().to_pybytes())
            yield pa.RecordBatch.from_arrays(
                [pa.array(schemas, pa.binary()), batch.column("timestamp")], names=["schema", "timestamp"]
            )


def _user_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f for f in schema if not f.name.startswith(RESERVED_PREFIX)])


def _schema_of_all(df: Any, kms: KmsSettings | None = None) -> pa.Schema:
    """The schema that holds every segment in a batch DataFrame of Kafka rows: the union of the
    segments' user schemas (:func:`parka.evolution.merge_schemas`, oldest first, no type
    widening), where a column that some segment lacks is nullable (the decoder fills it with
    nulls there). One pass over the rows in the executors; the driver gets one row per distinct
    schema.

    Raises:
        SchemaError: no segment; segments whose columns disagree in type (naming the column and
            both types: give the schema).
    """
    from pyspark.sql import functions as F

    is_seg = F.exists("headers", lambda h: h["key"] == F.lit(FORMAT_HEADER))
    rows = df.where(is_seg).select("value", "headers", "topic", "partition", "offset", "timestamp")
    found = (
        rows.mapInArrow(_SegmentSchemas(kms), _SegmentSchemas.OUTPUT)
        .groupBy("schema")
        .agg(F.min("timestamp").alias("first"))
        .orderBy("first")
        .collect()
    )
    if not found:
        raise SchemaError("no parka segment to take the schema from; give the topic's schema")
    schemas = [pa.ipc.read_schema(pa.py_buffer(bytes(row["schema"]))) for row in found]
    everywhere = set.intersection(*(set(s.names) for s in schemas))

    def relaxed(schema: pa.Schema) -> pa.Schema:
        return pa.schema([f if f.name in everywhere else f.with_nullable(True) for f in schema])

    union = relaxed(schemas[0])
    for schema in schemas[1:]:
        merged = merge_schemas(union, relaxed(schema), widening=False)
        if merged.problems:
            problems = "; ".join(str(p).replace("in the table", "in an older segment") for p in merged.problems)
            raise SchemaError(f"the topic's segments disagree ({problems}); give the schema to read them with")
        union = merged.schema
    return union


def topic_schema(spark: Any, topic: str, options: Mapping[str, str], kms: KmsSettings | None = None) -> pa.Schema:
    """The schema of every segment in ``topic`` now (a batch read of it, :func:`_schema_of_all`).

    Raises:
        SchemaError: the topic holds no segment, or its segments disagree in a column's type.
        SegmentDecodeError: a segment cannot be read.
    """
    batch_opts = {k: v for k, v in options.items() if k not in _STREAM_ONLY}
    batch_opts.update(startingOffsets="earliest", endingOffsets="latest")
    df = spark.read.format("kafka").options(**batch_opts).load()
    try:
        return _schema_of_all(df, kms)
    except SchemaError as exc:
        raise SchemaError(f"topic '{topic}': {exc}") from exc


# Kafka source options a batch query rejects.
_STREAM_ONLY = frozenset({"maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "startingOffsets"})


def read(
    spark: Any,
    topic: str,
    *,
    bootstrap_servers: str | None = None,
    schema: SchemaInput | None = None,
    options: Mapping[str, Any] | None = None,
    reserved: str = "keep",
    metadata: Sequence[str] = (),
    kms: KmsSettings | None = None,
) -> Any:
    """A batch DataFrame of the records in ``topic`` (by default from earliest to latest).

    ``options`` are Kafka source options (``kafka.*`` client settings, ``startingOffsets``,
    ``endingOffsets``...). ``schema`` and ``kms`` as in :func:`decode`; without a schema, the
    union of the read segments' (a topic whose schema evolved reads whole, older segments'
    missing columns null).
    """
    opts = kafka_options(topic, bootstrap_servers, options)
    df = spark.read.format("kafka").options(**opts).load()
    return decode(df, schema, reserved=reserved, metadata=metadata, kms=kms)


def read_stream(
    spark: Any,
    topic: str,
    *,
    bootstrap_servers: str | None = None,
    schema: SchemaInput | None = None,
    options: Mapping[str, Any] | None = None,
    reserved: str = "keep",
    metadata: Sequence[str] = (),
    kms: KmsSettings | None = None,
) -> Any:
    """A streaming DataFrame of the records in ``topic``.

    Without ``schema``, the segments in the topic now give it (:func:`topic_schema`, read once,
    now); a later segment with columns beyond them fails the stream, naming it: give the schema.
    ``options`` as in :func:`read` (``startingOffsets``, ``maxOffsetsPerTrigger``...).
    """
    opts = kafka_options(topic, bootstrap_servers, options)
    arrow_schema = topic_schema(spark, topic, opts, kms) if schema is None else to_arrow_schema(schema)
    df = spark.readStream.format("kafka").options(**opts).load()
    return decode(df, arrow_schema, reserved=reserved, metadata=metadata, kms=kms)
