"""Typed, validated parka settings parsed once from a confluent-kafka style config dict.

Kafka users speak dotted keys, so that is what parka accepts:

==================================  ============================================  =========
key                                 values                                        default
==================================  ============================================  =========
``columnar.encoding``               ``none`` | ``parquet``                        ``none``
``columnar.encoding.compression``   ``none`` | ``snappy`` | ``gzip`` | ``lz4`` |   ``none``
                                    ``zstd``
``columnar.encoding.compression.    integer, codec-specific level                 codec's
level``
``columnar.batch.records``          integer >= 1: most records in one segment     ``10000``
``columnar.batch.bytes``            integer >= 1024: most bytes of one encoded     ``message.max.bytes``
                                    segment (must fit ``message.max.bytes``)      minus 16 KiB
``columnar.partition.by``           comma-separated columns or derived values     none
                                    (``day=date(ts)``, :mod:`parka.partitioning`):
                                    a segment never holds two values of them
``columnar.encoding.tuning``        ``auto`` | ``none``: per-column Parquet       ``auto``
                                    encodings (see :mod:`parka.encoding`), or
                                    pyarrow's defaults
``columnar.sort.by``                comma-separated column names: each segment's  none
                                    rows are sorted by them (stable)
``columnar.tombstone.order``        ``partition`` | ``key``: what a tombstone     ``partition``
                                    (``value=None``) waits for (below)
``columnar.metrics.registry``       a ``prometheus_client.CollectorRegistry``:    none
                                    the producer's ``parka_producer_*`` metrics
                                    go there (:mod:`parka.metrics`)
``linger.ms``                       a segment waits at most this long             ``100``
``partitioner``                     any of librdkafka's (see :mod:`parka.partitioner`)  ``consistent_random``
``columnar.encryption.*``           Parquet modular encryption of chosen columns   off
                                    (see :mod:`parka.encryption`)
==================================  ============================================  =========

``columnar.sort.by`` reorders the records within a segment (never across segments): a consumer
sees them, and their delivery reports give their indices, in the sorted order. Kafka's one
ordering promise survives it: records with the same Kafka key keep their order, because a segment
whose sort would swap two of them is left unsorted (:func:`parka.encoding.sort_order`); sort by
columns that are the same for all records of a key (the column the key is made from) and every
segment is sorted. Records without a key may move.

A tombstone (``produce(topic, None, key=k)``) is a plain Kafka message, not a row of a segment.
With ``columnar.tombstone.order=partition`` it keeps its place in the partition: the records
buffered for its partition are cut into a segment and sent first, so a stream with deletes
among its updates (a keyed table's changes) goes out in segments of the few records between two
tombstones. With ``key`` it keeps its place among the records of its own key, as
``columnar.sort.by`` does: the buffer is cut only when it holds a record with the same key, and
otherwise the tombstone goes ahead of the buffered records of other keys; segments stay full.
``parka ingest --upsert`` orders by key, so either serves it.

Every other key goes to the wrapped confluent-kafka client unchanged (TLS and SASL included).
Unknown ``columnar.*`` keys are rejected so a typo never goes unnoticed.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .encoding import DEFAULT_TUNING, TUNINGS
from .encryption import ENCRYPTION_PREFIX, EncryptionSettings, parse_encryption_config
from .errors import ConfigError
from .extras import install_command
from .partitioner import PARTITIONERS
from .partitioning import PartitionSpec, parse_partition_by
from .schema import RESERVED_PREFIX

__all__ = [
    "CODECS",
    "ENCODINGS",
    "PARTITIONERS",
    "TUNINGS",
    "ParkaConfigWarning",
    "ProducerSettings",
    "parse_producer_config",
    "is_s3",
    "storage_options_for",
]

ENCODINGS = ("none", "parquet")
TOMBSTONE_ORDERS = ("partition", "key")
CODECS = ("none", "snappy", "gzip", "lz4", "zstd")

_COLUMNAR_KEYS = frozenset(
    {
        "columnar.encoding",
        "columnar.encoding.compression",
        "columnar.encoding.compression.level",
        "columnar.batch.records",
        "columnar.batch.bytes",
        "columnar.partition.by",
        "columnar.encoding.tuning",
        "columnar.sort.by",
        "columnar.tombstone.order",
        "columnar.metrics.registry",
    }
)

# librdkafka's default message.max.bytes; a segment plus its headers and the record-batch
# framing must fit it, so parka's default leaves headroom.
_LIBRDKAFKA_MESSAGE_MAX_BYTES = 1_000_000
_SEGMENT_HEADROOM_BYTES = 16 * 1024
DEFAULT_BATCH_RECORDS = 10_000
DEFAULT_LINGER_MS = 100.0


class ParkaConfigWarning(UserWarning):
    """A setting parka accepts but that is probably not what the user wants."""


@dataclass(frozen=True)
class ProducerSettings:
    """What ``ParquetProducer`` needs to know, after validation."""

    encoding: str
    compression: str
    compression_level: int | None
    batch_records: int
    batch_bytes: int
    linger_ms: float
    partitioner: str
    partition_by: tuple[PartitionSpec, ...]
    tuning: str = DEFAULT_TUNING
    sort_by: tuple[str, ...] = ()
    metrics_registry: Any = field(default=None, compare=False, repr=False)
    encryption: EncryptionSettings | None = None
    tombstone_order: str = "partition"

    @property
    def columnar(self) -> bool:
        return self.encoding != "none"


def _choice(conf: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    raw = conf.get(key, default)
    if not isinstance(raw, str) or raw.lower() not in allowed:
        raise ConfigError(key, raw, " | ".join(allowed))
    return raw.lower()


def _int(conf: Mapping[str, Any], key: str, default: int | None, *, minimum: int) -> int | None:
    raw = conf.get(key, default)
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise ConfigError(key, raw, f"an integer >= {minimum}")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ConfigError(key, raw, f"an integer >= {minimum}") from None
    if value < minimum or (isinstance(raw, float) and raw != value):
        raise ConfigError(key, raw, f"an integer >= {minimum}")
    return value


def _float(conf: Mapping[str, Any], key: str, default: float, *, minimum: float) -> float:
    raw = conf.get(key, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(key, raw, f"a number >= {minimum}") from None
    if value < minimum or isinstance(raw, bool):
        raise ConfigError(key, raw, f"a number >= {minimum}")
    return value


def parse_producer_config(conf: Mapping[str, Any]) -> tuple[ProducerSettings, dict[str, Any]]:
    """Split ``conf`` into parka's settings and the config for the wrapped Kafka producer.

    The caller's mapping is never modified. Raises :class:`ConfigError` naming the key, the
    bad value and the allowed values, for unknown ``columnar.*`` keys and for contradictions
    (a segment limit larger than ``message.max.bytes``). Warns (:class:`ParkaConfigWarning`)
    when Kafka compression is explicitly stacked on columnar compression.
    """
    if not isinstance(conf, Mapping):
        raise ConfigError("conf", type(conf).__name__, "a dict of configuration keys")
    unknown = sorted(
        k for k in conf if k.startswith("columnar.") and k not in _COLUMNAR_KEYS and not k.startswith(ENCRYPTION_PREFIX)
    )
    if unknown:
        raise ConfigError(unknown[0], conf[unknown[0]], "known keys: " + ", ".join(sorted(_COLUMNAR_KEYS)))

    encoding = _choice(conf, "columnar.encoding", ENCODINGS, "none")
    compression = _choice(conf, "columnar.encoding.compression", CODECS, "none")
    level = _int(conf, "columnar.encoding.compression.level", None, minimum=-131072)
    # In columnar mode parka partitions records itself, exactly as librdkafka would with the same
    # setting (default consistent_random, as librdkafka's); with encoding none the wrapped client does.
    if encoding != "none":
        partitioner = _choice(conf, "partitioner", PARTITIONERS, "consistent_random")
    else:
        partitioner = str(conf.get("partitioner", "consistent_random"))

    batch_bytes, batch_records = _segment_limits(conf, encoding)
    partition_by, tuning, sort_by = _segment_layout(conf, encoding)

    registry = conf.get("columnar.metrics.registry")
    if registry is not None and not callable(getattr(registry, "register", None)):
        raise ConfigError(
            "columnar.metrics.registry",
            registry,
            f"a prometheus_client.CollectorRegistry (the 'metrics' extra: {install_command('metrics')})",
        )

    encryption = parse_encryption_config(conf)
    if encryption is not None and encoding == "none":
        raise ConfigError(
            "columnar.encryption.columns",
            conf.get("columnar.encryption.columns"),
            "no encryption settings",
            reason="columns are encrypted within Parquet segments, and columnar.encoding is none",
        )

    linger_ms = _float(conf, "linger.ms", DEFAULT_LINGER_MS, minimum=0.0)
    client = _client_conf(conf, encoding, compression)
    settings = ProducerSettings(
        encoding=encoding,
        compression=compression,
        compression_level=level,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        linger_ms=linger_ms,
        partitioner=partitioner,
        partition_by=partition_by,
        tuning=tuning,
        sort_by=sort_by,
        metrics_registry=registry,
        encryption=encryption,
        tombstone_order=_choice(conf, "columnar.tombstone.order", TOMBSTONE_ORDERS, "partition"),
    )
    return settings, client


def _segment_limits(conf: Mapping[str, Any], encoding: str) -> tuple[int, int]:
    """``columnar.batch.bytes`` and ``columnar.batch.records``, checked against ``message.max.bytes``."""
    # With encoding none no segment is ever made: message.max.bytes is librdkafka's alone to judge
    # (it takes values from 1000), and the segment limit derived from it is not checked.
    message_max = (
        _int(conf, "message.max.bytes", _LIBRDKAFKA_MESSAGE_MAX_BYTES, minimum=1000)
        if encoding != "none"
        else _LIBRDKAFKA_MESSAGE_MAX_BYTES
    )
    assert message_max is not None  # a default was given
    default_bytes = max(1024, message_max - _SEGMENT_HEADROOM_BYTES)
    batch_bytes = _int(conf, "columnar.batch.bytes", default_bytes, minimum=1024)
    batch_records = _int(conf, "columnar.batch.records", DEFAULT_BATCH_RECORDS, minimum=1)
    assert batch_bytes is not None and batch_records is not None
    if encoding != "none" and batch_bytes > message_max - 1024:
        raise ConfigError(
            "columnar.batch.bytes",
            conf.get("columnar.batch.bytes"),
            f"at most message.max.bytes - 1024 = {message_max - 1024}",
            reason="a segment is one Kafka message and must fit message.max.bytes with its headers",
        )
    return batch_bytes, batch_records


def _segment_layout(conf: Mapping[str, Any], encoding: str) -> tuple[tuple[PartitionSpec, ...], str, tuple[str, ...]]:
    """``columnar.partition.by``, ``columnar.encoding.tuning`` and ``columnar.sort.by``, checked."""
    raw_partition_by = conf.get("columnar.partition.by", "")
    if not isinstance(raw_partition_by, (str, list, tuple)):
        raise ConfigError(
            "columnar.partition.by", raw_partition_by, "comma-separated columns or name=date(col) style specs"
        )
    partition_by = parse_partition_by(raw_partition_by, key="columnar.partition.by")
    tuning = _choice(conf, "columnar.encoding.tuning", TUNINGS, DEFAULT_TUNING)
    sort_by = _columns(conf, "columnar.sort.by")
    if sort_by and encoding == "none":
        raise ConfigError(
            "columnar.sort.by",
            conf["columnar.sort.by"],
            "no sort columns",
            reason="rows are sorted within Parquet segments, and columnar.encoding is none",
        )
    reserved = [c for c in sort_by if c.startswith(RESERVED_PREFIX)]
    if reserved or len(set(sort_by)) != len(sort_by):
        raise ConfigError(
            "columnar.sort.by",
            conf["columnar.sort.by"],
            "distinct names of the schema's own columns",
            reason=f"'{reserved[0]}' is a reserved column" if reserved else "a column is named twice",
        )
    return partition_by, tuning, sort_by


def _client_conf(conf: Mapping[str, Any], encoding: str, compression: str) -> dict[str, Any]:
    """The wrapped Kafka producer's config: ``conf`` without ``columnar.*``, adjusted for segments."""
    client = {k: v for k, v in conf.items() if not k.startswith("columnar.")}
    if encoding != "none":
        # parka cuts segments itself; the wrapped client sends each one promptly.
        client["linger.ms"] = 5
        client.pop("partitioner", None)  # parka picks the partition explicitly
        if compression != "none":
            user_codec = str(conf.get("compression.type", conf.get("compression.codec", "none"))).lower()
            if "compression.type" in conf or "compression.codec" in conf:
                if user_codec != "none":
                    warnings.warn(
                        f"columnar.encoding.compression={compression} already compresses each segment; "
                        f"compression.type={user_codec} is applied on top as you asked (KIP-1008 "
                        "disables it by default: double compression costs CPU for little gain)",
                        ParkaConfigWarning,
                        stacklevel=4,  # the application's line that made the producer
                    )
            else:
                client["compression.type"] = "none"
    return client


def _columns(conf: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """Column names from a comma-separated string or a list; raises :class:`ConfigError` otherwise."""
    raw = conf.get(key, "")
    if not isinstance(raw, (str, list, tuple)):
        raise ConfigError(key, raw, "comma-separated column names")
    names = raw.split(",") if isinstance(raw, str) else list(raw)
    return tuple(str(n).strip() for n in names if str(n).strip())


# Delta's commit protocol needs "create this log file unless it exists" from the store. On S3
# delta-rs 1.x gets it from a conditional put (If-None-Match: *); DynamoDB locking is gone
# there (its option is ignored, with a logged error) and an "unsafe rename" waives the check.
_CONDITIONAL_PUT = "aws_conditional_put"
_UNSAFE = {
    "aws_s3_allow_unsafe_rename": "a commit may overwrite another worker's commit of the same version",
    "aws_s3_locking_provider": "delta-rs 1.x ignores it (DynamoDB locking was removed)",
}


def is_s3(table_uri: str) -> bool:
    """Whether ``table_uri`` is an S3 table (``s3://``, or delta-rs' alias ``s3a://``)."""
    return "://" in table_uri and table_uri.split("://", 1)[0].lower() in ("s3", "s3a")


def storage_options_for(table_uri: str, options: Mapping[str, str] | None) -> dict[str, str]:
    """The storage options delta-rs and parka's file layer get for ``table_uri``: ``options``
    as given, plus ``aws_conditional_put=etag`` for an ``s3://`` / ``s3a://`` table that names
    no ``aws_conditional_put``, so concurrent commits are safe by default (the store must honour
    ``If-None-Match: *``, as AWS S3, MinIO, R2 and s3proxy do).

    Idempotent: calling it on its own result returns an equal dict.

    Raises:
        ConfigError: an S3 configuration under which two workers could both commit the same
            table version: ``aws_conditional_put`` other than ``etag``, or
            ``aws_s3_allow_unsafe_rename=true`` or ``aws_s3_locking_provider`` (in the options
            or, as delta-rs also reads them, the environment in upper case).
    """
    out = {str(k): str(v) for k, v in (options or {}).items()}
    if not is_s3(table_uri):
        return out
    lower = {k.lower(): (k, v) for k, v in out.items()}
    for key, why in _UNSAFE.items():
        given_key, value = lower.get(key, (key.upper(), os.environ.get(key.upper(), "")))
        if value and not (key == "aws_s3_allow_unsafe_rename" and value.strip().lower() in ("false", "0")):
            raise ConfigError(
                given_key,
                value,
                f"leave it unset; parka makes concurrent S3 commits safe with {_CONDITIONAL_PUT}=etag",
                reason=why,
            )
    if _CONDITIONAL_PUT in lower:
        given_key, value = lower[_CONDITIONAL_PUT]
        if value.strip().lower() != "etag":
            raise ConfigError(
                given_key,
                value,
                "etag (or leave it unset: parka sets etag)",
                reason="without conditional puts two workers can both commit the same table version",
            )
    else:
        out[_CONDITIONAL_PUT] = "etag"
    return out
