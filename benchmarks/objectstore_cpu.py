"""Where the object-store floor's and ``parka ingest``'s time goes on one machine:
``python -m benchmarks.objectstore_cpu --s3 s3://bench/diag``.

For the object-store floor's goal. A topic of ``--copies`` copies of the flights in 10,000-row
segments, then ``--repeats`` pairs of runs, each pair: fetch + PUT (the floor of
:mod:`benchmarks.ingest_throughput`) and ``parka ingest`` into a fresh table on the store
(background compaction off, as there), both done by that module's own functions; with
``--commit-bytes`` also ``parka ingest`` with those ``--min-bytes-per-commit`` values (by
default a commit, and so a file, holds 128 MiB: on a short topic most of it is fetched before
the first upload starts, and the last file's upload is waited on alone). Printed per
run: wall seconds, MB/s over the whole run, and the CPU seconds of this process, of the store's
server and of the broker when they listen on this machine (psutil, by port). Then one
128 MiB object PUT three ways with the client parka writes through (:func:`parka.lake.object_store`):
obstore's default multipart, one single PUT, and the same bytes as 165 KB objects
``WRITE_THREADS`` at a time (the floor's way).

Not a benchmark: no ratio is reported and no goal checked; it says whether the CPU or the store
is what limits the two.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from .broker import Broker
from .checks import Checks
from .datasets import load
from .ingest_throughput import fetch_and_put, produce_copies
from .lake import ingest
from .measure import local_listener, process_cpu_s
from .objectstore import WRITE_THREADS, add_s3_arguments, remove_all, s3_root


def _timed(label: str, nbytes: int, procs: dict[str, Any], fn: Callable[[], object]) -> None:
    before = {name: process_cpu_s(p) for name, p in procs.items()}
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    cpu = ", ".join(f"{name} {process_cpu_s(p) - before[name]:.2f}" for name, p in procs.items())
    print(f"{label}: {wall:.2f} s, {nbytes / 1e6 / wall:.0f} MB/s; CPU-s: {cpu}", flush=True)


def main(argv: list[str] | None = None) -> int:
    from parka.ops.settings import SettingsParser

    parser = SettingsParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--kafka-data-dir", default=os.environ.get("PARKA_KAFKA_DATA_DIR", ""))
    parser.add_argument("--copies", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--commit-bytes",
        default="",
        help="also run parka ingest with these --min-bytes-per-commit values (comma-separated), in each repeat",
    )
    add_s3_arguments(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    root = s3_root(parser, args)
    if root is None:
        parser.error("--s3 is required")
    try:
        commit_bytes = [int(b) for b in args.commit_bytes.split(",") if b.strip()]
    except ValueError:
        parser.error(f"--commit-bytes: integers separated by commas, got {args.commit_bytes!r}")
    import psutil

    procs = {
        "this process": psutil.Process(),
        "store server": local_listener(root.described()["endpoint"] or ""),
        "broker": local_listener(args.bootstrap),
    }
    broker = Broker(args.bootstrap, args.kafka_data_dir)
    topic = produce_copies(broker, load("flights", None), args.copies, 10_000, f"bench-diag-{uuid.uuid4().hex[:6]}")
    nbytes = topic["bytes"]
    print(f"{topic['segments']:,} segments, {nbytes / 1e6:.1f} MB", flush=True)
    try:
        for rep in range(args.repeats):
            _timed(f"{rep + 1}: fetch + PUT", nbytes, procs, lambda: fetch_and_put(broker, topic, root, Checks()))
            for per_commit in [None, *commit_bytes]:
                label = "" if per_commit is None else f", --min-bytes-per-commit {per_commit:,}"
                uri = root.fresh("ingest")
                try:
                    run = partial(
                        ingest, broker.bootstrap, topic["topic"], uri, compaction=False, min_bytes_per_commit=per_commit
                    )
                    _timed(
                        f"{rep + 1}: parka ingest{label}",
                        nbytes,
                        procs,
                        partial(run, storage_options=root.storage_options),
                    )
                finally:
                    remove_all(root.store(uri))
    finally:
        broker.delete_topics([topic["topic"]])

    import obstore as obs

    store = root.store(root.fresh("puts"))
    data = os.urandom(128 * 2**20)
    piece = 165_000
    try:
        _timed(
            "one 128 MiB object, multipart (obstore's default)",
            len(data),
            procs,
            lambda: obs.put(store, "multipart", data),
        )
        _timed(
            "one 128 MiB object, single PUT",
            len(data),
            procs,
            lambda: obs.put(store, "single", data, use_multipart=False),
        )

        def small() -> None:
            with ThreadPoolExecutor(WRITE_THREADS) as pool:
                list(pool.map(lambda i: obs.put(store, f"small-{i}", data[i : i + piece]), range(0, len(data), piece)))

        _timed(f"the same bytes as 165 KB objects, {WRITE_THREADS} in flight", len(data), procs, small)
    finally:
        remove_all(store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
