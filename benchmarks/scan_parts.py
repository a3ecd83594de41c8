"""Where a DuckDB scan of a Delta table spends its time against the row baseline's table of the
same rows: ``python -m benchmarks.scan_parts TABLE [--version V]``.

For the freshness section's scans (:mod:`benchmarks.freshness`, whose ``--keep-tables DIR`` keeps
the tables it measured). A scan there is :class:`benchmarks.scans.DuckDbScanner`'s: open the
table's Delta log at a version into its list of files (deltalake), then DuckDB's
``read_parquet`` of those files with the data set's query. This prints, each the median of
``--repeats`` timings after one unmeasured:

* opening the log at every version from the last checkpoint at or before ``V`` up to ``V`` (the
  checkpoint alone, then one more JSON commit each), and opening the row baseline's table (the
  same rows appended as :func:`benchmarks.lake.row_baseline_table` appends them: one commit);
* DuckDB's read of the version's files: all of them; the files background compaction wrote
  (``compacted-*``) and the others (what ingestion wrote, not compacted yet) apart; each of those
  two groups' rows rewritten as one file (pyarrow, zstd, row groups of 1M rows); the baseline's
  files.

Not a benchmark: no ratio, no goal; it says which part of a scan ratio the log is, and which
the data files.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile

__all__ = ["by_kind", "main"]

_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


def _last_checkpoint(table: str, version: int) -> int | None:
    found = [int(m.group(1)) for f in os.listdir(os.path.join(table, "_delta_log")) if (m := _CHECKPOINT.match(f))]
    at_or_before = [v for v in found if v <= version]
    return max(at_or_before) if at_or_before else None


def by_kind(files: list[str]) -> tuple[list[str], list[str]]:
    """The files background compaction wrote (by their names, :class:`parka.lake.CompactedName`),
    and the others."""
    from parka.lake import CompactedName

    compacted = [f for f in files if CompactedName.parse(f) is not None]
    return compacted, [f for f in files if CompactedName.parse(f) is None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("table", help="a Delta table of flights rows on the local disk")
    parser.add_argument("--version", type=int, help="the version to scan (default: the latest)")
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from .datasets import FLIGHTS_SCAN
    from .lake import row_baseline_table
    from .measure import median_s
    from .scans import DuckDbScanner

    table = os.path.abspath(args.table)
    version = DeltaTable(table).version() if args.version is None else args.version
    query = FLIGHTS_SCAN
    duck = DuckDbScanner()
    repeats = args.repeats

    def read_ms(files: list[str]) -> float:
        return median_s(lambda: duck.read(files, query), repeats, warmups=1) * 1e3

    def open_ms(uri: str, at: int | None) -> float:
        return median_s(lambda: DeltaTable(uri, version=at).file_uris(), repeats, warmups=1) * 1e3

    files = DeltaTable(table, version=version).file_uris()
    compacted, rest = by_kind(files)
    groups = sum(pq.ParquetFile(f).metadata.num_row_groups for f in rest)
    print(f"{table} at version {version}: {len(files)} files", end=" ")
    print(f"({len(compacted)} compacted, {len(rest)} not: {groups} row groups)")
    print(f"median of {repeats} timings after one unmeasured, ms")

    checkpoint = _last_checkpoint(table, version)
    first = checkpoint if checkpoint is not None else 0
    print(f"opening the log (the last checkpoint at or before {version}: {checkpoint}):")
    for v in range(first, version + 1):
        jsons = v + 1 if checkpoint is None else v - checkpoint  # read after the checkpoint, if any
        what = "the checkpoint alone" if v == checkpoint else f"+ {jsons} JSON commit(s)"
        print(f"  version {v} ({what}): {open_ms(table, v):.2f}")

    work = tempfile.mkdtemp(prefix="parka-scan-parts-")
    try:
        rows = DeltaTable(table, version=version).to_pyarrow_table()
        base = os.path.join(work, "baseline")
        commits = row_baseline_table(base, rows, kdi_files=True)
        base_files = DeltaTable(base).file_uris()
        print(f"  the row baseline's table ({commits} commit(s), {len(base_files)} file(s)): {open_ms(base, None):.2f}")

        def one_file(paths: list[str], name: str) -> list[str]:
            out = os.path.join(work, f"{name}.parquet")
            pq.write_table(
                pa.concat_tables([pq.read_table(p) for p in paths]), out, row_group_size=1 << 20, compression="zstd"
            )
            return [out]

        print("DuckDB's read of the files:")
        print(f"  all {len(files)}: {read_ms(files):.2f}")
        for label, group in (("compacted", compacted), ("not compacted", rest)):
            if group:
                alone, joined = read_ms(group), read_ms(one_file(group, label))
                print(f"  the {len(group)} {label}: {alone:.2f}; their rows as one file: {joined:.2f}")
        print(f"  the row baseline's {len(base_files)}: {read_ms(base_files):.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        duck.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
