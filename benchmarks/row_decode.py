"""Row-format Kafka values to one Arrow table: the bulk paths of :mod:`parka.rowdecode`
(Confluent-framed Avro, JSON) against decoding one record at a time, CPU per row, measured side
by side in one run.

For each data set of ``--datasets``, its first ``--rows`` rows are serialized as a Confluent Avro
serializer writes them, and as JSON objects (``json.dumps``; timestamps as ISO-8601 strings,
dates as days since the epoch, as :class:`parka.rowdecode.JsonRows` reads them), before any
clock starts, then cut into batches of ``--batch`` values (a fetch's worth). Each repeat decodes
every batch with each way in turn, its CPU taken with ``time.process_time`` (every thread of the
process):

* **bulk**: ``AvroRows.decode``, the bodies read as one Avro block by polars (the ``rows``
  extra); ``JsonRows.decode``, the values read as one newline-delimited text by pyarrow (a
  schema with a map, github_events', is read value by value: ``json.loads`` and the validator);
* **per record**: what a batch with a bad record costs. Avro: ``AvroRows``' own fallback,
  fastavro per record then parka's record validator, on the same batches. JSON: each batch with
  its middle value replaced by a bad one (``{``), which ``JsonRows`` finds by halving the batch
  (with a map, ``json.loads`` per value then the validator, as in bulk);
* **plain + from_pylist**: what an application does with a plain consumer: fastavro or
  ``json.loads`` per record, then ``pyarrow.Table.from_pylist`` without any check (for JSON,
  with Arrow's inferred types: timestamps stay strings), the floor of a per-record way.

The figure per way is the median over repeats of µs per row; the ratios are medians of the
per-repeat ratios (paired: the same repeat, the same batches)::

    python -m benchmarks.row_decode --rows 100000 --batch 10000 --repeats 7 --out DIR
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

from parka.rowdecode import AvroRows, JsonRows

from . import encodings as enc
from .datasets import DATASET_NAMES, load

WAYS = ("bulk", "per record", "plain + from_pylist")


def json_values(table: pa.Table) -> list[bytes]:
    """The rows as JSON objects as :class:`JsonRows` reads them: ISO-8601 timestamps, dates as
    days since 1970-01-01, maps as objects."""
    out = []
    for row in table.to_pylist(maps_as_pydicts="strict"):
        out.append(json.dumps(_jsonable(row)).encode())
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


def json_ways(schema: pa.Schema) -> dict[str, Callable[[list[bytes]], pa.Table]]:
    bulk = JsonRows(schema)
    per_record = JsonRows(schema)
    loads = json.loads

    def plain(values: list[bytes]) -> pa.Table:
        return pa.Table.from_pylist([loads(v) for v in values])  # Arrow's types inferred: unchecked

    def decode_bulk(values: list[bytes]) -> pa.Table:
        decoded = bulk.decode(values)
        if decoded.bad:
            raise SystemExit(f"the JSON bulk path refused values: {decoded.bad[:3]}")
        return decoded.table

    def decode_per_record(values: list[bytes]) -> pa.Table:
        damaged = list(values)
        damaged[len(values) // 2] = b"{"
        decoded = per_record.decode(damaged)
        if [i for i, _ in decoded.bad] != [len(values) // 2]:
            raise SystemExit(f"the JSON fallback found {decoded.bad[:3]}, not the one bad value")
        return decoded.table

    return {"bulk": decode_bulk, "per record": decode_per_record, "plain + from_pylist": plain}


def ways(schema: dict[str, Any]) -> dict[str, Callable[[list[bytes]], pa.Table]]:
    bulk = AvroRows(schema)
    per_record = AvroRows(schema)
    parsed = fastavro.parse_schema(schema)
    read = fastavro.schemaless_reader

    def plain(bodies: list[bytes]) -> pa.Table:
        return pa.Table.from_pylist([read(io.BytesIO(b), parsed, None) for b in bodies])

    def decode_bulk(bodies: list[bytes]) -> pa.Table:
        decoded = bulk.decode(bodies)
        if decoded.bad or bulk.bulk_off is not None:
            raise SystemExit(f"the bulk path did not take the batch: {decoded.bad[:3]} {bulk.bulk_off}")
        return decoded.table

    def decode_per_record(bodies: list[bytes]) -> pa.Table:
        return per_record._per_record(bodies).table

    return {"bulk": decode_bulk, "per record": decode_per_record, "plain + from_pylist": plain}


def measure(name: str, fmt: str, rows: int, batch: int, repeats: int) -> dict[str, Any]:
    dataset = load(name, rows)
    if fmt == "avro":
        values = [v[5:] for v in enc.serialize(dataset, "avro", enc.rows_for(dataset, "avro"))]
        decoders = ways(dataset.avro_schema)
    else:
        values = json_values(dataset.table)
        decoders = json_ways(dataset.table.schema)
    batches = [values[i : i + batch] for i in range(0, len(values), batch)]
    first = {w: pa.concat_tables(decoders[w](b) for b in batches) for w in ("bulk", "per record")}
    expected = first["bulk"]
    if fmt == "json":  # the per-record way's batches lost their middle value
        kept = [
            i
            for b, start in zip(batches, range(0, len(values), batch), strict=True)
            for i in range(start, start + len(b))
            if i - start != len(b) // 2
        ]
        expected = expected.take(pa.array(kept))
    if not expected.equals(first["per record"]):
        raise SystemExit(f"{name} {fmt}: the bulk table differs from the per-record one")
    us: dict[str, list[float]] = {w: [] for w in WAYS}
    for _ in range(repeats):
        for way in WAYS:
            started = time.process_time()
            for b in batches:
                decoders[way](b)
            us[way].append((time.process_time() - started) / len(values) * 1e6)
    ratio = {w: statistics.median(b / o for b, o in zip(us["bulk"], us[w], strict=True)) for w in WAYS if w != "bulk"}
    return {
        "dataset": name,
        "format": fmt,
        "rows": len(values),
        "batch": batch,
        "repeats": repeats,
        "us_per_row_median": {w: round(statistics.median(v), 3) for w, v in us.items()},
        "bulk_over": {w: round(r, 3) for w, r in ratio.items()},
        "us_per_row": {w: [round(x, 3) for x in v] for w, v in us.items()},
    }


def report(results: list[dict[str, Any]]) -> str:
    lines = [
        "| format | data set | bulk µs/row | per record µs/row | plain + from_pylist µs/row "
        "| bulk / per record | bulk / plain + from_pylist |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m, q = r["us_per_row_median"], r["bulk_over"]
        lines.append(
            f"| {r['format']} | {r['dataset']} | {m['bulk']:.2f} | {m['per record']:.2f} "
            f"| {m['plain + from_pylist']:.2f} | {q['per record']:.3f} | {q['plain + from_pylist']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.row_decode", description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(DATASET_NAMES))
    p.add_argument("--formats", default="avro,json")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    results = [
        measure(n, f, args.rows, args.batch, args.repeats)
        for f in args.formats.split(",")
        for n in args.datasets.split(",")
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    table = report(results)
    (args.out / "report.md").write_text(table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
