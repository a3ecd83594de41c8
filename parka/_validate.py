"""One record checked against a schema, field by field: what names a bad record's bad field.

:func:`compile_validator` compiles a schema into nested converters, one per field type, that
check a record's values, convert them where Arrow needs it, and raise with the path of the first
bad value. :mod:`parka.records` converts batches in Arrow and comes here only for a batch that
did not pass (or a schema with time columns); its module docstring lists the values each Arrow
type takes, which both paths accept alike.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from parka.errors import RecordError, SchemaError
from parka.schema import INT_UNIT_KEY, TIME_UNIT_KEY

__all__ = ["compile_validator"]

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
    :func:`parka.records.records_to_table` reads them as null) with values converted where Arrow needs it
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
