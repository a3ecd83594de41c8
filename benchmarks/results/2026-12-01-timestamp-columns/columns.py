"""The producer's conversion of a timestamp column of datetimes, two ways, per data set with one:
inferring an Arrow type from the values and casting it to the column's (``pa.array(values)``
then ``parka.records._conform``, what ``parka.records._column`` does) and converting to the
column's type at once (``pa.array(values, type=...)``, after a check of the values' types, as
a4bb457 did; reverted after this run).

    PYTHONPATH=. python benchmarks/results/2026-12-01-timestamp-columns/columns.py --rows 8192 --rounds 31

Figures: the median over the rounds of ``time.process_time`` per value, each round one
conversion each way (the order alternating); both ways must give equal arrays.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time
from operator import itemgetter
from typing import Any

import pyarrow as pa

from benchmarks import datasets
from benchmarks import encodings as enc
from parka import records


def at_once(values: list[Any], field: pa.Field) -> pa.Array:
    """a4bb457's path for a column of datetimes alone."""
    assert set(map(type, values)) <= {dt.datetime, type(None)}
    return pa.array(values, type=field.type)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    print(f"{'column':28} {'infer + cast':>12} {'at once':>8} {'ratio':>6}  (CPU us per value)")
    for name in ("flights", "github_events"):
        ds = datasets.load(name, args.rows)
        rows = enc.rows_for(ds, "avro")
        for field in ds.table.schema:
            if not pa.types.is_timestamp(field.type):
                continue
            values: list[Any] = list(map(itemgetter(field.name), rows))
            ways = {
                "infer + cast": lambda values=values, field=field: records._conform(pa.array(values), field),
                "at once": lambda values=values, field=field: at_once(values, field),
            }
            assert ways["infer + cast"]().equals(ways["at once"]())
            cpu: dict[str, list[float]] = {way: [] for way in ways}
            for r in range(args.rounds):
                for way in list(ways) if r % 2 == 0 else list(ways)[::-1]:
                    began = time.process_time()
                    ways[way]()
                    cpu[way].append((time.process_time() - began) / len(values) * 1e6)
            old, new = statistics.median(cpu["infer + cast"]), statistics.median(cpu["at once"])
            print(f"{name + '.' + field.name:28} {old:12.3f} {new:8.3f} {new / old:6.2f}")


if __name__ == "__main__":
    main()
