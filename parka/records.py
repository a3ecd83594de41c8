"""Python records (dicts) to Arrow: many at a time in Arrow, one at a time only to explain a bad one.

:meth:`RecordConverter.convert` converts a batch of records column by column in Arrow (values inferred,
then cast to the declared type with Arrow's *safe* cast, so nothing is truncated or wrapped) and
checks unknown fields and nullability once per batch. When anything in a batch does not pass, the
batch takes the slow path: :func:`compile_validator`'s per-record check, which names the bad field
of each bad record and converts the rest. Both paths accept the same values:

==========================  ===========================================================
Arrow type                  Python values
==========================  ===========================================================
bool                        ``bool`` (not ``int``)
int8 ... uint64             ``int`` within range (not ``bool``, not ``float``)
float32, float64            ``float``, ``int`` or ``bool`` (as 1.0 / 0.0, as fastavro takes it)
string                      ``str``, or ``uuid.UUID`` (stored as its ``str``)
binary, fixed_size_binary   ``bytes``, ``bytearray``, ``memoryview`` (not ``str``)
decimal(p, s)               ``decimal.Decimal`` or ``int`` that fits without rounding
timestamp                   ``datetime`` (naive ones are taken as UTC), or ``int`` in the
                            column's unit (microseconds for schemas made from Avro)
date32                      ``date`` (not ``datetime``), or ``int`` days since the epoch
time32, time64              ``datetime.time``, or ``int`` in the column's unit
list                        ``list`` or ``tuple``
map                         a mapping with keys of the key type
struct                      a mapping with no unknown keys
==========================  ===========================================================

numpy scalars are accepted where the matching Python type is. A field absent from a record is
null (an error when the field is not nullable). One leniency of the batch path: a numpy bool
among the ints of an integer column is read as 1 / 0 (Arrow cannot tell it from an int, and
checking every value's type would cost more than the rest of the conversion).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parka._validate import compile_validator
from parka.errors import RecordError
from parka.schema import INT_UNIT_KEY, TIME_UNIT_KEY, child_fields

__all__ = ["Conversion", "RecordConverter", "compile_validator", "records_to_table", "struct_with_placeholders"]


def records_to_table(records: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a table from records already checked by :func:`compile_validator`.

    Raises:
        RecordError: Arrow refused a value (only possible for records that were not validated).
    """
    try:
        return pa.Table.from_pylist(list(records), schema=schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise RecordError(f"cannot convert records to Arrow: {exc}") from exc


@dataclass(frozen=True)
class Conversion:
    """A batch of records in Arrow: ``table`` holds the good ones in order; ``bad`` lists
    ``(index in the batch, error)`` for the others (``field`` set); ``kept`` gives the batch index
    of each row of ``table``, or is ``None`` when every record is in it."""

    table: pa.Table
    bad: list[tuple[int, RecordError]]
    kept: list[int] | None


class _Slow(Exception):
    """The Arrow path cannot take this batch as it is; the per-record path decides."""


class RecordConverter:
    """Converts batches of records (dicts) for one schema, as the module docstring describes.

    Raises:
        SchemaError: ``schema`` holds a type records cannot be given for (at construction).
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.validate = compile_validator(schema)
        self._names = frozenset(schema.names)
        # time columns have no Arrow inference that keeps ints apart from times: per record
        self._always_slow = any(_contains_time(f) for f in schema)

    def convert(self, records: Sequence[Mapping[str, Any]]) -> Conversion:
        """Convert ``records`` (already known to be mappings); never raises for a bad record."""
        if not self._always_slow:
            try:
                return Conversion(self._fast(records), [], None)
            except _Slow:
                pass
        return self._slow(records)

    def _fast(self, records: Sequence[Mapping[str, Any]]) -> pa.Table:
        columns = _columns(records, list(self.schema), self._names)
        for array, field in zip(columns, self.schema, strict=True):
            if _null_violation(array, field, None):
                raise _Slow("null in a non-nullable position")
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _slow(self, records: Sequence[Mapping[str, Any]]) -> Conversion:
        good: list[dict[str, Any]] = []
        kept: list[int] = []
        bad: list[tuple[int, RecordError]] = []
        for index, record in enumerate(records):
            try:
                good.append(self.validate(record))
            except RecordError as exc:
                bad.append((index, exc))
                continue
            kept.append(index)
        try:
            table = records_to_table(good, self.schema)
        except RecordError:
            # Arrow refused something the validator let through: isolate it record by record.
            rows, still = [], []
            for index, record in zip(kept, good, strict=True):
                try:
                    rows.append(records_to_table([record], self.schema))
                    still.append(index)
                except RecordError as exc:
                    bad.append((index, exc))
            bad.sort(key=lambda item: item[0])
            kept = still
            table = pa.concat_tables(rows) if rows else self.schema.empty_table()
        return Conversion(table, bad, None if not bad else kept)


_EMPTY: dict[str, Any] = {}


def _columns(dicts: Sequence[Mapping[str, Any]], fields: list[pa.Field], names: frozenset[str]) -> list[pa.Array]:
    """One array per field, from mappings (a missing key is null); :class:`_Slow` on an unknown
    key, or on a value that is not a mapping at all (the per-record path says so by name)."""
    out = []
    complete = True  # every mapping had every field
    try:
        for field in fields:
            try:
                values = list(map(itemgetter(field.name), dicts))
            except KeyError:
                complete = False
                values = [d.get(field.name) for d in dicts]
            out.append(_column(values, field))
        # A mapping holding every field has no other key unless it is longer than the field list.
        if (max(map(len, dicts), default=0) > len(fields)) if complete else bool(set().union(*dicts) - names):
            raise _Slow("unknown field")
    except (TypeError, AttributeError) as exc:  # not subscriptable by name, no len, no .get
        raise _Slow(str(exc)) from None
    return out


_NONE = type(None)


def _kinds_fit(kinds: set[type], t: pa.DataType) -> bool:
    """Whether Python values of these types are ones the validator takes for ``t``, where Arrow's
    inference would otherwise blur them (a bool read as a number, text as bytes, a datetime as a
    date)."""
    kinds.discard(_NONE)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return kinds <= {bytes, bytearray}
    if pa.types.is_date32(t):
        return all(k is dt.date or k is int or issubclass(k, np.integer) for k in kinds)
    return True


_CHECK_KINDS = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary, pa.types.is_date32)


def _column(values: list[Any], field: pa.Field) -> pa.Array:
    t = field.type
    if pa.types.is_map(t):
        return _map_column(values, t)
    if pa.types.is_struct(t):
        return _struct_column(values, field)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and (
        pa.types.is_struct(t.value_type) or pa.types.is_map(t.value_type)
    ):
        return _list_column(values, t)
    # Numbers need no such check: Arrow refuses a str or a Python bool among ints and turns
    # floats among ints into a float array, which _conform refuses for an int column.
    checked = t.value_type if pa.types.is_dictionary(t) else t
    if any(is_kind(checked) for is_kind in _CHECK_KINDS) and not _kinds_fit(set(map(type, values)), checked):
        raise _Slow("a value of a type the column does not take")
    repeated = _repeated(values, t)
    try:
        array = pa.array(values if repeated is None else repeated[0])
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise _Slow(str(exc)) from None
    array = _conform(array, field)
    return array if repeated is None else array.take(repeated[1])


# A column is sampled for repeats when it is at least twice this long; it repeats enough when
# the sample holds at most a quarter of distinct values, and the whole column too.
_SAMPLE = 256


def _repeated(values: list[Any], t: pa.DataType) -> tuple[list[Any], pa.Array] | None:
    """A timestamp or date column whose values repeat (event times of a coarse grain: the hour,
    the day) as its distinct values in order of first appearance and each value's position among
    them, so that Arrow converts each distinct value once: pyarrow converts a datetime several times
    slower than a dict finds it. ``None`` (convert every value) when the column is short, mostly
    distinct, holds values of another type (ints, subclasses: they take the plain path), or holds
    an aware datetime at a wall time its zone repeats or skips, where values equal as keys (a
    datetime's equality in one zone ignores ``fold``) can be different instants."""
    if pa.types.is_timestamp(t):
        kind: type = dt.datetime
    elif pa.types.is_date32(t):
        kind = dt.date
    else:
        return None
    n = len(values)
    try:
        if n < 2 * _SAMPLE or len(set(values[:_SAMPLE])) > _SAMPLE // 4:
            return None
        if not set(map(type, values)) <= {kind, _NONE}:
            return None
        distinct = list(dict.fromkeys(values))
        if len(distinct) > n // 4:
            return None
        if kind is dt.datetime:
            zones = {v.tzinfo for v in distinct if v is not None}
            if any(not _fixed(z) for z in zones) and any(
                v is not None and not _fixed(v.tzinfo) and v.replace(fold=1 - v.fold).utcoffset() != v.utcoffset()
                for v in distinct
            ):
                return None
    except Exception:  # a tzinfo that fails, a value that cannot be hashed: the plain path decides
        return None
    where = {v: i for i, v in enumerate(distinct)}
    return distinct, pa.array(np.fromiter(map(where.__getitem__, values), np.int32, n))


def _fixed(zone: dt.tzinfo | None) -> bool:
    """No zone (naive), a fixed offset, or UTC by its tz database name: a zone without wall
    times it repeats or skips."""
    return zone is None or isinstance(zone, dt.timezone) or getattr(zone, "key", None) in ("UTC", "Etc/UTC")


def _null_mask(values: list[Any]) -> pa.Array | None:
    """The validity mask of a nested column from its Python values (``None``: none is null)."""
    return pa.array([v is None for v in values], pa.bool_()) if None in values else None


def _list_column(values: list[Any], target: pa.DataType) -> pa.Array:
    """A list of structs or of maps, built from its elements converted as a column of their own
    (child by child, as :func:`_struct_column`), where Arrow's inference of nested dicts is slow.
    A value that is not a list or tuple takes the per-record path."""
    offsets = [0]
    elements: list[Any] = []
    for value in values:
        if value is not None:
            if type(value) is not list and type(value) is not tuple:
                raise _Slow("not a list")
            elements += value
        offsets.append(len(elements))
    inner = _column(elements, target.value_field)
    large = pa.types.is_large_list(target)
    mask = _null_mask(values)
    cls = pa.LargeListArray if large else pa.ListArray
    try:
        return cls.from_arrays(pa.array(offsets, pa.int64() if large else pa.int32()), inner, type=target, mask=mask)
    except (pa.ArrowException, ValueError) as exc:
        raise _Slow(str(exc)) from None


def _null_structs(n: int, t: pa.DataType) -> pa.Array:
    """``n`` null structs of type ``t`` whose never-null children hold placeholders (zeros, empty
    strings and lists): Arrow's own null structs have null children, which Parquet writers
    refuse under a field the schema says is never null."""
    return pa.StructArray.from_arrays([_filler(n, f) for f in t], fields=list(t), mask=pa.array([True] * n, pa.bool_()))


def struct_with_placeholders(children: list[pa.Array], t: pa.DataType, mask: pa.Array | None) -> pa.Array:
    """A struct array of type ``t`` from ``children``, null where ``mask`` is true, each
    never-null child holding placeholders under the null structs (see :func:`_null_structs`)."""
    if mask is not None:
        children = [
            c if f.nullable or not c.null_count else pc.if_else(mask, _filler(len(c), f), c)
            for c, f in zip(children, t, strict=True)
        ]
    return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)


def _filler(n: int, field: pa.Field) -> pa.Array:
    """``n`` values of ``field`` never read (under a null struct): nulls where it allows them."""
    t = field.type
    if field.nullable:
        return _null_structs(n, t) if pa.types.is_struct(t) else pa.nulls(n, t)
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([_filler(n, f) for f in t], fields=list(t))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        offsets = pa.array([0] * (n + 1), pa.int64() if pa.types.is_large_list(t) else pa.int32())
        if pa.types.is_map(t):
            return pa.MapArray.from_arrays(offsets, pa.array([], t.key_type), pa.array([], t.item_type), type=t)
        return type(pa.nulls(0, t)).from_arrays(offsets, pa.array([], t.value_type), type=t)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pa.array([""] * n, pa.string()).cast(t)
    if pa.types.is_decimal(t):
        return pa.array([decimal.Decimal(0)] * n, t)
    for zero in (pa.int64(), pa.int32()):  # timestamps cast from int64, dates from int32
        try:
            return pa.array([0] * n, zero).cast(t)
        except (pa.ArrowException, TypeError, ValueError):
            continue
    return pa.nulls(n, t)  # a type without a zero: left to the writer to judge


def _struct_column(values: list[Any], field: pa.Field) -> pa.Array:
    """A struct column built child by child (faster than Arrow inferring nested dicts, and each
    level's keys are checked)."""
    nulls = values.count(None)
    if nulls == len(values):
        return _null_structs(len(values), field.type)
    mask = _null_mask(values)
    dicts = values
    if nulls:
        # A null struct's rows take a present row's values: masked, never read, and no null lands
        # in a child the schema says is never null (Parquet writers refuse the file otherwise).
        stand_in = next(v for v in values if v is not None)
        dicts = [stand_in if v is None else v for v in values]
    t = field.type
    children = _columns(dicts, list(t), frozenset(f.name for f in t))
    return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)


def _contains_time(field: pa.Field) -> bool:
    """A time-of-day column anywhere in ``field``: an Arrow time type, or an Avro time held as an int."""
    t = field.type
    if pa.types.is_time(t) or TIME_UNIT_KEY in (field.metadata or {}):
        return True
    return any(_contains_time(child) for child in child_fields(t))


def _cast(array: pa.Array, target: pa.DataType) -> pa.Array:
    try:
        return array.cast(target, safe=True)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise _Slow(str(exc)) from None


def _conform(array: pa.Array, field: pa.Field) -> pa.Array:
    """``array`` (as Arrow inferred it from Python values) as ``field``'s type, or :class:`_Slow`
    when the values are not all of the kinds the table in this module's docstring allows."""
    target = field.type
    src = array.type
    if pa.types.is_null(src):
        return _null_structs(len(array), target) if pa.types.is_struct(target) else pa.nulls(len(array), target)
    if pa.types.is_dictionary(target):
        return _cast(_conform(array, field.with_type(target.value_type)), target)
    if pa.types.is_struct(target):
        if not pa.types.is_struct(src):
            raise _Slow("not a struct")
        have = {src.field(i).name: i for i in range(src.num_fields)}
        if set(have) - {f.name for f in target}:
            raise _Slow("unknown struct field")
        children = [
            _conform(array.field(have[f.name]), f) if f.name in have else _filler(len(array), f.with_nullable(True))
            for f in target
        ]
        mask = array.is_null() if array.null_count else None
        return struct_with_placeholders(children, target, mask)
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        if not (pa.types.is_list(src) or pa.types.is_large_list(src)):
            raise _Slow("not a list")
        values = _conform(array.values, target.value_field)
        offsets = array.offsets
        if pa.types.is_large_list(target) != pa.types.is_large_list(src):
            offsets = offsets.cast(pa.int64() if pa.types.is_large_list(target) else pa.int32())
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        mask = array.is_null() if array.null_count else None
        try:
            return cls.from_arrays(offsets, values, type=target, mask=mask)
        except (pa.ArrowException, ValueError) as exc:
            raise _Slow(str(exc)) from None
    if src.equals(target):
        return array
    if pa.types.is_integer(target):
        if not pa.types.is_integer(src):
            raise _Slow("not an integer")
        return _cast(array, target)
    if pa.types.is_floating(target):
        if not (pa.types.is_floating(src) or pa.types.is_integer(src)):
            raise _Slow("not a number")
        return _cast(array, target)
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        if not (pa.types.is_string(src) or pa.types.is_large_string(src)):
            raise _Slow("not a string")
        return _cast(array, target)
    if pa.types.is_binary(target) or pa.types.is_large_binary(target) or pa.types.is_fixed_size_binary(target):
        if not (pa.types.is_binary(src) or pa.types.is_large_binary(src)):
            raise _Slow("not bytes")
        return _cast(array, target)
    if pa.types.is_decimal(target):
        if not (pa.types.is_decimal(src) or pa.types.is_integer(src)):
            raise _Slow("not a decimal")
        return _cast(array, target)
    if pa.types.is_timestamp(target):
        if pa.types.is_integer(src):
            return _cast(_scale_ints(array, field), target)
        if not pa.types.is_timestamp(src):
            raise _Slow("not a timestamp")
        if src.tz is None and target.tz is not None:  # naive datetimes are UTC
            array = _cast(array, pa.timestamp(src.unit, tz="UTC"))
        return _cast(array, target)
    if pa.types.is_date32(target):
        if pa.types.is_integer(src):
            return _cast(_cast(array, pa.int32()), target)
        if not pa.types.is_date32(src):
            raise _Slow("not a date")
        return array
    raise _Slow(f"no Arrow path for {target}")


def _map_column(values: list[Any], target: pa.DataType) -> pa.Array:
    """A map column built from its keys and its items, each converted and checked as a column of
    its own (Arrow infers a struct from a dict, and converting dicts as maps typed bends some
    values: a float in an int map, bytes in a string map). A value that is not a mapping takes
    the per-record path."""
    offsets = [0]
    keys: list[Any] = []
    items: list[Any] = []
    try:
        for value in values:
            if value is not None:
                keys += value.keys()
                items += value.values()
            offsets.append(len(keys))
    except (AttributeError, TypeError) as exc:  # not a mapping
        raise _Slow(str(exc)) from None
    key_array = _column(keys, target.key_field)
    item_array = _column(items, target.item_field)
    mask = _null_mask(values)
    try:
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), key_array, item_array, type=target, mask=mask)
    except (pa.ArrowException, ValueError) as exc:
        raise _Slow(str(exc)) from None


def _scale_ints(array: pa.Array, field: pa.Field) -> pa.Array:
    """Plain ints for a timestamp declared in another unit (Avro ``timestamp-millis``), as
    microseconds; the per-record path does the same."""
    unit = (field.metadata or {}).get(INT_UNIT_KEY)
    try:
        if unit == b"ms":
            return pc.multiply_checked(array.cast(pa.int64()), 1000)
        if unit == b"ns":
            micros = pc.divide(array, 1000)  # integer division
            if pc.any(pc.not_equal(pc.multiply(micros, 1000), array)).as_py():
                raise _Slow("ns not a whole number of microseconds")
            return micros
    except (pa.ArrowException, OverflowError) as exc:
        raise _Slow(str(exc)) from None
    return array


def _null_violation(array: pa.Array, field: pa.Field, relevant: pa.Array | None) -> bool:
    """Whether a null sits where ``field`` (or a field inside it) is not nullable; ``relevant``
    masks out rows under a null parent."""
    if (
        not field.nullable
        and array.null_count
        and (relevant is None or pc.any(pc.and_(array.is_null(), relevant)).as_py())
    ):
        return True
    t = field.type
    if pa.types.is_struct(t):
        valid = array.is_valid() if array.null_count else None
        if relevant is not None:
            valid = relevant if valid is None else pc.and_(valid, relevant)
        return any(_null_violation(array.field(i), t.field(i), valid) for i in range(t.num_fields))
    if pa.types.is_map(t):  # a null key or a null where the items are never null
        first, last = array.offsets[0].as_py(), array.offsets[-1].as_py()  # into the whole children
        return _null_violation(array.keys.slice(first, last - first), t.key_field, None) or _null_violation(
            array.items.slice(first, last - first), t.item_field, None
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        # flatten() keeps only the items of non-null lists
        return _null_violation(array.flatten(), t.value_field, None)
    return False
