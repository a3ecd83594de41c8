"""Schema evolution at any depth: which table schema takes a segment's, or why none can.

One pure rule over Arrow schemas, for both commit engines (delta-rs in ``parka ingest``,
delta-spark in Spark raw mode) and for nothing else to copy: :func:`merge_schemas` walks the
table's and the segment's fields by name, into structs, list elements and map values, and
returns the table schema that takes the segment (``schema``), what changed (``changes``) and
what cannot be taken (``problems``, each naming its path and both types).

Paths name struct fields with dots (``actor.site_admin``); a list's element is ``element``, a
map's key and value ``key`` and ``value`` (``commits.element.author.email``), as Delta's
``delta.typeChanges`` metadata and Spark's messages name them.

What joins (``changes``):

* ``added``: a field the table lacks. Older files have no value for it, so it joins nullable.
  Outside lists and maps a field the segment declares non-nullable is refused instead (older
  rows would be null in a column that says it never is; as Avro, a new field needs a default).
* ``widened``: a wider type, only where the table allows type widening
  (``delta.enableTypeWidening``): integers to wider integers, float to double, a decimal to
  one with no fewer digits on either side of the point (Delta's type widening).
* ``relaxed``: a NOT NULL table field the segment declares nullable becomes nullable.

What is taken as it is: a field the segment lacks that the table has nullable (readers fill
null by name), a narrower type where the table allows type widening (a segment written before
the table was widened: readers upcast it), a non-nullable field of the segment in a nullable
table field.

What is refused (``problems``): any other type change (a narrowing without type widening, a
string that became an integer), a struct where the table has a leaf or the reverse, a field
missing from the segment that the table declares NOT NULL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

__all__ = [
    "TYPE_WIDENING_KEY",
    "Change",
    "Merge",
    "Problem",
    "merge_schemas",
    "nullable_within",
    "type_identity",
    "widening_enabled",
]

TYPE_WIDENING_KEY = "delta.enableTypeWidening"
"""The Delta table property that lets a column's type widen (and the Arrow schema metadata key
parka's table schemas carry it under, so that the rule travels with the schema)."""

_INTEGERS = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


@dataclass(frozen=True)
class Change:
    """One change the table takes: ``kind`` at ``path``, from ``before`` (``None``: a new field)
    to ``after``."""

    path: str
    kind: Literal["added", "widened", "relaxed"]
    before: pa.DataType | None
    after: pa.DataType


@dataclass(frozen=True)
class Problem:
    """Why the table cannot take the segment at ``path``: ``segment`` and ``table`` are the two
    sides' types (``None``: the side has no such field)."""

    path: str
    segment: pa.DataType | None
    table: pa.DataType | None
    reason: str

    def __str__(self) -> str:
        seg = "missing" if self.segment is None else str(self.segment)
        table = "missing" if self.table is None else str(self.table)
        return f"'{self.path}' is {seg} in the segment but {table} in the table: {self.reason}"


@dataclass(frozen=True)
class Merge:
    """The table schema that takes the segment (the table's when nothing changed), what changed,
    and the problems (when there are any, ``schema`` is meaningless)."""

    schema: pa.Schema
    changes: tuple[Change, ...]
    problems: tuple[Problem, ...]

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def widening_enabled(schema: pa.Schema) -> bool:
    """Whether a table schema (as parka's committer hands it out) allows type widening."""
    return (schema.metadata or {}).get(TYPE_WIDENING_KEY.encode(), b"").lower() == b"true"


def type_identity(t: pa.DataType) -> Any:
    """A leaf type's identity for compatibility: ignores large/view variants, dictionary
    encoding and timestamp units down to milliseconds (Delta readers take Parquet's MILLIS and
    MICROS alike), keeps everything else: a nanosecond timestamp and a timestamp with a time
    zone (UTC instants) against one without differ. Nested types: their child types in order."""
    if pa.types.is_dictionary(t):
        return type_identity(t.value_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_timestamp(t):
        return ("timestamp", t.tz is not None, t.unit == "ns")
    if pa.types.is_map(t):
        return ("map", type_identity(t.key_type), type_identity(t.item_type))
    if _is_list(t):
        return ("list", type_identity(t.value_type))
    if pa.types.is_struct(t):
        return ("struct", tuple((f.name, type_identity(f.type)) for f in t))
    return str(t)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t)


def _kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_struct(t):
        return "struct"
    if _is_list(t):
        return "list"
    if pa.types.is_map(t):
        return "map"
    return "leaf"


def _widens(narrow: pa.DataType, wide: pa.DataType) -> bool:
    """Whether Delta's type widening takes ``narrow`` to ``wide`` (a strict widening)."""
    if narrow in _INTEGERS and wide in _INTEGERS:
        return _INTEGERS.index(narrow) < _INTEGERS.index(wide)
    if pa.types.is_float32(narrow) and pa.types.is_float64(wide):
        return True
    if pa.types.is_decimal(narrow) and pa.types.is_decimal(wide) and narrow != wide:
        n: Any = narrow
        w: Any = wide
        return bool(
            w.precision >= n.precision and w.scale >= n.scale and w.precision - w.scale >= n.precision - n.scale
        )
    return False


class _Merger:
    def __init__(self, widening: bool) -> None:
        self.widening = widening
        self.changes: list[Change] = []
        self.problems: list[Problem] = []

    def fields(
        self, table: Iterable[pa.Field], segment: Iterable[pa.Field], prefix: str, inside: bool, skip: frozenset[str]
    ) -> list[pa.Field]:
        """The merged fields: the table's in its order, then the segment's new ones in theirs."""
        seg = {f.name: f for f in segment}
        out: list[pa.Field] = []
        for t in table:
            s = seg.pop(t.name, None)
            if s is None:
                if not t.nullable and not inside and t.name not in skip:
                    self.problems.append(
                        Problem(prefix + t.name, None, t.type, "the table's field is NOT NULL, the segment lacks it")
                    )
                out.append(t)
            else:
                out.append(self.field(t, s, prefix + t.name, inside))
        for s in seg.values():
            if not s.nullable and not inside:
                self.problems.append(
                    Problem(prefix + s.name, s.type, None, "a new field must be nullable: older rows have no value")
                )
                continue
            added = nullable_within(s, inside=inside).with_nullable(True)
            self.changes.append(Change(prefix + s.name, "added", None, added.type))
            out.append(added)
        return out

    def field(self, t: pa.Field, s: pa.Field, path: str, inside: bool) -> pa.Field:
        nullable = t.nullable
        if s.nullable and not t.nullable and not inside:
            self.changes.append(Change(path, "relaxed", t.type, t.type))
            nullable = True
        return t.with_type(self.type(t.type, s.type, path, inside)).with_nullable(nullable)

    def type(self, t: pa.DataType, s: pa.DataType, path: str, inside: bool) -> pa.DataType:
        kinds = (_kind(t), _kind(s))
        if kinds[0] != kinds[1]:
            self.problems.append(Problem(path, s, t, f"a {kinds[1]} cannot replace a {kinds[0]}"))
            return t
        if kinds[0] == "struct":
            return pa.struct(self.fields(list(t), list(s), path + ".", inside, frozenset()))
        if kinds[0] == "list":
            item = self.field(t.value_field, s.value_field, path + ".element", True)
            return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
        if kinds[0] == "map":
            if type_identity(t.key_type) != type_identity(s.key_type):
                self.problems.append(Problem(path + ".key", s.key_type, t.key_type, "a map's key type cannot change"))
                return t
            item = self.field(t.item_field, s.item_field, path + ".value", True)
            return pa.map_(t.key_field, item)
        if type_identity(t) == type_identity(s):
            return t
        if self.widening and _widens(t, s):
            self.changes.append(Change(path, "widened", t, s))
            return s
        if self.widening and _widens(s, t):
            return t  # written before the table widened: readers upcast it
        if _widens(t, s):
            reason = f"a wider type needs type widening on the table ({TYPE_WIDENING_KEY}=true)"
        elif _widens(s, t):
            reason = "a narrowing; with type widening on the table an older, narrower segment would be taken"
        else:
            reason = "the type changed (only widenings can join, with type widening on the table)"
        self.problems.append(Problem(path, s, t, reason))
        return t


def nullable_within(field: pa.Field, *, inside: bool = False) -> pa.Field:
    """``field`` with every field under a list or map nullable (Delta refuses NOT NULL there;
    ``inside``: it is under one itself)."""
    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([nullable_within(f, inside=inside) for f in t])
    elif _is_list(t):
        item = nullable_within(t.value_field, inside=True)
        t = pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    elif pa.types.is_map(t):
        t = pa.map_(t.key_type, nullable_within(t.item_field, inside=True))
    out = field.with_type(t)
    return out.with_nullable(True) if inside else out


def merge_schemas(
    table: pa.Schema, segment: pa.Schema, *, widening: bool | None = None, absent_ok: Iterable[str] = ()
) -> Merge:
    """The table schema that takes ``segment``'s fields at any depth (see the module docstring).

    ``widening``: whether the table allows type widening; ``None`` reads it from ``table``'s
    metadata (:func:`widening_enabled`). ``absent_ok``: top-level table columns the segment may
    lack though NOT NULL (partition columns a table derives). The merged schema keeps the
    table's metadata and its fields' order; new fields follow, in the segment's order.
    """
    merger = _Merger(widening_enabled(table) if widening is None else widening)
    fields = merger.fields(list(table), list(segment), "", False, frozenset(absent_ok))
    merged = pa.schema(fields, metadata=table.metadata)
    return Merge(merged, tuple(merger.changes), tuple(merger.problems))
