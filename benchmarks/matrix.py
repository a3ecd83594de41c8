"""Bytes per row, producer CPU and consumer CPU for every data set x encoding x batch size.

One *cell* is (data set, encoding, batch size). Per repeat every cell runs once, in an order
shuffled with a fixed seed, so that compared variants are interleaved and drift hits them alike:

1. create a fresh one-partition topic;
2. produce all rows of the data set (timed: producer CPU and wall);
3. read the broker's ``.log`` files: bytes on disk, record batches, records; the record count
   must match;
4. consume the first rows (at least ``consumer_rows``, rounded up to whole batches) with the
   messaging path of the encoding, timed, and check their content fingerprint;
5. on the first repeat, fetch the whole topic undecoded and check its content (row encodings:
   the values' digest equals the serialized values'; segments: decoded rows' fingerprint);
6. delete the topic.

Producer CPU of a row encoding = per-record serialization (measured per repeat over the whole
data set, as it does not depend on Kafka's compression or batching) + the client's produce of
the serialized values (measured per cell). Parquet segments are produced from Arrow with
``produce_batch`` (no per-record work); the variant ``(produce per record)`` feeds
``produce()`` one dict at a time, at one batch size, as a drop-in user would, and its consumer
step reads record by record with ``ParquetConsumer.poll()`` (the other segment cells use
``consume(10,000)``).
"""

from __future__ import annotations

import io
import logging
import random
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from parka.ops.progress import ProgressBar

from parka.segment import decode_segment

from . import encodings as enc
from .broker import Broker
from .checks import CheckFailed, Checks, fingerprint, to_table
from .clients import (
    consume_decoded,
    consume_shim,
    consume_shim_poll,
    fetch_raw,
    produce_parquet,
    produce_parquet_records,
    produce_values,
    values_digest,
)
from .datasets import Dataset
from .encodings import Encoding
from .measure import measured, settle, summarize

__all__ = ["MatrixPlan", "run_matrix"]

log = logging.getLogger("parka.bench")


@dataclass(frozen=True)
class MatrixPlan:
    batch_sizes: tuple[int, ...]
    codecs: tuple[str, ...]
    repeats: int
    consumer_rows: int
    per_record_batch: int | None  # batch size of the "per record" parka variant (produce, poll)
    seed: int
    # batch size of the layout variants (zstd): pyarrow's default encodings, and segments sorted by
    # the data set's key column (Dataset.sort_key) when it has one
    variants_batch: int | None = 10_000


@dataclass(frozen=True, order=True)
class Cell:
    dataset: str
    encoding: Encoding
    batch_rows: int


@dataclass
class _Prepared:
    """A data set with what every cell compares against."""

    dataset: Dataset
    fingerprint: str
    payloads: dict[str, list[bytes]] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    _prefix_fps: dict[int, str] = field(default_factory=dict)

    def prefix_fingerprint(self, rows: int) -> str:
        if rows not in self._prefix_fps:
            table = self.dataset.table
            self._prefix_fps[rows] = fingerprint(table.slice(0, rows), table.schema)
        return self._prefix_fps[rows]


def cells_for(plan: MatrixPlan, datasets: list[Dataset]) -> list[Cell]:
    cells = []
    for ds in datasets:
        for batch in plan.batch_sizes:
            for fmt in enc.FORMATS:
                for codec in plan.codecs:
                    cells.append(Cell(ds.name, Encoding(fmt, codec), batch))
        if plan.per_record_batch:
            cells.append(Cell(ds.name, Encoding("parquet", "zstd", per_record=True), plan.per_record_batch))
        if plan.variants_batch and "zstd" in plan.codecs:
            cells.append(Cell(ds.name, Encoding("parquet", "zstd", tuning="none"), plan.variants_batch))
            if ds.sort_key:
                cells.append(Cell(ds.name, Encoding("parquet", "zstd", sort_by=ds.sort_key), plan.variants_batch))
    return cells


def _serialize(prep: _Prepared, fmt: str, verify: bool, checks: Checks) -> float:
    """Serialize the whole data set; returns CPU µs per row. With ``verify``, decode it back."""
    ds = prep.dataset
    rows = enc.rows_for(ds, fmt)
    with measured() as span:
        values = enc.serialize(ds, fmt, rows)
    del rows
    prep.payloads[fmt] = values
    prep.digests[fmt] = values_digest(values)
    if verify:
        decode = enc.decode_values(ds, fmt)
        back = to_table([decode(v) for v in values], ds.table.schema)
        checks.expect(
            f"{ds.name}: {fmt} serialize/decode round trip",
            rows=back.num_rows,
            expected_rows=ds.rows,
            got=fingerprint(back, ds.table.schema),
            expected=prep.fingerprint,
        )
    return span.cpu_s / ds.rows * 1e6


def _consumed_rows(plan: MatrixPlan, cell: Cell, total: int) -> int:
    """At least ``consumer_rows``, rounded up to whole batches, at most all rows."""
    batches = -(-plan.consumer_rows // cell.batch_rows)
    return min(total, batches * cell.batch_rows)


def _run_cell(
    broker: Broker, plan: MatrixPlan, prep: _Prepared, cell: Cell, run_id: str, first: bool, checks: Checks
) -> dict[str, float]:
    ds = prep.dataset
    e = cell.encoding
    kind = "rec" if e.per_record else ("pa" if e.tuning == "none" else "sorted" if e.sort_by else e.format)
    topic = f"bench-{run_id}-{ds.name}-{kind}-{e.codec}-{cell.batch_rows}-{uuid.uuid4().hex[:6]}"
    what = f"{ds.name} {e.name} batch {cell.batch_rows}"
    max_bytes = broker.max_message_bytes_cached()
    broker.create_topic(topic)
    sample: dict[str, float] = {}
    try:
        if e.is_row:
            conf = enc.row_producer_conf(broker.bootstrap, e.codec, cell.batch_rows, max_bytes)
            span = produce_values(conf, topic, prep.payloads[e.format])
            messages = ds.rows
            sample["value_bytes_per_row"] = sum(map(len, prep.payloads[e.format])) / ds.rows
        else:
            conf = enc.parka_producer_conf(
                broker.bootstrap, e.codec, cell.batch_rows, max_bytes, tuning=e.tuning, sort_by=e.sort_by
            )
            if e.per_record:
                rows = enc.rows_for(ds, "avro")
                span, stats = produce_parquet_records(conf, topic, ds.avro_schema, rows)
                sample["floor_cpu_us_per_row"] = _producer_floor(rows, ds.table.schema, cell.batch_rows, e.codec)
                del rows
            else:
                span, stats, segment_rows = produce_parquet(conf, topic, ds.avro_schema, ds.table)
                sample["max_rows_per_batch"] = max(segment_rows)
            if stats["records"] != ds.rows:
                raise CheckFailed(f"{what}: producer sent {stats['records']:,} records, expected {ds.rows:,}")
            messages = stats["segments"]
            sample["value_bytes_per_row"] = stats["segment_bytes"] / ds.rows
        on_disk = broker.log_stats(topic)
        if on_disk.records != messages:
            raise CheckFailed(f"{what}: the broker's log holds {on_disk.records:,} records, expected {messages:,}")
        sample["bytes_per_row"] = on_disk.bytes / ds.rows
        sample["rows_per_batch"] = ds.rows / on_disk.batches if e.is_row else ds.rows / messages
        if e.is_row:
            sample["max_rows_per_batch"] = on_disk.max_records_per_batch
        sample["client_cpu_us_per_row"] = span.cpu_s / ds.rows * 1e6
        sample["produce_rows_per_s"] = ds.rows / span.wall_s
        _consume(broker, plan, prep, cell, topic, sample, checks)
        if first:
            _verify_topic(broker, prep, cell, topic, messages, checks)
    finally:
        broker.delete_topics([topic])
    return sample


def _producer_floor(rows: list[dict[str, Any]], schema: pa.Schema, batch_rows: int, codec: str) -> float:
    """CPU µs per row of the least a producer of Parquet from dicts does, batch by batch: the
    dicts appended to a list one by one, ``Table.from_pylist`` and a Parquet write with ``codec``
    (pyarrow's defaults otherwise), in memory. The per-record cell measures it right after its
    own ``produce()`` run, on the same rows."""
    with measured() as span:
        for start in range(0, len(rows), batch_rows):
            batch: list[dict[str, Any]] = []
            for row in rows[start : start + batch_rows]:
                batch.append(row)
            pq.write_table(pa.Table.from_pylist(batch, schema=schema), io.BytesIO(), compression=codec)
    return span.cpu_s / len(rows) * 1e6


def _consume(
    broker: Broker, plan: MatrixPlan, prep: _Prepared, cell: Cell, topic: str, sample: dict[str, float], checks: Checks
) -> None:
    ds = prep.dataset
    want = _consumed_rows(plan, cell, ds.rows)
    if cell.encoding.is_row:
        span, rows = consume_decoded(broker.bootstrap, topic, want, enc.decode_values(ds, cell.encoding.format))
    elif cell.encoding.per_record:
        span, rows = consume_shim_poll(broker.bootstrap, topic, want)  # the per-record consumer: poll()
    else:
        span, rows = consume_shim(broker.bootstrap, topic, want)  # consume(10,000)
    sample["consumer_cpu_us_per_row"] = span.cpu_s / want * 1e6
    sample["consume_rows_per_s"] = want / span.wall_s
    back = to_table(rows, ds.table.schema)
    checks.expect(
        f"{ds.name} {cell.encoding.name} batch {cell.batch_rows}: first {want:,} records consumed",
        rows=back.num_rows,
        expected_rows=want,
        got=fingerprint(back, ds.table.schema),
        expected=prep.prefix_fingerprint(want),
    )


def _verify_topic(broker: Broker, prep: _Prepared, cell: Cell, topic: str, messages: int, checks: Checks) -> None:
    ds = prep.dataset
    what = f"{ds.name} {cell.encoding.name} batch {cell.batch_rows}: whole topic"
    if cell.encoding.is_row:
        fetched = fetch_raw(broker.bootstrap, topic, messages, subscribe=False, digest=True)
        checks.expect(
            what + " (value digest)",
            rows=fetched.messages,
            expected_rows=ds.rows,
            got=fetched.digest,
            expected=prep.digests[cell.encoding.format],
        )
        return
    fetched = fetch_raw(broker.bootstrap, topic, messages, subscribe=False, keep=True)
    tables = [decode_segment(v, None) for v in fetched.values or []]
    table = pa.concat_tables(tables) if tables else ds.table.schema.empty_table()
    checks.expect(
        what + " (decoded segments)",
        rows=table.num_rows,
        expected_rows=ds.rows,
        got=fingerprint(table, ds.table.schema),
        expected=prep.fingerprint,
    )


def warm_up(broker: Broker, dataset: Dataset, run_id: str) -> None:
    """One small cell of each format, discarded: imports, JIT-less caches, connections."""
    small = dataset.head(2000)
    prep = _Prepared(small, fingerprint(small.table, small.table.schema))
    scratch = Checks()
    plan = MatrixPlan((1000,), ("zstd",), 1, 1000, None, 0)
    for fmt in ("avro", "json"):
        _serialize(prep, fmt, True, scratch)
    for fmt in enc.FORMATS:
        _run_cell(broker, plan, prep, Cell(small.name, Encoding(fmt, "zstd"), 1000), run_id, True, scratch)


def run_matrix(
    broker: Broker,
    datasets: list[Dataset],
    plan: MatrixPlan,
    run_id: str,
    checks: Checks,
    progress: Callable[[str], None] = log.info,
) -> dict[str, Any]:
    """Run every cell ``plan.repeats`` times, interleaved; returns the ``matrix`` section of results.json."""
    preps = {ds.name: _Prepared(ds, fingerprint(ds.table, ds.table.schema)) for ds in datasets}
    cells = cells_for(plan, datasets)
    samples: dict[Cell, list[dict[str, float]]] = defaultdict(list)
    serialize_us: dict[tuple[str, str], list[float]] = defaultdict(list)
    # on a terminal, a bar over every cell of every repeat (nothing in a pipe or a log)
    bar = ProgressBar(plan.repeats * len(cells), label="matrix", unit="cells", interval_s=0.5)
    for rep in range(plan.repeats):
        first = rep == 0
        for prep in preps.values():
            for fmt in ("avro", "json"):
                serialize_us[(prep.dataset.name, fmt)].append(_serialize(prep, fmt, first, checks))
        settle()
        order = list(cells)
        random.Random(plan.seed + rep).shuffle(order)
        for i, cell in enumerate(order, 1):
            samples[cell].append(_run_cell(broker, plan, preps[cell.dataset], cell, run_id, first, checks))
            bar.advance()
            if i % 20 == 0 or i == len(order):
                progress(f"matrix repeat {rep + 1}/{plan.repeats}: {i}/{len(order)} cells")
    bar.close()
    for prep in preps.values():
        prep.payloads.clear()
    out = []
    for cell in cells:
        reps = samples[cell]
        measures: dict[str, list[float]] = defaultdict(list)
        for r, sample in enumerate(reps):
            for name, value in sample.items():
                measures[name].append(value)
            if cell.encoding.is_row:
                ser = serialize_us[(cell.dataset, cell.encoding.format)][r]
                measures["serialize_cpu_us_per_row"].append(ser)
                measures["producer_cpu_us_per_row"].append(ser + sample["client_cpu_us_per_row"])
            else:
                measures["producer_cpu_us_per_row"].append(sample["client_cpu_us_per_row"])
        out.append(
            {
                "dataset": cell.dataset,
                "encoding": cell.encoding.to_json(),
                "batch_rows": cell.batch_rows,
                "measures": {name: summarize(values, name) for name, values in measures.items()},
            }
        )
    return {
        "cells": out,
        "serialization": [
            {"dataset": d, "format": f, "measures": {"cpu_us_per_row": summarize(v, "cpu_us_per_row")}}
            for (d, f), v in sorted(serialize_us.items())
        ],
    }
