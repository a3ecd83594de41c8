"""The one module that talks to deltalake (delta-rs) and to a Delta table's filesystem.

:class:`RsTableLog` is delta-rs' implementation of the Delta-log interface the raw commit
protocol uses (:class:`parka.consumer._log.TableLog`; delta-spark's is in
``spark_ext/_delta_spark.py``). The rules both engines share live here once: which tables raw
files may join (:func:`check_writable`), the schema JSON a new table gets (:func:`schema_json`)
and how new columns merge in (:func:`new_columns`, :func:`schema_with_columns`).

Whatever deltalake or the filesystem raises leaves as a parka error::

    ParkaError
    ├── CommitConflict       another commit landed after the handle's version: refresh, re-read
    │                        txn versions, decide again (defined here)
    ├── SchemaMismatchError  a type Delta cannot store, or files the table cannot take
    └── CommitError          any other Delta or storage failure

What delta-rs 1.6 does, as ``tests/unit/test_delta.py`` checks: ``create_write_transaction`` with
``max_commit_retries=0`` commits at exactly the handle's version + 1 or fails ("Failed to commit
transaction: 0"); it neither updates the handle nor checks, in append mode, its ``schema``. With
retries it rebases onto newer versions unless one carries a ``txn`` of the same app id. A commit
of ``txn`` actions alone is accepted. ``AddAction`` has no ``tags``. Paths go in decoded, and the
log (and ``get_add_actions``) holds them URL-encoded. Readers take partition values from the add
action, not from a copy of the column inside the file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as dt
import json
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake import Field as DeltaField
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.exceptions import SchemaMismatchError as DeltaSchemaMismatchError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

from parka.errors import CommitError, ParkaError, SchemaMismatchError, SegmentDecodeError
from parka.schema import RESERVED_PREFIX

__all__ = [
    "make_durable",
    "FILE_TAGS_KEY",
    "CommitConflict",
    "DataFile",
    "FileInfo",
    "RecentCache",
    "RsEngine",
    "RsTableLog",
    "add_columns",
    "append_rows",
    "arrow_schema",
    "arrow_schema_of_json",
    "check_commit",
    "check_partition_columns",
    "check_relative",
    "check_schema",
    "check_writable",
    "checkpoint",
    "commit_add_files",
    "create_table",
    "data_file_stats",
    "delete_files",
    "list_files",
    "new_columns",
    "open_table",
    "referenced_files",
    "refresh",
    "schema_json",
    "schema_with_columns",
    "txn_version",
    "write_data_file",
]

FILE_TAGS_KEY = "parka.fileTags"
"""``commitInfo`` key holding ``{path: tags}`` of a commit's files (delta-rs' ``AddAction`` has no tags)."""

STRING_PREFIX_LENGTH = 32  # Spark's delta.stats string prefix length
_CONFLICT = re.compile(r"Failed to commit transaction: \d+\s*$|existing table version|[Cc]oncurrent|changed since last")
_BAD_NAME_CHARS = frozenset(" ,;{}()\n\t=")


V = TypeVar("V")

_libc_name = ctypes.util.find_library("c")
_LIBC = ctypes.CDLL(_libc_name, use_errno=True) if _libc_name else None


class CommitConflict(ParkaError):
    """Another commit landed after ``read_version``: refresh, re-read txn versions, then retry."""

    def __init__(self, message: str, *, read_version: int | None = None) -> None:
        self.read_version = read_version
        super().__init__(message)


@dataclass(frozen=True)
class DataFile:
    """A data file written under the table root, for :func:`commit_add_files`.

    ``path`` is relative to the table root, ``/``-separated and not URL-encoded (as on disk);
    ``stats`` is the add action's JSON (:func:`data_file_stats`); ``tags`` (Kafka coordinates)
    are recorded in ``commitInfo`` under :data:`FILE_TAGS_KEY`.
    """

    path: str
    size: int
    stats: str
    partition_values: Mapping[str, str | None] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FileInfo:
    """A file under the table root: ``path`` relative to the root, size in bytes, mtime (UTC)."""

    path: str
    size: int
    mtime: dt.datetime | None


@contextmanager
def _translating(what: str, *, read_version: int | None = None) -> Iterator[None]:
    try:
        yield
    except ParkaError:
        raise
    except CommitFailedError as exc:
        if _CONFLICT.search(str(exc)):
            raise CommitConflict(f"{what}: a concurrent commit won ({exc})", read_version=read_version) from exc
        raise CommitError(f"{what}: {exc}") from exc
    except DeltaSchemaMismatchError as exc:
        raise SchemaMismatchError(f"{what}: {exc}") from exc
    except Exception as exc:  # deltalake raises bare Exception for its "External error"s
        raise CommitError(f"{what}: {type(exc).__name__}: {exc}") from exc


# --- schemas ----------------------------------------------------------------------------------


def _type_problem(t: pa.DataType) -> str | None:
    """Why Delta (as Spark and delta-rs read it) cannot store ``t``, or ``None``."""
    if isinstance(t, pa.ExtensionType):
        return _type_problem(t.storage_type)
    if pa.types.is_dictionary(t):
        return _type_problem(t.value_type)
    if pa.types.is_unsigned_integer(t):
        return f"Delta has no unsigned integers ({t}); delta-rs would map it to a signed type it can overflow"
    if pa.types.is_fixed_size_binary(t):
        return f"Delta has no fixed-size binary ({t}); use binary"
    if pa.types.is_float16(t):
        return f"Delta has no {t} type; use float32 or float64"
    if pa.types.is_timestamp(t):
        if t.unit not in ("ms", "us"):
            return f"Delta timestamps have microsecond precision ({t}); use unit 'us'"
        if t.tz is not None and t.tz.upper() != "UTC":
            return f"Delta stores instants in UTC or without a time zone ({t}); use tz='UTC'"
        return None
    if pa.types.is_time(t) or pa.types.is_duration(t) or pa.types.is_interval(t):
        return f"Delta has no time-of-day or interval type ({t}); store an integer or a string"
    if pa.types.is_decimal(t) and not isinstance(t, pa.Decimal128Type):
        return f"Delta decimals are decimal128 with precision <= 38 ({t})"
    if isinstance(t, pa.Decimal128Type) and not 0 <= t.scale <= t.precision:
        return f"Delta needs 0 <= scale <= precision ({t})"
    if pa.types.is_struct(t) and t.num_fields == 0:
        return "Delta cannot store a struct without fields"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return None  # the element is checked as a field of its own
    simple = (pa.types.is_primitive(t) and not pa.types.is_null(t)) or pa.types.is_decimal(t)
    stringish = any(check(t) for check in (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view))
    binaryish = any(check(t) for check in (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view))
    if simple or stringish or binaryish or pa.types.is_struct(t) or pa.types.is_map(t):
        return None
    return f"Delta cannot store {t}"


def _children(t: pa.DataType) -> list[pa.Field]:
    t = t.storage_type if isinstance(t, pa.ExtensionType) else t
    if pa.types.is_struct(t):
        return list(t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_field]
    return [t.key_field, t.item_field] if pa.types.is_map(t) else []


def _check_fields(fields: list[pa.Field], prefix: str) -> None:
    seen: dict[str, str] = {}
    for f in fields:
        path = prefix + f.name
        if not f.name or _BAD_NAME_CHARS & set(f.name):
            raise SchemaMismatchError("Delta (without column mapping) rejects names with ' ,;{}()\\n\\t='", field=path)
        if f.name.lower() in seen:
            raise SchemaMismatchError(
                f"clashes with '{seen[f.name.lower()]}': Delta names are case-insensitive", field=path
            )
        seen[f.name.lower()] = f.name
        problem = _type_problem(f.type)
        if problem:
            raise SchemaMismatchError(problem, field=path)
        _check_fields(_children(f.type), path + ".")


def check_schema(schema: pa.Schema) -> None:
    """Check that Delta can store every column of ``schema``, names and types.

    Raises:
        SchemaMismatchError: ``field`` names the first column Delta cannot store; the message says why.
    """
    _check_fields(list(schema), "")
    try:
        DeltaSchema.from_arrow(schema)
    except Exception as exc:  # a rule of delta-rs that _type_problem does not know
        raise SchemaMismatchError(f"delta-rs rejects the schema: {str(exc).splitlines()[0]}") from exc


def arrow_schema(table: DeltaTable) -> pa.Schema:
    """The table's schema in Arrow (timestamp -> timestamp[us, UTC], timestamp_ntz -> timestamp[us])."""
    with _translating("cannot read the table schema"):
        return pa.schema(table.schema().to_arrow())


def _delta_type(f: DeltaField) -> Any:
    """A field's Delta type as JSON without nullability and metadata, for comparisons."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            drop = ("nullable", "containsNull", "valueContainsNull", "metadata")
            return {k: strip(v) for k, v in node.items() if k not in drop}
        return [strip(v) for v in node] if isinstance(node, list) else node

    return strip(json.loads(f.to_json())["type"])


def _check_files_schema(table: DeltaTable, schema: pa.Schema) -> None:
    """Each column of ``schema`` must be a table column of the same Delta type."""
    check_schema(pa.schema([f for f in schema if not f.name.startswith(RESERVED_PREFIX)]))
    columns = {f.name: f for f in table.schema().fields}
    for f in schema:
        existing = columns.get(f.name)
        if existing is None and f.name.startswith(RESERVED_PREFIX):
            continue  # readers ignore file columns outside the table schema
        if existing is None:
            raise SchemaMismatchError("column is not in the Delta table; add it first", field=f.name)
        if _delta_type(existing) != _delta_type(DeltaField.from_arrow(f)):
            raise SchemaMismatchError(f"the table has type {existing.type}, the file {f.type}", field=f.name)
        if f.nullable and not existing.nullable:
            raise SchemaMismatchError("the table column is NOT NULL, the file's is nullable", field=f.name)


# --- tables -----------------------------------------------------------------------------------


def open_table(uri: str, storage_options: dict[str, str] | None = None) -> DeltaTable | None:
    """The latest version of the Delta table at ``uri``; ``None`` when there is none.

    Raises:
        CommitError: the location cannot be read, or the table uses a feature raw files would
            bypass (column mapping, CHECK constraints, generated columns).
    """
    try:
        table = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None
    except Exception as exc:
        raise CommitError(f"cannot open the Delta table at {uri}: {exc}") from exc
    _check_writable(table)
    return table


def _check_writable(table: DeltaTable) -> None:
    with _translating("cannot read the table metadata"):
        config = table.metadata().configuration
        fields = table.schema().fields
    check_writable(config, [f.metadata for f in fields])


def check_writable(configuration: Mapping[str, str], field_metadata: Collection[Mapping[str, Any]]) -> None:
    """Refuse a table whose features raw Parquet files would bypass or break, naming the table
    property: column mapping (``delta.columnMapping.mode``: data files use physical column
    names, raw segments logical ones), CHECK constraints (``delta.constraints.*``) and generated
    columns (``delta.generationExpression`` in a column's metadata). ``field_metadata``: each
    top-level column's metadata. One rule for both commit engines.

    Raises:
        CommitError: the message names the property and what to do instead.
    """
    mode = configuration.get("delta.columnMapping.mode", "none")
    constraint = next((key for key in configuration if key.startswith("delta.constraints.")), None)
    if mode != "none":
        problem = (
            f"column mapping (delta.columnMapping.mode={mode}): its data files use physical column names, "
            "raw segments logical ones"
        )
    elif constraint is not None:
        problem = f"CHECK constraints ({constraint}): raw files would bypass them"
    elif any("delta.generationExpression" in m for m in field_metadata):
        problem = "generated columns (delta.generationExpression): raw files would bypass them"
    else:
        return
    raise CommitError(
        f"parka cannot add raw Parquet files to a table with {problem}; "
        "use parka spark-ingest --mode decode, or a table without it"
    )


def create_table(
    uri: str,
    schema: pa.Schema,
    *,
    partition_by: list[str],
    storage_options: dict[str, str] | None = None,
    name: str | None = None,
    configuration: Mapping[str, str | None] | None = None,
) -> DeltaTable:
    """Create an empty Delta table (version 0, no data) at ``uri``.

    Raises:
        SchemaMismatchError: a column Delta cannot store, or a bad partition column.
        CommitConflict: a table appeared at ``uri`` meanwhile: open it instead.
        CommitError: any other failure.
    """
    check_schema(schema)
    check_partition_columns(schema, partition_by)
    try:
        return DeltaTable.create(
            uri,
            schema,
            mode="error",
            partition_by=partition_by,
            name=name,
            configuration=configuration,
            storage_options=storage_options,
        )
    except Exception as exc:
        if DeltaTable.is_deltatable(uri, storage_options):
            raise CommitConflict(f"a Delta table was created at {uri} concurrently") from exc
        raise CommitError(f"cannot create a Delta table at {uri}: {exc}") from exc


def check_partition_columns(schema: pa.Schema, partition_by: Collection[str]) -> None:
    """Raise :class:`SchemaMismatchError` unless each partition column is a top-level primitive
    column of ``schema`` (a new table's rule, for both engines)."""
    for column in partition_by:
        if column not in schema.names or pa.types.is_nested(schema.field(column).type):
            raise SchemaMismatchError("a partition column must be a top-level primitive column", field=column)


def refresh(table: DeltaTable) -> int:
    """Move the handle to the table's latest version and return it."""
    with _translating("cannot refresh the table"):
        table.update_incremental()
    _check_writable(table)
    return table.version()


def txn_version(table: DeltaTable, app_id: str) -> int | None:
    """The last ``txn`` version of ``app_id`` in the handle's snapshot, ``None`` when there is none."""
    with _translating(f"cannot read the txn version of '{app_id}'"):
        return table.transaction_version(app_id)


def referenced_files(table: DeltaTable) -> set[str]:
    """The snapshot's data files, relative to the table root and decoded (as on disk)."""
    with _translating("cannot list the table's add actions"):
        paths = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
    return {unquote(p) for p in paths}


def checkpoint(table: DeltaTable) -> None:
    """Write a checkpoint of the handle's version."""
    with _translating("cannot write a checkpoint"):
        table.create_checkpoint()


def add_columns(table: DeltaTable, fields: list[pa.Field]) -> int:
    """Add nullable columns, or new fields of struct columns; returns the table version.

    Fields already present with the same type are skipped, so a retry after a crash is harmless.

    Raises:
        SchemaMismatchError: a type Delta cannot store, a new column that is not nullable, or a
            column that exists with another type.
        CommitConflict, CommitError: the metadata commit failed.
    """
    new = new_columns(table.schema().fields, fields)
    if new:
        with _translating("cannot add columns", read_version=table.version()):
            table.alter.add_columns(new)
    return table.version()


def new_columns(current: Collection[DeltaField], fields: Collection[pa.Field]) -> list[DeltaField]:
    """Which of ``fields`` a table with columns ``current`` lacks, as Delta fields: new nullable
    columns, and struct columns with new fields (to merge into the existing ones).

    Raises:
        SchemaMismatchError: a type Delta cannot store, a new column that is not nullable, or a
            column that exists with another type (or another case).
    """
    check_schema(pa.schema(list(fields)))
    by_name = {f.name.lower(): f for f in current}
    new: list[DeltaField] = []
    for f in fields:
        wanted, existing = DeltaField.from_arrow(f), by_name.get(f.name.lower())
        if existing is None:
            if not f.nullable:
                raise SchemaMismatchError("an added column must be nullable: older files have no values", field=f.name)
            new.append(wanted)
            continue
        if existing.name != f.name:
            raise SchemaMismatchError(f"clashes with '{existing.name}': Delta names are case-insensitive", field=f.name)
        old_type = _delta_type(existing)
        if old_type == _delta_type(wanted):
            continue
        if not (pa.types.is_struct(f.type) and isinstance(old_type, dict) and old_type.get("type") == "struct"):
            raise SchemaMismatchError(f"the column exists with type {existing.type}", field=f.name)
        new.append(wanted)  # new fields of a struct: merged into the existing ones
    return new


def schema_with_columns(schema_json: str, fields: Collection[pa.Field]) -> str | None:
    """A Delta schema (its JSON, as in the ``metaData`` action) with ``fields`` added as
    :func:`add_columns` adds them (new fields of a struct column merge into it); ``None`` when
    nothing is missing. For an engine that commits the metadata itself.

    Raises:
        SchemaMismatchError: as :func:`new_columns`.
    """
    try:
        current = DeltaSchema.from_json(schema_json)
    except Exception as exc:
        raise CommitError(f"cannot read the table schema: {exc}") from exc
    new = new_columns(current.fields, fields)
    if not new:
        return None
    merged = json.loads(schema_json)
    for f in new:
        _merge_field(merged["fields"], json.loads(f.to_json()))
    return json.dumps(merged, separators=(",", ":"))


def _merge_field(fields: list[dict[str, Any]], new: dict[str, Any]) -> None:
    """Add the Delta field ``new`` (JSON) to ``fields``, or merge its struct fields into the one there."""
    for existing in fields:
        if existing["name"].lower() == new["name"].lower():
            kind, added = existing["type"], new["type"]
            if isinstance(kind, dict) and kind.get("type") == "struct" and isinstance(added, dict):
                for child in added.get("fields", []):
                    _merge_field(kind["fields"], child)
            return
    fields.append(new)


def schema_json(schema: pa.Schema) -> str:
    """The Delta schema JSON (``schemaString``) of an Arrow schema, converted as delta-rs creates
    tables, so that both engines give a new table the same column types.

    Raises:
        SchemaMismatchError: a column Delta cannot store.
    """
    check_schema(schema)
    return str(DeltaSchema.from_arrow(schema).to_json())


def arrow_schema_of_json(text: str) -> pa.Schema:
    """The Arrow schema of a Delta schema JSON, as :func:`arrow_schema` converts a table's.

    Raises:
        CommitError: JSON delta-rs cannot read as a schema.
    """
    with _translating("cannot read the table schema"):
        return pa.schema(DeltaSchema.from_json(text).to_arrow())


def check_relative(path: str) -> None:
    """Raise ``ValueError`` unless ``path`` is a clean data file path relative to the table root."""
    parts = path.split("/")
    if not path or "://" in path or parts[0] == "_delta_log" or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a clean data file path relative to the table root: {path!r}")


def check_commit(files: Collection[DataFile], txns: Mapping[str, int], partitions: Collection[str]) -> None:
    """What a commit of ``files`` and ``txns`` into a table partitioned by ``partitions`` must
    satisfy, whichever engine commits it.

    Raises:
        ValueError: a path that is not relative, partition values for other columns, or a txn
            version that is not a non-negative int.
    """
    for f in files:
        check_relative(f.path)
        if set(f.partition_values) != set(partitions):
            raise ValueError(f"{f.path}: partition values for {sorted(f.partition_values)}, not {list(partitions)}")
    for app_id, version in txns.items():
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"txn version of '{app_id}' must be a non-negative int, got {version!r}")


def _transactions(txns: Mapping[str, int]) -> list[Transaction]:
    check_commit((), txns, ())
    return [Transaction(app_id, version) for app_id, version in txns.items()]


def commit_add_files(
    table: DeltaTable,
    files: list[DataFile],
    *,
    txns: Mapping[str, int],
    schema: pa.Schema | None = None,
    partition_by: list[str] | None = None,
    commit_info: Mapping[str, Any] | None = None,
) -> int:
    """Commit ``files`` (already written under the table root) and ``txns`` as one table version.

    1. The add actions and the ``txn`` actions (app id -> last Kafka offset) are one commit: data
       and offsets become visible together or not at all. ``files`` may be empty, to move app ids
       past dead-lettered messages; with neither files nor txns nothing is committed.
    2. The commit goes to exactly the handle's version + 1, without retries. If anything else
       committed since (another worker, a zombie, an ALTER), :class:`CommitConflict` is raised:
       :func:`refresh`, re-read :func:`txn_version`, decide again.
    3. On success the handle is loaded at the committed version, not later, so that the next
       commit, too, conflicts with whatever this worker has not seen.
    4. After a :class:`~parka.errors.CommitError` the commit may still have landed (a timeout
       after the log write): only the log, read back through :func:`txn_version`, tells.

    ``schema`` (the files' schema) is checked against the table: each column must be a table
    column of the same Delta type (``__parka_*`` columns outside the table are fine: readers skip
    them). ``partition_by``, when given, must be the table's partition columns. ``commit_info``
    entries (JSON values) are added to ``commitInfo``.

    Returns the new table version.

    Raises:
        CommitConflict: a concurrent commit won.
        SchemaMismatchError: ``schema`` or ``partition_by`` does not match the table.
        ValueError: a path that is not relative, or partition values for other columns.
        CommitError: any other failure.
    """
    read_version = table.version()
    if not files and not txns:
        return read_version
    _check_writable(table)
    with _translating("cannot read the table metadata"):
        partitions = list(table.metadata().partition_columns)
    if partition_by is not None and list(partition_by) != partitions:
        raise SchemaMismatchError(f"the table is partitioned by {partitions}, not {list(partition_by)}")
    if schema is not None:
        _check_files_schema(table, schema)
    check_commit(files, txns, partitions)
    now_ms = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [
        AddAction(f.path, f.size, dict(f.partition_values), now_ms, True, f.stats) for f in files
    ]
    metadata = dict(commit_info or {})
    if any(f.tags for f in files):
        metadata[FILE_TAGS_KEY] = {f.path: dict(f.tags) for f in files if f.tags}
    properties = CommitProperties(
        custom_metadata=metadata or None, max_commit_retries=0, app_transactions=_transactions(txns)
    )
    with _translating(f"commit on version {read_version} failed", read_version=read_version):
        table.create_write_transaction(
            actions, mode="append", schema=table.schema(), partition_by=partitions, commit_properties=properties
        )
    with _translating(f"committed version {read_version + 1} but cannot load it"):
        table.load_as_version(read_version + 1)
    return read_version + 1


def append_rows(
    target: str | DeltaTable,
    rows: pa.Table,
    *,
    txns: Mapping[str, int],
    storage_options: dict[str, str] | None = None,
    partition_by: list[str] | None = None,
) -> int:
    """Append ``rows`` (dead letters) and ``txns`` in one commit; returns the new table version.

    ``target`` is a URI (the table is created when missing) or, better, the handle whose
    :func:`txn_version` the caller read: then a commit that landed in between raises
    :class:`CommitConflict` (no retries, as in :func:`commit_add_files`).

    Raises:
        CommitConflict: a concurrent commit won, or created the table first.
        SchemaMismatchError: ``rows`` do not fit the table, or Delta.
        CommitError: any other failure.
    """
    check_schema(rows.schema)
    if isinstance(target, str):  # create first, so that the write has a handle of known version
        table = open_table(target, storage_options) or create_table(
            target, rows.schema, partition_by=partition_by or [], storage_options=storage_options
        )
    else:
        table = target
    read_version = table.version()
    properties = CommitProperties(max_commit_retries=0, app_transactions=_transactions(txns))
    with _translating(f"append on version {read_version} failed", read_version=read_version):
        write_deltalake(table, rows, mode="append", partition_by=partition_by, commit_properties=properties)
    return read_version + 1


class RsTableLog:
    """:class:`parka.consumer._log.TableLog` over a delta-rs handle: the functions above, bound
    to one table. Commits go to exactly the read version + 1 (:func:`commit_add_files`)."""

    def __init__(self, uri: str, table: DeltaTable) -> None:
        self.uri = uri
        self.table = table

    def version(self) -> int:
        return int(self.table.version())

    def refresh(self) -> int:
        return refresh(self.table)

    def txn_version(self, app_id: str) -> int | None:
        return txn_version(self.table, app_id)

    def arrow_schema(self) -> pa.Schema:
        return arrow_schema(self.table)

    def partition_columns(self) -> list[str]:
        with _translating("cannot read the table metadata"):
            return list(self.table.metadata().partition_columns)

    def referenced_files(self) -> set[str]:
        return referenced_files(self.table)

    def add_columns(self, fields: Collection[pa.Field]) -> None:
        add_columns(self.table, list(fields))

    def commit_add_files(
        self, files: Collection[DataFile], *, txns: Mapping[str, int], commit_info: Mapping[str, Any] | None = None
    ) -> int:
        return commit_add_files(
            self.table, list(files), txns=txns, partition_by=self.partition_columns(), commit_info=commit_info
        )

    def checkpoint(self) -> None:
        checkpoint(self.table)


class RsEngine:
    """:class:`parka.consumer._log.LogEngine` of delta-rs."""

    name = "delta-rs"

    def open(self, uri: str, storage_options: Mapping[str, str] | None = None) -> RsTableLog | None:
        table = open_table(uri, dict(storage_options or {}))
        return None if table is None else RsTableLog(uri, table)

    def create(
        self,
        uri: str,
        schema: pa.Schema,
        *,
        partition_by: Collection[str],
        storage_options: Mapping[str, str] | None = None,
    ) -> RsTableLog:
        table = create_table(uri, schema, partition_by=list(partition_by), storage_options=dict(storage_options or {}))
        return RsTableLog(uri, table)


# --- statistics -------------------------------------------------------------------------------


class _Raw(str):
    """JSON text written as is: a decimal number that must not round-trip through float."""


def _dumps(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + _dumps(v) for k, v in value.items()) + "}"
    return str(value) if isinstance(value, _Raw) else json.dumps(value)


def _leaf_columns(md: pq.FileMetaData) -> dict[tuple[str, ...], int]:
    """Column index of each non-repeated leaf of the file, by name path."""
    out: dict[tuple[str, ...], int] = {}
    count = 0

    def walk(f: pa.Field, path: tuple[str, ...], repeated: bool) -> None:
        nonlocal count
        t = f.type.storage_type if isinstance(f.type, pa.ExtensionType) else f.type
        if pa.types.is_struct(t) or pa.types.is_nested(t):
            for child in _children(t):
                walk(child, (*path, child.name), repeated or not pa.types.is_struct(t))
            return
        if not repeated and count < md.num_columns:
            column = md.schema.column(count)
            if column.max_repetition_level == 0 and column.name == f.name:
                out[path] = count
        count += 1

    for f in md.schema.to_arrow_schema():
        walk(f, (f.name,), False)
    return out if count == md.num_columns else {}  # leaves did not line up: describe no column


def _stat_kind(t: pa.DataType, column: Any) -> str | None:
    """How min/max of a file column read as table type ``t`` are rendered; ``None``: not at all."""
    logical = json.loads(column.logical_type.to_json())
    kind, physical = logical.get("Type"), column.physical_type
    if pa.types.is_signed_integer(t) and physical in ("INT32", "INT64"):
        width = logical.get("bitWidth", 32 if physical == "INT32" else 64)
        signed = kind == "None" or (kind == "Int" and logical.get("isSigned"))
        return "int" if signed and width <= t.bit_width else None
    if pa.types.is_boolean(t):
        return "bool" if physical == "BOOLEAN" else None
    if pa.types.is_date(t):
        return "date" if kind == "Date" else None
    if pa.types.is_timestamp(t):
        unit = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}.get(logical.get("timeUnit"))
        if kind != "Timestamp" or unit is None or logical.get("isAdjustedToUTC") != (t.tz is not None):
            return None
        return ("ts-utc-" if t.tz is not None else "ts-ntz-") + unit
    if isinstance(t, pa.Decimal128Type):
        same = kind == "Decimal" and column.scale == t.scale and column.precision <= t.precision
        return "decimal" if same else None
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string" if kind == "String" else None
    return None  # floats (NaN ordering), binary, anything else: no min/max


def _order_key(kind: str, raw: Any) -> Any:
    return int.from_bytes(raw, "big", signed=True) if kind == "decimal" and isinstance(raw, bytes) else raw


def _ceil_div(value: int, by: int, up: bool) -> int:
    return -(-value // by) if up else value // by


def _render(kind: str, t: pa.DataType, value: Any, is_max: bool) -> Any:
    """The JSON value of a min or max (``is_max``) statistic, or ``None`` to leave it out."""
    if kind == "decimal":  # exact digits: decimal.Decimal arithmetic would round to 28 of them
        digits = str(abs(value)).rjust(t.scale + 1, "0")
        point = f"{digits[: -t.scale]}.{digits[-t.scale :]}" if t.scale else digits
        return _Raw(("-" if value < 0 else "") + point)
    if kind == "date":
        with suppress(OverflowError):
            return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
        return None
    if kind.startswith("ts-"):
        # Delta stats hold milliseconds. The min is floored and the max ceiled, so both stay bounds
        # even for a reader that does not widen a truncated max by 1 ms (Spark and kernel do).
        unit = kind[-2:]
        micros = value * 1000 if unit == "ms" else value if unit == "us" else _ceil_div(value, 1000, is_max)
        with suppress(OverflowError):
            utc = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
            moment = utc + dt.timedelta(milliseconds=_ceil_div(micros, 1000, is_max))
            text = moment.replace(tzinfo=None).isoformat(timespec="milliseconds")
            return text + ("Z" if kind.startswith("ts-utc") else "")
        return None
    if kind != "string":
        return value
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) <= STRING_PREFIX_LENGTH:
        return text
    # A prefix is a lower bound; an upper bound would need Spark's tie-breaker rule: leave it out.
    return None if is_max else text[:STRING_PREFIX_LENGTH]


def _column_stats(md: pq.FileMetaData, index: int, t: pa.DataType, kind: str | None) -> tuple[int | None, Any, Any]:
    """(nullCount, min, max) of column ``index`` over all row groups, ``None`` where unknown;
    ``kind`` is :func:`_stat_kind` of the column."""
    nulls: int | None = 0
    low = high = None
    for rg in range(md.num_row_groups):
        group = md.row_group(rg)
        rows = group.num_rows
        stats = group.column(index).statistics
        null_count = stats.null_count if stats is not None and stats.has_null_count else None
        nulls = None if nulls is None or null_count is None else nulls + null_count
        if kind is not None and stats is not None and stats.has_min_max:
            rg_low, rg_high = _order_key(kind, stats.min_raw), _order_key(kind, stats.max_raw)
            low = rg_low if low is None or rg_low < low else low
            high = rg_high if high is None or rg_high > high else high
        elif rows and null_count != rows:
            kind = None  # this row group has values its statistics do not describe
    if kind is None or low is None:
        return nulls, None, None
    return nulls, _render(kind, t, low, False), _render(kind, t, high, True)


@dataclass(frozen=True)
class _StatColumn:
    path: tuple[str, ...]  # the table field's names, outermost first (structs nest in the JSON)
    index: int  # the file's column
    type: pa.DataType  # the table's type
    kind: str | None  # how min/max render (:func:`_stat_kind`); None: nullCount only


@dataclass(frozen=True)
class _StatsPlan:
    """Which file columns describe which table columns, worked out once per (file schema, table
    schema): a stream's segments share their schema, so only the row-group numbers vary."""

    columns: tuple[_StatColumn, ...]
    exact: bool  # a decimal column: rendered by _dumps, which keeps its digits


class RecentCache(Generic[V]):
    """The last few values built, most recently used first, found by comparing keys in order.

    For keys that are costly to hash but cheap to compare, such as Parquet and Arrow schemas
    (``equals``); other key parts compare with ``==``. Put the cheapest parts first.
    """

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._entries: list[tuple[tuple[Any, ...], V]] = []

    def get(self, key: tuple[Any, ...], build: Callable[[], V]) -> V:
        for i, (cached, value) in enumerate(self._entries):
            if all(_same(a, b) for a, b in zip(cached, key, strict=True)):
                if i:
                    self._entries.insert(0, self._entries.pop(i))
                return value
        value = build()
        self._entries.insert(0, (key, value))
        del self._entries[self._size :]
        return value


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, (pa.Schema, pq.ParquetSchema)) and type(b) is type(a):
        return bool(a.equals(b))
    return bool(a == b)


_plans: RecentCache[_StatsPlan] = RecentCache()


def _stats_plan(
    md: pq.FileMetaData, table_schema: pa.Schema, partition_by: Collection[str], num_indexed_cols: int
) -> _StatsPlan:
    parts = tuple(partition_by)
    arrow_meta = (md.metadata or {}).get(b"ARROW:schema")  # decides the Arrow types of the leaves
    return _plans.get(
        (parts, num_indexed_cols, arrow_meta, md.schema, table_schema),
        lambda: _build_stats_plan(md, table_schema, parts, num_indexed_cols),
    )


def _build_stats_plan(
    md: pq.FileMetaData, table_schema: pa.Schema, partition_by: Collection[str], num_indexed_cols: int
) -> _StatsPlan:
    leaves = _leaf_columns(md)
    budget = math.inf if num_indexed_cols < 0 else num_indexed_cols
    columns: list[_StatColumn] = []

    def visit(f: pa.Field, path: tuple[str, ...]) -> None:
        nonlocal budget
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if pa.types.is_struct(t):
            for child in t:
                visit(child, (*path, child.name))
            return
        if budget <= 0:
            return
        budget -= 1
        if path in leaves:
            index = leaves[path]
            columns.append(_StatColumn(path, index, t, _stat_kind(t, md.schema.column(index))))

    for f in table_schema:
        if f.name not in partition_by:
            visit(f, (f.name,))
    return _StatsPlan(tuple(columns), exact=any(c.kind == "decimal" for c in columns))


def data_file_stats(
    parquet: bytes | pq.FileMetaData,
    table_schema: pa.Schema,
    *,
    partition_by: Collection[str] = (),
    num_indexed_cols: int = 32,
) -> str:
    """The add action's ``stats`` JSON, from the Parquet footer alone (no data is decoded).

    ``numRecords``; ``nullCount`` of every non-repeated leaf column of the table that the file
    has (structs as nested objects); ``minValues``/``maxValues`` for integers, booleans, dates,
    timestamps (milliseconds: min floored, max ceiled), decimals and strings (the min cut to 32
    characters, a longer max left out). Floats, binary, lists and maps get no min/max, nor does a
    column whose statistics miss in a row group with values. Partition columns are skipped; only
    the first ``num_indexed_cols`` leaf columns are described (-1: all), as
    ``delta.dataSkippingNumIndexedCols`` asks.

    Raises:
        SegmentDecodeError: ``parquet`` bytes without a readable footer.
    """
    if isinstance(parquet, pq.FileMetaData):
        md = parquet
    else:
        try:
            md = pq.read_metadata(pa.BufferReader(parquet))
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise SegmentDecodeError(f"no readable Parquet footer: {exc}", value=parquet) from exc
    plan = _stats_plan(md, table_schema, partition_by, num_indexed_cols)
    out: dict[str, dict[str, Any]] = {"minValues": {}, "maxValues": {}, "nullCount": {}}
    for column in plan.columns:
        for key, value in zip(
            ("nullCount", "minValues", "maxValues"),
            _column_stats(md, column.index, column.type, column.kind),
            strict=True,
        ):
            if value is not None:
                into = out[key]
                for name in column.path[:-1]:
                    into = into.setdefault(name, {})
                into[column.path[-1]] = value
    stats = {"numRecords": md.num_rows, **out}
    return _dumps(stats) if plan.exact else json.dumps(stats, separators=(",", ":"))


# --- files ------------------------------------------------------------------------------------

_S3_OPTIONS = {
    "aws_access_key_id": "access_key",
    "aws_secret_access_key": "secret_key",
    "aws_session_token": "session_token",
    "aws_region": "region",
}


def _s3_kwargs(storage_options: Mapping[str, str]) -> dict[str, str]:
    """``S3FileSystem`` arguments from deltalake's common AWS storage options (keys in any case)."""
    options = {k.lower(): v for k, v in storage_options.items()}
    kwargs = {arg: options[key] for key, arg in _S3_OPTIONS.items() if key in options}
    endpoint = options.get("aws_endpoint_url") or options.get("aws_endpoint")
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else "https://" + endpoint)
        kwargs.update(endpoint_override=parsed.netloc + parsed.path.rstrip("/"), scheme=parsed.scheme)
    return kwargs


def _filesystem(uri: str, storage_options: Mapping[str, str] | None) -> tuple[pafs.FileSystem, str]:
    """The filesystem holding the table at ``uri``, and the table root in it (no trailing slash)."""
    parsed = urlparse(uri)
    if len(parsed.scheme) <= 1 or parsed.scheme == "file":  # a local path, a drive letter, file://
        return pafs.LocalFileSystem(), os.path.abspath(unquote(parsed.path) if parsed.scheme == "file" else uri)
    kwargs = _s3_kwargs(storage_options) if storage_options and parsed.scheme in ("s3", "s3a") else {}
    try:
        if kwargs:
            return pafs.S3FileSystem(**kwargs), (parsed.netloc + parsed.path).rstrip("/")
        filesystem, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CommitError(f"no filesystem for {parsed.scheme}:// ({exc})") from exc
    return filesystem, path.rstrip("/")


def write_data_file(
    table_uri: str, relative_path: str, data: bytes, storage_options: Mapping[str, str] | None = None
) -> int:
    """Write ``data`` as ``relative_path`` under the table root; returns its size in bytes.

    A local file is written under a hidden temporary name and renamed, so a crash never leaves a
    partial file under the final name (at worst a ``.*.tmp`` that :func:`list_files` shows). It
    is not fsynced here: call :func:`make_durable` once before the commit that references it (one
    sync per commit instead of one per file, 5x the write rate on this project's machines). An
    object store publishes an object only once it is whole and durable.

    Raises:
        ValueError: ``relative_path`` is not a clean relative path.
        CommitError: the write failed.
    """
    check_relative(relative_path)
    filesystem, root = _filesystem(table_uri, storage_options)
    try:
        if isinstance(filesystem, pafs.LocalFileSystem):
            _write_local(os.path.join(root, *relative_path.split("/")), data)
        else:
            with filesystem.open_output_stream(f"{root}/{relative_path}") as sink:
                sink.write(data)
    except (pa.ArrowException, OSError) as exc:
        raise CommitError(f"cannot write data file {relative_path}: {exc}") from exc
    return len(data)


def _write_local(target: str, data: bytes) -> None:
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temp, "wb") as fh:
            fh.write(data)
        os.replace(temp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise


def make_durable(table_uri: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Flush data files written since the last call to stable storage, before a commit names them.

    Local tables: one ``syncfs`` of the table's file system (Linux), else ``os.sync``; object
    stores: nothing to do. Raises :class:`CommitError` when the flush fails, so the commit that
    would reference unflushed files is not made.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    if not isinstance(filesystem, pafs.LocalFileSystem):
        return
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError as exc:
        raise CommitError(f"cannot open table directory {root} to flush it: {exc}") from exc
    try:
        if _LIBC is not None and hasattr(_LIBC, "syncfs"):
            if _LIBC.syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise CommitError(f"syncfs of {root} failed: {os.strerror(err)}")
        else:
            os.sync()
    finally:
        os.close(fd)


def delete_files(
    table_uri: str, relative_paths: Collection[str], storage_options: Mapping[str, str] | None = None
) -> None:
    """Delete files under the table root; files already gone are fine.

    Raises:
        ValueError: a path that is not a clean relative path.
        CommitError: a deletion failed.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    for path in relative_paths:
        check_relative(path)
        try:
            filesystem.delete_file(f"{root}/{path}")
        except FileNotFoundError:
            continue
        except (pa.ArrowException, OSError) as exc:
            raise CommitError(f"cannot delete {path}: {exc}") from exc


def list_files(
    table_uri: str, storage_options: Mapping[str, str] | None = None, *, prefix_dirs: Collection[str] = ()
) -> list[FileInfo]:
    """Files under the table root, or under its ``prefix_dirs``, sorted by path.

    ``_delta_log`` is never listed; temporary files of interrupted writes are.

    Raises:
        CommitError: the listing failed.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    found: dict[str, FileInfo] = {}
    for prefix in prefix_dirs or ("",):
        base = f"{root}/{prefix.strip('/')}".rstrip("/")
        try:
            infos = filesystem.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except (pa.ArrowException, OSError) as exc:
            raise CommitError(f"cannot list {prefix or 'the table root'}: {exc}") from exc
        for info in infos:
            path = info.path[len(root) + 1 :]
            if info.type == pafs.FileType.File and path.split("/")[0] != "_delta_log":
                mtime = info.mtime
                if mtime is not None and mtime.tzinfo is None:
                    mtime = mtime.replace(tzinfo=dt.timezone.utc)
                found[path] = FileInfo(path, info.size or 0, mtime)
    return [found[path] for path in sorted(found)]
