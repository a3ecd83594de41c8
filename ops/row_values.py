"""``--value-format`` (both daemons): the values of a topic's messages that are not parka
segments, read as rows in bulk (:mod:`parka.rowdecode`), a partition's run of them at a time, and
each run of good records made a segment (:func:`segments`) for the lake to take as it takes a
producer's.

``avro``: Confluent-framed Avro, each run of one writer schema id decoded with that schema from
the registry. ``json``: a Confluent-framed value (magic byte 0) against its JSON Schema in the
registry; a plain one (a JSON object) against ``--value-schema`` (an Avro schema or a JSON
Schema document), else the table's schema (its user columns), else the schema inferred from the
first values read while no table exists, then kept for the run. ``connect-json``: Kafka Connect's
``JsonConverter`` with ``schemas.enable=true``, each value's schema in it. ``protobuf``:
Confluent-framed Protobuf (:mod:`parka.protodecode`), each schema from the registry.

:class:`RowFormat` is what a daemon was told, read once where it starts (the ``--value-schema``
file included), small enough to travel to Spark's executors; :func:`row_values` gives a
process its one decoder of a format, whose registry client and schemas it keeps.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from parka.lake import SegmentRead, segment_of_rows

from parka.errors import RecordError, SchemaError, SegmentError
from parka.registry import Registry
from parka.rowdecode import ConfluentAvroRows, ConfluentJsonRows, ConnectJsonRows, JsonRows, Run, Runs
from parka.schema import RESERVED_PREFIX, json_schema_to_arrow, to_arrow_schema

from .settings import VALUE_SCHEMA, ValueFormatSettings

__all__ = ["ROW_RECORD_OVERHEAD", "RowFormat", "RowValues", "row_values"]

Headers = Sequence[tuple[str, bytes | None]] | None

# What a row record held until its run is decoded costs in memory beyond its value's bytes (the
# client's message object, its key and headers: 496 bytes per message with an 11-byte value, a key
# and one header, benchmarks/results/2026-11-30-row-ingest/held_message_bytes.py; a Spark
# executor's row, a dict of the same, about as much), counted in the bytes buffered so that the
# memory bound holds for a row topic as for a segment topic
ROW_RECORD_OVERHEAD = 500


@dataclass(frozen=True)
class RowFormat:
    """``--value-format`` and what it reads with: the declared schema (``--value-schema``'s, read),
    the registry's URL and client settings."""

    format: str
    declared: pa.Schema | None = None
    registry_url: str | None = None
    registry_options: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # credentials, maybe

    @classmethod
    def of(cls, settings: ValueFormatSettings, registry_options: Mapping[str, str]) -> RowFormat | None:
        """The settings' format, ``None`` when they read no rows (``--value-format segment``).

        Raises:
            ConfigError: ``--value-schema`` is not a readable Avro schema or JSON Schema.
        """
        if settings.value_format == "segment":
            return None
        declared = None if settings.value_schema_path is None else _declared_schema(settings.value_schema_path)
        options = tuple(sorted(registry_options.items()))
        return cls(settings.value_format, declared, settings.schema_registry_url, options)


class RowValues:
    """The decoder of one format's row values (see the module docstring)."""

    def __init__(self, fmt: RowFormat) -> None:
        self.format = fmt.format
        self._registry: Registry | None = None
        if fmt.registry_url:
            self._registry = Registry({**dict(fmt.registry_options), "url": fmt.registry_url})
        # the decoder of every value for the formats whose values all carry their schema
        self._whole: Callable[[Sequence[bytes | None]], Runs] | None = None
        self._framed: ConfluentJsonRows | None = None  # json: a framed value's
        if self.format == "avro":
            assert self._registry is not None  # the settings require it
            self._whole = ConfluentAvroRows(self._registry.writer_avro).decode
        elif self.format == "protobuf":
            from parka.protodecode import ProtobufRows  # the protobuf extra: only when asked for

            assert self._registry is not None
            self._whole = ProtobufRows(self._registry.writer_protobuf).decode
        elif self.format == "connect-json":
            self._whole = ConnectJsonRows().decode
        elif self._registry is not None:
            self._framed = ConfluentJsonRows(self._registry.writer_json_schema)
        self._declared: JsonRows | None = None if fmt.declared is None else JsonRows(fmt.declared)
        self._of_table: JsonRows | None = None  # json: the table's user columns' decoder, the last one
        self._inferred: JsonRows | None = None  # json: the schema inferred while no table exists

    def close(self) -> None:
        if self._registry is not None:
            self._registry.close()

    def segments(
        self,
        *,
        topic: str,
        partition: int,
        table_schema: pa.Schema | None,
        values: Sequence[bytes | None],
        offsets: Sequence[int],
        keys: Sequence[bytes | None],
        timestamps: Sequence[int | None],
        headers: Sequence[Headers],
    ) -> list[tuple[list[int], SegmentRead | SegmentError]]:
        """One Kafka partition's run of row records (in offset order, each given by its value,
        offset, key, timestamp in ms and headers) in bulk, in offset order: each run of good
        records of one schema as one segment (:func:`parka.lake.segment_of_rows`), each bad
        record as the error to refuse it with, by the indexes of the records. No segment spans
        a bad record. ``table_schema``: the table's, ``None`` while there is none.

        Raises:
            RegistryError: the registry could not be reached (not the data's fault: nothing is
                refused for it).
        """
        decoded = self.decode(values, table_schema)
        events: list[tuple[int, Any]] = [(i, error) for i, error in decoded.bad]
        for r in decoded.runs:
            # a gap in a run's indexes is a bad record: no segment spans one
            starts = [0, *(np.flatnonzero(np.diff(r.indexes) > 1) + 1).tolist(), len(r.indexes)]
            for a, b in itertools.pairwise(starts):
                events.append((r.indexes[a], (r.table.slice(a, b - a), r.indexes[a:b])))
        out: list[tuple[list[int], SegmentRead | SegmentError]] = []
        for i, event in sorted(events, key=lambda e: e[0]):
            if isinstance(event, Exception):
                out.append(([i], SegmentError(f"--value-format {self.format}: {event}")))
                continue
            table, indexes = event
            a, b = indexes[0], indexes[-1] + 1  # consecutive: a gap split the run above
            try:
                seg: SegmentRead | SegmentError = segment_of_rows(
                    topic=topic,
                    partition=partition,
                    offsets=offsets[a:b],
                    table=table,
                    keys=keys[a:b],
                    timestamps=timestamps[a:b],
                    headers=headers[a:b],
                )
            except (SegmentError, RecordError) as exc:
                seg = SegmentError(str(exc))
            out.append((list(indexes), seg))
        return out

    def decode(self, values: Sequence[bytes | None], table_schema: pa.Schema | None) -> Runs:
        """``values`` (one Kafka partition's, in offset order) decoded: runs of one schema, and the
        bad values by index. ``table_schema``: the table's, ``None`` while there is none.

        Raises:
            RegistryError: the registry could not be reached (not the data's fault: nothing is
                refused for it).
        """
        if self._whole is not None:
            return self._whole(values)
        runs: list[Run] = []
        bad: list[tuple[int, RecordError]] = []
        at = 0
        for framed, group in itertools.groupby(values, key=lambda v: v is not None and v[:1] == b"\x00"):
            chunk = list(group)
            decoded = self._json(chunk, framed=framed, table_schema=table_schema)
            runs += [Run(r.schema_id, r.schema, r.table, [at + i for i in r.indexes]) for r in decoded.runs]
            bad += [(at + i, e) for i, e in decoded.bad]
            at += len(chunk)
        return Runs(runs, bad)

    def _json(self, values: list[bytes | None], *, framed: bool, table_schema: pa.Schema | None) -> Runs:
        if framed:
            if self._framed is None:
                error = RecordError("a Confluent-framed value (magic byte 0): give --schema-registry-url to read it")
                return Runs([], [(i, error) for i in range(len(values))])
            return self._framed.decode(values)
        # the values there are (their indexes: None when every value is, as a rule)
        where: list[int] | None = None
        texts: list[bytes] = values  # type: ignore[assignment]
        bad: list[tuple[int, RecordError]] = []
        if None in values:
            where = [i for i, v in enumerate(values) if v is not None]
            texts = [v for v in values if v is not None]
            bad = [(i, RecordError("no value: not a JSON record")) for i, v in enumerate(values) if v is None]
            if not texts:
                return Runs([], bad)
        decoder = self._declared
        if decoder is None and table_schema is not None:
            user = pa.schema([f for f in table_schema if not f.name.startswith(RESERVED_PREFIX)])
            if self._of_table is None or not self._of_table.schema.equals(user):
                self._of_table = JsonRows(user)
            decoder = self._of_table
        if decoder is None:
            decoder = self._inferred
        if decoder is None:
            try:
                decoder = self._inferred = JsonRows.inferred(texts)
            except SchemaError as exc:
                error = RecordError(f"no schema could be inferred from the first values: {exc}")
                every = range(len(texts)) if where is None else where
                return Runs([], sorted(bad + [(i, error) for i in every], key=lambda b: b[0]))
        conversion = decoder.decode(texts)
        kept = list(conversion.kept) if conversion.kept is not None else list(range(len(texts)))
        if where is not None:
            kept = [where[i] for i in kept]
            bad += [(where[i], e) for i, e in conversion.bad]
        else:
            bad += conversion.bad
        runs = [Run(0, decoder.schema, conversion.table, kept)] if kept else []
        return Runs(runs, sorted(bad, key=lambda b: b[0]))


_decoders: dict[RowFormat, RowValues] = {}
_decoders_lock = threading.Lock()


def row_values(fmt: RowFormat) -> RowValues:
    """This process's decoder of ``fmt``, made at its first use and kept: a Spark executor's
    Python worker runs many tasks, and each writer schema is fetched from the registry once.
    (Plain JSON is read against the table's schema each call gives, so a decoder kept across
    tables reads each against its own.)"""
    with _decoders_lock:
        found = _decoders.get(fmt)
        if found is None:
            found = _decoders[fmt] = RowValues(fmt)
        return found


def _declared_schema(path: str) -> pa.Schema:
    """``--value-schema``: the Arrow form of the Avro schema or JSON Schema document in ``path``."""
    try:
        text = Path(path).read_text()
        document: Any = json.loads(text)
    except (OSError, ValueError) as exc:
        raise VALUE_SCHEMA.error(path, "a readable file holding a JSON document", reason=str(exc)) from None
    try:
        if isinstance(document, dict) and document.get("type") == "record":
            return to_arrow_schema(document)
        return json_schema_to_arrow(text)
    except SchemaError as exc:
        raise VALUE_SCHEMA.error(path, "an Avro record schema or a JSON Schema of an object", reason=str(exc)) from None
