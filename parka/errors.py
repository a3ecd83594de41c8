"""parka's exceptions: one root, a few subclasses that carry the context a caller needs.

::

    ParkaError
    ├── ConfigError            a config key has a bad value, is unknown, or contradicts another
    ├── SchemaError            a schema parka cannot use (names the field)
    │   └── SchemaMismatchError  a segment schema the target (table, topic) cannot take
    ├── RecordError            a record does not match its topic's schema (names topic and field)
    │   ├── RecordTypeError      a value, key or headers of a type produce() never takes (also a
    │   │                        TypeError, as confluent-kafka raises for the same mistake)
    │   └── RecordTooLargeError  one record alone exceeds the segment byte limit
    ├── SegmentError           a Kafka message that is not a readable parka segment
    │   └── SegmentDecodeError   header or Parquet bytes are corrupt; keeps the raw bytes
    ├── KafkaClientError       the Kafka client reported an error (delivery, consume, commit)
    ├── RegistryError          the schema registry refused a request or could not be reached
    ├── BlockedError           a run-once cannot start: broker unreachable, topic unknown, Kafka
    │                          credentials refused, table location unusable (``blocker`` says which)
    └── CommitError            a Delta commit (or a write under the table) failed
        ├── CommitConflict       another commit won: raised by a Delta engine for the committer
        │                        to re-read and decide again, and by the committer when that
        │                        kept failing
        └── NoTableError         a compaction found no table where it was sent

Errors that concern one Kafka message keep ``topic``, ``partition``, ``offset`` and the raw
``value`` so that a dead-letter path can store exactly what arrived.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BlockedError",
    "Blocker",
    "CommitConflict",
    "CommitError",
    "ConfigError",
    "KafkaClientError",
    "MissingExtraError",
    "NoTableError",
    "ParkaError",
    "RecordError",
    "RecordTooLargeError",
    "RecordTypeError",
    "RegistryError",
    "SchemaError",
    "SchemaMismatchError",
    "SegmentDecodeError",
    "SegmentError",
    "one_line",
]


class ParkaError(Exception):
    """Root of every error parka raises on purpose."""


class ConfigError(ParkaError, ValueError):
    """A configuration value is invalid.

    ``key`` is the offending key as the user spelled it, ``value`` what was given and
    ``allowed`` a short description of what would have been accepted.
    """

    def __init__(self, key: str, value: Any, allowed: str, *, reason: str | None = None) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        detail = f"; {reason}" if reason else ""
        super().__init__(f"invalid value {value!r} for '{key}'{detail}; allowed: {allowed}")


class SchemaError(ParkaError, ValueError):
    """A schema parka cannot convert or use; ``field`` is the dotted path of the culprit."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        prefix = f"field '{field}': " if field else ""
        super().__init__(prefix + message)


class SchemaMismatchError(SchemaError):
    """A segment's schema is not one the target (a Delta table, a topic's schema) can take.

    When the segment is known, the raw message is kept as in :class:`SegmentError`: ``value``,
    ``headers``, ``topic``, ``partition`` and ``offset`` (each ``None`` when not known).
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        value: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.value = value
        self.headers = headers
        self.topic = topic
        self.partition = partition
        self.offset = offset
        where = f" at {topic}[{partition}]@{offset}" if topic is not None else ""
        super().__init__(message + where, field=field)


class RecordError(ParkaError, ValueError):
    """A record does not match the schema of its topic.

    ``topic`` and ``field`` (dotted path, ``None`` when the record as a whole is wrong) say where.

    When it reaches a delivery callback as ``err`` it also answers confluent-kafka's
    ``KafkaError`` accessors (``code()``, ``name()``, ``str()``, ``fatal()``, ``retriable()``,
    ``txn_requires_abort()``), with librdkafka's code for a value that cannot be serialized
    (``_VALUE_SERIALIZATION``, -161), so callbacks written for confluent-kafka keep working.
    """

    kafka_code = -161  # librdkafka RD_KAFKA_RESP_ERR__VALUE_SERIALIZATION
    kafka_name = "_VALUE_SERIALIZATION"

    def __init__(self, message: str, *, topic: str | None = None, field: str | None = None) -> None:
        self.reason = message
        self.topic = topic
        self.field = field
        where = []
        if topic is not None:
            where.append(f"topic '{topic}'")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)

    def with_topic(self, topic: str) -> RecordError:
        """The same error (same class, field and reason) attributed to ``topic``."""
        return type(self)(self.reason, topic=topic, field=self.field)

    def code(self) -> int:
        return self.kafka_code

    def name(self) -> str:
        return self.kafka_name

    def str(self) -> str:
        return super().__str__()

    def fatal(self) -> bool:
        return False

    def retriable(self) -> bool:
        return False

    def txn_requires_abort(self) -> bool:
        return False


class RecordTypeError(RecordError, TypeError):
    """``produce()`` was given a value, key or headers of a type it never takes (bytes where a
    columnar topic wants a record mapping, a key that is not bytes or str, ...). A ``TypeError`` too,
    since confluent-kafka raises ``TypeError`` for those mistakes."""


class RecordTooLargeError(RecordError):
    """A single record encodes to more bytes than ``columnar.batch.bytes`` allows."""

    kafka_code = 10  # Kafka MSG_SIZE_TOO_LARGE
    kafka_name = "MSG_SIZE_TOO_LARGE"


class SegmentError(ParkaError):
    """A Kafka message that is not a usable parka segment.

    Keeps the raw message so nothing is lost: ``value`` (bytes or ``None``), ``headers``,
    ``topic``, ``partition`` and ``offset`` (``None`` when not known).
    """

    def __init__(
        self,
        message: str,
        *,
        value: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.value = value
        self.headers = headers
        self.topic = topic
        self.partition = partition
        self.offset = offset
        where = f" at {topic}[{partition}]@{offset}" if topic is not None else ""
        super().__init__(message + where)


class SegmentDecodeError(SegmentError):
    """The segment's headers or its Parquet bytes could not be decoded."""


class RegistryError(ParkaError):
    """The schema registry refused a request (unknown subject or id, incompatible schema) or could
    not be reached. ``subject`` and ``schema_id`` name what was asked for, when known;
    ``http_status`` is the registry's answer to a refusal (``None``: it could not be reached)."""

    def __init__(
        self, message: str, *, subject: str | None = None, schema_id: int | None = None, http_status: int | None = None
    ) -> None:
        self.subject = subject
        self.schema_id = schema_id
        self.http_status = http_status
        super().__init__(message)


@dataclass(frozen=True)
class Blocker:
    """A cause that keeps a run from starting or going on. ``key`` names its kind (``broker``,
    ``topic``, ``kafka-auth``, ``table``); ``message`` is the one line that names it (the
    address, the topic, the path); ``configuration``: only a change of configuration, rights or
    infrastructure clears it (a run-once exits with the configuration code,
    :data:`parka.ops.health.EXIT_CONFIG`), else it is an outage that may clear on its own (exit
    :data:`parka.ops.health.EXIT_UNREACHABLE` once the timeout is spent)."""

    key: str
    message: str
    configuration: bool


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_FRAME = re.compile(r"\s*(at [\w$.<>/]+\(.*\)|\.\.\. \d+ more)\s*$")  # a Java stack frame


def one_line(text: object, *, limit: int = 600) -> str:
    """``text`` (an exception or a message) as one line: ANSI colour codes removed (delta-rs and
    object_store colour their error chains), Java stack frames dropped (a Py4J error's text
    keeps its ``Caused by:`` lines), lines joined with ``: ``, repeated whitespace folded, cut
    at ``limit`` characters."""
    plain = _ANSI.sub("", str(text))
    parts = [" ".join(line.split()).removeprefix(": ") for line in plain.splitlines() if not _FRAME.match(line)]
    joined = ""
    for part in filter(None, parts):
        joined += (" " if joined.endswith(":") else ": " if joined else "") + part
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


class BlockedError(ParkaError):
    """Something outside parka keeps a run from starting: ``blocker`` (a :class:`Blocker`) names
    it and its one-line message; whether it is one of configuration decides the exit code."""

    def __init__(self, blocker: Blocker) -> None:
        self.blocker = blocker
        super().__init__(blocker.message)


class MissingExtraError(ParkaError, ImportError):
    """An optional part of parka was used without its extra installed; ``extra`` names it,
    ``missing`` the modules that were not found and ``install`` the command that adds the extra
    (``parka.extras.install_command``)."""

    def __init__(self, extra: str, missing: list[str], needed_by: str, install: str) -> None:
        self.extra = extra
        self.missing = missing
        self.install = install
        super().__init__(f"{needed_by} needs parka's '{extra}' extra ({', '.join(missing)} not installed): {install}")


class KafkaClientError(ParkaError):
    """The Kafka client reported an error; ``kafka_error`` is the client's own error object."""

    def __init__(self, message: str, *, kafka_error: Any = None) -> None:
        self.kafka_error = kafka_error
        super().__init__(message)


class CommitError(ParkaError):
    """A Delta commit failed for a reason other than a retryable conflict."""


class NoTableError(CommitError):
    """No table at the location a compaction (``parka optimize``, background compaction) was
    given: for ``parka optimize`` an error, for a daemon's background compaction nothing to do yet
    (ingestion creates the table with its first commit)."""


class CommitConflict(CommitError):
    """Another commit landed on the table after ``read_version`` (the version this one read).

    A Delta engine raises it so that the committer re-reads the table's ``txn`` versions and
    decides again; the committer raises it when conflicts did not resolve within its attempts.
    """

    def __init__(self, message: str, *, read_version: int | None = None) -> None:
        self.read_version = read_version
        super().__init__(message)
