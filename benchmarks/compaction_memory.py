"""The resident memory of a compaction into one target-sized file: ``parka optimize`` of a table of
small files, Delta and Iceberg, each run in a process of its own.

A table of ``--files`` data files of web_requests rows (``--rows-per-file`` each, eight
distinct ones in turn) is written per format and repeat: Delta with deltalake (one
``write_deltalake`` append per file), Iceberg with pyiceberg's embedded SQL catalog (one
``append`` per file). Then ``parka optimize`` compacts it with ``--target-file-size`` above the
table's bytes, so every file goes into one output file. The statistic: the optimize process's peak resident set
(``VmHWM`` of ``/proc/self/status``, read by the process at its end; Linux), in MB; and, as
the baseline, the peak of a process that only imports parka's lake and opens the table
(``--baseline``). Writes ``results.json`` and ``report.md``::

    python -m benchmarks.compaction_memory --out DIR
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from .datasets import web_requests
from .machine import machine_info

# a child: run parka's CLI in-process, then print this process's peak RSS (KiB): VmHWM of its
# memory map, which starts at the exec (ru_maxrss would count the parent's RSS at the fork: Linux
# keeps it across exec)
_CHILD = """
import json, sys
from parka.cli import main
code = main(sys.argv[1:]) if sys.argv[1] != "--baseline" else 0
if sys.argv[1] == "--baseline":
    import parka.lake, deltalake, pyiceberg.catalog.sql  # what optimize imports, and no more
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"code": code, "maxrss_kib": int(hwm.split()[1])}))
"""


def write_delta(path: Path, parts: list[pa.Table], files: int) -> int:
    from deltalake import write_deltalake

    for i in range(files):
        write_deltalake(str(path), parts[i % len(parts)], mode="append")
    return sum(p.stat().st_size for p in path.glob("*.parquet"))


def _catalog(warehouse: Path) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("bench", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")


def write_iceberg(warehouse: Path, parts: list[pa.Table], files: int) -> int:
    warehouse.mkdir()
    catalog = _catalog(warehouse)
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.t", parts[0].schema)
    for i in range(files):
        table.append(parts[i % len(parts)])
    return sum(p.stat().st_size for p in (warehouse / "bench" / "t" / "data").rglob("*.parquet"))


def delta_live(path: Path) -> tuple[int, int]:
    """The table's live files and rows (from the files' footers)."""
    from deltalake import DeltaTable

    dt = DeltaTable(str(path))
    return len(dt.file_uris()), dt.to_pyarrow_dataset().count_rows()


def iceberg_live(warehouse: Path) -> tuple[int, int]:
    """The table's live files and rows (from the manifests)."""
    tasks = list(_catalog(warehouse).load_table("bench.t").scan().plan_files())
    return len(tasks), sum(t.file.record_count for t in tasks)


def check_compacted(kind: str, live: tuple[int, int], expected: int) -> None:
    """The premise: one live file holding every row."""
    if live != (1, expected):
        raise RuntimeError(f"{kind}: {live[0]} live files and {live[1]} rows after optimize, not 1 and {expected}")


def peak_rss_mb(args: list[str]) -> float:
    """The peak RSS of a child process running ``parka`` with ``args`` (or only importing, with
    ``--baseline``), in MB."""
    run = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        raise RuntimeError(f"{args}: exit {run.returncode}: {run.stderr[-3000:]}")
    result = json.loads(run.stdout.strip().splitlines()[-1])
    if result["code"] != 0:
        raise RuntimeError(f"{args}: parka exited {result['code']}: {run.stderr[-3000:]}")
    return float(result["maxrss_kib"]) / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--rows-per-file", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="bench-out/compaction-memory")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="parka-compaction-memory-"))
    results: dict[str, Any] = {"machine": machine_info(None), "files": args.files, "rows_per_file": args.rows_per_file}
    parts = [web_requests(args.rows_per_file, seed=i) for i in range(8)]
    runs: dict[str, list[float]] = {"delta": [], "iceberg": [], "baseline": []}
    sizes: dict[str, int] = {}
    try:
        for repeat in range(args.repeats):
            runs["baseline"].append(peak_rss_mb(["--baseline"]))
            delta, iceberg = work / f"delta-{repeat}", work / f"iceberg-{repeat}"
            expected = args.files * args.rows_per_file
            sizes["delta"] = write_delta(delta, parts, args.files)
            target = str(2 * sizes["delta"])
            runs["delta"].append(peak_rss_mb(["optimize", str(delta), "--target-file-size", target]))
            check_compacted("Delta", delta_live(delta), expected)
            sizes["iceberg"] = write_iceberg(iceberg, parts, args.files)
            target = str(2 * sizes["iceberg"])
            command = ["optimize", "bench.t", "--catalog", "bench", "--catalog-option", f"warehouse={iceberg}"]
            runs["iceberg"].append(peak_rss_mb([*command, "--target-file-size", target]))
            check_compacted("Iceberg", iceberg_live(iceberg), expected)
            shutil.rmtree(delta)
            shutil.rmtree(iceberg)
        results["input_bytes"] = sizes
        results["peak_rss_mb"] = runs
        results["median_peak_rss_mb"] = {k: statistics.median(v) for k, v in runs.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    m = results["median_peak_rss_mb"]
    report = "\n".join(
        [
            "# Peak resident memory of `parka optimize` compacting a table into one file",
            "",
            f"{args.files} files of {args.rows_per_file:,} web_requests rows; input bytes: Delta "
            f"{sizes['delta'] / 1e6:.1f} MB, Iceberg {sizes['iceberg'] / 1e6:.1f} MB. Statistic: the median",
            f"of {args.repeats} runs of the process's peak RSS (VmHWM).",
            "",
            "| process | peak RSS (MB) |",
            "|---|---|",
            f"| imports and nothing else (baseline) | {m['baseline']:.0f} |",
            f"| parka optimize, Delta | {m['delta']:.0f} |",
            f"| parka optimize, Iceberg | {m['iceberg']:.0f} |",
            "",
        ]
    )
    (out / "report.md").write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
