"""The Delta rules both Delta engines share, as pure functions over Arrow schemas and the
Delta log's JSON: no deltalake, no JVM. The delta-rs engine (:mod:`._rs`) and the
delta-spark one (``parka.spark_ext``) both call them, so a table gets the same column types,
the same writability check and the same schema evolution whichever engine commits.

* Which Arrow types and names Delta can store (:func:`check_schema`), and a new table's
  partition columns (:func:`check_partition_columns`).
* The schema JSON (``schemaString``) of an Arrow schema (:func:`schema_json`, as delta-rs 1.x
  converts one: ``tests/unit/test_delta_rules.py`` compares the two) and back
  (:func:`arrow_schema_of_json`).
* How a schema evolves (:func:`evolve_schema_json`, after :mod:`parka.evolution`'s rule).
* Which tables raw files may join (:func:`check_writable`) and what any commit must satisfy
  (:func:`check_commit`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import pyarrow as pa

from parka.errors import CommitError, ConfigError, SchemaMismatchError
from parka.evolution import merge_schemas
from parka.partitioning import DELTA_ALLOWED, EXPRESSION_KEY, parse_spec
from parka.schema import child_fields

from .._log import DataFile
from .._storage import check_relative

__all__ = [
    "arrow_schema_of_json",
    "check_commit",
    "check_partition_columns",
    "check_schema",
    "check_writable",
    "delta_type_json",
    "evolve_schema_json",
    "field_json",
    "schema_json",
]

_BAD_NAME_CHARS = frozenset(" ,;{}()\n\t=")


# --- which schemas Delta can store ------------------------------------------------------------


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


# --- Arrow <-> Delta schema JSON ---------------------------------------------------------------

_PRIMITIVES: tuple[tuple[Any, str], ...] = (
    (pa.types.is_boolean, "boolean"),
    (pa.types.is_int8, "byte"),
    (pa.types.is_int16, "short"),
    (pa.types.is_int32, "integer"),
    (pa.types.is_int64, "long"),
    (pa.types.is_float32, "float"),
    (pa.types.is_float64, "double"),
    (pa.types.is_date, "date"),
)
_STRINGS = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
_BINARIES = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view)
_ARROW_OF = {
    "boolean": pa.bool_(),
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "string": pa.string(),
    "binary": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


def delta_type_json(t: pa.DataType) -> Any:
    """The Delta type (JSON: a name or a nested object) of an Arrow type Delta can store.

    Raises:
        SchemaMismatchError: a type Delta cannot store.
    """
    if isinstance(t, pa.ExtensionType):
        return delta_type_json(t.storage_type)
    if pa.types.is_dictionary(t):
        return delta_type_json(t.value_type)
    problem = _type_problem(t)
    if problem:
        raise SchemaMismatchError(problem)
    for check, name in _PRIMITIVES:
        if check(t):
            return name
    if any(check(t) for check in _STRINGS):
        return "string"
    if any(check(t) for check in _BINARIES):
        return "binary"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if isinstance(t, pa.Decimal128Type):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [field_json(f) for f in child_fields(t)]}
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": delta_type_json(t.key_type),
            "valueType": delta_type_json(t.item_type),
            "valueContainsNull": t.item_field.nullable,
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return {"type": "array", "elementType": delta_type_json(t.value_type), "containsNull": t.value_field.nullable}
    raise SchemaMismatchError(f"Delta cannot store {t}")  # _type_problem lets nothing else through


def field_json(f: pa.Field) -> dict[str, Any]:
    """A Delta field (JSON) of an Arrow field: its metadata's values stay strings, as delta-rs
    keeps them.

    Raises:
        SchemaMismatchError: a type Delta cannot store (:func:`check_schema` names the field).
    """
    kind = delta_type_json(f.type)
    metadata = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
    return {"name": f.name, "type": kind, "nullable": f.nullable, "metadata": metadata}


def schema_json(schema: pa.Schema) -> str:
    """The Delta schema JSON (``schemaString``) of an Arrow schema, converted as delta-rs creates
    tables, so that every engine gives a new table the same column types.

    Raises:
        SchemaMismatchError: a column Delta cannot store.
    """
    check_schema(schema)
    return json.dumps({"type": "struct", "fields": [field_json(f) for f in schema]}, separators=(",", ":"))


def _arrow_type(kind: Any) -> pa.DataType:
    if isinstance(kind, str):
        if kind in _ARROW_OF:
            return _ARROW_OF[kind]
        if kind.startswith("decimal(") and kind.endswith(")"):
            precision, scale = kind[len("decimal(") : -1].split(",")
            return pa.decimal128(int(precision), int(scale))
        raise ValueError(f"unknown Delta type {kind!r}")
    if kind["type"] == "struct":
        return pa.struct([_arrow_field(f) for f in kind["fields"]])
    if kind["type"] == "array":
        return pa.list_(pa.field("element", _arrow_type(kind["elementType"]), nullable=kind["containsNull"]))
    if kind["type"] == "map":
        value = pa.field("value", _arrow_type(kind["valueType"]), nullable=kind["valueContainsNull"])
        return pa.map_(pa.field("key", _arrow_type(kind["keyType"]), nullable=False), value)
    raise ValueError(f"unknown Delta type {kind['type']!r}")


def _arrow_field(field: Mapping[str, Any]) -> pa.Field:
    metadata = {
        k: v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for k, v in field["metadata"].items()
    }
    return pa.field(field["name"], _arrow_type(field["type"]), nullable=field["nullable"], metadata=metadata or None)


def arrow_schema_of_json(text: str) -> pa.Schema:
    """The Arrow schema of a Delta schema JSON, as delta-rs converts a table's (timestamp ->
    timestamp[us, UTC], timestamp_ntz -> timestamp[us]; metadata values that are not strings
    as their JSON).

    Raises:
        CommitError: JSON that is not a Delta schema.
    """
    try:
        return pa.schema([_arrow_field(f) for f in json.loads(text)["fields"]])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CommitError(f"cannot read the table schema: {type(exc).__name__}: {exc}") from exc


# --- evolution --------------------------------------------------------------------------------


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
        wanted = field_json(f)
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


# --- what tables and commits must satisfy ----------------------------------------------------


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


def check_partition_columns(schema: pa.Schema, partition_by: Collection[str]) -> None:
    """A new table's rule for its partition columns, for both engines.

    Raises:
        SchemaMismatchError: a partition column that is not a top-level primitive column of ``schema``.
        ConfigError: a derived partition column Delta cannot have (``bucket``: Iceberg-only),
            naming its spec.
    """
    for column in partition_by:
        if column not in schema.names or pa.types.is_nested(schema.field(column).type):
            raise SchemaMismatchError("a partition column must be a top-level primitive column", field=column)
        expression = (schema.field(column).metadata or {}).get(EXPRESSION_KEY.encode())
        if expression is not None:
            spec = parse_spec(f"{column}={expression.decode()}", key=f"{EXPRESSION_KEY} of column '{column}'")
            problem = spec.delta_problem()
            if problem is not None:
                raise ConfigError("partition_by", str(spec), DELTA_ALLOWED, reason=problem)


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
