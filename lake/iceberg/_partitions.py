"""parka's partition specs (:mod:`parka.partitioning`) as Iceberg partition transforms, both ways.

=========================  ============================  =========================================
parka spec                 Iceberg partition field       the same partitions because
=========================  ============================  =========================================
``country``                ``identity(country)``         the value itself
``day=date(ts)``           ``day(ts)`` named ``day``     both take the UTC date of a timestamp
                                                         with a time zone, the wall-clock date of
                                                         one without, a date as is
``hour=hour(ts)``          ``hour(ts)`` named ``hour``   both cut at the UTC (or wall-clock) hour
``month=month(ts)``        ``month(ts)``                 parka's ``yyyy-MM`` is Iceberg's month
                                                         (months since 1970-01) written out
``year=year(ts)``          ``year(ts)``                  parka's calendar year is Iceberg's year
                                                         (years since 1970) plus 1970
``b=truncate(id, 1000)``   ``truncate[1000](id)``        parka's truncate is Iceberg's (integers
                                                         down to a multiple, strings to N chars)
``b=bucket(id, 16)``       ``bucket[16](id)``            parka computes Iceberg's murmur3 bucket
                                                         (:mod:`parka._bucket`)
=========================  ============================  =========================================

A parka value is what Iceberg shows as the partition's human-readable value (``2026``,
``2026-11``, ``2026-11-23-08``, a bucket's number); :func:`partition_record` turns it into
Iceberg's own (``56``, ``682``, hours since the epoch).

The committer (and the Delta engines) see a derived partition as a column of the table schema
whose metadata holds its expression; an Iceberg table has no such column, so
:func:`derived_fields` gives it to the committer from the partition spec, and :func:`data_schema`
leaves it out of the Iceberg schema. A data file's partition record comes from the partition
values the files were split by (:func:`partition_record`), not from the footer's bounds, which
Iceberg truncates for strings (and which say nothing of a bucket). The void transform has no
parka spec, nor has a transform of a column parka cannot compute it for (a bucket of a decimal
or a UUID): a table partitioned so is refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionField
from pyiceberg.partitioning import PartitionSpec as IcebergSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.typedef import Record
from pyiceberg.types import BooleanType, DateType, IntegerType, LongType, StringType

from parka.errors import CommitError, ConfigError
from parka.partitioning import EXPRESSION_KEY, PartitionSpec, parse_spec

__all__ = ["data_schema", "derived_fields", "parka_specs", "partition_record", "transform_of"]

_EPOCH = dt.date(1970, 1, 1)
_EPOCH_YEAR = 1970
# identity partitions on these types: parka's partition value strings parse back exactly
_IDENTITY_TYPES = (BooleanType, IntegerType, LongType, StringType, DateType)

_TIME_TRANSFORMS: dict[str, Transform[Any, Any]] = {  # parka's time transforms, Iceberg's (stateless)
    "date": DayTransform(),
    "hour": HourTransform(),
    "month": MonthTransform(),
    "year": YearTransform(),
}


def transform_of(spec: PartitionSpec) -> Transform[Any, Any]:
    """The Iceberg transform of a parka spec."""
    if spec.transform is None:
        return IdentityTransform()
    if spec.transform in _TIME_TRANSFORMS:
        return _TIME_TRANSFORMS[spec.transform]
    assert spec.width is not None
    if spec.transform == "bucket":
        return BucketTransform(spec.width)
    assert spec.transform == "truncate"
    return TruncateTransform(spec.width)


def parka_specs(spec: IcebergSpec, schema: Schema, identifier: str) -> tuple[PartitionSpec, ...]:
    """An Iceberg table's partition spec as parka's specs.

    Raises:
        CommitError: a transform parka has no spec for (void), a transform of a column type
            parka cannot compute it for (a bucket of a decimal), or an identity partition on a
            type whose values parka cannot carry exactly.
    """
    out = []
    for field in spec.fields:
        source = schema.find_field(field.source_id)
        t = field.transform
        if isinstance(t, IdentityTransform):
            if not isinstance(source.field_type, _IDENTITY_TYPES):
                raise CommitError(
                    f"Iceberg table {identifier} is partitioned by {source.name} ({source.field_type}): parka "
                    "lands in identity partitions of booleans, integers, strings and dates only"
                )
            text = source.name if field.name == source.name else f"{field.name}"
        elif isinstance(t, TruncateTransform):
            text = f"{field.name}=truncate({source.name}, {t.width})"
        elif isinstance(t, BucketTransform):
            text = f"{field.name}=bucket({source.name}, {t.num_buckets})"
        else:
            fn = next((fn for fn, time in _TIME_TRANSFORMS.items() if isinstance(t, type(time))), None)
            if fn is None:
                raise CommitError(
                    f"Iceberg table {identifier} is partitioned by {t}({source.name}): parka lands in identity, "
                    "year, month, day, hour, truncate and bucket partitions only"
                )
            text = f"{field.name}={fn}({source.name})"
        parsed = parse_spec(text, key=f"partition field '{field.name}' of {identifier}")
        arrow = schema_to_pyarrow(source.field_type, include_field_ids=False)
        problem = parsed.problem(arrow) if parsed.derived else None
        if problem is not None:
            raise CommitError(f"Iceberg table {identifier} is partitioned by {t}({source.name}): {problem}")
        out.append(parsed)
    return tuple(out)


def derived_fields(specs: Sequence[PartitionSpec], arrow: pa.Schema) -> list[pa.Field]:
    """The committer's view of the derived partitions: a column each, with its expression."""
    return [spec.output_field(arrow.field(spec.source)) for spec in specs if spec.derived]


def data_schema(schema: pa.Schema) -> tuple[pa.Schema, tuple[PartitionSpec, ...]]:
    """A table schema as the committer makes it (derived partition columns carry their
    expression) split into the Iceberg schema (without them) and the derived specs."""
    derived = []
    kept = []
    for f in schema:
        expression = (f.metadata or {}).get(EXPRESSION_KEY.encode())
        if expression is None:
            kept.append(f)
        else:
            derived.append(parse_spec(f"{f.name}={expression.decode()}", key=f"table column '{f.name}'"))
    return pa.schema(kept), tuple(derived)


def partition_fields(specs: Sequence[PartitionSpec], schema: Schema) -> list[tuple[str, Transform[Any, Any], str]]:
    """``(source column, transform, partition field name)`` per spec, to add to a new table."""
    fields = []
    for spec in specs:
        if spec.transform is None and not isinstance(schema.find_field(spec.source).field_type, _IDENTITY_TYPES):
            raise ConfigError(
                "--partition-by",
                str(spec),
                "a boolean, integer, string or date column, or a derived partition",
                reason="an Iceberg identity partition of that type",
            )
        fields.append((spec.source, transform_of(spec), spec.name))
    return fields


def partition_record(spec: IcebergSpec, schema: Schema, values: Mapping[str, str | None]) -> Record:
    """A data file's partition record from the values its rows were split by (parka's strings)."""
    out = []
    for field in spec.fields:
        out.append(_internal(field, schema, values.get(field.name)))
    return Record(*out)


def _internal(field: PartitionField, schema: Schema, text: str | None) -> Any:
    """Iceberg's partition value (years, months, days, hours since the epoch, a bucket's number,
    or the value) for ``text``, parka's partition value string."""
    if text is None:
        return None
    t = field.transform
    if isinstance(t, YearTransform):
        return int(text) - _EPOCH_YEAR
    if isinstance(t, MonthTransform):
        year, month = text.rsplit("-", 1)
        return (int(year) - _EPOCH_YEAR) * 12 + int(month) - 1
    if isinstance(t, DayTransform):
        return (dt.date.fromisoformat(text[:10]) - _EPOCH).days
    if isinstance(t, HourTransform):
        day, hour = dt.date.fromisoformat(text[:10]), int(text[11:13])
        return (day - _EPOCH).days * 24 + hour
    if isinstance(t, BucketTransform):
        return int(text)
    source = schema.find_field(field.source_id).field_type
    if isinstance(source, (IntegerType, LongType)):
        return int(text)
    if isinstance(source, BooleanType):
        return text == "true"
    if isinstance(source, DateType):
        return (dt.date.fromisoformat(text) - _EPOCH).days
    return text
