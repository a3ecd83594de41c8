"""parka's conversion of dicts to Arrow (``RecordConverter.convert``: column by column, checked
in bulk) against ``pa.Table.from_pylist`` with the schema, by the number of records converted at
once, on the first 100,000 rows of each flat data set (Avro's Python values, as the drop-in
benchmark holds them); then, on web_requests, each column's share of one 10,000-row conversion,
beside ``pa.array(values, type)`` of the column ("typed": Arrow's typed conversion, which drops unknown
struct keys and takes bytes for text without a word, so parka does not use it for those).
CPU µs (or ns) per row, the best of five passes.

    python benchmarks/results/2026-12-02-dropin-quiet/conversion_sizes.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pyarrow as pa

from benchmarks import datasets
from benchmarks import encodings as enc
from parka.records import RecordConverter, _column
from parka.schema import to_arrow_schema

SIZES = (500, 1_500, 2_900, 8_192, 10_000, 20_000)


def best(run: Callable[..., Any], *args: Any, passes: int = 5) -> float:
    out = float("inf")
    for _ in range(passes):
        started = time.process_time()
        run(*args)
        out = min(out, time.process_time() - started)
    return out


def convert_all(converter: RecordConverter, chunks: list[list[dict[str, Any]]]) -> None:
    for chunk in chunks:
        converter.convert(chunk)


def from_pylist_all(schema: pa.Schema, chunks: list[list[dict[str, Any]]]) -> None:
    for chunk in chunks:
        pa.Table.from_pylist(chunk, schema=schema)


def take(rows: list[dict[str, Any]], name: str) -> list[Any]:
    return list(map(itemgetter(name), rows))


def main() -> None:
    print("| data set | records at once | parka µs/row | from_pylist µs/row | ratio |")
    print("|---|---|---|---|---|")
    for name in ("flights", "web_requests", "gps"):
        ds = datasets.load(name, None).head(100_000)
        rows = enc.rows_for(ds, "avro")
        converter = RecordConverter(to_arrow_schema(ds.avro_schema))
        for size in SIZES:
            chunks = [rows[i : i + size] for i in range(0, len(rows), size)]
            parka = best(convert_all, converter, chunks) / len(rows) * 1e6
            plain = best(from_pylist_all, ds.table.schema, chunks) / len(rows) * 1e6
            print(f"| {name} | {size:,} | {parka:.3f} | {plain:.3f} | {parka / plain:.2f} |")
    ds = datasets.load("web_requests", None).head(10_000)
    rows = enc.rows_for(ds, "avro")
    schema = to_arrow_schema(ds.avro_schema)
    print()
    print("web_requests, 10,000 records: CPU ns per row (best of 20)")
    for field in schema:
        values = take(rows, field.name)
        took = best(_column, values, field, passes=20) / len(rows) * 1e9
        taking = best(take, rows, field.name, passes=20) / len(rows) * 1e9
        typed = best(pa.array, values, field.type, passes=20) / len(rows) * 1e9
        print(f"  {field.name}: its values taken {taking:.0f}, converted {took:.0f}, typed {typed:.0f}")
    converter = RecordConverter(schema)
    whole = best(converter.convert, rows, passes=20) / len(rows) * 1e9
    plain = best(pa.Table.from_pylist, rows, ds.table.schema, passes=20) / len(rows) * 1e9
    print(f"  the whole conversion {whole:.0f}; Table.from_pylist {plain:.0f}")


if __name__ == "__main__":
    main()
