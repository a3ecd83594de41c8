"""The drop-in runs' producer figures side by side: per data set, the median over the run's
paired repeats of the floor against Avro + zstd, of ``produce()`` per dict against Avro + zstd,
and of ``produce()`` against its floor (the floor: the dicts appended, ``Table.from_pylist``, a
zstd Parquet write, measured in the per-record cell right after its ``produce()`` run; Avro +
zstd: fastavro's serialization plus the plain producer, as the report's targets take it).

    python benchmarks/results/2026-12-02-dropin-quiet/floor_vs_avro.py RESULTS.json [...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

MEASURE = "producer_cpu_us_per_row"


def _values(cells: list[dict], dataset: str, *, per_record: bool, name: str = "") -> dict[str, list[float]]:
    (cell,) = [
        c
        for c in cells
        if c["dataset"] == dataset
        and c["encoding"]["per_record"] == per_record
        and (per_record or c["encoding"]["name"] == name)
    ]
    return {k: m["values"] for k, m in cell["measures"].items()}


def ratio(a: list[float], b: list[float]) -> float:
    """The median of the paired repeats' ratios."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main(paths: list[str]) -> None:
    print("| run | data set | floor / Avro + zstd | produce() / Avro + zstd | produce() / floor |")
    print("|---|---|---|---|---|")
    for path in paths:
        cells = json.loads(Path(path).read_text())["matrix"]["cells"]
        for ds in sorted({c["dataset"] for c in cells}):
            rec = _values(cells, ds, per_record=True)
            avro = _values(cells, ds, per_record=False, name="avro+zstd")[MEASURE]
            floor, parka = rec["floor_cpu_us_per_row"], rec[MEASURE]
            run = Path(path).parent.name
            print(f"| {run} | {ds} | {ratio(floor, avro):.3f} | {ratio(parka, avro):.3f} | {ratio(parka, floor):.3f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
