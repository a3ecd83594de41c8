"""The segment wire format: one Arrow table as one standalone Parquet file in one Kafka message.

A segment's value is a complete Parquet file (footer included, Arrow schema stored), so any Parquet
reader can open it, and it can be added to a Delta table as a data file without re-encoding.
Kafka headers describe it (envelope version 1):

====================  =====================  ==================================================
header                value (ASCII)          meaning
====================  =====================  ==================================================
``parka.format``      ``parquet``            marks the message as a segment (see :func:`is_segment`)
``parka.version``     ``1``                  envelope version
``parka.codec``       ``none`` ``snappy``    Parquet compression codec (informational: the file
                      ``gzip`` ``lz4``       says it too; ``lz4`` is Parquet's ``LZ4_RAW``)
                      ``zstd``
``parka.records``     decimal count          number of rows in the Parquet file
``parka.schema``      16 hex digits          :func:`parka.schema.schema_fingerprint` of the user
                                             columns (reserved columns excluded)
``parka.crc32``       8 hex digits           CRC-32 (zlib's) of the value; optional (parka's
                                             producer writes it), checked by every reader
                                             when present
``parka.schema.id``   decimal id             optional: the schema registry's id of the Avro
                                             schema the segment was written with (a producer
                                             with ``set_schema(..., subject=...)``); see
                                             :mod:`parka.registry`
====================  =====================  ==================================================

Per-record Kafka metadata travels as reserved columns after the user columns, each present only
when at least one record of the segment has a value: ``__parka_key`` (binary),
``__parka_timestamp`` (int64, milliseconds since the epoch, like Kafka timestamps) and
``__parka_headers`` (list of ``struct<key: string, value: binary>``).

Versioning: a reader rejects a version newer than it knows (:class:`SegmentDecodeError`).
Adding a header or a codec value does not change the version; changing the meaning of a header,
the payload format or the reserved columns does. Other headers are the producer's own and are
carried untouched; names starting with ``parka.`` are reserved.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parka._reserved import (
    HEADERS_COLUMN,
    KEY_COLUMN,
    RESERVED_FIELDS,
    TIMESTAMP_COLUMN,
    HeaderValue,
    RecordMeta,
    build_segment_table,
    reserved_problem,
    split_reserved,
)
from parka.encoding import AUTO_ZSTD_LEVEL, DEFAULT_TUNING, TUNINGS, ColumnEncodings, choose_encodings
from parka.encryption import EncryptionSettings, KmsSettings, decryption_properties, encryption_properties
from parka.errors import ConfigError, SchemaMismatchError, SegmentDecodeError, SegmentError
from parka.schema import RESERVED_PREFIX, schema_fingerprint

__all__ = [
    "CODECS",
    "CODEC_HEADER",
    "CRC_HEADER",
    "FORMAT_HEADER",
    "HEADERS_COLUMN",
    "KEY_COLUMN",
    "RECORDS_HEADER",
    "RESERVED_FIELDS",
    "SCHEMA_HEADER",
    "SCHEMA_ID_HEADER",
    "TIMESTAMP_COLUMN",
    "VERSION",
    "VERSION_HEADER",
    "RecordMeta",
    "Segment",
    "SegmentInfo",
    "build_segment_table",
    "decode_segment",
    "encode_segment",
    "is_segment",
    "read_segment_info",
    "split_reserved",
]

FORMAT_HEADER = "parka.format"
VERSION_HEADER = "parka.version"
CODEC_HEADER = "parka.codec"
RECORDS_HEADER = "parka.records"
SCHEMA_HEADER = "parka.schema"
CRC_HEADER = "parka.crc32"
SCHEMA_ID_HEADER = "parka.schema.id"
FORMAT = b"parquet"
VERSION = 1

# parka codec name -> pyarrow's Parquet compression name ('LZ4' is written as LZ4_RAW)
CODECS: dict[str, str] = {"none": "NONE", "snappy": "SNAPPY", "gzip": "GZIP", "lz4": "LZ4", "zstd": "ZSTD"}

_FORMAT_KEYS = frozenset({FORMAT_HEADER, FORMAT_HEADER.encode()})
_FINGERPRINT = re.compile(rb"[0-9a-f]{16}")
_CRC = re.compile(rb"[0-9a-f]{8}")

HeadersInput = Sequence[tuple[str | bytes, HeaderValue]] | Mapping[str, HeaderValue] | None


@dataclass(frozen=True)
class Segment:
    """An encoded segment: the Kafka message value and headers."""

    value: bytes
    headers: list[tuple[str, bytes]]
    num_records: int


@dataclass(frozen=True)
class SegmentInfo:
    """What a segment's headers say about it."""

    version: int
    codec: str
    num_records: int
    fingerprint: str
    crc32: int | None = None  # of the value, when the producer wrote ``parka.crc32``


def encode_segment(
    table: pa.Table,
    *,
    codec: str,
    fingerprint: str,
    compression_level: int | None = None,
    tuning: str = DEFAULT_TUNING,
    layout: ColumnEncodings | None = None,
    extra_headers: Sequence[tuple[str, bytes]] = (),
    encryption: EncryptionSettings | None = None,
    schema_id: int | None = None,
) -> Segment:
    """Encode ``table`` (user columns, then any reserved ones) as one Parquet file with its headers.

    ``fingerprint`` is :func:`parka.schema.schema_fingerprint` of the user schema. ``tuning``
    ``auto`` picks each column's encoding from the table (:func:`parka.encoding.choose_encodings`)
    and, for ``zstd`` without a ``compression_level``, level 2; ``none`` writes pyarrow's
    defaults (a dictionary for every column, zstd level 1). Either way any Parquet reader reads it.
    With ``auto``, ``layout`` is a choice made earlier for a table of the same schema
    (:class:`parka.encoding.LayoutCache`), used instead of judging ``table``. With
    ``encryption``, its columns are encrypted with fresh data keys (:mod:`parka.encryption`).
    ``schema_id``: the schema registry's id of the writer schema, sent as ``parka.schema.id``.

    Raises:
        ConfigError: unknown ``codec`` or ``tuning``, or a ``compression_level`` the codec does not take.
        ValueError: a malformed fingerprint, a ``parka.*`` name among ``extra_headers``, or a
            ``__parka_*`` column that is not a reserved column of the right type.
        SegmentError: Arrow could not write the table, a column to encrypt is not in it, or the
            KMS refused to wrap a key.
    """
    parquet_codec = _check_encode(table, codec, compression_level, tuning, fingerprint, extra_headers, encryption)
    options: dict[str, Any] = {}
    if tuning == "auto":
        options = (layout or choose_encodings(table)).writer_options()
        if codec == "zstd" and compression_level is None:
            compression_level = AUTO_ZSTD_LEVEL
    value = _write_parquet(table, parquet_codec, compression_level, options, encryption)
    headers = [
        (FORMAT_HEADER, FORMAT),
        (VERSION_HEADER, str(VERSION).encode()),
        (CODEC_HEADER, codec.encode()),
        (RECORDS_HEADER, str(table.num_rows).encode()),
        (SCHEMA_HEADER, fingerprint.encode()),
        # The ingestion path lands the bytes without reading their pages: this is what tells
        # it a segment was altered after it was written (Kafka's own batch CRC covers only
        # the way from the producer's client to the broker and back).
        (CRC_HEADER, f"{zlib.crc32(value):08x}".encode()),
        *([] if schema_id is None else [(SCHEMA_ID_HEADER, b"%d" % schema_id)]),
        *extra_headers,
    ]
    return Segment(value=value, headers=headers, num_records=table.num_rows)


def _check_encode(
    table: pa.Table,
    codec: str,
    compression_level: int | None,
    tuning: str,
    fingerprint: str,
    extra_headers: Sequence[tuple[str, bytes]],
    encryption: EncryptionSettings | None,
) -> str:
    """:func:`encode_segment`'s checks of its arguments; returns pyarrow's name of the codec.

    Raises as :func:`encode_segment` does, but never :class:`SegmentError` for Arrow's writer.
    """
    parquet_codec = _check_codec(codec, compression_level)
    if tuning not in TUNINGS:
        raise ConfigError("tuning", tuning, " | ".join(TUNINGS))
    if not _FINGERPRINT.fullmatch(fingerprint.encode()):
        raise ValueError(f"fingerprint must be 16 lowercase hex digits, got {fingerprint!r}")
    for name, _ in extra_headers:
        if name.startswith("parka."):
            raise ValueError(f"header name {name!r} is reserved for parka's envelope")
    problem = reserved_problem(table.schema)
    if problem:
        raise ValueError(problem)
    if encryption is not None:
        missing = _missing_columns(table.schema, encryption.columns)
        if missing:
            raise SegmentError(
                f"columnar.encryption.columns names {', '.join(missing)}, not a column of the segment "
                f"(columns: {', '.join(table.column_names)})"
            )
    return parquet_codec


def _write_parquet(
    table: pa.Table,
    parquet_codec: str,
    compression_level: int | None,
    options: dict[str, Any],
    encryption: EncryptionSettings | None,
) -> bytes:
    """``table`` as one standalone Parquet file, as every reader of a segment expects it.

    Raises:
        SegmentError: Arrow could not write the table, or the KMS refused to wrap a key.
    """
    sink = pa.BufferOutputStream()
    try:
        if encryption is not None:
            options = {**options, "encryption_properties": encryption_properties(encryption)}
        pq.write_table(
            table,
            sink,
            compression=parquet_codec,
            compression_level=compression_level,
            # One row group: a segment is one Kafka message, read whole.
            row_group_size=max(table.num_rows, 1),
            # Logical types (TIMESTAMP(MICROS), DATE, DECIMAL) that Spark 3 and delta-rs read; no INT96.
            version="2.6",
            use_deprecated_int96_timestamps=False,
            data_page_version="1.0",
            use_compliant_nested_type=True,
            write_statistics=True,
            store_schema=True,
            # CRC32 per page, so a corrupt uncompressed page fails to decode instead of reading wrong.
            write_page_checksum=True,
            **options,
        )
    except (pa.ArrowException, OSError, KeyError) as exc:
        raise SegmentError(f"cannot encode segment as Parquet: {exc}") from exc
    value: bytes = sink.getvalue().to_pybytes()
    return value


def _missing_columns(schema: pa.Schema, columns: Sequence[str]) -> list[str]:
    """Which of ``columns`` (dotted paths) name no column or struct field of ``schema``."""
    paths: set[str] = set()

    def walk(f: pa.Field, prefix: str) -> None:
        path = prefix + f.name
        paths.add(path)
        if pa.types.is_struct(f.type):
            for child in f.type:
                walk(child, path + ".")

    for f in schema:
        walk(f, "")
    return [c for c in columns if c not in paths]


def _check_codec(codec: str, level: int | None) -> str:
    if codec not in CODECS:
        raise ConfigError("codec", codec, ", ".join(CODECS))
    if level is None:
        return CODECS[codec]
    if codec == "none" or not pa.Codec.supports_compression_level(codec):
        raise ConfigError("compression_level", level, "none (no level)", reason=f"codec '{codec}' has no levels")
    low, high = pa.Codec.minimum_compression_level(codec), pa.Codec.maximum_compression_level(codec)
    if isinstance(level, bool) or not isinstance(level, int) or not low <= level <= high:
        raise ConfigError("compression_level", level, f"an integer from {low} to {high} for '{codec}'")
    return CODECS[codec]


def is_segment(headers: HeadersInput) -> bool:
    """Whether a Kafka message with these headers is a parka segment (has a ``parka.format`` header)."""
    if not headers:
        return False
    if isinstance(headers, Mapping):
        return FORMAT_HEADER in headers
    return any(key in _FORMAT_KEYS for key, _ in headers)


def read_segment_info(
    headers: HeadersInput,
    *,
    value: bytes | None = None,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
) -> SegmentInfo:
    """Parse and check a segment's headers (the last one wins when a name repeats).

    With ``value``, its CRC-32 is checked against ``parka.crc32`` when the segment has one
    (parka's producer always writes it; segments from elsewhere may lack it). ``value`` and
    the coordinates also go into the error, so that it keeps the raw message.

    Raises:
        SegmentDecodeError: a ``parka.*`` header is missing or malformed, the format is not
            ``parquet``, the version is newer than this parka reads, or ``value`` is not the
            bytes ``parka.crc32`` was computed over.
    """
    raw = _normalize_headers(headers)
    found = {key: val for key, val in raw if key.startswith("parka.")}

    def fail(message: str) -> SegmentDecodeError:
        return SegmentDecodeError(message, value=value, headers=raw, topic=topic, partition=partition, offset=offset)

    if FORMAT_HEADER not in found:
        raise fail(f"not a parka segment: no '{FORMAT_HEADER}' header")
    if found[FORMAT_HEADER] != FORMAT:
        raise fail(f"unsupported segment format {found[FORMAT_HEADER]!r}; this parka reads 'parquet'")
    version = _parse_count(found.get(VERSION_HEADER))
    if version is None or version < 1:
        raise fail(f"missing or malformed '{VERSION_HEADER}' header: {found.get(VERSION_HEADER)!r}")
    if version > VERSION:
        raise fail(f"segment envelope version {version} is newer than version {VERSION}; upgrade parka")
    codec = found.get(CODEC_HEADER)
    if not codec or not codec.isascii():
        raise fail(f"missing or malformed '{CODEC_HEADER}' header: {codec!r}")
    num_records = _parse_count(found.get(RECORDS_HEADER))
    if num_records is None:
        raise fail(f"missing or malformed '{RECORDS_HEADER}' header: {found.get(RECORDS_HEADER)!r}")
    fingerprint = found.get(SCHEMA_HEADER)
    if fingerprint is None or not _FINGERPRINT.fullmatch(fingerprint):
        raise fail(f"missing or malformed '{SCHEMA_HEADER}' header: {fingerprint!r}")
    crc: int | None = None
    if CRC_HEADER in found:
        raw_crc = found[CRC_HEADER]
        if raw_crc is None or not _CRC.fullmatch(raw_crc):
            raise fail(f"malformed '{CRC_HEADER}' header (8 lowercase hex digits): {raw_crc!r}")
        crc = int(raw_crc, 16)
        if value is not None and zlib.crc32(value) != crc:
            raise fail(
                f"segment value ({len(value)} bytes) has CRC-32 {zlib.crc32(value):08x}, but '{CRC_HEADER}' "
                f"says {crc:08x}: the bytes changed after the producer wrote them"
            )
    return SegmentInfo(
        version=version, codec=codec.decode(), num_records=num_records, fingerprint=fingerprint.decode(), crc32=crc
    )


def _normalize_headers(headers: HeadersInput) -> list[tuple[str, bytes | None]]:
    """Headers as confluent-kafka gives them: ``(str, bytes | None)`` pairs, in order."""
    if not headers:
        return []
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for key, val in pairs:
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        out.append((name, val.encode() if isinstance(val, str) else (None if val is None else bytes(val))))
    return out


def _parse_count(raw: bytes | None) -> int | None:
    """A non-negative decimal ASCII integer, or ``None`` when absent or malformed."""
    if raw is None or not (0 < len(raw) <= 19) or not raw.isdigit():
        return None
    return int(raw)


def decode_segment(
    value: bytes | None,
    headers: HeadersInput = None,
    *,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    expected_schema: pa.Schema | None = None,
    kms: KmsSettings | None = None,
) -> pa.Table:
    """Read a segment's Parquet bytes into a table (user columns, then any reserved columns).

    With ``headers``, they are checked first (:func:`read_segment_info`) and the row count must
    match ``parka.records``; with ``headers=None`` only the bytes are read. With
    ``expected_schema``, the user columns must have exactly its names, order, types and
    nullability (metadata ignored). With ``kms``, encrypted segments are decrypted
    (:mod:`parka.encryption`); plaintext ones read as before.

    Raises:
        SegmentDecodeError: bad headers, bytes that are not a readable Parquet file (an
            encrypted one without ``kms`` or without its keys), a row count
            that differs from the header, or malformed reserved columns. It keeps ``value``,
            the headers and the coordinates.
        SchemaMismatchError: the user columns differ from ``expected_schema``; ``field`` names
            the first differing column, and the raw message is kept as above.
    """
    raw_headers = None if headers is None else _normalize_headers(headers)
    context: dict[str, Any] = {
        "value": value,
        "headers": raw_headers,
        "topic": topic,
        "partition": partition,
        "offset": offset,
    }
    info = None
    if headers is not None:
        info = read_segment_info(headers, value=value, topic=topic, partition=partition, offset=offset)
    if value is None:
        raise SegmentDecodeError("segment has no value (a tombstone?)", **context)
    try:
        reader = pa.BufferReader(pa.py_buffer(value))
        table = pq.ParquetFile(
            reader, page_checksum_verification=True, decryption_properties=decryption_properties(kms)
        ).read()
    except (pa.ArrowException, OSError, ValueError, TypeError, EOFError, KeyError) as exc:
        hint = ""
        if "ecrypt" in str(exc) or "ncrypt" in str(exc):
            hint = (
                " (an encrypted segment: configure its KMS with columnar.encryption.kms.*)"
                if kms is None
                else " (an encrypted segment the configured KMS has no key for)"
            )
        raise SegmentDecodeError(
            f"segment value ({len(value)} bytes) is not a readable Parquet file: {exc}{hint}", **context
        ) from exc
    if info is not None and table.num_rows != info.num_records:
        raise SegmentDecodeError(
            f"Parquet file holds {table.num_rows} rows but '{RECORDS_HEADER}' says {info.num_records}",
            **context,
        )
    problem = reserved_problem(table.schema)
    if problem:
        raise SegmentDecodeError(problem, **context)
    if expected_schema is not None:
        _check_expected(table.schema, expected_schema, context)
    return table


def _check_expected(actual: pa.Schema, expected: pa.Schema, context: dict[str, Any]) -> None:
    user = [f for f in actual if not f.name.startswith(RESERVED_PREFIX)]
    if schema_fingerprint(pa.schema(user)) == schema_fingerprint(expected):
        return
    for index in range(max(len(user), len(expected))):
        got = user[index] if index < len(user) else None
        want = expected.field(index) if index < len(expected) else None
        if got is None or want is None or _field_key(got) != _field_key(want):
            name = want.name if want is not None else got.name if got is not None else None
            raise SchemaMismatchError(
                f"segment column {index} is {_describe_field(got)}, expected {_describe_field(want)}",
                field=name,
                **context,
            )


def _field_key(field: pa.Field) -> str:
    return schema_fingerprint(pa.schema([field]))


def _describe_field(field: pa.Field | None) -> str:
    if field is None:
        return "absent"
    return f"'{field.name}' {field.type}{'' if field.nullable else ' not null'}"
