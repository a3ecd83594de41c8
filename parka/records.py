"""Python records (dicts) to Arrow: many at a time in Arrow, one at a time only to explain a bad one.

:func:`records_to_arrow` converts a batch of records column by column in Arrow (values inferred,
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
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parka.errors import RecordError, SchemaError
from parka.schema import INT_UNIT_KEY, TIME_UNIT_KEY, child_fields

__all__ = ["Conversion", "RecordConverter", "compile_validator", "records_to_table"]

_Converter = Callable[[Any], Any]


class _Invalid(Exception):
    """Raised by converters; ``path`` collects the field path innermost first on the way out."""

    def __init__(self, message: str, *path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = list(path)


def compile_validator(schema: pa.Schema) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Return a function that checks one record against ``schema`` and returns it ready for Arrow.

    The returned function gives a shallow copy of the record (absent nullable fields stay absent;
    :func:`records_to_table` reads them as null) with values converted where Arrow needs it
    (``uuid.UUID`` to ``str``, exact decimals quantized to the column's scale, numpy scalars to
    Python ones, nested structs copied).

    Raises:
        SchemaError: ``schema`` holds a type the validator does not support (at compile time).

    The returned function raises :class:`RecordError` with ``field`` set to the path of the bad
    value (``"a.b[3].c"``, map keys as ``"m['k']"``), or ``None`` when the record is not a mapping.
    """
    check = _struct_converter(list(schema), top_level=True)

    def validate(record: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return check(record)
        except _Invalid as exc:
            raise RecordError(exc.message, field=_join_path(exc.path)) from None

    return validate


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
    """Converts batches of records (dicts) for one schema; see :func:`records_to_arrow`.

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
    # Numbers need no such check: Arrow refuses a str or a Python bool among ints and turns
    # floats among ints into a float array, which _conform refuses for an int column.
    checked = t.value_type if pa.types.is_dictionary(t) else t
    if any(is_kind(checked) for is_kind in _CHECK_KINDS) and not _kinds_fit(set(map(type, values)), checked):
        raise _Slow("a value of a type the column does not take")
    try:
        array = pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise _Slow(str(exc)) from None
    return _conform(array, field)


def _null_structs(n: int, t: pa.DataType) -> pa.Array:
    """``n`` null structs of type ``t`` whose never-null children hold placeholders (zeros, empty
    strings and lists): Arrow's own null structs have null children, which Parquet writers
    refuse under a field the schema says is never null."""
    return pa.StructArray.from_arrays([_filler(n, f) for f in t], fields=list(t), mask=pa.array([True] * n, pa.bool_()))


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
    mask = None
    dicts = values
    if nulls:
        mask = pa.array([v is None for v in values], pa.bool_())
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
        if mask is not None:  # under a null struct, a never-null child holds placeholders (see _null_structs)
            children = [
                c if f.nullable or not c.null_count else pc.if_else(mask, _filler(len(array), f), c)
                for c, f in zip(children, target, strict=True)
            ]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
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
    """A top-level map column. Arrow infers a struct from a dict, so maps convert typed; a round
    trip then shows any value Arrow bent on the way (a float in an int map, bytes in a string
    map). Maps nested in other types take the per-record path."""
    try:
        array = pa.array(values, target)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise _Slow(str(exc)) from None
    if array.to_pylist(maps_as_pydicts="strict") != values:
        raise _Slow("a map value changed in conversion")
    return array


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
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        # flatten() keeps only the items of non-null lists
        return _null_violation(array.flatten(), t.value_field, None)
    return False


def _join_path(pieces: list[str]) -> str | None:
    path = ""
    for piece in reversed(pieces):
        path += piece if (not path or piece.startswith("[")) else "." + piece
    return path or None


def _describe(value: Any) -> str:
    return type(value).__name__


def _converter(t: pa.DataType) -> _Converter:
    if pa.types.is_dictionary(t):
        return _converter(t.value_type)
    if pa.types.is_boolean(t):
        return _check_bool
    if pa.types.is_integer(t):
        return _int_converter(str(t), *_int_range(t))
    if pa.types.is_floating(t) and not pa.types.is_float16(t):
        return _to_float
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _to_string
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _to_bytes
    if pa.types.is_fixed_size_binary(t):
        return _fixed_converter(t.byte_width)
    if pa.types.is_decimal(t):
        return _decimal_converter(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return _timestamp_converter(str(t))
    if pa.types.is_date(t):
        return _date_converter(pa.types.is_date32(t))
    if pa.types.is_time(t):
        return _time_converter(str(t), {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[t.unit])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _list_converter(_converter(t.value_type), t.value_field.nullable)
    if pa.types.is_map(t):
        return _map_converter(_converter(t.key_type), _converter(t.item_type), t.item_field.nullable)
    if pa.types.is_struct(t):
        return _struct_converter(list(t), top_level=False)
    raise SchemaError(f"records of Arrow type {t} are not supported")


def _field_converter(field: pa.Field) -> _Converter:
    """The type's converter, scaling plain ints for timestamps declared in another unit, and
    turning ``datetime.time`` values into the int an Avro time column holds."""
    conv = _converter(field.type)
    time_unit = (field.metadata or {}).get(TIME_UNIT_KEY)
    if time_unit is not None and pa.types.is_integer(field.type):
        return _time_of_day_converter(conv, time_unit)
    unit = (field.metadata or {}).get(INT_UNIT_KEY)
    if unit is None or not pa.types.is_timestamp(field.type):
        return conv

    def scaled(value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            if unit == b"ms":
                value = value * 1000
            elif unit == b"ns":
                if value % 1000:
                    raise _Invalid(f"{value} ns is not a whole number of microseconds")
                value = value // 1000
        return conv(value)

    return scaled


def _time_of_day_converter(conv: _Converter, unit: bytes) -> _Converter:
    per_second = 1000 if unit == b"ms" else 1_000_000
    day = 86_400 * per_second

    def convert(value: Any) -> Any:
        if isinstance(value, dt.time):
            micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
            if per_second == 1000 and micros % 1000:
                raise _Invalid(f"{value} has sub-millisecond precision; a time-millis holds milliseconds")
            return micros // (1_000_000 // per_second)
        number = conv(value)
        if not 0 <= number < day:
            raise _Invalid(f"{number} is not a time of day in {unit.decode()}")
        return number

    return convert


def _struct_converter(fields: list[pa.Field], *, top_level: bool) -> _Converter:
    # (name, converter, nullable, type whose values pass unchanged so the call can be skipped)
    specs = tuple((f.name, _field_converter(f), f.nullable, *_fast_path(f)) for f in fields)
    names = frozenset(f.name for f in fields)
    what = "record" if top_level else "struct"

    def convert(value: Any) -> dict[str, Any]:
        if type(value) is not dict and not isinstance(value, Mapping):
            raise _Invalid(f"expected a mapping for a {what}, got {_describe(value)}")
        if not names.issuperset(value):
            unknown = next(k for k in value if k not in names)
            raise _Invalid("unknown field, not in the schema", str(unknown))
        get = value.get
        changed = None
        for name, conv, nullable, pass_through, low, high in specs:
            item = get(name)
            if type(item) is pass_through and (low is None or low <= item <= high):
                continue
            if item is None:
                if not nullable:
                    problem = "is null" if name in value else "is missing"
                    raise _Invalid(f"required field {problem}", name)
                continue
            try:
                converted = conv(item)
            except _Invalid as exc:
                exc.path.append(name)
                raise
            if converted is not item:
                if changed is None:
                    changed = []
                changed.append((name, converted))
        # A copy, so that the caller changing its dict later cannot alter a validated record.
        out = dict(value)
        if changed is not None:
            out.update(changed)
        return out

    return convert


_PASS_THROUGH: dict[int, type] = {
    pa.bool_().id: bool,
    pa.float32().id: float,
    pa.float64().id: float,
    pa.string().id: str,
    pa.large_string().id: str,
    pa.binary().id: bytes,
    pa.large_binary().id: bytes,
    pa.timestamp("us").id: dt.datetime,
    pa.date32().id: dt.date,
}


def _fast_path(field: pa.Field) -> tuple[type | None, Any, Any]:
    """``(type, low, high)``: values of exactly ``type`` (within ``low..high`` for ints) pass as they are."""
    t = field.type
    if pa.types.is_integer(t):
        time_unit = (field.metadata or {}).get(TIME_UNIT_KEY)
        if time_unit is not None:  # an Avro time of day: ints within one day
            return int, 0, 86_400 * (1000 if time_unit == b"ms" else 1_000_000) - 1
        return (int, *_int_range(t))
    return _PASS_THROUGH.get(t.id), None, None


def _int_range(t: pa.DataType) -> tuple[int, int]:
    info = np.iinfo(t.to_pandas_dtype())
    return int(info.min), int(info.max)


def _list_converter(item_conv: _Converter, item_nullable: bool) -> _Converter:
    def convert(value: Any) -> list[Any]:
        if type(value) is not list and not isinstance(value, (list, tuple)):
            raise _Invalid(f"expected a list, got {_describe(value)}")
        out: list[Any] = []
        for index, item in enumerate(value):
            if item is None:
                if not item_nullable:
                    raise _Invalid("null item in a list of non-nullable items", f"[{index}]")
                out.append(None)
                continue
            try:
                out.append(item_conv(item))
            except _Invalid as exc:
                exc.path.append(f"[{index}]")
                raise
        return out

    return convert


def _map_converter(key_conv: _Converter, value_conv: _Converter, value_nullable: bool) -> _Converter:
    def convert(value: Any) -> dict[Any, Any]:
        if not isinstance(value, Mapping):
            raise _Invalid(f"expected a mapping for a map, got {_describe(value)}")
        out: dict[Any, Any] = {}
        for key, item in value.items():
            where = f"[{key!r}]"
            if key is None:
                raise _Invalid("map keys cannot be null", where)
            try:
                converted_key = key_conv(key)
            except _Invalid as exc:
                raise _Invalid(f"bad map key: {exc.message}", where) from None
            if item is None:
                if not value_nullable:
                    raise _Invalid("null value in a map of non-nullable values", where)
                out[converted_key] = None
                continue
            try:
                out[converted_key] = value_conv(item)
            except _Invalid as exc:
                exc.path.append(where)
                raise
        return out

    return convert


def _check_bool(value: Any) -> bool:
    if type(value) is bool:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise _Invalid(f"expected bool, got {_describe(value)}")


def _int_converter(type_name: str, low: int, high: int) -> _Converter:
    def convert(value: Any) -> int:
        if type(value) is not int:
            # bool is an int subclass, but True in an int column is almost always a bug
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise _Invalid(f"expected {type_name}, got {_describe(value)}")
            value = int(value)
        if low <= value <= high:
            return value
        raise _Invalid(f"{value} is out of range for {type_name}")

    return convert


def _to_float(value: Any) -> float:
    if type(value) is float:
        return value
    # bools are taken as 1.0 / 0.0, as fastavro takes them for a double (and Arrow on the batch path)
    if not isinstance(value, (float, int, np.integer, np.floating, np.bool_)):
        raise _Invalid(f"expected float, got {_describe(value)}")
    try:
        return float(value)
    except OverflowError:
        raise _Invalid(f"{value} is too large for a float") from None


def _to_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, uuid.UUID):
        return str(value)
    raise _Invalid(f"expected str, got {_describe(value)}")


def _to_bytes(value: Any) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise _Invalid(f"expected bytes, got {_describe(value)}")


def _fixed_converter(width: int) -> _Converter:
    def convert(value: Any) -> bytes:
        data = _to_bytes(value)
        if len(data) != width:
            raise _Invalid(f"expected exactly {width} bytes, got {len(data)}")
        return data

    return convert


def _decimal_converter(precision: int, scale: int) -> _Converter:
    exponent = decimal.Decimal(1).scaleb(-scale)
    # quantize() signals InvalidOperation when the result needs more than `precision` digits
    context = decimal.Context(prec=precision, traps=[decimal.InvalidOperation])
    type_name = f"decimal({precision}, {scale})"

    def convert(value: Any) -> decimal.Decimal:
        if isinstance(value, decimal.Decimal):
            number = value
        elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            number = decimal.Decimal(int(value))
        else:
            raise _Invalid(f"expected Decimal or int for {type_name}, got {_describe(value)}")
        if not number.is_finite():
            raise _Invalid(f"{value} is not a finite number")
        try:
            exact = number.quantize(exponent, context=context)
        except decimal.InvalidOperation:
            raise _Invalid(f"{value} does not fit {type_name}") from None
        if exact != number:
            raise _Invalid(f"{value} has more than {scale} decimal places; round it before sending")
        return exact

    return convert


def _int64_or(value: Any, what: str) -> int:
    """``value`` as an int64 when it is an integer, else raise ``expected <what>``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _Invalid(f"expected {what}, got {_describe(value)}")
    number = int(value)
    if not -(2**63) <= number < 2**63:
        raise _Invalid(f"{number} is out of range for int64")
    return number


def _timestamp_converter(type_name: str) -> _Converter:
    what = f"datetime or int for {type_name}"

    def convert(value: Any) -> Any:
        # Arrow converts aware datetimes to UTC and stores naive ones as they are, i.e. as UTC.
        if isinstance(value, dt.datetime):
            return value
        return _int64_or(value, what)

    return convert


def _date_converter(days: bool) -> _Converter:
    what = "date or int days" if days else "date or int milliseconds"

    def convert(value: Any) -> Any:
        if type(value) is dt.date:
            return value
        if isinstance(value, dt.datetime):
            raise _Invalid("expected a date, got datetime; use .date() if the time is meant to be dropped")
        if isinstance(value, dt.date):
            return value
        number = _int64_or(value, what)
        if days and not -(2**31) <= number < 2**31:
            raise _Invalid(f"{number} is out of range for date32")
        return number

    return convert


def _time_converter(type_name: str, per_second: int) -> _Converter:
    day = 86_400 * per_second

    def convert(value: Any) -> Any:
        if isinstance(value, dt.time):
            return value
        number = _int64_or(value, f"time or int for {type_name}")
        if not 0 <= number < day:
            raise _Invalid(f"{number} is not a time of day for {type_name}")
        return number

    return convert
