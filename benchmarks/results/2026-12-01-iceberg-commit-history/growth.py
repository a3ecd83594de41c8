"""CPU per commit of parka's committer into an Iceberg table (pyiceberg's SQL catalog, a local
warehouse) as the table's history grows: one row per segment, one commit each, as a daemon at
second-level freshness commits. Two arms, alternated in windows of 100 commits on two tables:
``parka`` (its commits apply the updates without copying the history: updated_metadata and
stage_without_copies in lake/iceberg/_snapshots.py) and ``pyiceberg`` (pyiceberg's own
update_table_metadata, which deep-copies the whole metadata, in the transaction and in the
catalog's staging). Reports the median CPU-ms per commit of each window (time.process_time).

    .venv/bin/python benchmarks/results/2026-12-01-iceberg-commit-history/growth.py 1000
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import parka.lake.iceberg._snapshots as snapshots
from parka.lake import Committer, IcebergEngine

from tests.unit._tables import landed

MIRRORED = snapshots._MIRRORED


def committer(arm: str) -> Committer:
    warehouse = Path(tempfile.mkdtemp(prefix=f"growth-{arm}-"))
    return Committer(IcebergEngine(arm, {"warehouse": str(warehouse)}), table_uri="db.t", topic="t", app_id="app")


def main(n: int) -> None:
    arms = {arm: committer(arm) for arm in ("parka", "pyiceberg")}
    done = dict.fromkeys(arms, 0)
    print("snapshots  parka ms/commit  pyiceberg ms/commit  (median of the window's commits, CPU)")
    for window in range(n // 100):
        medians = {}
        for arm, c in arms.items():
            snapshots._MIRRORED = MIRRORED if arm == "parka" else False
            times = []
            for _ in range(100):
                i = done[arm]
                start = time.process_time()
                c.commit([landed(c, i % 2, i // 2, [i])])
                times.append(time.process_time() - start)
                done[arm] += 1
            medians[arm] = statistics.median(times) * 1000
        print(f"{(window + 1) * 100:9d}  {medians['parka']:15.1f}  {medians['pyiceberg']:19.1f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
