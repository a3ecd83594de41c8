"""``parka ingest`` throughput next to the raw fetch of the same bytes and next
to its floor, in one run.

For each segment size, a topic holds copies of the flights as zstd Parquet segments (about
6 MB per copy at 10,000 rows per segment; fewer copies for small segments, which are slow).
Per repeat, in a shuffled order, each topic is (a) ingested into a fresh Delta table by
``parka ingest`` (in-process, ``end_at_latest``, background compaction off: the files as they
land, which is what the floor writes), (b) fetched by a plain confluent-kafka
consumer that polls every message and discards it (the raw fetch, the first goal's reference), and
(c) fetched the same way with each message written to a file of its own and one ``syncfs``
at the end: the least any ingester must do, so (c) is the floor of (a) on this disk. With
``--s3 s3://bucket/prefix`` two arms run on that object store too (:mod:`.objectstore`):
(d) ``parka ingest`` into a fresh ``s3://`` Delta table there, and (e) its floor: the fetch of
(c) with each message PUT as an object of its own, as many PUTs in flight as ``parka ingest``
writes files at once, through the same client (obstore), done when all are acknowledged. All
join a fresh consumer group; throughput is reported over the whole run and "steady" (from the
first message in hand to the end, so the group join is not billed). The goals: ingest steady
MB/s >= 0.8 x its floor's, (a) / (c) and (d) / (e); the first goal's (a) / (b) is kept.

Checks on every ingest: rows in the table, the table's files are byte for byte the produced
segments (SHA-256 per row group against the delivery reports' values; on the object store the
objects are read back); on the first repeat also exact column sums of the table read back. On
every fetch + PUT: the objects stored hold the bytes produced. The object-store arms delete
their tables and objects afterwards. With ``--profile`` (or when the goal is missed, in the
suite) one extra ingest at 10,000 rows per segment runs under pyinstrument, outside the
measurements.

Run alone (writes results.json and report.md):
``python -m benchmarks.ingest_throughput --kafka-data-dir "$(scripts/kafka-local.sh data-dir)" --profile``;
with the object-store arms, its storage options in the environment as for ``parka ingest``
(``PARKA_STORAGE_OPTIONS``, comma-separated; or ``--storage-option``, repeatable), e.g. on
``scripts/s3proxy.sh``'s server: ``PARKA_STORAGE_OPTIONS="$(scripts/s3proxy.sh env | paste -sd,)"
python -m benchmarks.ingest_throughput ... --s3 s3://lake/bench``.
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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from parka.lake import read_file, row_groups
from parka.producer import ParquetProducer

from . import encodings as enc
from .broker import Broker
from .checks import CheckFailed, Checks, column_sums
from .clients import FileSink, Sink, fetch_raw
from .datasets import Dataset, load
from .endtoend import rates
from .ingest_summary import FETCH_AND_PUT, FETCH_AND_WRITE, GOAL, S3_VARIANTS, VARIANTS, summarize_runs, summary_lines
from .lake import ingest
from .objectstore import ObjectStoreRoot, PutSink, add_s3_arguments, masked_command, remove_all, s3_root, stored

__all__ = [
    "FETCH_AND_PUT",
    "FETCH_AND_WRITE",
    "GOAL",
    "fetch_and_put",
    "fetch_and_write",
    "main",
    "produce_copies",
    "run",
]

log = logging.getLogger("parka.bench")

PROFILE_SEGMENT_ROWS = 10_000


def produce_copies(
    broker: Broker, ds: Dataset, copies: int, segment_rows: int, topic: str, *, partitions: int = 1
) -> dict[str, Any]:
    """Produce the data set ``copies`` times into ``topic`` (created here, with ``partitions``) as zstd segments of
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
    broker.create_topic(topic, partitions)
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


def _file_digests(table_uri: str, storage_options: Mapping[str, str]) -> tuple[list[str], int]:
    """The digests of the row groups in the table's data files (read back from wherever the
    table lives, through parka's own file layer) and its rows."""
    table = DeltaTable(table_uri, storage_options=dict(storage_options) or None)
    adds = pa.table(table.get_add_actions(flatten=True))
    digests: list[str] = []
    for path in adds["path"].to_pylist():
        data = read_file(table_uri, path, storage_options)
        digests.extend(hashlib.sha256(g).hexdigest() for g in row_groups(data))
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
    s3: ObjectStoreRoot | None = None,
    profile_path: str | None = None,
    profile_if_missed: bool = False,
    progress: Callable[[str], None] = log.info,
) -> dict[str, Any]:
    """The ``ingest_throughput`` section of results.json. ``copies`` maps each segment size
    (rows per segment) to how many copies of the data set its topic holds. With ``s3`` the
    object-store arms run there too (:data:`S3_VARIANTS`). Profiles one ingest into
    ``profile_path`` when asked, or when ``profile_if_missed`` and the goal is missed."""
    sums_by_copies = {
        n: _sums_digest(column_sums(pa.concat_tables([ds.table] * n), ds.table.schema)) for n in set(copies.values())
    }
    topics: dict[int, dict[str, Any]] = {}
    samples: dict[tuple[int, str], list[dict[str, float]]] = defaultdict(list)
    variants = VARIANTS + (S3_VARIANTS if s3 is not None else ())
    try:
        for size, n in copies.items():
            topic = f"bench-{run_id}-ingest-{size}-{uuid.uuid4().hex[:6]}"
            topics[size] = {**produce_copies(broker, ds, n, size, topic), "copies": n}
        progress(f"ingest throughput: {len(topics)} topics produced")
        runs = [(size, variant) for size in copies for variant in variants]
        for rep in range(repeats):
            order = list(runs)
            random.Random(seed + 2000 + rep).shuffle(order)
            for size, variant in order:
                sums = sums_by_copies[copies[size]] if rep == 0 else None
                samples[(size, variant)].append(_run_one(broker, ds, topics[size], variant, sums, checks, s3))
            progress(f"ingest throughput repeat {rep + 1}/{repeats} done")
        out = summarize_runs(ds.name, topics, samples)
        if s3 is not None:
            out["object_store"] = s3.described()
        missed = any((r["ratio_steady_mb_per_s"]["median"] or 0.0) < GOAL for r in out["segment_sizes"])
        if profile_path is None and profile_if_missed and missed:
            raise ValueError("profile_if_missed needs profile_path")
        if profile_path is not None and (missed or not profile_if_missed):
            size = PROFILE_SEGMENT_ROWS if PROFILE_SEGMENT_ROWS in topics else next(iter(topics))
            table_uri = tempfile.mkdtemp(prefix="parka-bench-profile-")
            try:
                profiler = _profiler(profile_path, html=not profile_if_missed)
                ingest(broker.bootstrap, topics[size]["topic"], table_uri, profiler=profiler, compaction=False)
            finally:
                shutil.rmtree(table_uri, ignore_errors=True)
            out["profile"] = {"segment_rows": size, "text": os.path.basename(profile_path)}
        return out
    finally:
        broker.delete_topics([t["topic"] for t in topics.values()])


def _sums_digest(sums: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sums, sort_keys=True).encode()).hexdigest()[:20]


def _fetch_into(broker: Broker, topic: dict[str, Any], sink: Sink | None, what: str) -> dict[str, float]:
    """:func:`fetch_raw` of every segment of ``topic``, one poll at a time, into ``sink``; its
    rates. Raises ``CheckFailed`` when the bytes fetched differ from the bytes produced."""
    fetched = fetch_raw(broker.bootstrap, topic["topic"], topic["segments"], batch_size=1, sink=sink)
    if fetched.value_bytes != topic["bytes"]:
        raise CheckFailed(
            f"{topic['topic']} {what}: fetched {fetched.value_bytes:,} bytes, produced {topic['bytes']:,}"
        )
    s = fetched.span
    return rates(topic["rows"], fetched.value_bytes, s.wall_s, s.cpu_s, fetched.steady_wall_s, fetched.first_bytes)


def fetch_and_write(broker: Broker, topic: dict[str, Any], *, write: bool = True) -> dict[str, float]:
    """The floor of any ingester on ``topic`` (a :func:`produce_copies` result) on this disk:
    fetch every segment one poll at a time and, with ``write``, write each to a file of its own,
    then one ``syncfs`` (:data:`FETCH_AND_WRITE`); without ``write``, the raw fetch. Returns its
    rates; raises ``CheckFailed`` when the bytes fetched differ from the bytes produced. Call
    ``os.sync()`` first to start from clean page cache."""
    folder = tempfile.mkdtemp(prefix="parka-bench-fetch-") if write else None
    try:
        sink = FileSink(folder) if folder is not None else None
        return _fetch_into(broker, topic, sink, "fetch + write" if write else "raw fetch")
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def fetch_and_put(broker: Broker, topic: dict[str, Any], root: ObjectStoreRoot, checks: Checks) -> dict[str, float]:
    """The floor of any ingester on ``topic`` on the object store at ``root``: fetch every
    segment one poll at a time and PUT each as an object of its own under a fresh path
    (:data:`FETCH_AND_PUT`), deleted afterwards. Returns its rates; raises ``CheckFailed`` when
    the bytes fetched, or the objects stored, differ from what was produced."""
    what = f"ingest throughput {topic['topic']} fetch + PUT (s3)"
    store = root.store(root.fresh("fetch-put"))
    sink = PutSink(store)
    try:
        sample = _fetch_into(broker, topic, sink, "fetch + PUT (s3)")
        objects, nbytes = stored(store)
    finally:
        sink.close()
        remove_all(store)
    if (objects, nbytes) != (topic["segments"], topic["bytes"]):
        raise CheckFailed(
            f"{what}: {objects:,} objects of {nbytes:,} bytes stored, "
            f"produced {topic['segments']:,} segments of {topic['bytes']:,} bytes"
        )
    checks.passed_elsewhere(what + ": the objects hold the bytes produced", objects=objects, bytes=nbytes)
    return sample


def _run_one(
    broker: Broker,
    ds: Dataset,
    topic: dict[str, Any],
    variant: str,
    expected_sums: str | None,
    checks: Checks,
    s3: ObjectStoreRoot | None,
) -> dict[str, float]:
    """One measured run; with ``expected_sums`` the table is also read back and summed."""
    # Start from clean page cache: on ext4 (data=ordered) an fsync also writes out other files'
    # dirty data, such as the broker's, which would bill earlier work to this run.
    os.sync()
    if variant in ("raw fetch", "fetch + write"):
        return fetch_and_write(broker, topic, write=variant == "fetch + write")
    if variant in S3_VARIANTS and s3 is None:
        raise ValueError(f"{variant} needs an object store (--s3)")
    if variant == "fetch + PUT (s3)" and s3 is not None:
        return fetch_and_put(broker, topic, s3, checks)
    if variant == "parka ingest (s3)" and s3 is not None:
        table_uri = s3.fresh("ingest")
        try:
            return _ingest_checked(broker, ds, topic, table_uri, s3.storage_options, expected_sums, checks, variant)
        finally:
            remove_all(s3.store(table_uri))
    table_uri = tempfile.mkdtemp(prefix="parka-bench-ingest-")
    try:
        return _ingest_checked(broker, ds, topic, table_uri, {}, expected_sums, checks, variant)
    finally:
        shutil.rmtree(table_uri, ignore_errors=True)


def _ingest_checked(
    broker: Broker,
    ds: Dataset,
    topic: dict[str, Any],
    table_uri: str,
    storage_options: Mapping[str, str],
    expected_sums: str | None,
    checks: Checks,
    variant: str,
) -> dict[str, float]:
    """``parka ingest`` of ``topic`` into the fresh table ``table_uri``, its rates and commits.
    Raises ``CheckFailed`` when the table's rows or files (or, with ``expected_sums``, its column
    sums) are not the produced segments'."""
    rows = topic["rows"]
    what = f"ingest throughput {topic['topic']} {variant}"
    # compaction off: the files as they land are what the floor writes, and what the byte-for-byte
    # check reads (a compaction rewrites row groups; its cost is the freshness benchmark's
    # write amplification)
    result = ingest(broker.bootstrap, topic["topic"], table_uri, storage_options=storage_options, compaction=False)
    digests, table_rows = _file_digests(table_uri, storage_options)
    checks.expect(
        what + ": data files hold the segments' row groups, byte for byte",
        rows=table_rows,
        expected_rows=rows,
        got=hashlib.sha256("".join(digests).encode()).hexdigest()[:20],
        expected=hashlib.sha256("".join(topic["digests"]).encode()).hexdigest()[:20],
    )
    if expected_sums is not None:
        table = DeltaTable(table_uri, storage_options=dict(storage_options) or None)
        got = column_sums(table.to_pyarrow_dataset(), ds.table.schema)
        checks.expect(
            what + ": column sums read back",
            rows=table_rows,
            expected_rows=rows,
            got=_sums_digest(got),
            expected=expected_sums,
        )
    sample = rates(rows, result.bytes, result.span.wall_s, result.span.cpu_s, result.steady_wall_s, result.first_bytes)
    sample["commits"] = result.commits
    return sample


def main(argv: list[str] | None = None) -> int:
    from parka.ops.settings import SettingsParser

    from .machine import machine_info
    from .report import write_report

    argv = sys.argv[1:] if argv is None else argv
    # parka ingest's own reading of --storage-option / PARKA_STORAGE_OPTIONS; no abbreviated
    # flags, so masked_command finds every storage option to mask
    parser = SettingsParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--kafka-data-dir", default=os.environ.get("PARKA_KAFKA_DATA_DIR"), required=False)
    parser.add_argument(
        "--sizes",
        default="1000:4,10000:48,100000:48",
        help="rows per segment:copies of the flights in its topic, comma-separated (default 1000:4,10000:48,100000:48)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="profile one ingest with pyinstrument")
    add_s3_arguments(parser)
    parser.add_argument("--out", default="bench-out/ingest")
    args = parser.parse_args(argv)
    if not args.kafka_data_dir:
        parser.error("--kafka-data-dir is required (scripts/kafka-local.sh data-dir)")
    s3 = s3_root(parser, args)
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
        s3=s3,
        profile_path=os.path.join(args.out, "profile_ingest.txt") if args.profile else None,
    )
    doc = {
        "command": " ".join(
            [os.path.basename(sys.executable), "-m", "benchmarks.ingest_throughput", *masked_command(argv)]
        ),
        "wall_s": time.perf_counter() - started,
        "machine": machine_info(broker),
        "ingest_throughput": result,
        "checks": checks.passed,
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(doc, f, indent=2)
    write_report(doc, args.out)
    for line in summary_lines(result):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
