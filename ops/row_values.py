"""``parka ingest --value-format``: the values of a topic's messages that are not parka segments,
read as rows in bulk (:mod:`parka.rowdecode`), a partition's run of them at a time.

``avro``: Confluent-framed Avro, each run of one writer schema id decoded with that schema from
the registry. ``json``: a Confluent-framed value (magic byte 0) against its JSON Schema in the
registry; a plain one (a JSON object) against ``--value-schema`` (an Avro schema or a JSON
Schema document), else the table's schema (its user columns), else the schema inferred from the
first values read while no table exists, then kept for the run. ``connect-json``: Kafka Connect's
``JsonConverter`` with ``schemas.enable=true``, each value's schema in it. ``protobuf``:
Confluent-framed Protobuf (:mod:`parka.protodecode`), each schema from the registry.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from parka.errors import RecordError, SchemaError
from parka.registry import Registry
from parka.rowdecode import ConfluentAvroRows, ConfluentJsonRows, ConnectJsonRows, JsonRows, Run, Runs
from parka.schema import RESERVED_PREFIX, json_schema_to_arrow, to_arrow_schema

from ._settings import VALUE_SCHEMA, IngestSettings

__all__ = ["RowValues"]


class RowValues:
    """The decoder of one run's row values (see the module docstring); ``None`` from
    :meth:`of` when the settings read no rows (``--value-format segment``)."""

    def __init__(self, settings: IngestSettings) -> None:
        self.format = settings.value_format
        self._registry: Registry | None = None
        if settings.schema_registry_url:
            self._registry = Registry({**settings.schema_registry_options, "url": settings.schema_registry_url})
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
        self._plain: JsonRows | None = None
        if settings.value_schema_path is not None:
            self._plain = JsonRows(_declared_schema(settings.value_schema_path))

    @classmethod
    def of(cls, settings: IngestSettings) -> RowValues | None:
        return None if settings.value_format == "segment" else cls(settings)

    def close(self) -> None:
        if self._registry is not None:
            self._registry.close()

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
        present = [(i, v) for i, v in enumerate(values) if v is not None]
        bad = [(i, RecordError("no value: not a JSON record")) for i, v in enumerate(values) if v is None]
        if not present:
            return Runs([], bad)
        decoder = self._plain
        if decoder is None and table_schema is not None:
            user = [f for f in table_schema if not f.name.startswith(RESERVED_PREFIX)]
            decoder = self._plain = JsonRows(pa.schema(user))
        if decoder is None:
            try:
                decoder = self._plain = JsonRows.inferred([v for _, v in present])
            except SchemaError as exc:
                error = RecordError(f"no schema could be inferred from the first values: {exc}")
                return Runs([], sorted(bad + [(i, error) for i, _ in present], key=lambda b: b[0]))
        conversion = decoder.decode([v for _, v in present])
        kept = conversion.kept if conversion.kept is not None else range(len(present))
        bad += [(present[i][0], e) for i, e in conversion.bad]
        runs = [Run(0, decoder.schema, conversion.table, [present[i][0] for i in kept])] if len(kept) else []
        return Runs(runs, sorted(bad, key=lambda b: b[0]))


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
