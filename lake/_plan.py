"""Pure decisions of the ingestion: when to commit, how data files are named, whether a segment's
schema fits the table, and the committer's input (what a segment became, or why it was refused).
No Kafka, no Delta, no I/O: tested without either.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlparse

import pyarrow as pa

from parka.errors import ConfigError, SchemaMismatchError, SegmentError
from parka.evolution import Change, merge_schemas, nullable_within
from parka.partitioning import EXPRESSION_KEY, PartitionSpec, parse_partition_by, parse_spec
from parka.segment import HEADERS_COLUMN, KEY_COLUMN, TIMESTAMP_COLUMN

from ._log import DataFile

__all__ = [
    "RESERVED_COLUMNS",
    "app_txn_id",
    "dead_letter_txn_id",
    "default_app_id",
    "legacy_app_id",
    "table_identity",
    "CommitPolicy",
    "FileName",
    "Fit",
    "LandedSegment",
    "Refused",
    "Tombstone",
    "SchemaVerdict",
    "check_key_columns",
    "check_sequence_column",
    "check_partitioning",
    "check_schema",
    "columns_text",
    "fit_segment",
    "partitioning_problem",
    "table_partitioning",
    "table_schema_from_segment",
    "partition_path",
    "partition_value_string",
]

RESERVED_COLUMNS = (KEY_COLUMN, TIMESTAMP_COLUMN, HEADERS_COLUMN)


@dataclass(frozen=True)
class CommitPolicy:
    """Commit when the oldest buffered segment waited ``allowed_latency_s``, or the buffer holds
    ``min_bytes`` or ``max_segments``: whichever first (kafka-delta-ingest's knobs)."""

    allowed_latency_s: float
    min_bytes: int
    max_segments: int

    def due(self, *, segments: int, buffered_bytes: int, oldest_at: float | None, now: float) -> bool:
        if segments == 0:
            return False
        if segments >= self.max_segments or buffered_bytes >= self.min_bytes:
            return True
        return oldest_at is not None and now - oldest_at >= self.allowed_latency_s

    def overflows(self, *, buffered_bytes: int, next_bytes: int) -> bool:
        """Whether the next segment (``next_bytes``) would take a batch holding segments past
        ``min_bytes``: the batch is committed before it joins. Otherwise the segment that crosses
        the line, stitched after files filled up to ``min_bytes`` (which defaults to the target
        file size), got a data file of its own in every commit of a busy partition: a small file
        for compaction. (The files near the target size this makes keep their producers' row
        groups until compaction's row-group budget rewrites them: :mod:`._compaction`.)"""
        return buffered_bytes > 0 and buffered_bytes + next_bytes > self.min_bytes


_HADOOP_S3 = {"s3a": "s3", "s3n": "s3"}


def table_identity(table_uri: str, catalog: str | None = None) -> str:
    """What names a table wherever parka needs to tell two tables apart (the default app id,
    the Kafka offset commits' metadata): a local path made absolute and normalized (a
    ``file:`` URI read as its path), any other URI with its scheme in lower case and no trailing
    ``/``; an Iceberg table (``catalog`` given) ``iceberg:<catalog>.<namespace>.<name>``. Two
    spellings of one address give one identity, and so do Hadoop's names for an S3 URI
    (``s3a://``, ``s3n://``: Spark reaches the table ``parka ingest`` writes as ``s3://`` by
    them); two addresses of one table otherwise (a symlink, another endpoint) give two."""
    if catalog is not None:
        return f"iceberg:{catalog}.{table_uri}"
    parsed = urlparse(table_uri)
    if len(parsed.scheme) <= 1:  # a path (a Windows drive letter is no scheme)
        return os.path.abspath(table_uri)
    if parsed.scheme.lower() == "file":
        return os.path.abspath(parsed.path)
    scheme = _HADOOP_S3.get(parsed.scheme.lower(), parsed.scheme.lower())
    return f"{scheme}://{table_uri.split('://', 1)[-1].rstrip('/')}"


def default_app_id(topic: str, table: str) -> str:
    """The app id of a topic's ingestion into ``table`` (a :func:`table_identity`) when none is
    given: ``parka-<topic>-<8 hex of the identity's SHA-256>``, the same for ``parka ingest``
    and Spark, so they can take turns on one table, and different for two tables of one topic.
    ``parka ingest``'s consumer group defaults to it, so two tables each get every record."""
    return f"parka-{topic}-{hashlib.sha256(table.encode()).hexdigest()[:8]}"


def legacy_app_id(topic: str) -> str:
    """The default app id of releases before the app id named the table: ``parka-<topic>``. A
    table whose progress is under it keeps it (:meth:`parka.lake.LandingSession.settle_app_id`)."""
    return f"parka-{topic}"


def app_txn_id(app_id: str, partition: int) -> str:
    """The Delta ``txn`` app id that records a Kafka partition's progress: ``<app_id>-<partition>``."""
    return f"{app_id}-{partition}"


def dead_letter_txn_id(app_id: str, partition: int) -> str:
    """The dead-letter table's ``txn`` app id of a Kafka partition: ``<app_id>-dlq-<partition>``."""
    return f"{app_id}-dlq-{partition}"


_NAME = re.compile(
    r"^(?P<topic>.+)-p(?P<partition>\d+)-o(?P<offset>\d+)(?:-to(?P<last>\d+))?-(?P<uid>[0-9a-f]{12})"
    r"(?:-s(?P<split>\d+))?\.parquet$"
)


_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{32}\.tmp$")


def base_name(name: str, *, temporary: bool = False) -> str:
    """A path's base name; with ``temporary``, the name a write's temporary file
    (``.<name>.<32 hex>.tmp``) stands for, where it is one."""
    base = name.rsplit("/", 1)[-1]
    if temporary:
        t = _TEMPORARY.match(base)
        if t is not None:
            return t.group("name")
    return base


@dataclass(frozen=True)
class FileName:
    """A data file's name carries the Kafka coordinates of the segments it holds.

    ``<topic>-p<partition>-o<offset, 20 digits>[-to<last offset, 20 digits>]-<12 hex>[-s<split>].parquet``:
    one segment's file names its offset; a stitched file (several segments of one Kafka
    partition) its first and ``last`` offsets, so the orphan rule (every offset it holds is at
    or below the partition's ``txn``) reads ``last``. The random part keeps a retried write from
    colliding with a crashed attempt's file.
    """

    topic: str
    partition: int
    offset: int
    uid: str
    split: int | None = None
    last: int | None = None

    @classmethod
    def new(
        cls, topic: str, partition: int, offset: int, split: int | None = None, *, last: int | None = None
    ) -> FileName:
        return cls(topic, partition, offset, uuid.uuid4().hex[:12], split, last)

    @property
    def last_offset(self) -> int:
        """The highest offset whose data the file may hold."""
        return self.offset if self.last is None else self.last

    def __str__(self) -> str:
        span = "" if self.last is None else f"-to{self.last:020d}"
        suffix = "" if self.split is None else f"-s{self.split}"
        return f"{self.topic}-p{self.partition}-o{self.offset:020d}{span}-{self.uid}{suffix}.parquet"

    @classmethod
    def parse(cls, name: str, *, temporary: bool = False) -> FileName | None:
        """The coordinates in a file's base name, or None for a file parka did not name. With
        ``temporary``, also of a write's temporary file (``.<name>.<32 hex>.tmp``), which a
        crash in the middle of the write leaves behind."""
        m = _NAME.match(base_name(name, temporary=temporary))
        if m is None:
            return None
        split, last = m.group("split"), m.group("last")
        return cls(
            m.group("topic"),
            int(m.group("partition")),
            int(m.group("offset")),
            m.group("uid"),
            None if split is None else int(split),
            None if last is None else int(last),
        )


def partition_value_string(value: Any) -> str | None:
    """A partition value as the Delta protocol serialises it in ``partitionValues``."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat") and hasattr(value, "hour"):  # datetime
        text: str = value.strftime("%Y-%m-%d %H:%M:%S.%f")
        return text
    if hasattr(value, "isoformat"):  # date
        return str(value.isoformat())
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)


def partition_path(values: dict[str, str | None]) -> str:
    """Hive-style directory for partition values (``col=value/``), escaped like Spark does."""
    parts = []
    for name, value in values.items():
        text = "__HIVE_DEFAULT_PARTITION__" if value is None else quote(value, safe=" ")
        parts.append(f"{name}={text}")
    return "/".join(parts)


@dataclass(frozen=True)
class SchemaVerdict:
    """How a segment's schema relates to the table's (:func:`parka.evolution.merge_schemas`).

    ``new_fields``: the table's top-level columns as they must become to take the segment
    (new ones, new fields at any depth, widened types, relaxed nullability); ``changes``: what
    changes, by path; ``problems``: human-readable reasons the table cannot take the segment,
    each naming its path and both types.
    """

    new_fields: tuple[pa.Field, ...]
    problems: tuple[str, ...]
    changes: tuple[Change, ...] = ()
    problem_paths: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return not self.new_fields and not self.problems


def check_schema(table: pa.Schema, segment: pa.Schema, *, partition_by: tuple[str, ...] = ()) -> SchemaVerdict:
    """Compare a segment's (footer) schema with the table's at any depth; never decodes data.
    Type widening is allowed when ``table``'s metadata says the table has it
    (:data:`parka.evolution.TYPE_WIDENING_KEY`)."""
    merged = merge_schemas(table, segment, absent_ok=(*partition_by, *RESERVED_COLUMNS))
    problems = tuple(f"column {p}" for p in merged.problems)
    changed = tuple(f for f in merged.schema if f.name not in table.names or not f.equals(table.field(f.name)))
    return SchemaVerdict(changed, problems, merged.changes, tuple(p.path for p in merged.problems))


def table_schema_from_segment(schema: pa.Schema, partition_by: Sequence[PartitionSpec | str] = ()) -> pa.Schema:
    """A new table's schema from a segment's: its user columns, the derived partition columns
    of ``partition_by`` (``day=date(ts)``: a nullable ``day`` whose metadata holds
    ``date(ts)``), then its reserved ones nullable.

    Everything inside a list or a map is made nullable: Delta (delta-spark) refuses NOT NULL
    nested within arrays or maps, and a file whose items are never null reads the same through
    a table that would allow them.

    Raises:
        SchemaMismatchError: a partition column's source is missing, of a type its transform
            cannot take, or a derived one's name is taken by a column of the segment.
    """
    specs = parse_partition_by(partition_by)
    found = partitioning_problem(schema, specs, where="the segment")
    if found is not None:
        spec, problem = found
        raise SchemaMismatchError(f"cannot partition by {spec}: {problem}", field=spec.source)
    derived = [spec.output_field(schema.field(spec.source)) for spec in specs if spec.derived]
    return pa.schema(
        [nullable_within(f) for f in schema if f.name not in RESERVED_COLUMNS]
        + derived
        + [nullable_within(f).with_nullable(True) for f in schema if f.name in RESERVED_COLUMNS]
    )


def partitioning_problem(
    schema: pa.Schema, specs: Sequence[PartitionSpec], *, where: str = "the schema"
) -> tuple[PartitionSpec, str] | None:
    """The first of ``specs`` that a table made from ``schema`` cannot be partitioned by, with why:
    its source column is not a top-level column of ``schema``, or of a type its transform cannot
    take (a nested column for the identity), or a derived column's name is taken by a column of
    ``schema``. ``None`` when it can be partitioned by all of them. ``where`` names ``schema`` in
    the reason (``the segment``)."""
    for spec in specs:
        if spec.source not in schema.names:
            return spec, f"{where} has no column '{spec.source}'"
        if spec.derived and spec.name in schema.names:
            return spec, f"{where} has a column '{spec.name}' already (a derived column needs a name of its own)"
        source_type = schema.field(spec.source).type
        problem = spec.problem(source_type)
        if problem is not None:  # a transform's problem names the type; the identity's does not
            return spec, problem if spec.derived else f"{problem}, and {where}'s '{spec.source}' is {source_type}"
    return None


def check_partitioning(schema: pa.Schema, partition_by: Sequence[PartitionSpec | str], *, where: str) -> None:
    """Refuse partitioning a new table made from ``schema`` by ``partition_by`` when it cannot
    be (:func:`partitioning_problem`): a configuration error, found before anything is written
    or dead-lettered. ``where`` names where ``schema`` comes from (``the topic's first segment``).

    Raises:
        ConfigError: naming ``--partition-by``, its value, the spec and why, and the columns
            ``schema`` has (with their types).
    """
    specs = parse_partition_by(partition_by)
    found = partitioning_problem(schema, specs, where=where)
    if found is None:
        return
    spec, problem = found
    raise ConfigError(
        "partition_by",
        ",".join(map(str, specs)),
        f"columns of {where}, or derived specs of them: {columns_text(schema)}",
        reason=f"set by --partition-by or PARKA_PARTITION_BY; {spec}: {problem}",
    )


def check_key_columns(schema: pa.Schema, key_columns: Sequence[str], *, where: str) -> None:
    """Refuse ``--key-columns`` that ``schema`` cannot give a key from: each must be one of its
    top-level columns of a primitive type (not a struct, list or map). A configuration error,
    found before anything is written or dead-lettered. ``where`` names where ``schema`` comes
    from (``the topic's first segment``, ``the table``).

    Raises:
        ConfigError: naming ``--key-columns``, its value, the column and why, and the columns
            ``schema`` has (with their types).
    """
    for name in key_columns:
        field = schema.field(name) if name in schema.names else None
        if field is None:
            problem = f"{where} has no column '{name}'"
        elif pa.types.is_nested(field.type) or pa.types.is_dictionary(field.type):
            problem = f"{where}'s '{name}' is {field.type}, not a primitive type"
        else:
            continue
        raise ConfigError(
            "key_columns",
            ",".join(key_columns),
            f"top-level primitive columns of {where}: {columns_text(schema)}",
            reason=f"set by --key-columns or PARKA_KEY_COLUMNS; {problem}",
        )


def check_sequence_column(schema: pa.Schema, column: str, *, where: str) -> None:
    """Refuse a ``--sequence-by`` column ``schema`` lacks or cannot order by: it must be one of
    its top-level columns of an integer, timestamp or date type.

    Raises:
        ConfigError: naming ``--sequence-by``, the column and why, and the columns ``schema`` has.
    """
    field = schema.field(column) if column in schema.names else None
    if field is None:
        problem = f"{where} has no column '{column}'"
    elif pa.types.is_uint64(field.type) or not (
        pa.types.is_integer(field.type) or pa.types.is_timestamp(field.type) or pa.types.is_date(field.type)
    ):
        problem = f"{where}'s '{column}' is {field.type}, not an integer (up to int64), timestamp or date"
    else:
        return
    raise ConfigError(
        "sequence_by",
        column,
        f"an integer, timestamp or date column of {where}: {columns_text(schema)}",
        reason=f"set by --sequence-by or PARKA_SEQUENCE_BY; {problem}",
    )


COLUMNS_TEXT_LIMIT = 300
"""Characters of column list an error shows at most (:func:`columns_text`): the error stays one
readable line whatever the width of the table."""


def columns_text(schema: pa.Schema, *, limit: int = COLUMNS_TEXT_LIMIT) -> str:
    """``schema``'s top-level columns as ``name: type``, sorted by name, for an error that says
    what exists: as many as fit in ``limit`` characters, then how many more there are (a long
    nested type is cut)."""
    shown: list[str] = []
    fields = sorted(schema, key=lambda f: f.name)
    length = 0
    for f in fields:
        kind = str(f.type)
        item = f"{f.name}: {kind if len(kind) <= 40 else kind[:37] + '...'}"
        if shown and length + len(item) + 2 > limit:
            break
        shown.append(item)
        length += len(item) + 2
    rest = len(fields) - len(shown)
    return (", ".join(shown) or "none") + (f", and {rest} more" if rest else "")


def table_partitioning(schema: pa.Schema, partition_columns: Sequence[str]) -> tuple[PartitionSpec, ...]:
    """A table's partitioning as specs: a partition column whose metadata holds an expression
    (:data:`~parka.partitioning.EXPRESSION_KEY`) is derived (``day=date(ts)``), any other is
    the identity.

    Raises:
        ConfigError: an expression parka cannot parse (names the column's metadata).
    """
    specs = []
    for name in partition_columns:
        field = schema.field(name) if name in schema.names else None
        expression = (field.metadata or {}).get(EXPRESSION_KEY.encode()) if field is not None else None
        text = name if expression is None else f"{name}={expression.decode()}"
        specs.append(parse_spec(text, key=f"{EXPRESSION_KEY} of table column '{name}'"))
    return tuple(specs)


@dataclass(frozen=True)
class Fit:
    """Whether a segment fits the table: ``problem`` says why not (``field`` names the path,
    ``actor.site_admin``, when one is to blame); otherwise ``new_fields`` are the table's
    top-level columns as they must become to take it (new or changed)."""

    new_fields: tuple[pa.Field, ...] = ()
    problem: str | None = None
    field: str | None = None


def fit_segment(
    table: pa.Schema, segment: pa.Schema, *, partition_by: Sequence[PartitionSpec | str], merge: bool
) -> Fit:
    """The one rule for a segment against the table, for ``parka ingest`` and Spark raw mode alike.

    It fits when it has each partition column's source column, of a type its transform takes
    (and no column of a derived partition column's name), :func:`check_schema` finds no
    problem, and every column it adds is nullable: reserved columns (keys, timestamps,
    headers) always, user columns only with ``merge`` (``--schema-evolution merge``).
    Plain names in ``partition_by`` are identity specs.
    """
    specs = parse_partition_by(partition_by)
    for spec in specs:
        if spec.source not in segment.names:
            what = f"partition column '{spec.name}'" if not spec.derived else f"column '{spec.source}' (for {spec})"
            return Fit(problem=f"{what} is not in the segment", field=spec.source)
        problem = spec.problem(segment.field(spec.source).type)
        if problem is not None:
            return Fit(problem=f"partition {spec}: {problem}", field=spec.source)
        if spec.derived and spec.name in segment.names:
            return Fit(
                problem=f"column '{spec.name}' is the table's partition column {spec}; the segment has its own",
                field=spec.name,
            )
    verdict = check_schema(table, segment, partition_by=tuple(s.name for s in specs))
    if verdict.problems:
        return Fit(problem="; ".join(verdict.problems), field=verdict.problem_paths[0])
    user = [c for c in verdict.changes if c.path.split(".", 1)[0] not in RESERVED_COLUMNS]
    if user and not merge:
        paths = ", ".join(f"{c.path} ({c.kind})" for c in user)
        return Fit(
            problem=f"schema change(s) {paths}: rerun with --schema-evolution merge to take them", field=user[0].path
        )
    return Fit(new_fields=verdict.new_fields)


@dataclass(frozen=True)
class LandedSegment:
    """A segment written as data file(s) under the table root, not yet committed.

    ``records`` is the segment's; ``split`` says its rows spanned several table partitions (so
    it was decoded and written as one file per partition); ``new_fields`` are columns the table
    lacks that its files need; ``value_bytes`` is the Kafka value's size. ``row_groups``:
    ``(first, count)`` of its row groups in its one file when it shares that file with other
    segments (stitched); ``None`` when the file(s) hold this segment alone. ``stitch_fallback``:
    it could have been stitched with others but was written alone (stitching was not safe).

    A run of row records (Avro or JSON values, one record each, made a segment when read:
    :func:`parka.lake._files.segment_of_rows`) spans several offsets: ``offsets`` holds each of
    its rows' Kafka offset in the order of its rows in the file (increasing), ``offset`` is the
    last of them, and ``rows``, when set, says which of its rows this is, ``(first, count)``:
    a part of the run kept or dropped on its own when the table's ``txn`` covers only the
    run's first rows (:func:`parka.lake._settle.split_covered`).
    """

    topic: str
    partition: int
    offset: int
    records: int
    files: tuple[DataFile, ...]
    split: bool = False
    new_fields: tuple[pa.Field, ...] = ()
    value_bytes: int = 0
    row_groups: tuple[int, int] | None = None
    stitch_fallback: bool = False
    offsets: Any = field(default=None, compare=False)  # a numpy int64 array, or None
    rows: tuple[int, int] | None = None

    @property
    def first_offset(self) -> int:
        """The Kafka offset of its first row: ``offset`` but for a run of row records."""
        return self.offset if self.offsets is None else int(self.offsets[0])


@dataclass(frozen=True)
class Tombstone:
    """A message with a key and no value on an upsert table's topic: its key's row is deleted."""

    partition: int
    offset: int
    key: bytes


@dataclass(frozen=True)
class Refused:
    """A Kafka message the table cannot take. ``error`` says why and keeps the raw message
    (value, headers, topic, partition, offset) for the dead-letter table."""

    partition: int
    offset: int
    error: SegmentError | SchemaMismatchError
    timestamp_ms: int | None = None
