"""How records travel: JSON or Confluent Avro per record with Kafka batch compression, or parka
Parquet segments with a Parquet codec. Serializers, decoders and the client settings that make a
"batch" hold a given number of rows.

Row encodings ("batch" = one librdkafka record batch): ``batch.num.messages`` = the batch size,
``batch.size`` at its maximum and ``linger.ms`` = 5 s, so a batch is cut when it holds that many
records (the final one at ``flush``). librdkafka also caps a batch at the client's
``message.max.bytes``, set to the broker's limit (8 MiB on the local broker): large batches of
wide records are cut by bytes, and the run records the records per batch it actually got from
the broker's log.

Parquet segments ("batch" = one segment = one Kafka message): ``columnar.batch.records`` = the
batch size, ``message.max.bytes`` as above so segments are not split for size below 8 MiB, and
``linger.ms`` = 5 s so that ``produce()`` per record also fills whole segments.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa

from .datasets import Dataset

__all__ = [
    "CODECS",
    "FORMATS",
    "Encoding",
    "avro_decoder",
    "decode_values",
    "parka_producer_conf",
    "row_producer_conf",
    "rows_for",
    "serialize",
]

CODECS = ("none", "lz4", "snappy", "zstd", "gzip")
FORMATS = ("json", "avro", "parquet")
_LINGER_MS = 5000
_MAGIC = 0


@dataclass(frozen=True, order=True)
class Encoding:
    """``format`` (json, avro, parquet) and ``codec``: Kafka's batch compression for row
    formats, the Parquet codec for segments (Kafka compression off, as parka sets it).
    ``per_record`` marks parka's per-record APIs: fed by ``produce()`` one dict at a time instead
    of ``produce_batch()`` with an Arrow table, and read by ``poll()`` one record at a time
    instead of ``consume(10,000)``."""

    format: str
    codec: str
    per_record: bool = False
    tuning: str = "auto"  # columnar.encoding.tuning of parquet cells: auto (parka's default) or none
    sort_by: str = ""  # columnar.sort.by of parquet cells

    @property
    def name(self) -> str:
        if self.format == "parquet":
            return (
                f"parquet-{self.codec}"
                + (" (per record: produce, poll)" if self.per_record else "")
                + (" (pyarrow defaults)" if self.tuning == "none" else "")
                + (f" (sorted by {self.sort_by})" if self.sort_by else "")
            )
        return f"{self.format}+{self.codec}"

    @property
    def is_variant(self) -> bool:
        """A comparison cell, run at one batch size: pyarrow's default layout, or sorted segments."""
        return self.tuning != "auto" or bool(self.sort_by)

    @property
    def is_row(self) -> bool:
        return self.format in ("json", "avro")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "format": self.format,
            "codec": self.codec,
            "per_record": self.per_record,
            "tuning": self.tuning,
            "sort_by": self.sort_by,
        }


def rows_for(dataset: Dataset, fmt: str) -> list[dict[str, Any]]:
    """The records as a producer application holds them before serializing to ``fmt``.

    Avro: Python values as fastavro takes them (``datetime`` for timestamps). JSON: timestamps
    as integer microseconds since the epoch (the Avro ``timestamp-micros`` value), since JSON
    has no timestamp type.
    """
    table = dataset.table
    if fmt == "json":
        for i, field in enumerate(table.schema):
            if pa.types.is_timestamp(field.type):
                table = table.set_column(i, field.name, table.column(i).cast(pa.int64()))
    return list(table.to_pylist(maps_as_pydicts="strict"))  # maps as dicts, as applications hold them


def serialize(dataset: Dataset, fmt: str, rows: list[dict[str, Any]]) -> list[bytes]:
    """One Kafka value per record.

    Avro is framed as Confluent's serializers frame it: magic byte 0, the 4-byte big-endian
    schema id, then the schemaless Avro body. JSON is compact UTF-8 text with no prefix.
    Raises ``ValueError`` for a format that is not a row format.
    """
    if fmt == "avro":
        schema = fastavro.parse_schema(dataset.avro_schema)
        prefix = struct.pack(">bI", _MAGIC, dataset.schema_id)
        out = []
        buf = io.BytesIO()
        write = fastavro.schemaless_writer
        for row in rows:
            buf.seek(0)
            buf.truncate()
            write(buf, schema, row)
            out.append(prefix + buf.getvalue())
        return out
    if fmt == "json":
        dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
        return [dumps(row).encode() for row in rows]
    raise ValueError(f"{fmt!r} is not a row format")


def avro_decoder(dataset: Dataset) -> Callable[[bytes], dict[str, Any]]:
    """Decode one Confluent-framed Avro value; raises ``ValueError`` on a wrong magic byte or schema id."""
    schema = fastavro.parse_schema(dataset.avro_schema)
    expected = struct.pack(">bI", _MAGIC, dataset.schema_id)
    read = fastavro.schemaless_reader

    def decode(value: bytes) -> dict[str, Any]:
        if value[:5] != expected:
            raise ValueError(f"not Confluent Avro with schema id {dataset.schema_id}: prefix {value[:5]!r}")
        record = read(io.BytesIO(value[5:]), schema, None)
        if not isinstance(record, dict):
            raise ValueError(f"Avro value decodes to {type(record).__name__}, not a record")
        return record

    return decode


def decode_values(dataset: Dataset, fmt: str) -> Callable[[bytes], dict[str, Any]]:
    """The per-record decoder a plain consumer of ``fmt`` runs."""
    if fmt == "avro":
        return avro_decoder(dataset)
    if fmt == "json":
        loads: Callable[[bytes], dict[str, Any]] = json.loads
        return loads
    raise ValueError(f"{fmt!r} is not a row format")


def row_producer_conf(bootstrap: str, codec: str, batch_rows: int, message_max_bytes: int) -> dict[str, Any]:
    """A plain confluent-kafka producer whose record batches hold ``batch_rows`` records."""
    return {
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "batch.num.messages": batch_rows,
        "batch.size": 2**31 - 1,
        "message.max.bytes": message_max_bytes,
        "linger.ms": _LINGER_MS,
        "queue.buffering.max.messages": max(100_000, 4 * batch_rows),
        "queue.buffering.max.kbytes": 2**21,
        "allow.auto.create.topics": False,
    }


def parka_producer_conf(
    bootstrap: str, codec: str, batch_rows: int, message_max_bytes: int, *, tuning: str = "auto", sort_by: str = ""
) -> dict[str, Any]:
    """A ``ParquetProducer`` cutting segments of ``batch_rows`` records."""
    return {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": codec,
        "columnar.encoding.tuning": tuning,
        "columnar.sort.by": sort_by,
        "columnar.batch.records": batch_rows,
        "message.max.bytes": message_max_bytes,
        # produce() per record: cut at the record count, not by time
        "linger.ms": _LINGER_MS,
        "allow.auto.create.topics": False,
    }
