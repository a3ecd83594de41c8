"""Change data capture into upsert tables: Debezium's records, as ParquetProducer's segments.

``parka ingest --upsert --cdc debezium`` takes a topic whose rows are Debezium change events, in
either of Debezium's two shapes:

- **The envelope** (``op``, ``before``, ``after``, ``source``, ``ts_ms``): each segment is decoded
  and written again (:meth:`Debezium.unwrap`) as the table's rows: the fields of ``after`` for
  ``c``, ``r`` and ``u`` events and of ``before`` for ``d`` events, as top-level columns, then
  ``__op``, the sequence column (below), the metadata ``--cdc-fields`` asks for, and the segment's
  reserved columns (record key, timestamp, headers). The only segments parka does not land byte
  for byte: the rows change shape, in bulk, with Arrow (no record is read one by one).
- **Flattened** by Debezium's ``ExtractNewRecordState`` with deletes rewritten (a ``__deleted``
  column, ``"true"``/``"false"`` or a boolean): the segment lands as it is.

A delete event's row lands with the others and is deleted (by deletion vector) in the same commit:
it deletes its key (:meth:`parka.lake._keys.KeyIndex.plan`'s ``deleting``), so the key's later
tombstone, which Debezium sends for log compaction, finds nothing more to delete. ``t``
(truncate) and ``m`` (message) events name no key and are refused, as is an event without the
row its operation needs.

**The order** of a key's events is its sequence column: ``source.lsn`` where the connector gives
one (an integer: PostgreSQL's, Db2's, Oracle's SCN), else the envelope's ``ts_ms``, kept as
``__source_lsn`` or ``__ts_ms``; in a flattened table the first of ``__source_lsn``, ``__lsn``,
``__ts_ms``, ``__source_ts_ms`` it has, else the Kafka offset. ``--sequence-by`` names another.
Pure Arrow: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parka.errors import SegmentError
from parka.schema import RESERVED_PREFIX

__all__ = ["CDC_FORMATS", "DELETED_COLUMN", "OP_COLUMN", "Debezium", "cdc_field_column"]

CDC_FORMATS = ("debezium",)
"""What ``--cdc`` takes."""
OP_COLUMN = "__op"
"""An unwrapped envelope's operation column (``ExtractNewRecordState``'s name for ``add.fields=op``)."""
DELETED_COLUMN = "__deleted"
"""The column ``ExtractNewRecordState`` marks deletes with (its rewrite mode)."""
SEQUENCE_CANDIDATES = ("__source_lsn", "__lsn", "__ts_ms", "__source_ts_ms")
"""The columns a CDC table's default sequence is the first of (else the Kafka offset)."""
_ROW_OPS = ("c", "r", "u")
_OPS = (*_ROW_OPS, "d")

Shape = Literal["envelope", "flattened"]


def cdc_field_column(path: str) -> str:
    """The column an envelope field is kept as: ``op`` -> ``__op``, ``source.ts_ms`` ->
    ``__source_ts_ms`` (``ExtractNewRecordState``'s names for its ``add.fields``)."""
    return "__" + path.replace(".", "_")


def _integer(t: pa.DataType) -> bool:
    return pa.types.is_integer(t)


@dataclass(frozen=True)
class Debezium:
    """``--cdc debezium``: ``fields`` are envelope fields (``op``, ``ts_ms``, ``source.<name>``,
    ``transaction.<name>``) kept as columns (``--cdc-fields``)."""

    fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for path in self.fields:
            top = path.split(".", 1)[0]
            if top not in ("op", "ts_ms", "source", "transaction") or path in ("source", "transaction"):
                raise ValueError(
                    f"--cdc-fields: {path!r} is not an envelope field to keep (op, ts_ms, source.<field>, "
                    "transaction.<field>)"
                )

    @staticmethod
    def shape(schema: pa.Schema) -> Shape | None:
        """Which of Debezium's shapes ``schema`` is, ``None`` for neither."""
        names = set(schema.names)
        if "op" in names and ({"before", "after"} & names):
            return "envelope"
        if DELETED_COLUMN in names:
            return "flattened"
        return None

    @staticmethod
    def delete_column(schema: pa.Schema) -> str:
        """The column of a CDC table that marks its delete rows: ``__deleted`` when it has one
        (flattened), else ``__op``.

        Raises:
            ValueError: the table has neither.
        """
        for name in (DELETED_COLUMN, OP_COLUMN):
            if name in schema.names:
                return name
        raise ValueError(f"a --cdc table holds {DELETED_COLUMN} or {OP_COLUMN}; this one has neither")

    @staticmethod
    def deleting(column: pa.ChunkedArray | pa.Array, name: str) -> np.ndarray:
        """Which rows of a landed file are deletes, from its :meth:`delete_column` ``name``:
        ``__op`` = ``d``; ``__deleted`` true (or ``"true"``, as Debezium writes it)."""
        if name == OP_COLUMN:
            marks = pc.equal(column, "d")
        elif pa.types.is_boolean(column.type):
            marks = column
        else:
            marks = pc.equal(pc.utf8_lower(column.cast(pa.string())), "true")
        return np.asarray(pc.fill_null(marks, False).to_numpy(zero_copy_only=False), dtype=bool)

    @staticmethod
    def default_sequence(schema: pa.Schema) -> str | None:
        """A CDC table's sequence column when ``--sequence-by`` names none: the first integer
        column of :data:`SEQUENCE_CANDIDATES` it has, ``None`` (the Kafka offset) without one."""
        for name in SEQUENCE_CANDIDATES:
            if name in schema.names and _integer(schema.field(name).type):
                return name
        return None

    def unwrap(self, table: pa.Table) -> pa.Table | None:
        """The table's rows of a segment's ``table``: an envelope's rows unwrapped (see the module
        docstring); ``None`` for a flattened segment, which lands as it is.

        Raises:
            SegmentError: neither shape, an operation that names no key (``t``, ``m``) or an
                unknown one, an event without the row its operation needs, ``before`` and
                ``after`` of different types, a column name the unwrapping would give twice, a
                field ``--cdc-fields`` names that the envelope lacks, or a sequence with nulls.
                Without the message's coordinates: the caller adds them.
        """
        shape = self.shape(table.schema)
        if shape is None:
            raise SegmentError(
                "--cdc debezium: neither a Debezium envelope (op, before, after) nor a flattened event "
                f"({DELETED_COLUMN}, ExtractNewRecordState's rewrite of deletes); "
                f"columns: {', '.join(table.column_names)}"
            )
        if shape == "flattened":
            self._check_flattened(table)
            return None
        return self._unwrap(table)

    def _check_flattened(self, table: pa.Table) -> None:
        t = table.schema.field(DELETED_COLUMN).type
        if not (pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise SegmentError(f"--cdc debezium: {DELETED_COLUMN} is {t}, not a boolean or a string")

    def _unwrap(self, table: pa.Table) -> pa.Table:
        op = table.column("op").combine_chunks()
        if not (pa.types.is_string(op.type) or pa.types.is_large_string(op.type)):
            raise SegmentError(f"--cdc debezium: the envelope's op is {op.type}, not a string")
        known = pc.fill_null(pc.is_in(op, pa.array(_OPS, op.type)), False)
        if not pc.all(known).as_py():
            bad = op.filter(pc.invert(known))[0].as_py()
            what = "a null op" if bad is None else f"op {bad!r}"
            if bad == "t":
                what += " (a truncate names no key: empty the table by hand, or produce its rows' deletes)"
            raise SegmentError(f"--cdc debezium: {what}; an upsert table takes c, r, u and d events")
        is_delete = pc.equal(op, "d")
        parts = {n: table.column(n).combine_chunks() for n in ("before", "after") if n in table.column_names}
        for name, part in parts.items():
            if not pa.types.is_struct(part.type):
                raise SegmentError(f"--cdc debezium: the envelope's {name} is {part.type}, not a struct of the row")
        if len({p.type for p in parts.values()}) > 1:
            raise SegmentError(
                f"--cdc debezium: before ({parts['before'].type}) and after ({parts['after'].type}) differ"
            )
        row_type = next(iter(parts.values())).type
        after = parts.get("after", pa.nulls(len(op), row_type))
        missing = int(pc.sum(pc.cast(pc.and_(pc.invert(is_delete), pc.is_null(after)), pa.int64())).as_py() or 0)
        if missing:
            raise SegmentError(f"--cdc debezium: {missing} c, r or u event(s) without after")
        # a delete's row is its before (its key columns at least), or nulls where the connector sends none
        rows = pc.if_else(is_delete, parts.get("before", pa.nulls(len(op), row_type)), after)
        names = [f.name for f in row_type]
        columns: dict[str, pa.Array] = dict(zip(names, rows.flatten(), strict=True))
        fields = [pa.field(f.name, f.type, nullable=True) for f in row_type]
        sequence = self._sequence_path(table.schema)
        extra = {OP_COLUMN: op}
        for path in (*self.fields, *([sequence] if sequence else [])):
            extra[cdc_field_column(path)] = self._field(table, path)
        for name, array in extra.items():
            if name in columns:
                raise SegmentError(f"--cdc debezium: the row has a column {name!r}, the name of envelope metadata")
            columns[name] = array
            names.append(name)
            fields.append(pa.field(name, array.type))
        if sequence and columns[cdc_field_column(sequence)].null_count:
            nulls = columns[cdc_field_column(sequence)].null_count
            raise SegmentError(f"--cdc debezium: {sequence}, the events' sequence, is null in {nulls} event(s)")
        for name in table.column_names:
            if name.startswith(RESERVED_PREFIX):
                columns[name] = table.column(name).combine_chunks()
                names.append(name)
                fields.append(table.schema.field(name))
        return pa.Table.from_arrays([columns[n] for n in names], schema=pa.schema(fields))

    @staticmethod
    def _sequence_path(schema: pa.Schema) -> str | None:
        """The envelope field the default sequence is: ``source.lsn`` (an integer), else ``ts_ms``."""
        if "source" in schema.names:
            source = schema.field("source").type
            if pa.types.is_struct(source) and source.get_field_index("lsn") >= 0 and _integer(source.field("lsn").type):
                return "source.lsn"
        if "ts_ms" in schema.names and _integer(schema.field("ts_ms").type):
            return "ts_ms"
        return None

    @staticmethod
    def _field(table: pa.Table, path: str) -> pa.Array:
        top, _, rest = path.partition(".")
        if top not in table.column_names:
            raise SegmentError(f"--cdc-fields: the envelope has no {top}")
        array = table.column(top).combine_chunks()
        if rest:
            if not pa.types.is_struct(array.type) or array.type.get_field_index(rest) < 0:
                raise SegmentError(f"--cdc-fields: the envelope's {top} has no field {rest!r}")
            array = pc.struct_field(array, rest)
        return array
