"""Issue 3: ``parka ingest`` throughput next to the raw fetch of the same bytes, in one run.

For each segment size, a topic holds copies of the flights as zstd Parquet segments (about
6 MB per copy at 10,000 rows per segment; fewer copies for small segments, which are slow).
Per repeat, in a shuffled order, each topic is (a) ingested into a fresh Delta table by
``parka ingest`` (in-process, ``end_at_latest``), (b) fetched by a plain confluent-kafka
consumer that polls every message and discards it (the raw fetch, the goal's reference), and
(c) fetched the same way with each message written to a file of its own and one ``syncfs``
at the end: the least any ingester must do, so (c) is the ceiling for (a) on this disk. All join a
fresh consumer group; throughput is reported over the whole run and "steady" (from the first
message in hand to the end, so the group join is not billed). The goal: ingest steady MB/s
>= 0.8 x the raw fetch's.

Checks on every ingest: rows in the table, the table's files are byte for byte the produced
segments (SHA-256 per file against the delivery reports' values); on the first repeat also
exact column sums of the table read back. With ``--profile`` (or when the goal is missed, in
the suite) one extra ingest at 10,000 rows per segment runs under pyinstrument, outside the
measurements.

Run alone (writes results.json and report.md):
``python -m benchmarks.ingest_throughput --kafka-data-dir "$(scripts/kafka-local.sh data-dir)" --profile``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from parka.lake import row_groups
from parka.producer import ParquetProducer

from . import encodings as enc
from .broker import Broker
from .checks import CheckFailed, Checks, column_sums
from .clients import fetch_raw
from .datasets import Dataset, load
from .endtoend import rates
from .lake import ingest
from .measure import summarize

__all__ = ["GOAL", "fetch_and_write", "main", "produce_copies", "run"]

log = logging.getLogger("parka.bench")

GOAL = 0.8
VARIANTS = ("parka ingest", "raw fetch", "fetch + write")
FETCH_AND_WRITE = "poll every message, write it to a file of its own, one syncfs once all are written"
PROFILE_SEGMENT_ROWS = 10_000


def produce_copies(broker: Broker, ds: Dataset, copies: int, segment_rows: int, topic: str) -> dict[str, Any]:
    """Produce the data set ``copies`` times into ``topic`` (created here) as zstd segments of
    ``segment_rows`` rows; returns the topic, rows, the segments' count, bytes and the digests
    of their row groups (stitched data files hold them byte for byte).
    Raises ``CheckFailed`` when a delivery fails."""
    digests: list[str] = []
    sizes: list[int] = []

    def delivered(err: Any, msg: Any, _records: int) -> None:
        if err is not None:
            raise CheckFailed(f"{topic}: delivery failed: {err}")
        value = msg.value()
        digests.extend(hashlib.sha256(g).hexdigest() for g in row_groups(value))
        sizes.append(len(value))

    conf = enc.parka_producer_conf(broker.bootstrap, "zstd", segment_rows, broker.max_message_bytes_cached())
    broker.create_topic(topic)
    producer = ParquetProducer(conf)
    producer.set_schema(topic, ds.avro_schema)
    for _ in range(copies):
        producer.produce_batch(topic, ds.table, on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(300)
    producer.close()
    if left or producer.stats()["records"] != ds.rows * copies:
        raise CheckFailed(f"{topic}: {left} records undelivered")
    return {
        "topic": topic,
        "rows": ds.rows * copies,
        "segments": len(sizes),
        "bytes": sum(sizes),
        "digests": sorted(digests),
    }


def _file_digests(table_uri: str) -> tuple[list[str], int]:
    table = DeltaTable(table_uri)
    adds = pa.table(table.get_add_actions(flatten=True))
    digests = []
    for path in adds["path"].to_pylist():
        with open(os.path.join(table_uri, path), "rb") as f:
            digests.extend(hashlib.sha256(g).hexdigest() for g in row_groups(f.read()))
    rows = int(sum(adds["num_records"].to_pylist()))
    return sorted(digests), rows


def _profiler(path: str, *, html: bool) -> Callable[[], Any]:
    @contextmanager
    def profiled() -> Iterator[None]:
        try:
            from pyinstrument import Profiler
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("profiling needs pyinstrument: pip install -e '.[bench]'") from exc
        profiler = Profiler(interval=0.0005)
        profiler.start()
        try:
            yield
        finally:
            profiler.stop()
            with open(path, "w") as f:
                f.write(profiler.output_text(unicode=False, color=False, show_all=False))
            if html:  # interactive, but over a megabyte
                with open(path.removesuffix(".txt") + ".html", "w") as f:
                    f.write(profiler.output_html())

    return profiled


def run(
    broker: Broker,
    ds: Dataset,
    *,
    copies: dict[int, int],
    repeats: int,
    run_id: str,
    checks: Checks,
    seed: int,
    profile_path: str | None = None,
    profile_if_missed: bool = False,
    progress: Callable[[str], None] = log.info,
) -> dict[str, Any]:
    """The ``ingest_throughput`` section of results.json. ``copies`` maps each segment size
    (rows per segment) to how many copies of the data set its topic holds. Profiles one ingest
    into ``profile_path`` when asked, or when ``profile_if_missed`` and the goal is missed."""
    sums_by_copies = {
        n: _sums_digest(column_sums(pa.concat_tables([ds.table] * n), ds.table.schema)) for n in set(copies.values())
    }
    topics: dict[int, dict[str, Any]] = {}
    samples: dict[tuple[int, str], list[dict[str, float]]] = defaultdict(list)
    try:
        for size, n in copies.items():
            topic = f"bench-{run_id}-ingest-{size}-{uuid.uuid4().hex[:6]}"
            topics[size] = {**produce_copies(broker, ds, n, size, topic), "copies": n}
        progress(f"ingest throughput: {len(topics)} topics produced")
        runs = [(size, variant) for size in copies for variant in VARIANTS]
        for rep in range(repeats):
            order = list(runs)
            random.Random(seed + 2000 + rep).shuffle(order)
            for size, variant in order:
                sums = sums_by_copies[copies[size]] if rep == 0 else None
                samples[(size, variant)].append(_run_one(broker, ds, topics[size], variant, sums, checks))
            progress(f"ingest throughput repeat {rep + 1}/{repeats} done")
        out = _summarize(ds, topics, samples)
        missed = any((r["ratio_steady_mb_per_s"]["median"] or 0.0) < GOAL for r in out["segment_sizes"])
        if profile_path is None and profile_if_missed and missed:
            raise ValueError("profile_if_missed needs profile_path")
        if profile_path is not None and (missed or not profile_if_missed):
            size = PROFILE_SEGMENT_ROWS if PROFILE_SEGMENT_ROWS in topics else next(iter(topics))
            table_uri = tempfile.mkdtemp(prefix="parka-bench-profile-")
            try:
                profiler = _profiler(profile_path, html=not profile_if_missed)
                ingest(broker.bootstrap, topics[size]["topic"], table_uri, profiler=profiler)
            finally:
                shutil.rmtree(table_uri, ignore_errors=True)
            out["profile"] = {"segment_rows": size, "text": os.path.basename(profile_path)}
        return out
    finally:
        broker.delete_topics([t["topic"] for t in topics.values()])


def _sums_digest(sums: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sums, sort_keys=True).encode()).hexdigest()[:20]


def fetch_and_write(broker: Broker, topic: dict[str, Any], *, write: bool = True) -> dict[str, float]:
    """The floor of any ingester on ``topic`` (a :func:`produce_copies` result): fetch every
    segment one poll at a time and, with ``write``, write each to a file of its own, then one
    ``syncfs`` (:data:`FETCH_AND_WRITE`); without ``write``, the raw fetch. Returns its rates;
    raises ``CheckFailed`` when the bytes fetched differ from the bytes produced. Call
    ``os.sync()`` first to start from clean page cache."""
    folder = tempfile.mkdtemp(prefix="parka-bench-fetch-") if write else None
    try:
        fetched = fetch_raw(broker.bootstrap, topic["topic"], topic["segments"], batch_size=1, write_to=folder)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    if fetched.value_bytes != topic["bytes"]:
        what = "fetch + write" if write else "raw fetch"
        raise CheckFailed(
            f"{topic['topic']} {what}: fetched {fetched.value_bytes:,} bytes, produced {topic['bytes']:,}"
        )
    s = fetched.span
    rows = topic["rows"]
    return rates(rows, fetched.value_bytes, s.wall_s, s.cpu_s, fetched.steady_wall_s, fetched.first_bytes)


def _run_one(
    broker: Broker,
    ds: Dataset,
    topic: dict[str, Any],
    variant: str,
    expected_sums: str | None,
    checks: Checks,
) -> dict[str, float]:
    """One measured run; with ``expected_sums`` the table is also read back and summed."""
    rows = topic["rows"]
    # Start from clean page cache: on ext4 (data=ordered) an fsync also writes out other files'
    # dirty data, such as the broker's, which would bill earlier work to this run.
    os.sync()
    what = f"ingest throughput {topic['topic']} {variant}"
    if variant in ("raw fetch", "fetch + write"):
        return fetch_and_write(broker, topic, write=variant == "fetch + write")
    table_uri = tempfile.mkdtemp(prefix="parka-bench-ingest-")
    try:
        result = ingest(broker.bootstrap, topic["topic"], table_uri)
        digests, table_rows = _file_digests(table_uri)
        checks.expect(
            what + ": data files hold the segments' row groups, byte for byte",
            rows=table_rows,
            expected_rows=rows,
            got=hashlib.sha256("".join(digests).encode()).hexdigest()[:20],
            expected=hashlib.sha256("".join(topic["digests"]).encode()).hexdigest()[:20],
        )
        if expected_sums is not None:
            got = column_sums(DeltaTable(table_uri).to_pyarrow_dataset(), ds.table.schema)
            checks.expect(
                what + ": column sums read back",
                rows=table_rows,
                expected_rows=rows,
                got=_sums_digest(got),
                expected=expected_sums,
            )
        sample = rates(
            rows, result.bytes, result.span.wall_s, result.span.cpu_s, result.steady_wall_s, result.first_bytes
        )
        sample["commits"] = result.commits
        return sample
    finally:
        shutil.rmtree(table_uri, ignore_errors=True)


def _summarize(
    ds: Dataset,
    topics: dict[int, dict[str, Any]],
    samples: dict[tuple[int, str], list[dict[str, float]]],
) -> dict[str, Any]:
    sizes = []
    for size, topic in topics.items():
        ing, raw, written = (samples[(size, v)] for v in VARIANTS)
        sizes.append(
            {
                "segment_rows": size,
                "copies": topic["copies"],
                "rows": topic["rows"],
                "segments": topic["segments"],
                "bytes": topic["bytes"],
                "parka_ingest": {k: summarize([s[k] for s in ing], k) for k in ing[0]},
                "raw_fetch": {k: summarize([s[k] for s in raw], k) for k in raw[0]},
                "fetch_and_write": {k: summarize([s[k] for s in written], k) for k in written[0]},
                "ratio_steady_mb_per_s": summarize(
                    [i["steady_mb_per_s"] / r["steady_mb_per_s"] for i, r in zip(ing, raw, strict=True)], "ratio"
                ),
                "ratio_mb_per_s": summarize(
                    [i["mb_per_s"] / r["mb_per_s"] for i, r in zip(ing, raw, strict=True)], "ratio"
                ),
                "ratio_to_fetch_and_write_steady_mb_per_s": summarize(
                    [i["steady_mb_per_s"] / w["steady_mb_per_s"] for i, w in zip(ing, written, strict=True)], "ratio"
                ),
            }
        )
    return {
        "dataset": ds.name,
        "goal_ratio": GOAL,
        "fetch_and_write": FETCH_AND_WRITE,
        "segment_sizes": sizes,
    }


def main(argv: list[str] | None = None) -> int:
    from .machine import machine_info
    from .report import write_report

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--kafka-data-dir", default=os.environ.get("PARKA_KAFKA_DATA_DIR"), required=False)
    parser.add_argument(
        "--sizes",
        default="1000:4,10000:12,100000:12",
        help="rows per segment:copies of the flights in its topic, comma-separated (default 1000:4,10000:12,100000:12)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="profile one ingest with pyinstrument")
    parser.add_argument("--out", default="bench-out/ingest")
    args = parser.parse_args(argv)
    if not args.kafka_data_dir:
        parser.error("--kafka-data-dir is required (scripts/kafka-local.sh data-dir)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("parka").setLevel(logging.WARNING)
    log.setLevel(logging.INFO)
    os.makedirs(args.out, exist_ok=True)
    broker = Broker(args.bootstrap, args.kafka_data_dir)
    checks = Checks()
    started = time.perf_counter()
    result = run(
        broker,
        load("flights", None),
        copies={int(size): int(n) for size, n in (item.split(":") for item in args.sizes.split(","))},
        repeats=args.repeats,
        run_id=uuid.uuid4().hex[:6],
        checks=checks,
        seed=args.seed,
        profile_path=os.path.join(args.out, "profile_ingest.txt") if args.profile else None,
    )
    doc = {
        "command": " ".join([os.path.basename(sys.executable), "-m", "benchmarks.ingest_throughput", *sys.argv[1:]]),
        "wall_s": time.perf_counter() - started,
        "machine": machine_info(broker),
        "ingest_throughput": result,
        "checks": checks.passed,
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(doc, f, indent=2)
    write_report(doc, args.out)

    def fmt(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)  # None: no steady window in any repeat

    for s in result["segment_sizes"]:
        ratio = s["ratio_steady_mb_per_s"]
        print(
            f"{s['segment_rows']:>7} rows/segment: ingest {fmt(s['parka_ingest']['steady_mb_per_s']['median'], '8.1f')}"
            f" MB/s, raw fetch {fmt(s['raw_fetch']['steady_mb_per_s']['median'], '8.1f')} MB/s, ratio "
            f"{fmt(ratio['median'], '.2f')} ({fmt(ratio['min'], '.2f')}-{fmt(ratio['max'], '.2f')}); goal {GOAL}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
