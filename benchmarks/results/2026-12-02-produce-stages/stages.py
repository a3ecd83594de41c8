"""Where ``ParquetProducer.produce()`` per dict spends its CPU against its floor, per data set.

    python benchmarks/results/2026-12-02-produce-stages/stages.py --bootstrap HOST:PORT [--rows N]
        [--datasets A,B] [--producer-only]

Two parts, on the first ``--rows`` rows of each data set as the drop-in benchmark holds them
(Avro's Python values):

* **alone**, in 10,000-row batches, nothing else running in the process (best of five passes,
  CPU µs per row, ``time.process_time``): the floor's parts (the dicts appended to a list,
  ``Table.from_pylist``, a zstd Parquet write with pyarrow's defaults) and parka's (its
  conversion, ``RecordConverter.convert``; its segment encoding, ``encode_segment`` with a layout
  judged once, as the producer's cache does).
* **in the producer**: ``produce(topic, row)`` per dict into a one-partition topic of a real
  broker with parka's default settings, then ``flush()``; the process's CPU over it, the calling
  thread's (``time.thread_time``), and the CPU each of the two stages took on whichever thread ran
  it (``RecordConverter.convert`` and the segmenter's ``_encode`` wrapped with
  ``time.thread_time``), with the row counts of the conversions and of the segments cut.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka.admin import AdminClient, NewTopic

import producer._segmenter as segmenter
from benchmarks import datasets
from benchmarks import encodings as enc
from parka.encoding import choose_encodings
from parka.records import RecordConverter
from parka.schema import schema_fingerprint, to_arrow_schema
from parka.segment import encode_segment
from producer import ParquetProducer

BATCH = 10_000


def alone(name: str, rows: list[dict[str, Any]], ds: datasets.Dataset) -> dict[str, float]:
    schema = to_arrow_schema(ds.avro_schema)
    fingerprint = schema_fingerprint(schema)
    converter = RecordConverter(schema)
    batches = [rows[i : i + BATCH] for i in range(0, len(rows), BATCH)]
    tables = [pa.Table.from_pylist(b, schema=ds.table.schema) for b in batches]
    converted = [converter.convert(b).table for b in batches]
    layout = choose_encodings(converted[0])

    def append() -> None:
        for b in batches:
            out: list[dict[str, Any]] = []
            for r in b:
                out.append(r)

    steps: dict[str, Callable[[], Any]] = {
        "floor: append": append,
        "floor: Table.from_pylist": lambda: [pa.Table.from_pylist(b, schema=ds.table.schema) for b in batches],
        "floor: Parquet write (pyarrow defaults, zstd)": lambda: [
            pq.write_table(t, io.BytesIO(), compression="zstd") for t in tables
        ],
        "parka: conversion": lambda: [converter.convert(b) for b in batches],
        "parka: segment encoding (layout cached)": lambda: [
            encode_segment(t, codec="zstd", fingerprint=fingerprint, layout=layout) for t in converted
        ],
    }
    out = {}
    for step, run in steps.items():
        best = min(_cpu(run) for _ in range(5))
        out[step] = best / len(rows) * 1e6
    return out


def _cpu(run: Callable[[], Any]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def in_producer(bootstrap: str, rows: list[dict[str, Any]], ds: datasets.Dataset) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"stages-{ds.name}-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    spent = {"conversion": 0.0, "encoding": 0.0}
    converted: list[int] = []
    cut: list[int] = []
    convert, encode = RecordConverter.convert, segmenter.Segmenter._encode

    def timed_convert(self: RecordConverter, records: Any) -> Any:
        started = time.thread_time()
        try:
            return convert(self, records)
        finally:
            spent["conversion"] += time.thread_time() - started
            converted.append(len(records))

    def timed_encode(self: Any, topic: str, state: Any, part: Any) -> Any:
        started = time.thread_time()
        try:
            return encode(self, topic, state, part)
        finally:
            spent["encoding"] += time.thread_time() - started
            cut.append(len(part))

    RecordConverter.convert = timed_convert  # type: ignore[method-assign]
    segmenter.Segmenter._encode = timed_encode  # type: ignore[method-assign]
    try:
        producer = ParquetProducer(
            {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.encoding.compression": "zstd"}
        )
        producer.set_schema(topic, ds.avro_schema)
        process, thread = time.process_time(), time.thread_time()
        for row in rows:
            producer.produce(topic, row)
        if producer.flush(120) != 0:
            raise SystemExit(f"{ds.name}: records left unsent")
        process, thread = time.process_time() - process, time.thread_time() - thread
        producer.close()
    finally:
        RecordConverter.convert = convert  # type: ignore[method-assign]
        segmenter.Segmenter._encode = encode  # type: ignore[method-assign]
        admin.delete_topics([topic])
    n = len(rows)
    return {
        "process": process / n * 1e6,
        "calling thread": thread / n * 1e6,
        "conversion": spent["conversion"] / n * 1e6,
        "segment encoding": spent["encoding"] / n * 1e6,
        "conversions": len(converted),
        "rows per conversion (median)": statistics.median(converted),
        "segments": len(cut),
        "rows per segment": cut,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--datasets", default="flights,web_requests,gps,github_events")
    parser.add_argument("--producer-only", action="store_true", help="skip the stages alone")
    args = parser.parse_args()
    for name in args.datasets.split(","):
        ds = datasets.load(name, args.rows)
        rows = enc.rows_for(ds, "avro")
        print(f"## {name} ({len(rows):,} rows)")
        if not args.producer_only:
            print("alone, CPU µs per row (best of 5):")
            for step, value in alone(name, rows, ds).items():
                print(f"  {step:48} {value:7.3f}")
        result = in_producer(args.bootstrap, rows, ds)
        print("in the producer, CPU µs per row:")
        for key in ("process", "calling thread", "conversion", "segment encoding"):
            print(f"  {key:48} {result[key]:7.3f}")
        print(
            f"  {result['conversions']} conversions of {result['rows per conversion (median)']:.0f} rows (median); "
            f"{result['segments']} segments of {result['rows per segment']} rows"
        )
        print(flush=True)


if __name__ == "__main__":
    main()
