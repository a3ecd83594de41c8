"""A topic's state in the producer: its schema, its staged records, and their conversion to Arrow.

:func:`topic_state` checks a schema against the producer's settings (``columnar.partition.by``,
``columnar.sort.by``) once, in ``set_schema``; :func:`resolve_schema` fetches or registers it in
the schema registry when a subject is named. :func:`convert` is the first step of a drain: the
staged records, unpacked (``_buffer.Staging``), become one :class:`~._buffer.RowBatch`, and the
records Arrow cannot take are set aside with the reason. No Kafka here.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from parka.config import ProducerSettings
from parka.encoding import LayoutCache
from parka.errors import ConfigError, RecordError, SchemaError
from parka.partitioning import PartitionSpec
from parka.records import Conversion, RecordConverter
from parka.registry import Registry
from parka.schema import (
    ParkaSchemaWarning,
    is_message_class,
    schema_fingerprint,
    time_of_day_fields,
    to_arrow_schema,
)

from ._buffer import RowBatch, SizeModel, Staging, drain_size

__all__ = ["Converted", "TopicState", "convert", "resolve_schema", "topic_state"]


class Converter(Protocol):
    """A topic's records to Arrow in bulk: :class:`parka.records.RecordConverter` (dicts), or
    :class:`parka.protodecode.ProtobufRecords` (a message class's messages, or dicts)."""

    def convert(self, records: Sequence[Any]) -> Conversion: ...


@dataclass
class TopicState:
    schema: pa.Schema
    fingerprint: str
    converter: Converter
    partition_by: tuple[PartitionSpec, ...]
    drain_at: int
    items: list[Any] = field(default_factory=list)  # staged: values, or Side tuples (see _buffer)
    first_at: float = 0.0  # when the oldest staged item arrived
    arrow_size: SizeModel = field(default_factory=SizeModel)
    row_bytes: float | None = None
    layouts: LayoutCache = field(default_factory=LayoutCache)  # columnar.encoding.tuning=auto
    schema_id: int | None = None  # the registry's id of the schema: sent as parka.schema.id
    # set_schema with a Protobuf message class (or a subject's Protobuf schema): its
    # parka.protodecode.ProtobufRecords, the converter; produce() takes its messages too
    protobuf: Any = None


def resolve_schema(
    registry: Registry | None,
    schema: str | dict[str, Any] | pa.Schema | type | None,
    subject: str | None,
    register: bool,
) -> tuple[str | dict[str, Any] | pa.Schema | type, int | None]:
    """``set_schema``'s schema and its registry id (``None`` without a subject). A subject's
    latest version may be an Avro schema, a JSON Schema or a Protobuf schema (its first message:
    produce() then takes dicts of its fields, or messages of that type); only Avro registers.

    Raises :class:`~parka.errors.ConfigError` for a subject without a registry URL,
    :class:`~parka.errors.RegistryError` when the registry refuses or cannot be reached,
    :class:`~parka.errors.SchemaError` for a schema parka cannot use, ``ValueError`` for a
    contradictory call."""
    schema_id: int | None = None
    if is_message_class(schema) and (subject is not None or register):
        raise ValueError(
            "set_schema with a Protobuf message class takes no subject: give subject= alone to use the "
            "subject's Protobuf schema"
        )
    if subject is not None:
        if registry is None:
            raise ConfigError("schema.registry.url", None, "a registry URL, to set a schema by subject")
        if register:
            if schema is None or isinstance(schema, pa.Schema):
                raise ValueError("set_schema(register=True) needs the Avro schema to register")
            text = schema if isinstance(schema, str) else json.dumps(schema)
            to_arrow_schema(text)  # refuse a schema parka cannot use before registering it
            schema_id = registry.register(subject, text)
        elif schema is not None:
            raise ValueError("set_schema(subject=...) fetches the schema: give no schema, or register=True")
        else:
            schema_id, schema = registry.latest(subject)
    elif register:
        raise ValueError("set_schema(register=True) needs subject=")
    if schema is None:
        raise ValueError("set_schema needs a schema or subject=")
    return schema, schema_id


def topic_state(topic: str, schema: Any, schema_id: int | None, settings: ProducerSettings) -> TopicState:
    """A fresh state for ``topic`` with ``schema`` (an Avro record schema, a ``pyarrow.Schema``
    or a Protobuf message class); warns (``ParkaSchemaWarning``, at the caller of
    ``set_schema``) about a time-of-day column. Raises :class:`~parka.errors.SchemaError`
    naming the field when the schema cannot be used with the settings."""
    converter: Converter
    if is_message_class(schema):
        from parka.protodecode import ProtobufRecords  # the protobuf extra: only when a class is given

        converter = ProtobufRecords(schema)
        arrow = to_arrow_schema(converter.schema)
    else:
        arrow = to_arrow_schema(schema)
        converter = RecordConverter(arrow)
    times = time_of_day_fields(arrow)
    if times:
        warnings.warn(
            f"topic '{topic}': column {times[0]} is a time of day ({len(times)} such column(s)); Delta Lake "
            "has no time type, so parka ingest will refuse this topic's segments. Declare it as an int "
            "(ms or us since midnight), as an Avro time-millis/time-micros field becomes.",
            ParkaSchemaWarning,
            stacklevel=3,
        )
    for spec in settings.partition_by:
        if spec.source not in arrow.names:
            raise SchemaError(
                f"columnar.partition.by ({spec}) names a column the schema of topic '{topic}' lacks",
                field=spec.source,
            )
        problem = spec.problem(arrow.field(spec.source).type)
        if problem is not None:
            raise SchemaError(f"columnar.partition.by: {problem}", field=spec.source)
    for name in settings.sort_by:
        if name not in arrow.names:
            raise SchemaError(f"columnar.sort.by names a column the schema of topic '{topic}' lacks", field=name)
        if pa.types.is_nested(arrow.field(name).type):
            raise SchemaError(
                f"columnar.sort.by names a {arrow.field(name).type} column of topic '{topic}'; "
                "sort by columns of plain values",
                field=name,
            )
    return TopicState(
        schema=arrow,
        fingerprint=schema_fingerprint(arrow),
        converter=converter,
        schema_id=schema_id,
        protobuf=converter if is_message_class(schema) else None,
        partition_by=settings.partition_by,
        drain_at=drain_size(settings.batch_records, settings.batch_bytes, None),
    )


@dataclass
class Converted:
    """A drain's records in Arrow: ``batch`` (``None`` when no record converted), each kept
    record's explicit partition (``None`` when none has one), and the records set aside."""

    batch: RowBatch | None
    partitions: list[int] | None
    bad: list[tuple[Staging, RecordError]]


def convert(topic: str, state: TopicState, stg: Staging, settings: ProducerSettings) -> Converted:
    """Convert unpacked staged records to one :class:`RowBatch`; a record that does not fit the
    schema is set aside with its :class:`~parka.errors.RecordError` (topic named). Learns the
    topic's Arrow bytes per row, which sizes its next drains."""
    conv = state.converter.convert(stg.values)
    kept = conv.kept
    bad = [(stg.pick([index]), err.with_topic(topic)) for index, err in conv.bad]

    def keep(col: list[Any] | None) -> list[Any] | None:
        return col if col is None or kept is None else [col[i] for i in kept]

    rows = conv.table.num_rows
    if rows == 0:
        return Converted(None, None, bad)
    callbacks = keep(stg.callbacks)
    keys = keep(stg.keys)
    stamps = keep(stg.timestamps)
    batch = RowBatch(
        conv.table,
        keys=None if keys is None else pa.array(keys, pa.binary()),
        timestamps=None if stamps is None else pa.array(stamps, pa.int64()),
        headers=keep(stg.headers),
        callbacks=callbacks,
        values=keep(stg.values) if callbacks is not None else None,
    )
    state.row_bytes = conv.table.nbytes / rows
    state.drain_at = drain_size(settings.batch_records, settings.batch_bytes, state.row_bytes)
    return Converted(batch, keep(stg.partitions), bad)
