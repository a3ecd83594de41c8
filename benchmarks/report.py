"""``report.md`` and PNG plots from a results document.

Regenerate a report from a stored run: ``python -m benchmarks.report DIR`` (reads DIR/results.json).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections.abc import Iterable
from typing import Any

from .encodings import CODECS
from .measure import STATISTIC
from .plots import write_plots
from .targets import end_to_end_arms

__all__ = ["render", "write_report"]

_FORMAT_ORDER = {"json": 0, "avro": 1, "parquet": 2}
_CODEC_ORDER = list(CODECS)
SECONDS = "_s"
# what fetch + write did before results.json recorded it (runs before syncfs in parka ingest)
_OLD_FETCH_AND_WRITE = "poll every message, write it to a file of its own, every file fsynced once all are written"


def _num(value: float | None, digits: int = 3) -> str:
    """``digits`` significant digits, thousands separated (1,234,567; 17.3; 0.729)."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return f"{value:.{digits}g}" if abs(value) >= 1e-3 else f"{value:.2e}"


def _spread(measure: dict[str, Any] | None, digits: int = 3) -> str:
    if not measure or measure.get("median") is None:
        return "-"
    if measure["n"] <= 1:
        return _num(measure["median"], digits)
    return f"{_num(measure['median'], digits)} ({_num(measure['min'], digits)}-{_num(measure['max'], digits)})"


def _loads(values: list[float] | None) -> str:
    return "n/a" if not values else " / ".join(f"{v:.1f}" for v in values)


def _scaled(measure: dict[str, Any], factor: float) -> dict[str, Any]:
    """A measure in another unit (seconds to milliseconds, ...)."""
    return {**measure, **{k: measure[k] * factor for k in ("median", "min", "max") if measure.get(k) is not None}}


def _table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _encodings(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for c in cells:
        seen.setdefault(c["encoding"]["name"], c["encoding"])
    return sorted(
        seen.values(),
        key=lambda e: (
            e["per_record"],
            _FORMAT_ORDER[e["format"]],
            _CODEC_ORDER.index(e["codec"]),
            e.get("tuning", "auto") != "auto",
            e.get("sort_by", ""),
        ),
    )


def _matrix_table(results: dict[str, Any], dataset: str, measure: str, digits: int, spread: bool) -> str:
    cells = [c for c in results["matrix"]["cells"] if c["dataset"] == dataset]
    total = next(d.get("matrix_rows", d["rows"]) for d in results["datasets"] if d["name"] == dataset)
    batches = sorted({c["batch_rows"] for c in cells})
    by_key = {(c["encoding"]["name"], c["batch_rows"]): c for c in cells}
    rows = []
    for e in _encodings(cells):
        row = [e["name"]]
        for b in batches:
            cell = by_key.get((e["name"], b))
            m = cell["measures"].get(measure) if cell else None
            text = _spread(m, digits) if spread else (_num(m["median"], digits) if m else "-")
            if cell and measure == "bytes_per_row":
                achieved = cell["measures"]["rows_per_batch"]["median"]
                if achieved < 0.95 * min(b, total):
                    text += f" [{achieved:,.0f}/batch]"
            row.append(text)
        rows.append(row)
    return _table(["encoding", *(f"{b:,} rows/batch" for b in batches)], rows)


def _targets_section(results: dict[str, Any]) -> list[str]:
    rows = []
    for t in results.get("targets", []):
        ratio = t.get("ratio")
        value = _spread(ratio) if ratio else "-"
        goal = f"{t.get('comparison', '>=')} {t['threshold']}" if ratio else f"{t['threshold']}"
        status = {"met": "**met**", "not met": "**not met**"}.get(t["status"], t["status"])
        note = f" ({t['note']})" if t.get("note") else ""
        rows.append([t["description"] + note, goal, value, status])
    return ["## Targets", "", _table(["target", "goal", "measured: median (min-max)", "status"], rows), ""]


def _machine_section(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    s = results["suite"]
    v = m["versions"]
    return [
        "## Run",
        "",
        f"- command: `{s['command']}` (mode `{s['mode']}`), started {s['started_at']}, "
        f"wall time **{s['wall_s'] / 60:.1f} min** "
        f"({', '.join(f'{k.removesuffix(SECONDS)} {val:.0f} s' for k, val in s['section_wall_s'].items())})",
        f"- machine: {m['cpu_model']}, {m['logical_cores']} logical cores, {m['memory_bytes'] / 2**30:.0f} GiB, "
        f"{m['os']}",
        f"- Python {m['python']}, pyarrow {v['pyarrow']}, confluent-kafka {v['confluent-kafka']} "
        f"(librdkafka {v['librdkafka']}), deltalake {v['deltalake']}, fastavro {v['fastavro']}, "
        f"pyspark {v['pyspark']}, delta-spark {v['delta-spark']}",
        f"- Kafka {m['kafka']['version']} (single local KRaft broker at {m['kafka']['bootstrap']}, "
        f"max.message.bytes {m['kafka']['max_message_bytes']:,}); the broker shares the 2 cores with the "
        "benchmark, and its CPU is not counted",
        f"- repeats: {results['config']['repeats']}, interleaved (shuffled order per repeat, seed {s['seed']}); "
        f"checks passed: {results['checks']['passed']}; load average (1, 5, 15 min) at start "
        f"{_loads(s.get('load_average_at_start'))}, at end {_loads(s.get('load_average_at_end'))}",
        "",
    ]


_METHOD = """## Method

- **Data sets** ({datasets}). Synthetic ones come from NumPy with seed {seed}; nothing is downloaded.
- **Encodings.** JSON (compact UTF-8, timestamps as epoch microseconds) and Avro (fastavro schemaless,
  framed like Confluent's serializer: magic byte, 4-byte schema id, body), one record per Kafka message,
  with Kafka batch compression none/lz4/snappy/zstd/gzip; parka Parquet segments with each Parquet codec
  (Kafka compression off). parka is fed from Arrow with `produce_batch` and read with `consume(10,000)`,
  except the "(per record: produce, poll)" row, fed one dict at a time through `produce()` and read one
  record at a time through `poll()`.
- **Batch size.** Row encodings: librdkafka `batch.num.messages` = batch size, `batch.size` = 2^31-1,
  `linger.ms` = 5000, so a record batch is cut when it holds that many records; librdkafka also caps a
  batch at `message.max.bytes` (set to the broker's {max_bytes:,} bytes), which cuts large batches of wide
  records: where the achieved records per batch (read from the broker's log) fall short of the target the
  table shows them in brackets. Parquet: `columnar.batch.records` = batch size (one segment per message).
- **Bytes per row** = the size of the topic's `.log` files in the broker's log dir (`{log_dir}`)
  right after the producer's flush (acks=all), divided by the rows: Kafka's record-batch framing, headers
  and compression included, indexes excluded.
- **CPU** = `time.process_time()` of the benchmark process (all its threads: librdkafka, delta-rs,
  Arrow), per row. Producer CPU of a row encoding = serialization (measured per repeat over the whole data
  set, it does not depend on Kafka's settings) + the client producing the serialized values (per cell).
  Consumer CPU: the messaging path over the first {consumer_rows:,} rows (rounded up to whole batches):
  `ParquetConsumer` record by record for segments, a plain confluent-kafka `Consumer` + fastavro / `json`
  for rows.
- **End to end** (10,000 rows per segment or record batch, zstd): (a) `parka ingest` in-process
  (`IngestionConsumer`, `end_at_latest`, default commit policy), (b) the row baseline: plain consumer,
  fastavro decode, Arrow batches of 10,000 rows, `write_deltalake` (zstd) per 64 MiB or at the end, with a
  `txn`, (physical reference) a plain consumer fetching the same messages and discarding them. All join
  a fresh consumer group. Rows/s and MB/s are over the whole run; "steady" MB/s from the first message in
  hand to the end.
- **Checks.** Every produce checks the record count in the broker's log; every consume and every Delta
  table checks rows and an order-independent content fingerprint (SHA-256 over the rows sorted by all
  columns) against the data set; on the first repeat every topic is fetched whole (value digest for rows,
  decoded segments for parka). Ingest throughput checks that the table's files are byte for byte the
  segments, and on the first repeat exact column sums of the table read back. A mismatch fails the run.
"""


def _method_section(results: dict[str, Any]) -> list[str]:
    datasets = "; ".join(
        f"{d['name']}: {d['rows']:,} rows, {d['columns']} columns, {d['source']}" for d in results["datasets"]
    )
    return [
        _METHOD.format(
            datasets=datasets,
            seed=results["config"]["dataset_seed"],
            max_bytes=results["machine"]["kafka"]["max_message_bytes"],
            log_dir=results["machine"]["kafka"]["log_dir"],
            consumer_rows=results["config"]["consumer_rows"],
        )
    ]


def _layout_section(results: dict[str, Any]) -> list[str]:
    """Tuned encodings (parka's default) next to pyarrow's and to Avro + zstd, per data set."""
    cells = results.get("matrix", {}).get("cells", [])
    variants = [c for c in cells if c["encoding"].get("tuning", "auto") == "none"]
    if not variants:
        return []
    batch = variants[0]["batch_rows"]
    by_key = {(c["dataset"], c["encoding"]["name"], c["batch_rows"]): c["measures"] for c in cells}

    def median(ds: str, name: str) -> float | None:
        m = by_key.get((ds, name, batch))
        return m["bytes_per_row"]["median"] if m else None

    rows = []
    for d in results["datasets"]:
        ds = d["name"]
        avro, default, tuned = (
            median(ds, "avro+zstd"),
            median(ds, "parquet-zstd (pyarrow defaults)"),
            median(ds, "parquet-zstd"),
        )
        sorted_cell = next(
            (c for c in cells if c["dataset"] == ds and c["encoding"].get("sort_by") and c["batch_rows"] == batch), None
        )
        sorted_b = sorted_cell["measures"]["bytes_per_row"]["median"] if sorted_cell else None

        def ratio(x: float | None, avro: float | None = avro) -> str:
            return f"{x / avro:.3f}" if x is not None and avro else "-"

        rows.append(
            [
                ds,
                _num(avro),
                _num(default),
                _num(tuned),
                ratio(default),
                f"**{ratio(tuned)}**",
                f"{_num(sorted_b)} ({ratio(sorted_b)}, by {sorted_cell['encoding']['sort_by']})"
                if sorted_cell
                else "-",
            ]
        )
    return [
        f"## Parquet layout: tuned encodings against pyarrow's defaults ({batch:,} rows per segment, zstd)",
        "",
        "Bytes per row on the broker's disk (median over repeats). *tuned* is parka's default "
        "(`columnar.encoding.tuning=auto`: per-column encodings from `parka.encoding`, zstd level 2); "
        "*pyarrow defaults* is `columnar.encoding.tuning=none` (a dictionary for every column, zstd level 1); "
        "*sorted* adds `columnar.sort.by` on the data set's key column. Goal: tuned <= 0.7 x Avro + zstd.",
        "",
        _table(
            [
                "data set",
                "avro+zstd",
                "parquet, pyarrow defaults",
                "parquet, tuned",
                "defaults / avro",
                "tuned / avro",
                "tuned + sorted (/ avro)",
            ],
            rows,
        ),
        "",
    ]


def _matrix_sections(results: dict[str, Any]) -> list[str]:
    if "matrix" not in results:
        return []
    out = ["## Bytes on the broker's disk per row", "", "Median over repeats.", ""]
    datasets = [d["name"] for d in results["datasets"]]
    for ds in datasets:
        out += [f"### {ds}", "", _matrix_table(results, ds, "bytes_per_row", 3, False), ""]
    out += ["![bytes per row](bytes_per_row.png)", ""]
    out += ["## Producer CPU per row (µs)", "", "Median (min-max) over repeats.", ""]
    for ds in datasets:
        out += [f"### {ds}", "", _matrix_table(results, ds, "producer_cpu_us_per_row", 3, True), ""]
    ser = [
        [s["dataset"], s["format"], _spread(s["measures"]["cpu_us_per_row"])]
        for s in results["matrix"]["serialization"]
    ]
    out += ["Of which serialization (row encodings):", "", _table(["data set", "format", "µs/row"], ser), ""]
    out += ["![producer CPU](producer_cpu.png)", ""]
    out += ["## Consumer CPU per row (µs), messaging path", "", "Median (min-max) over repeats.", ""]
    for ds in datasets:
        out += [f"### {ds}", "", _matrix_table(results, ds, "consumer_cpu_us_per_row", 3, True), ""]
    out += ["![consumer CPU](consumer_cpu.png)", ""]
    return out


def _e2e_sections(results: dict[str, Any]) -> list[str]:
    section = results.get("end_to_end")
    if not section:
        return []
    out = [
        "## End to end into Delta (and Iceberg)",
        "",
        "Median (min-max) over repeats; zstd, 10,000 rows per segment / record batch.",
        "",
    ]
    for ds in section["datasets"]:
        rows = []
        for variant, m in ds["variants"].items():
            rows.append(
                [
                    variant,
                    _spread(m["rows_per_s"]),
                    _spread(m["mb_per_s"]),
                    _spread(m["cpu_s_per_million_rows"]),
                    _spread(m["rows_per_cpu_s"]),
                    _num(m["files"]["median"]) if "files" in m else "-",
                    _num(m["mean_file_bytes"]["median"] / 1024) if "mean_file_bytes" in m else "-",
                    _spread(_scaled(m["scan_s"], 1000)) if "scan_s" in m else "-",
                ]
            )
        r = ds["ratios"]
        seg_b, avro_b = ds["segments_bytes_per_row_on_disk"], ds["avro_zstd_bytes_per_row_on_disk"]
        out += [
            f"### {ds['dataset']} ({ds['rows']:,} rows, {ds['segments']} segments)",
            "",
            f"On the broker's disk: segments {_num(seg_b)} bytes/row, Avro + zstd {_num(avro_b)} bytes/row "
            f"(ratio {seg_b / avro_b:.3f}, one produce of all rows).",
            "",
            _table(
                [
                    "variant",
                    "rows/s",
                    "MB/s",
                    "CPU-s per 1M rows",
                    "rows per CPU-s",
                    "files",
                    "mean file KiB",
                    "scan ms",
                ],
                rows,
            ),
            "",
            "parka ingest / row baseline, rows per CPU-second: "
            f"{_spread(r['ingest_over_baseline_rows_per_cpu_s'])}; parka ingest / raw fetch, rows/s over the "
            f"whole run: {_spread(r['ingest_over_raw_fetch_rows_per_s'])}",
            "",
        ]
        if "iceberg_over_delta_cpu_s_per_row" in r:
            out += [
                "parka ingest into Iceberg / into Delta, same topic, same repeat: CPU-s per row "
                f"{_spread(r['iceberg_over_delta_cpu_s_per_row'])}; scan query (pyiceberg vs deltalake, both "
                f"through pyarrow) {_spread(r['iceberg_over_delta_scan_s'])}",
                "",
            ]
    out += _producer_to_table(results, [ds["dataset"] for ds in section["datasets"]])
    spark = results.get("spark") or {}
    if spark.get("status") == "ok":
        out += ["Spark (gps): see the Spark section.", ""]
    out += ["![end to end](end_to_end.png)", ""]
    return out


def _producer_to_table(results: dict[str, Any], datasets: list[str]) -> list[str]:
    """Producer plus ``parka ingest`` per million rows, both producer arms, where the run measured
    the producer too (the encoding matrix's per-record and segments cells at 10,000 rows)."""
    rows = []
    for name in datasets:
        arms = end_to_end_arms(results, name)
        if arms is not None:
            rows.append([name, *(_num(v) for v in arms.values())])
    if not rows:
        return []
    heads = [
        "data set",
        "produce() per dict",
        "produce_batch",
        "parka ingest",
        "produce() per dict + parka ingest",
        "produce_batch + parka ingest",
    ]
    return [
        "### Producer to table: CPU-seconds per million rows",
        "",
        "Each arm's median over repeats: the producers from the encoding matrix (10,000 rows per "
        "segment, zstd; `produce_batch` of an Arrow table), `parka ingest` into Delta from this "
        "section; a sum adds two medians of two sections of one run (not paired).",
        "",
        _table(heads, rows),
        "",
    ]


def _ingest_section(results: dict[str, Any], out_dir: str) -> list[str]:
    section = results.get("ingest_throughput")
    if not section:
        return []
    goal = section["goal_ratio"]
    rows = []
    for s in section["segment_sizes"]:
        i, r, w = s["parka_ingest"], s["raw_fetch"], s["fetch_and_write"]
        rows.append(
            [
                f"{s['segment_rows']:,}",
                f"{s['copies']} ({s['rows']:,} rows)",
                f"{s['segments']:,}",
                _spread(i["steady_mb_per_s"]),
                _spread(w["steady_mb_per_s"]),
                f"**{_spread(s['ratio_to_fetch_and_write_steady_mb_per_s'])}**",
                _spread(r["steady_mb_per_s"]),
                _spread(s["ratio_steady_mb_per_s"]),
                _spread(i["rows_per_s"]),
                _spread(i["cpu_s_per_million_rows"]),
            ]
        )
    out = [
        "## Ingest throughput next to its floor and the raw fetch",
        "",
        "Copies of the flights as zstd segments, one topic per segment size; per repeat, interleaved: "
        "`parka ingest` into a fresh table, "
        f"fetch + write ({section.get('fetch_and_write', _OLD_FETCH_AND_WRITE)}: the least any ingester "
        "must do, so the floor of ingest on this disk) and a raw fetch of the same topic (poll every message, "
        f"discard it). Goal: ingest >= {goal} x its floor, steady MB/s; the ratio to the raw fetch, the "
        f"first goal ({goal} x), is kept. Each cell: the median over the repeats (min-max); a ratio is the median "
        "of the repeats' paired ratios (each repeat's ingest over the same repeat's reference).",
        "",
        _table(
            [
                "rows/segment",
                "flights copies",
                "segments",
                "ingest MB/s",
                "fetch + write MB/s",
                "ingest / fetch + write",
                "raw fetch MB/s",
                "ingest / raw fetch",
                "ingest rows/s (whole run)",
                "ingest CPU-s per 1M rows",
            ],
            rows,
        ),
        "",
        *_ingest_s3_table(section),
        "![ingest throughput](ingest_throughput.png)",
        "",
    ]
    profile = section.get("profile")
    if profile:
        path = os.path.join(out_dir, profile["text"])
        text = ""
        if os.path.exists(path):
            with open(path) as fh:
                text = fh.read()
        lines = [line for line in text.splitlines() if line.strip()][:60]
        html = profile["text"].removesuffix(".txt") + ".html"
        files = f"`{profile['text']}`" + (f", `{html}`" if os.path.exists(os.path.join(out_dir, html)) else "")
        out += [
            f"### Where ingest spends its time ({profile['segment_rows']:,} rows per segment, pyinstrument)",
            "",
            f"One extra ingest, outside the measurements (full profile: {files}):",
            "",
            "```",
            *lines,
            "```",
            "",
        ]
    return out


def _ingest_s3_table(section: dict[str, Any]) -> list[str]:
    """The object-store arms of the ingest section, when they ran."""
    sizes = [s for s in section["segment_sizes"] if "fetch_and_put_s3" in s]
    if not sizes:
        return []
    store = section.get("object_store") or {}
    where = store.get("uri", "an object store") + (f" at {store['endpoint']}" if store.get("endpoint") else "")
    rows = [
        [
            f"{s['segment_rows']:,}",
            _spread(s["parka_ingest_s3"]["steady_mb_per_s"]),
            _spread(s["fetch_and_put_s3"]["steady_mb_per_s"]),
            f"**{_spread(s['ratio_to_fetch_and_put_steady_mb_per_s'])}**",
            _spread(s["parka_ingest_s3"]["rows_per_s"]),
            _spread(s["parka_ingest_s3"]["cpu_s_per_million_rows"]),
        ]
        for s in sizes
    ]
    return [
        f"On the object store ({where}), interleaved with the runs above: `parka ingest` into a fresh "
        f"`s3://` table, and fetch + PUT ({section['fetch_and_put']}: the floor of ingest on this store, "
        f"through the same client). Goal: ingest >= {section['goal_ratio']} x fetch + PUT, steady MB/s.",
        "",
        _table(
            [
                "rows/segment",
                "ingest (s3) MB/s",
                "fetch + PUT (s3) MB/s",
                "ingest / fetch + PUT",
                "ingest (s3) rows/s (whole run)",
                "ingest (s3) CPU-s per 1M rows",
            ],
            rows,
        ),
        "",
    ]


def _spark_section(results: dict[str, Any]) -> list[str]:
    spark = results.get("spark") or {}
    out = ["## Spark: Structured Streaming with from_avro vs parka's Spark path", ""]
    if spark.get("status") != "ok":
        out += [f"**Not run**: {spark.get('reason', 'no result')}.", ""]
        return out
    result = spark["result"]
    rows = []
    for name, p in result.get("paths", {}).items():
        rows.append(
            [
                name,
                _num(p["rows_per_s"]),
                _num(p["cpu_s_per_million_rows"]),
                _num(p["rows_per_cpu_s"]),
                ", ".join(_num(c) for c in p["runs_cpu_s"]),
                _num(p["kafka_messages"]),
                _num(p["kafka_value_bytes_per_row"]),
            ]
        )
    out += [
        f"`benchmarks/spark_gps.py` (its own GPS fleet and measurement, run in a child process): "
        f"{result['n_records']:,} records per path, {result.get('kafka_partitions', '?')} partitions, "
        f"one warm-up then {result.get('repeats', '?')} measured `availableNow` runs per path, alternating; "
        f"{spark['wall_s']:.0f} s wall in all. CPU: {result.get('cpu_measure', '?')}. Medians:",
        "",
        _table(
            [
                "path",
                "rows/s",
                "CPU-s per 1M rows",
                "rows per CPU-s",
                "CPU-s per run",
                "Kafka messages",
                "value bytes/row",
            ],
            rows,
        ),
        "",
        "parka / from_avro, rows per CPU-second, paired per repeat: "
        f"{_spread(spark.get('ratio_parka_over_from_avro_rows_per_cpu_s'))}; full result in `spark/spark_gps.json`.",
        "",
    ]
    return out


def _lake_section(results: dict[str, Any]) -> list[str]:
    lake = results.get("lake")
    if not lake:
        return []
    tables = lake["tables"]
    shape_rows = [
        [
            label,
            f"{t['files']:,}",
            _num(t["mean_file_bytes"] / 1024),
            _num(t["max_file_bytes"] / 1024),
            f"{t['row_groups']:,}",
            _num(t["total_bytes"] / 2**20),
        ]
        for label, t in tables.items()
    ]
    scans = lake["scans"]
    labels = list(tables)
    scan_rows = []
    for engine, e in scans["engines"].items():
        if e.get("status") != "ok":
            scan_rows.append([engine, *("-" for _ in labels), f"not run: {e.get('reason', '')}", "-"])
            continue
        scan_rows.append(
            [
                engine,
                *(_spread(_scaled(e["scan_s"][label], 1000)) if label in e["scan_s"] else "-" for label in labels),
                f"**{_spread(e['ratio_parka_over_baseline'])}**",
                f"**{_spread(e.get('ratio_optimized_over_baseline'))}**",
            ]
        )
    ing = lake["ingest"]
    base = lake["row_baseline"]
    opt = lake["optimize"]
    if opt["status"] == "ok":
        last = (opt["output"].splitlines() or [""])[-1]
        opt_line = f"`{' '.join(opt['command'])}` (default settings) took {opt['wall_s']:.1f} s: `{last[:300]}`"
    else:
        opt_line = f"**{opt['status']}**: {opt.get('reason', '')}; no scans after optimize"
    per_file = lake["segments_per_file"]
    return [
        "## The lake for its readers",
        "",
        f"{lake['rows']:,} flight rows ({lake['copies']} x the flights"
        f"{'' if lake['copies'] > 1 else ', the first rows'}) as {lake['segments']:,} zstd segments of "
        f"{lake['segment_rows']:,} rows, ingested by `parka ingest` (default settings) and by the row baseline "
        "(kafka-delta-ingest's files: 128 MiB of Parquet). Segments per parka data file: "
        f"**{_num(per_file) if per_file is not None else '-'}**.",
        "",
        _table(["table", "files", "mean file KiB", "largest file KiB", "row groups", "MiB"], shape_rows),
        "",
        f"Scan query `{scans['query']}`, {scans['warmups']} warm-up round then {scans['repeats']} rounds, each "
        f"scanning every table once in a shuffled order. {scans['statistic']}.",
        "",
        _table(
            ["reader", *(f"{label} ms" for label in labels), "parka / baseline", "optimized / baseline"],
            scan_rows,
        ),
        "",
        *(f"- {engine}: {e['reader']}" for engine, e in scans["engines"].items()),
        "",
        f"`parka optimize`: {opt_line}.",
        "",
        f"Ingest next to its floor on the same topic ({ing['fetch_and_write']}), interleaved: parka ingest "
        f"{_spread(ing['parka_ingest']['steady_mb_per_s'])} MB/s steady, fetch + write "
        f"{_spread(ing['floor']['steady_mb_per_s'])} MB/s, ratio **{_spread(ing['ratio_steady_mb_per_s'])}** "
        f"(over the whole runs: {_spread(ing['ratio_mb_per_s'])}); "
        f"parka ingest {_spread(ing['parka_ingest']['rows_per_s'])} rows/s over the whole run, "
        f"{_spread(ing['parka_ingest']['commits'])} commits. Row baseline: {_num(base['rows_per_s'])} rows/s, "
        f"{base['wall_s']:.0f} s, {base['commits']} commit(s).",
        "",
    ]


def _encryption_section(results: dict[str, Any]) -> list[str]:
    enc = results.get("encryption")
    if not enc:
        return []
    rows = []
    for cell in enc["cells"]:
        for v in ("some", "all"):
            rows.append(
                [
                    cell["dataset"],
                    f"{v} ({cell['encrypted_columns'][v]}/{cell['columns']})",
                    _spread(cell["encode_ratio"][v]),
                    _spread(cell["decode_ratio"][v]),
                    f"{_num(cell['encode_cpu_us_per_row']['plain']['median'])} -> "
                    f"{_num(cell['encode_cpu_us_per_row'][v]['median'])}",
                    f"{_num(cell['decode_cpu_us_per_row']['plain']['median'])} -> "
                    f"{_num(cell['decode_cpu_us_per_row'][v]['median'])}",
                    f"{_num(cell['bytes_per_row']['plain'])} -> {_num(cell['bytes_per_row'][v])}",
                ]
            )
    header = [
        "data set",
        "encrypted columns",
        "encode+encrypt / encode",
        "decode+decrypt / decode",
        "encode µs/row",
        "decode µs/row",
        "bytes/row",
    ]
    return [
        "## Column encryption",
        "",
        f"Segments of {enc['segment_rows']:,} rows, {enc['codec']}, plaintext footer, local KMS; CPU time ratios, "
        f"median of {enc['rounds']} paired rounds (min-max); µs/row: medians, plain -> encrypted.",
        "",
        _table(header, rows),
        "",
    ]


# -- the freshness section -------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}g}"


def _ratio(ratio: dict[str, Any]) -> str:
    return f"{_fmt(ratio['median'])} ({_fmt(ratio['min'])}-{_fmt(ratio['max'])})"


def _spark_cell(spark: dict[str, Any] | None) -> str:
    if spark is None:
        return "-"
    return _ratio(spark["ratio"]) if spark["status"] == "ok" else f"not run: {spark['reason'][:80]}"


def _compactions(stats: dict[str, Any]) -> str:
    """Background compactions that committed, and the small files they removed ("-": not counted)."""
    if "compactions" not in stats:
        return "-"
    return f"{stats['compactions']} ({stats['files_compacted']})"


def render_freshness(results: dict[str, Any], *, title: str = "#") -> str:
    """The freshness section's tables (``results["freshness"]``: :func:`benchmarks.freshness.run`'s), under a heading of
    ``title``'s level."""
    s = results["freshness"]["settings"]
    lines = [
        f"{title} Freshness: produce-to-visible latency and the table `parka ingest -l` leaves",
        "",
        f"flights rows (cycled) at fixed rates into {s['partitions']} partitions for {s['duration_s']:g} s each;"
        f" `parka ingest -l {s['allowed_latency_s']:g}{''.join(' ' + a for a in s.get('ingest_args', []))}`"
        " (subprocess),"
        f" a `produce_batch` per partition every {s['batch_ms']:g} ms,"
        f" table polled every {s['poll_ms']:g} ms.",
        "Latency: per row, the poll that first saw its version minus its slot in the pacing schedule"
        " (p50 and p99 over the run's rows). Scan ratio: DuckDB, parka's table / the row baseline's"
        f" table of the same rows, {STATISTIC}; each scan opens the table's Delta log (deltalake: the"
        " list of files) and has DuckDB read those files, and the next two columns split it so.",
        "",
        "| target rows/s | achieved rows/s | p50 latency s | p99 latency s | max s | versions/h | files/h |"
        " row groups/h | files at end | row groups at end | write amplification | compactions (files) |"
        " ingest CPU µs/row |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["freshness"]["runs"]:
        lat = r["latency_s"]
        lines.append(
            f"| {r['rate']} | {r['achieved_rows_per_s']:,.0f} | {_fmt(lat['p50'])} | {_fmt(lat['p99'])} |"
            f" {_fmt(lat['max'])} | {r['per_hour']['versions']:,.0f} | {r['per_hour']['files']:,.0f} |"
            f" {r['per_hour']['row_groups']:,.0f} | {r['table']['files']} | {r['table']['row_groups']} |"
            f" {r['write_amplification']['ratio']:.3f} | {_compactions(r['ingest'].get('stats', {}))} |"
            f" {r['ingest']['cpu_us_per_row']:.2f} |"
        )
    lines += [
        "",
        "Scans (`SELECT carrier, avg(dep_delay), sum(distance) GROUP BY carrier`; Spark at the end point only):",
        "",
        "| target rows/s | point | version | rows | parka files / row groups | baseline files / row groups |"
        " DuckDB parka / baseline | DuckDB's read of the files alone | opening the Delta log, ms (parka, baseline) |"
        " Spark parka / baseline |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["freshness"]["runs"]:
        for p in r["scans"]:
            ratio = p["duckdb_ratio"]
            lines.append(
                f"| {r['rate']} | {p['point']} | {p['version']} | {p['rows']:,} |"
                f" {p['parka']['files']} / {p['parka']['row_groups']} |"
                f" {p['row_baseline']['files']} / {p['row_baseline']['row_groups']} |"
                f" {_ratio(ratio)} | {_ratio(p['duckdb_read_ratio']) if 'duckdb_read_ratio' in p else '-'} |"
                f" {_opens(p.get('duckdb_open_s'))} | {_spark_cell(p.get('spark'))} |"
            )
    return "\n".join(lines) + "\n"


def _opens(open_s: dict[str, list[float]] | None) -> str:
    """The median time DuckDB's scans of a point spent opening each table's Delta log, in ms."""
    if not open_s:
        return "-"
    return f"{statistics.median(open_s['parka']) * 1e3:.1f}, {statistics.median(open_s['row baseline']) * 1e3:.1f}"


def _freshness_section(results: dict[str, Any]) -> list[str]:
    if not results.get("freshness"):
        return []
    return [*render_freshness(results, title="##").splitlines(), "", "![freshness](freshness.png)", ""]


def _upsert_section(results: dict[str, Any]) -> list[str]:
    """The upsert section's tables (``results["upsert"]``: :func:`benchmarks.suite.run_upsert_section`'s)."""
    section = results.get("upsert")
    if not section:
        return []
    lines = [
        f"## Upserts into {section['keys']:,} keys (`benchmarks/upsert.py`)",
        "",
        "CPU-seconds per event, one run per arm; the anchors in batches, each deduplicated by key.",
        "",
        "| arm | events | µs CPU per event |",
        "|---|---|---|",
    ]
    for name, arm in section["arms"].items():
        lines.append(f"| {name} | {arm['events']:,} | {arm['cpu_s'] / arm['events'] * 1e6:,.1f} |")
    lines += [
        "",
        f"The daemon (`parka ingest --upsert -l 1`) at {section['rate']:,} events/s; the scan is the median of its "
        "paired rounds against the same rows written compact:",
        "",
        "| keys | p99 produce-to-visible | CPU per commit | live files | scan / compact |",
        "|---|---|---|---|---|",
    ]
    for keys, run in sorted(section["daemon"].items(), key=lambda kv: int(kv[0])):
        lines.append(
            f"| {int(keys):,} | {run['p99_s']:.2f} s | {run['cpu_per_commit_ms']:.0f} ms | {run['live_files']} | "
            f"{run['scan_ratio']['median']:.2f} |"
        )
    return [*lines, ""]


def render(results: dict[str, Any], out_dir: str) -> str:
    """The report as Markdown."""
    quick = results["suite"]["mode"] == "quick"
    lines = [
        f"# parka benchmarks ({results['suite']['mode']} run, {results['suite']['started_at'][:10]})",
        "",
        *(
            [
                "> Quick mode: reduced volumes and one repeat, to check the suite end to end. Fixed costs weigh "
                "on small runs, so the targets below are indicative only; `make bench` decides.",
                "",
            ]
            if quick
            else []
        ),
        *_targets_section(results),
        *_machine_section(results),
        *_layout_section(results),
        *_matrix_sections(results),
        *_e2e_sections(results),
        *_ingest_section(results, out_dir),
        *_spark_section(results),
        *_lake_section(results),
        *_encryption_section(results),
        *_freshness_section(results),
        *_upsert_section(results),
        *_method_section(results),
    ]
    return "\n".join(lines).rstrip() + "\n"


def save_run(out_dir: str, results: dict[str, Any], text: str) -> None:
    """A benchmark run's ``results.json`` and ``report.md`` (``text``) into ``out_dir``, and the
    report on standard output."""
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2, default=str)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text)
    print(text)


def write_report(results: dict[str, Any], out_dir: str) -> None:
    """Write ``report.md`` and the plots into ``out_dir``."""
    write_plots(results, out_dir)
    text = render(results, out_dir) if "suite" in results else render_ingest(results, out_dir)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text)


def render_ingest(doc: dict[str, Any], out_dir: str) -> str:
    """The report of ``python -m benchmarks.ingest_throughput`` alone."""
    m = doc["machine"]
    lines = [
        "# parka ingest throughput",
        "",
        f"`{doc['command']}`, {doc['wall_s']:.0f} s; {m['cpu_model']}, {m['logical_cores']} cores, "
        f"Kafka {m['kafka']['version']}, deltalake {m['versions']['deltalake']}, pyarrow {m['versions']['pyarrow']}; "
        f"checks passed: {len(doc['checks'])}",
        "",
        *_ingest_section(doc, out_dir),
    ]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else "."  # a suite run or an ingest_throughput run
    with open(os.path.join(folder, "results.json")) as fh:
        write_report(json.load(fh), folder)
