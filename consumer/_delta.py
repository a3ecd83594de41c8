"""The one module that talks to deltalake (delta-rs).

:class:`RsTableLog` is delta-rs' implementation of the Delta-log interface the raw commit
protocol uses (:class:`parka.consumer._log.TableLog`; delta-spark's is in
``spark_ext/_delta_spark.py``). The rules both engines share live here once: which tables raw
files may join (:func:`check_writable`), the schema JSON a new table gets (:func:`schema_json`)
and how a schema evolves (:func:`evolve_schema_json`, after :mod:`parka.evolution`'s rule).

Whatever deltalake or the filesystem raises leaves as a parka error::

    ParkaError
    ├── SchemaMismatchError  a type Delta cannot store, or files the table cannot take
    └── CommitError          any other Delta failure
        └── CommitConflict     another commit landed after the handle's version: refresh, re-read
                               txn versions, decide again

What delta-rs 1.6 does, as ``tests/unit/test_delta.py`` checks: ``create_write_transaction`` with
``max_commit_retries=0`` commits at exactly the handle's version + 1 or fails ("Failed to commit
transaction: 0"); it neither updates the handle nor checks, in append mode, its ``schema``. With
retries it rebases onto newer versions unless one carries a ``txn`` of the same app id. A commit
of ``txn`` actions alone is accepted. ``AddAction`` has no ``tags``. Paths go in decoded, and the
log (and ``get_add_actions``) holds them URL-encoded. Readers take partition values from the add
action, not from a copy of the column inside the file.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake import Field as DeltaField
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.exceptions import SchemaMismatchError as DeltaSchemaMismatchError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

from parka.errors import CommitConflict, CommitError, ConfigError, ParkaError, SchemaMismatchError
from parka.evolution import merge_schemas
from parka.schema import RESERVED_PREFIX, child_fields

from ._log import DataFile
from ._logscan import logged_files
from ._plan import partition_value_string
from ._storage import check_relative

__all__ = [
    "FILE_TAGS_KEY",
    "RsEngine",
    "RsTableLog",
    "add_columns",
    "evolve_schema_json",
    "append_rows",
    "arrow_schema",
    "arrow_schema_of_json",
    "check_commit",
    "check_partition_columns",
    "check_relative",
    "check_schema",
    "check_writable",
    "checkpoint",
    "LiveFile",
    "commit_add_files",
    "commit_rewrite",
    "configuration",
    "live_files",
    "create_table",
    "open_table",
    "partition_columns",
    "read_version",
    "referenced_files",
    "refresh",
    "schema_json",
    "schema_json_of",
    "txn_version",
    "vacuum",
]

FILE_TAGS_KEY = "parka.fileTags"
"""``commitInfo`` key holding ``{path: tags}`` of a commit's files (delta-rs' ``AddAction`` has no tags)."""

_CONFLICT = re.compile(r"Failed to commit transaction: \d+\s*$|existing table version|[Cc]oncurrent|changed since last")
_BAD_NAME_CHARS = frozenset(" ,;{}()\n\t=")


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
        _check_fields(child_fields(f.type), path + ".")


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


def open_table(uri: str, storage_options: dict[str, str] | None = None, *, raw_files: bool = True) -> DeltaTable | None:
    """The latest version of the Delta table at ``uri``; ``None`` when there is none.
    ``raw_files=False``: for maintenance (OPTIMIZE, VACUUM), which adds no raw files, so the
    table's features are not checked.

    Raises:
        CommitError: the location cannot be read, or (``raw_files``) the table uses a feature
            raw files would bypass (column mapping, CHECK constraints, generated columns).
    """
    try:
        table = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None
    except Exception as exc:
        raise CommitError(f"cannot open the Delta table at {uri}: {exc}") from exc
    _check_writable(table)
    return table


def read_version(uri: str, version: int, storage_options: Mapping[str, str] | None = None) -> DeltaTable | None:
    """The Delta table at ``uri`` as of ``version``, to read (``txn`` versions, add actions), or
    ``None`` when delta-rs cannot read it (a reader feature it lacks, storage it cannot reach):
    the caller then reads through its own engine. Never raises."""
    try:
        return DeltaTable(uri, version=version, storage_options=dict(storage_options or {}))
    except Exception:  # deltalake raises bare Exception for many reasons; None says "ask someone else"
        return None


def _check_writable(table: DeltaTable) -> None:
    with _translating("cannot read the table metadata"):
        config = table.metadata().configuration
        fields = table.schema().fields
        features = set(table.protocol().reader_features or [])
    check_writable(config, [f.metadata for f in fields])
    if "typeWidening" in features:
        raise CommitError(
            "delta-rs 1.6 can neither read nor write a table with type widening (the typeWidening table feature, "
            "delta.enableTypeWidening): use parka spark-ingest --mode raw"
        )


def configuration(table: DeltaTable) -> dict[str, str]:
    """The table's properties (its metadata's ``configuration``).

    Raises:
        CommitError: the metadata cannot be read.
    """
    with _translating("cannot read the table metadata"):
        return {k: v for k, v in table.metadata().configuration.items() if v is not None}


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


def partition_columns(table: DeltaTable) -> list[str]:
    """The table's partition columns."""
    with _translating("cannot read the table metadata"):
        return list(table.metadata().partition_columns)


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
    """Evolve the table's schema to take ``fields`` (top-level columns as they must become:
    :func:`parka.evolution.merge_schemas`'s): new nullable columns, new fields at any depth
    (in structs, lists of structs, map values), top-level nullability relaxed. Returns the table
    version. What is there already is skipped, so a retry after a crash is harmless.

    delta-rs 1.6 commits new fields with ``alter.add_columns`` (which merges nested fields) and
    a relaxed column with ``alter.drop_column_not_null``; it cannot change a column's type (nor
    read or write a table with type widening), nor relax a field inside a struct.

    Raises:
        SchemaMismatchError: a type Delta cannot store, a change the table cannot take (names
            the path and both types), or one delta-rs cannot commit.
        CommitConflict, CommitError: the metadata commit failed.
    """
    merged = evolve_schema_json(schema_json_of(table), fields, widening=False)
    if merged is None:
        return table.version()
    with _translating("cannot read the table schema"):
        current = pa.schema(table.schema().to_arrow())
    changes = merge_schemas(current, pa.schema(list(fields)), widening=False, absent_ok=current.names).changes
    nested_relaxed = next((c for c in changes if c.kind == "relaxed" and "." in c.path), None)
    if nested_relaxed is not None:
        raise SchemaMismatchError(
            "delta-rs cannot make a field inside a struct nullable; use parka spark-ingest --mode raw",
            field=nested_relaxed.path,
        )
    added = {c.path.split(".", 1)[0] for c in changes if c.kind == "added"}
    with _translating("cannot add columns", read_version=table.version()):
        if added:
            table.alter.add_columns([DeltaField.from_arrow(f.with_nullable(True)) for f in fields if f.name in added])
        for c in changes:
            if c.kind == "relaxed":
                table.alter.drop_column_not_null(c.path)
    return table.version()


def schema_json_of(table: DeltaTable) -> str:
    """The table's Delta schema JSON (the ``metaData`` action's ``schemaString``)."""
    with _translating("cannot read the table schema"):
        return str(table.schema().to_json())


def evolve_schema_json(schema_json: str, fields: Collection[pa.Field], *, widening: bool) -> str | None:
    """A Delta schema (its JSON, as in the ``metaData`` action) evolved to take ``fields``
    (top-level columns as :func:`parka.evolution.merge_schemas` makes them): new columns
    appended, new fields merged in at any depth, nullability relaxed, types widened with the
    ``delta.typeChanges`` field metadata delta-spark records for them; existing fields keep their
    metadata. ``None`` when nothing changes. The one implementation for both engines: delta-spark
    commits this JSON, delta-rs the same changes through its alter API (:func:`add_columns`).
    ``widening``: the table allows type widening (``delta.enableTypeWidening``).

    Raises:
        SchemaMismatchError: a type Delta cannot store, a name that clashes with another but for
            its case, or a change the table cannot take (names the path and both types).
        CommitError: the schema JSON cannot be read.
    """
    check_schema(pa.schema(list(fields)))
    current = arrow_schema_of_json(schema_json)
    by_lower = {name.lower(): name for name in current.names}
    for f in fields:
        if by_lower.get(f.name.lower(), f.name) != f.name:
            raise SchemaMismatchError(
                f"clashes with '{by_lower[f.name.lower()]}': Delta names are case-insensitive", field=f.name
            )
    merge = merge_schemas(current, pa.schema(list(fields)), widening=widening, absent_ok=current.names)
    if merge.problems:
        raise SchemaMismatchError(str(merge.problems[0]), field=merge.problems[0].path)
    if not merge.changes:
        return None
    doc = json.loads(schema_json)
    for f in fields:
        wanted = json.loads(DeltaField.from_arrow(f).to_json())
        existing = next((e for e in doc["fields"] if e["name"] == f.name), None)
        if existing is None:
            wanted["nullable"] = True
            doc["fields"].append(wanted)
        else:
            _merge_json_field(existing, wanted)
    return json.dumps(doc, separators=(",", ":"))


def _merge_json_field(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Merge the Delta field ``new`` (JSON) into ``old``, recording type changes in its metadata."""
    if new.get("nullable") and not old.get("nullable"):
        old["nullable"] = True
    changes: list[dict[str, str]] = []
    old["type"] = _merge_json_type(old["type"], new["type"], "", changes)
    if changes:
        old.setdefault("metadata", {}).setdefault("delta.typeChanges", []).extend(changes)


def _merge_json_type(old: Any, new: Any, path: str, changes: list[dict[str, str]]) -> Any:
    kind = old.get("type") if isinstance(old, dict) else None
    if kind == "struct" and isinstance(new, dict):
        present = {f["name"]: f for f in old["fields"]}
        for child in new.get("fields", []):
            if child["name"] in present:
                _merge_json_field(present[child["name"]], child)
            else:
                old["fields"].append({**child, "nullable": True})
        return old
    inner = path + "." if path else ""
    if kind == "array" and isinstance(new, dict):
        old["elementType"] = _merge_json_type(old["elementType"], new["elementType"], inner + "element", changes)
        old["containsNull"] = bool(old.get("containsNull") or new.get("containsNull"))
        return old
    if kind == "map" and isinstance(new, dict):
        old["valueType"] = _merge_json_type(old["valueType"], new["valueType"], inner + "value", changes)
        old["valueContainsNull"] = bool(old.get("valueContainsNull") or new.get("valueContainsNull"))
        return old
    if old != new:  # a widening merge_schemas allowed
        changes.append({"fromType": old, "toType": new, **({"fieldPath": path} if path else {})})
        return new
    return old


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


# --- maintenance: compaction and VACUUM (parka optimize) --------------------------------------


@dataclass(frozen=True)
class LiveFile:
    """A data file of a snapshot: path (relative, decoded), size, partition values as the log
    serialises them, and its add action's modification time (ms)."""

    path: str
    size: int
    partition_values: Mapping[str, str | None]
    modification_time: int


def live_files(table: DeltaTable) -> list[LiveFile]:
    """The handle's snapshot's data files, in commit order (modification time, then path).

    Raises:
        CommitError: the table has deletion vectors or row tracking (a rewrite from the Parquet
            files alone would bring deleted rows back or lose row ids), or cannot be read.
    """
    with _translating("cannot read the table protocol"):
        protocol = table.protocol()
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    unsafe = sorted(features & {"deletionVectors", "rowTracking"})
    if unsafe:
        raise CommitError(
            f"parka optimize rewrites files from their Parquet alone; the table uses {', '.join(unsafe)}: "
            "use delta-spark's OPTIMIZE"
        )
    partitions = partition_columns(table)
    with _translating("cannot list the table's add actions"):
        rows = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    files = [
        LiveFile(
            unquote(r["path"]),
            int(r["size_bytes"]),
            {c: partition_value_string(r[f"partition.{c}"]) for c in partitions},
            int(r["modification_time"]),
        )
        for r in rows
    ]
    return sorted(files, key=lambda f: (f.modification_time, f.path))


def commit_rewrite(
    table: DeltaTable,
    removed: Collection[LiveFile],
    added: Collection[DataFile],
    *,
    commit_info: Mapping[str, Any] | None = None,
) -> int:
    """Commit a rewrite: ``remove`` actions for ``removed`` and ``add`` actions for ``added``
    (already written and durable), all with ``dataChange: false`` (the same rows in other
    files: streaming readers skip the commit), as one version at exactly the handle's
    version + 1, without retries, like :func:`commit_add_files`. Returns the new version; the
    handle is loaded at it.

    No rebase on purpose: delta-rs 1.6 rebases a ``dataChange: false`` removal over another
    commit that removed the same files (its own OPTIMIZE does), which leaves both rewrites'
    files live and every row twice. The caller re-reads and decides (its files still live?).

    Raises:
        CommitConflict: any commit landed after the handle's version.
        CommitError: any other failure.
    """
    read_version = table.version()
    now_ms = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(f.path, False, now_ms, f.size, dict(f.partition_values)) for f in removed
    ]
    actions += [AddAction(f.path, f.size, dict(f.partition_values), now_ms, False, f.stats) for f in added]
    properties = CommitProperties(custom_metadata=dict(commit_info or {}) or None, max_commit_retries=0)
    with _translating(f"rewrite on version {read_version} failed", read_version=read_version):
        table.create_write_transaction(
            actions, mode="append", schema=table.schema(), partition_by=partition_columns(table),
            commit_properties=properties,
        )  # fmt: skip
    with _translating(f"committed version {read_version + 1} but cannot load it"):
        table.load_as_version(read_version + 1)
    return read_version + 1


def vacuum(table: DeltaTable, *, retention_hours: int, enforce_retention: bool = True) -> list[str]:
    """Delete the files of ``remove`` actions older than ``retention_hours`` (delta-rs' "lite"
    VACUUM: files no log entry names, such as a live writer's files not yet committed, are
    never touched); returns the deleted paths. ``enforce_retention`` refuses a retention below
    the table's ``delta.deletedFileRetentionDuration``.

    Raises:
        ConfigError: the retention is below the table's (with ``enforce_retention``).
        CommitError: any other failure.
    """
    try:
        with _translating("vacuum failed"):
            return list(
                table.vacuum(
                    retention_hours=retention_hours,
                    dry_run=False,
                    enforce_retention_duration=enforce_retention,
                    full=False,
                )
            )
    except CommitError as exc:
        if "Invalid retention period" not in str(exc):
            raise
        raise ConfigError(
            "--vacuum-retention-hours",
            retention_hours,
            "at least the table's delta.deletedFileRetentionDuration (default 168 hours), or --allow-short-retention",
            reason=str(exc.__cause__),
        ) from exc


class RsTableLog:
    """:class:`parka.consumer._log.TableLog` over a delta-rs handle: the functions above, bound
    to one table. Commits go to exactly the read version + 1 (:func:`commit_add_files`)."""

    def __init__(self, uri: str, table: DeltaTable, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = uri
        self.table = table
        self.storage_options = dict(storage_options or {})

    def version(self) -> int:
        return int(self.table.version())

    def refresh(self) -> int:
        return refresh(self.table)

    def txn_version(self, app_id: str) -> int | None:
        return txn_version(self.table, app_id)

    def arrow_schema(self) -> pa.Schema:
        return arrow_schema(self.table)

    def partition_columns(self) -> list[str]:
        return partition_columns(self.table)

    def configuration(self) -> dict[str, str]:
        return configuration(self.table)

    def referenced_files(self) -> set[str]:
        return referenced_files(self.table)

    def logged_files(self) -> set[str]:
        return logged_files(self.uri, self.storage_options)

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
        return None if table is None else RsTableLog(uri, table, storage_options)

    def create(
        self,
        uri: str,
        schema: pa.Schema,
        *,
        partition_by: Collection[str],
        storage_options: Mapping[str, str] | None = None,
    ) -> RsTableLog:
        table = create_table(uri, schema, partition_by=list(partition_by), storage_options=dict(storage_options or {}))
        return RsTableLog(uri, table, storage_options)
