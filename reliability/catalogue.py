"""The data the suite produces, and the bad inputs it sends.

Good records are :data:`EVENTS` rows with unique ids, so a table's ids tell what is lost or
duplicated. Bad inputs come in three sorts:

* :data:`RAW_INPUTS`: Kafka messages that are not segments parka can land (a truncated segment
  and random bytes, each with and without the producer's ``parka.crc32``,
  random bytes with parka headers, valid Parquet of another schema, lying headers, plain JSON,
  tombstones, ...). Each must become one dead-letter row (with ``--dlq-table``) or stop
  ingestion with an error naming topic, partition and offset (without). Ids inside them are
  above :data:`FOREIGN_IDS`, so one that landed by mistake shows as unexpected.
* :data:`DATA_INPUTS`: valid but unusual segments (one very large segment, huge strings): they
  must land whole, exactly once.
* :data:`PRODUCER_INPUTS`: what cannot enter the topic at all (a segment above the topic's
  ``max.message.bytes``, a record above the segment limit): the producer must report it to the
  record's delivery callback with the topic named.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from parka.schema import schema_fingerprint
from parka.segment import CRC_HEADER, RECORDS_HEADER, VERSION_HEADER, encode_segment

__all__ = [
    "BAD_IDS",
    "DATA_INPUTS",
    "EVENTS",
    "EVENTS_VERSIONS",
    "PRODUCER_INPUTS",
    "RAW_INPUTS",
    "TOPIC_MAX_MESSAGE_BYTES",
    "BadInput",
    "events",
    "evolved_events",
    "random_text",
]

EVENTS = pa.schema(
    [
        ("id", pa.int64(), False),
        ("device", pa.string(), False),
        ("value", pa.float64()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("note", pa.string()),
    ]
)
FINGERPRINT = schema_fingerprint(EVENTS)
BAD_IDS = 10**12  # ids inside bad messages start here: never acknowledged as records
FOREIGN_IDS = -(10**9)  # rows another writer appends directly have ids below 0
# Every suite topic is created with this limit (it overrides the broker's), so "oversized" means
# the same on any broker.
TOPIC_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

Headers = list[tuple[str, str | bytes | None]] | None


def events(ids: Sequence[int], *, note: Sequence[str | None] | None = None) -> pa.Table:
    return pa.table(
        {
            "id": list(ids),
            "device": [f"d{i % 50}" for i in ids],
            "value": [None if i % 11 == 0 else i * 0.5 for i in ids],
            "at": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us", tz="UTC")),
            "note": list(note) if note is not None else [None] * len(ids),
        },
        schema=EVENTS,
    )


# The producer's schema as it evolves in the schema-evolution scenario: v1 is EVENTS; v2 adds an
# ``origin`` struct column; v3 adds a field inside it and a list-of-structs column.
EVENTS_VERSIONS = (
    EVENTS,
    EVENTS.append(pa.field("origin", pa.struct([("site", pa.string())]))),
    EVENTS.append(pa.field("origin", pa.struct([("site", pa.string()), ("rack", pa.int32())]))).append(
        pa.field("readings", pa.list_(pa.struct([("k", pa.string()), ("v", pa.float64())])))
    ),
)


def evolved_events(ids: Sequence[int], version: int) -> pa.Table:
    """:func:`events` in schema ``EVENTS_VERSIONS[version]`` (its new fields filled)."""
    table = events(ids)
    if version == 0:
        return table
    schema = EVENTS_VERSIONS[version]
    origin = [{"site": f"s{i % 3}", "rack": i % 9} for i in ids]
    readings = [[{"k": "t", "v": i / 4}] * (i % 3) for i in ids]
    extra = {"origin": origin, "readings": readings}
    columns = {
        f.name: table[f.name] if f.name in table.column_names else pa.array(extra[f.name], f.type) for f in schema
    }
    return pa.table(columns, schema=schema)


def random_text(rng: random.Random, size: int) -> str:
    """``size`` characters zstd cannot shrink much (6 bits of entropy per character)."""
    return "".join(rng.choices(string.ascii_letters + string.digits + "+/", k=size))


@dataclass(frozen=True)
class BadInput:
    """One kind of bad input and the answer it must get.

    ``error`` and ``fragment``: the error class and a phrase the dead-letter row's ``error`` and
    the error of ``parka ingest`` without a dead-letter table must hold (``RAW_INPUTS``).
    """

    kind: str
    description: str
    error: str = ""
    fragment: str = ""
    build: Callable[[random.Random, int], tuple[bytes | None, Headers]] | None = None


def _segment(table: pa.Table, fingerprint: str = FINGERPRINT) -> tuple[bytes, list[tuple[str, str | bytes | None]]]:
    seg = encode_segment(table, codec="zstd", fingerprint=fingerprint)
    return seg.value, list(seg.headers)


def _replace(headers: list[tuple[str, str | bytes | None]], name: str, value: bytes) -> Headers:
    return [(k, value if k == name else v) for k, v in headers]


def _good(rng: random.Random, n: int) -> tuple[bytes, list[tuple[str, str | bytes | None]]]:
    return _segment(events(range(BAD_IDS + n * 100, BAD_IDS + n * 100 + rng.randint(5, 60))))


def _truncated(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    value, headers = _good(rng, n)
    return value[: rng.randint(1, len(value) - 1)], headers


def _random_bytes(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    _, headers = _good(rng, n)
    return rng.randbytes(rng.randint(16, 4096)), headers


def _without_crc(
    build: Callable[[random.Random, int], tuple[bytes | None, Headers]],
) -> Callable[[random.Random, int], tuple[bytes | None, Headers]]:
    """The same bad value from a producer that writes no ``parka.crc32`` (another client of the
    format): only the Parquet reader can tell then."""

    def without(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
        value, headers = build(rng, n)
        return value, [(k, v) for k, v in headers or [] if k != CRC_HEADER]

    return without


def _other_schema(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    table = events(range(BAD_IDS + n * 100, BAD_IDS + n * 100 + 10))
    table = table.set_column(0, "id", pa.array([f"id-{i}" for i in table["id"].to_pylist()]))
    return _segment(table, schema_fingerprint(table.schema))


def _extra_column(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    table = events(range(BAD_IDS + n * 100, BAD_IDS + n * 100 + 10))
    table = table.append_column("extra", pa.array([rng.random() for _ in range(10)]))
    return _segment(table, schema_fingerprint(table.schema))


def _lying_count(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    value, headers = _good(rng, n)
    claimed = rng.randint(1, 50) + int(dict(headers)[RECORDS_HEADER] or 0)
    return value, _replace(headers, RECORDS_HEADER, str(claimed).encode())


def _newer_version(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    value, headers = _good(rng, n)
    return value, _replace(headers, VERSION_HEADER, b"2")


def _garbled_count(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    value, headers = _good(rng, n)
    return value, _replace(headers, RECORDS_HEADER, b"many")


def _json(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    return f'{{"id": {BAD_IDS + n}, "device": "d1", "value": {rng.random()}}}'.encode(), None


def _tombstone(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    return None, None


def _tombstone_with_headers(rng: random.Random, n: int) -> tuple[bytes | None, Headers]:
    return None, _good(rng, n)[1]


RAW_INPUTS = (
    BadInput("truncated", "truncated segment", "SegmentDecodeError", "but 'parka.crc32' says", _truncated),
    BadInput(
        "random-bytes",
        "random bytes with parka headers",
        "SegmentDecodeError",
        "but 'parka.crc32' says",
        _random_bytes,
    ),
    BadInput(
        "truncated-no-crc",
        "truncated segment, no parka.crc32 header",
        "SegmentDecodeError",
        "not a readable Parquet file",
        _without_crc(_truncated),
    ),
    BadInput(
        "random-bytes-no-crc",
        "random bytes with parka headers but no parka.crc32",
        "SegmentDecodeError",
        "not a readable Parquet file",
        _without_crc(_random_bytes),
    ),
    BadInput(
        "other-schema",
        "valid Parquet of another schema (id as string)",
        "SchemaMismatchError",
        "column 'id' is string in the segment but int64 in the table",
        _other_schema,
    ),
    BadInput(
        "extra-column",
        "valid Parquet with a column the table lacks",
        "SchemaMismatchError",
        "--schema-evolution merge",
        _extra_column,
    ),
    BadInput(
        "lying-count",
        "headers that lie about the record count",
        "SegmentDecodeError",
        "the parka.records header says",
        _lying_count,
    ),
    BadInput(
        "newer-version",
        "a newer envelope version (parka.version 2)",
        "SegmentDecodeError",
        "upgrade parka",
        _newer_version,
    ),
    BadInput(
        "garbled-header",
        "a garbled header (parka.records: many)",
        "SegmentDecodeError",
        "malformed 'parka.records' header",
        _garbled_count,
    ),
    BadInput("json", "a plain JSON message", "SegmentError", "not a parka segment", _json),
    BadInput("tombstone", "a tombstone (value None, no headers)", "SegmentError", "not a parka segment", _tombstone),
    BadInput(
        "tombstone-headers",
        "a tombstone with parka headers",
        "SegmentDecodeError",
        "segment has no value",
        _tombstone_with_headers,
    ),
)

DATA_INPUTS = (
    BadInput("large-segment", "one large segment (200,000 records in one message)"),
    BadInput("huge-strings", "huge strings (3 records of 900,000 characters)"),
)

PRODUCER_INPUTS = (
    BadInput("oversized", "a segment above the topic's max.message.bytes (about 6 MB)"),
    BadInput("record-too-large", "one record above the segment limit (a 6,000,000-character string)"),
)


def data_input(kind: str, rng: random.Random, first_id: int) -> pa.Table:
    """The table a :data:`DATA_INPUTS` kind sends (ids from ``first_id``)."""
    if kind == "large-segment":
        return events(range(first_id, first_id + 200_000))
    if kind == "huge-strings":
        return events(range(first_id, first_id + 3), note=[random_text(rng, 900_000) for _ in range(3)])
    raise ValueError(kind)
