"""Iceberg's transforms as parka computes them on Arrow arrays (``parka._bucket``, the year and
month specs), value by value against pyiceberg's scalar transforms: the same partitions, or a
table's readers would prune away rows."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from typing import Any

import mmh3
import pyarrow as pa
import pytest
from pyiceberg.transforms import BucketTransform, MonthTransform, YearTransform
from pyiceberg.types import (
    BinaryType,
    DateType,
    FixedType,
    IcebergType,
    LongType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
)

from parka._bucket import bucket, murmur3_32
from parka.partitioning import parse_spec

RNG = random.Random(20261126)
MICROS_PER_DAY = 86_400_000_000
# 1900-01-01 to 2100-01-01 in microseconds, and the instants around year and month boundaries
SPAN = (-2_208_988_800_000_000, 4_102_444_800_000_000)


def _boundaries() -> list[int]:
    out = []
    for year in (1900, 1969, 1970, 1971, 2000, 2024, 2026, 2099):
        for month in (1, 2, 3, 12):
            at = dt.datetime(year, month, 1, tzinfo=dt.timezone.utc)
            micros = (at - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)
            out += [micros - 1, micros, micros + 1]
    return out


MICROS = [RNG.randrange(*SPAN) for _ in range(3000)] + _boundaries() + [0, -1, 1]


def test_murmur3_is_mmh3_on_every_length_and_icebergs_spec_vectors() -> None:
    for n in range(0, 70):
        for _ in range(20):
            data = RNG.randbytes(n)
            assert murmur3_32(data) == mmh3.hash(data), data
    # the Iceberg spec's "Appendix B" examples: an int (as a long), a string
    assert murmur3_32((34).to_bytes(8, "little")) == 2017239379
    assert murmur3_32(b"iceberg") == 1210000089


def _iceberg(n: int, iceberg_type: IcebergType) -> Callable[[Any], int | None]:
    return BucketTransform(n).transform(iceberg_type)


def _check(values: pa.Array, python: list[Any], iceberg_type: IcebergType) -> None:
    for n in (1, 2, 7, 16, 1000, 2**31 - 1):
        expected = [_iceberg(n, iceberg_type)(v) for v in python]
        assert bucket(values, n).to_pylist() == expected, (values.type, n)
        assert parse_spec(f"b=bucket(x, {n})").evaluate(values).to_pylist() == expected


@pytest.mark.parametrize("t", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32()])
def test_integers_bucket_as_icebergs_longs(t: pa.DataType) -> None:
    bits = t.bit_width
    lo, hi = (0, 2**bits) if pa.types.is_unsigned_integer(t) else (-(2 ** (bits - 1)), 2 ** (bits - 1))
    python = [RNG.randrange(lo, hi) for _ in range(2000)] + [lo, hi - 1, 0, None]
    _check(pa.array(python, t), python, LongType())


def test_dates_bucket_as_icebergs_days() -> None:
    days = [m // MICROS_PER_DAY for m in MICROS] + [None]
    python = [None if d is None else dt.date(1970, 1, 1) + dt.timedelta(days=d) for d in days]
    _check(pa.array(python, pa.date32()), days, DateType())
    _check(pa.array(python, pa.date64()), days, DateType())


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Paris"])
def test_timestamps_bucket_as_icebergs_micros_in_every_unit(unit: str, tz: str | None) -> None:
    per = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}[unit]
    raw = [m // per for m in MICROS] if unit != "ns" else [m * 1000 + RNG.randrange(1000) for m in MICROS]
    values = pa.array([*raw, None], pa.int64()).cast(pa.timestamp(unit, tz=tz))
    if unit == "ns":  # Iceberg's timestamp_ns buckets its micros, floored
        _check(values, [*raw, None], TimestamptzNanoType() if tz else TimestampNanoType())
    else:
        _check(values, [*(r * per for r in raw), None], TimestamptzType() if tz else TimestampType())


@pytest.mark.parametrize(("t", "per"), [(pa.time32("s"), 1_000_000), (pa.time32("ms"), 1000), (pa.time64("us"), 1)])
def test_times_bucket_as_icebergs_micros(t: pa.DataType, per: int) -> None:
    raw = [RNG.randrange(MICROS_PER_DAY // per) for _ in range(1000)]
    _check(pa.array([*raw, None], t), [*(r * per for r in raw), None], TimeType())


@pytest.mark.parametrize("t", [pa.string(), pa.large_string(), pa.string_view()])
def test_strings_bucket_their_utf8_bytes(t: pa.DataType) -> None:
    alphabet = "abcxyz019 -é€日本語\U0001f600"
    python = ["".join(RNG.choice(alphabet) for _ in range(RNG.randrange(0, 60))) for _ in range(1000)]
    python += ["", "iceberg", "x" * 1000, None]
    _check(pa.array(python, t), python, StringType())
    # sliced (an array with an offset) and dictionary-encoded: the same buckets
    sliced = pa.array(python, t).slice(500)
    assert bucket(sliced, 16).to_pylist() == [_iceberg(16, StringType())(v) for v in python[500:]]
    dictionary = pa.array(python, pa.string()).dictionary_encode()
    expected = [_iceberg(16, StringType())(v) for v in python]
    assert parse_spec("b=bucket(x, 16)").evaluate(dictionary).to_pylist() == expected


def test_binary_and_fixed_size_binary_bucket_their_bytes() -> None:
    python = [RNG.randbytes(RNG.randrange(0, 40)) for _ in range(1000)] + [b"", None]
    for t in (pa.binary(), pa.large_binary(), pa.binary_view()):
        _check(pa.array(python, t), python, BinaryType())
    fixed = [RNG.randbytes(16) for _ in range(500)] + [None]
    _check(pa.array(fixed, pa.binary(16)), fixed, FixedType(16))


def test_an_empty_array_and_a_type_iceberg_cannot_bucket() -> None:
    assert bucket(pa.array([], pa.string()), 4).to_pylist() == []
    assert bucket(pa.array([], pa.int64()), 4).to_pylist() == []
    for t in (pa.float64(), pa.bool_(), pa.uint64(), pa.decimal128(10, 2)):
        assert parse_spec("b=bucket(x, 4)").problem(t) is not None, t
        with pytest.raises(TypeError, match="bucket"):
            bucket(pa.array([], t), 4)


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC", "America/New_York"])
def test_year_and_month_are_icebergs_counted_from_1970(unit: str, tz: str | None) -> None:
    """parka's values are Iceberg's human-readable ones (``2026``, ``2026-11``): the calendar
    year of the UTC (or wall-clock) time, and it plus the month; Iceberg counts from 1970."""
    per = {"ms": 1_000, "us": 1, "ns": 1}[unit]
    raw = [m // per if unit != "ns" else m * 1000 for m in MICROS]
    values = pa.array([*raw, None], pa.int64()).cast(pa.timestamp(unit, tz=tz))
    iceberg_type = TimestamptzType() if tz else TimestampType()
    micros = [r * per if unit != "ns" else r // 1000 for r in raw]
    years = parse_spec("y=year(ts)").evaluate(values).to_pylist()
    months = parse_spec("m=month(ts)").evaluate(values).to_pylist()
    assert years[-1] is None and months[-1] is None
    year_of, month_of = YearTransform().transform(iceberg_type), MonthTransform().transform(iceberg_type)
    for m, year, month in zip(micros, years[:-1], months[:-1], strict=True):
        assert year - 1970 == year_of(m), m
        y, mm = month.split("-")
        assert (int(y) - 1970) * 12 + int(mm) - 1 == month_of(m), m
        assert int(y) == year


def test_year_and_month_of_dates() -> None:
    days = [m // MICROS_PER_DAY for m in MICROS]
    values = pa.array([dt.date(1970, 1, 1) + dt.timedelta(days=d) for d in days], pa.date32())
    years = parse_spec("y=year(d)").evaluate(values).to_pylist()
    months = parse_spec("m=month(d)").evaluate(values).to_pylist()
    for d, year, month in zip(days, years, months, strict=True):
        assert year - 1970 == YearTransform().transform(DateType())(d)
        y, mm = month.split("-")
        assert (int(y) - 1970) * 12 + int(mm) - 1 == MonthTransform().transform(DateType())(d)
