"""What a Delta table's tombstones cost its checkpoints and its readers:
``python -m benchmarks.tombstones [--counts 10000,100000,300000]``.

Background compaction removes every small file it rewrites, and a Delta checkpoint keeps each
``remove`` (a tombstone) until the table's ``delta.deletedFileRetentionDuration`` is over (7 days
by default). At second-level freshness the small files come fast (``benchmarks.freshness`` at
100,000 rows/s into 4 partitions compacted 224 files a minute), so the tombstones pile up. For
each count N this builds a Delta log (deltalake 1.x writes its first commit; then one JSON
commit adding N files and one removing them, as a compaction does, files that do not exist:
neither a checkpoint nor a listing of the table's files reads data files) and prints:

* writing a checkpoint with deltalake (``create_checkpoint()`` on the table opened before, the
  call the committer makes every ``--checkpoint-interval`` commits): wall seconds, this
  process's CPU seconds, the checkpoint's size and the tombstones it kept;
* opening the table after it, as the freshness benchmark's DuckDB scan does
  (``DeltaTable(uri).file_uris()``): the median of 7.

``--age-hours H --retention 'interval 1 hours'``: the files were removed H hours ago, from a
table made with that ``delta.deletedFileRetentionDuration``: the checkpoint leaves expired
tombstones out.

``--vacuum``: the N files exist (empty, written H hours ago), and after the rest the daemon's
VACUUM (:func:`parka.lake.vacuum_by_table_retention`, delta-rs' full VACUUM: it lists the
table's files) runs once: wall and CPU seconds, files deleted. With ``--age-hours`` past the
retention it deletes all N.

Not a benchmark: no ratio, no goal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

__all__ = ["build_log", "main"]


def build_log(path: str, count: int, *, age_s: float = 0.0, properties: dict[str, str] | None = None) -> None:
    """A Delta table at ``path`` whose version 2 holds one file and ``count`` tombstones removed
    ``age_s`` seconds ago (the table made with ``properties``)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(path, pa.table({"x": pa.array([1], pa.int64())}), configuration=properties)  # version 0
    now = int((time.time() - age_s) * 1000)
    stats = json.dumps({"numRecords": 10_000, "minValues": {"x": 1}, "maxValues": {"x": 9}, "nullCount": {"x": 0}})
    log = os.path.join(path, "_delta_log")
    names = [f"t-p0-o{i:020d}-{i:012x}.parquet" for i in range(count)]
    with open(os.path.join(log, f"{1:020d}.json"), "w") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": now, "operation": "WRITE"}}) + "\n")
        for i, name in enumerate(names):
            add = {
                "path": name,
                "partitionValues": {},
                "size": 500_000,
                "modificationTime": now,
                "dataChange": True,
                "stats": stats,
                "tags": {"kafka.topic": "t", "kafka.partition": "0", "kafka.offset": str(i)},
            }
            f.write(json.dumps({"add": add}) + "\n")
    with open(os.path.join(log, f"{2:020d}.json"), "w") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": now, "operation": "OPTIMIZE"}}) + "\n")
        for name in names:
            remove = {
                "path": name,
                "deletionTimestamp": now,
                "dataChange": False,
                "extendedFileMetadata": True,
                "partitionValues": {},
                "size": 500_000,
            }
            f.write(json.dumps({"remove": remove}) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--counts", default="10000,100000,300000", help="tombstone counts, comma-separated")
    parser.add_argument("--age-hours", type=float, default=0.0, help="how long ago the files were removed")
    parser.add_argument(
        "--retention",
        help="the tables' delta.deletedFileRetentionDuration (e.g. 'interval 1 hours'; default: Delta's, 7 days)",
    )
    parser.add_argument("--vacuum", action="store_true", help="time the daemon's VACUUM of the N files (written)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        counts = [int(c) for c in args.counts.split(",") if c.strip()]
    except ValueError:
        parser.error(f"--counts: integers separated by commas, got {args.counts!r}")
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from .measure import measured, median_s

    work = tempfile.mkdtemp(prefix="parka-tombstones-")
    try:
        for count in counts:
            path = os.path.join(work, f"t{count}")
            props = None if args.retention is None else {"delta.deletedFileRetentionDuration": args.retention}
            build_log(path, count, age_s=args.age_hours * 3600, properties=props)
            table = DeltaTable(path)  # the committer holds its table open: not timed
            with measured() as span:
                table.create_checkpoint()
            log = os.path.join(path, "_delta_log")
            checkpoints = [os.path.join(log, f) for f in os.listdir(log) if ".checkpoint." in f]
            size = sum(os.path.getsize(f) for f in checkpoints)
            kept = sum(pq.read_table(f, columns=["remove"]).column("remove").drop_null().length() for f in checkpoints)
            opened = median_s(lambda path=path: DeltaTable(path).file_uris(), 7)
            files = DeltaTable(path).file_uris()
            assert len(files) == 1, files  # the tombstones are no reader's files
            vacuumed = ""
            if args.vacuum:
                vacuumed = _vacuum(path, count, args.age_hours * 3600)
            print(
                f"{count:>9,} tombstones: checkpoint {span.wall_s:.2f} s, {span.cpu_s:.2f} CPU-s, {size / 1e6:.1f} MB,"
                f" {kept:,} tombstones in it;"
                f" a reader opens the table in {opened * 1e3:.1f} ms{vacuumed}",
                flush=True,
            )
            shutil.rmtree(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _vacuum(path: str, count: int, age_s: float) -> str:
    """Write the ``count`` removed files (empty, modified ``age_s`` ago), VACUUM once as the
    daemon does, and say what it took."""
    from parka.lake import vacuum_by_table_retention

    from .measure import measured

    then = time.time() - age_s
    for i in range(count):
        name = os.path.join(path, f"t-p0-o{i:020d}-{i:012x}.parquet")
        open(name, "wb").close()
        os.utime(name, (then, then))
    with measured() as span:
        deleted = vacuum_by_table_retention(path)
    left = sum(1 for f in os.listdir(path) if f.startswith("t-p0-"))
    return f"; VACUUM {span.wall_s:.2f} s, {span.cpu_s:.2f} CPU-s, {len(deleted):,} deleted, {left:,} left"


if __name__ == "__main__":
    sys.exit(main())
