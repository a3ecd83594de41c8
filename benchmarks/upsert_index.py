"""What the key index of upsert tables (``parka.lake._keys``) costs as the table grows: a rebuild
of N keys (CPU and the index's bytes), and the CPU per batch of B uniformly random updates
(``plan`` + ``apply``, the part of an upsert commit that depends on N), for each N of ``--keys``
in one run, with the ratio of the largest N's per-batch CPU to the smallest's (the upsert goal:
a commit at 10 million keys within 1.3x of one at 1 million).

Keys are ``key-<10 digits>``, in files of 100,000 keys; each batch is ``--batch`` keys drawn
uniformly from the N, as rows of one new file; ``--batches`` batches per N, their CPU summed
(merges of the index's change dict into its arrays included). CPU is ``time.process_time``::

    python -m benchmarks.upsert_index --keys 1000000,10000000 --batch 50000 --batches 32 --out DIR
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from parka.lake._keys import KeyIndex

__all__ = ["main"]

FILE_KEYS = 100_000


def _key(i: int) -> bytes:
    return b"key-%010d" % i


def run(keys: int, batch: int, batches: int, seed: int) -> dict[str, float]:
    """One N: the rebuild and the batches."""
    index = KeyIndex()
    started = time.process_time()
    for first in range(0, keys, FILE_KEYS):
        index.add_file(f"base-{first}.parquet", [_key(i) for i in range(first, min(keys, first + FILE_KEYS))])
    assert len(index) == keys
    rebuild = time.process_time() - started
    rng = random.Random(seed)
    drawn = [[_key(rng.randrange(keys)) for _ in range(batch)] for _ in range(batches)]
    started = time.process_time()
    deleted = 0
    for n, batch_keys in enumerate(drawn):
        plan = index.plan([(f"batch-{n}.parquet", batch_keys)])
        deleted += plan.deleted_rows
        index.apply(plan)
    per_batch = (time.process_time() - started) / batches
    return {
        "keys": keys,
        "rebuild_cpu_s": round(rebuild, 3),
        "index_bytes": index.nbytes,
        "bytes_per_key": round(index.nbytes / keys, 1),
        "batch": batch,
        "batches": batches,
        "cpu_per_batch_s": round(per_batch, 4),
        "cpu_per_update_us": round(per_batch / batch * 1e6, 3),
        "rows_deleted": deleted,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", default="1000000,10000000", help="comma-separated key counts")
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--batches", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    sizes = [int(k) for k in args.keys.split(",")]
    results = [run(n, args.batch, args.batches, args.seed) for n in sizes]
    ratio = results[-1]["cpu_per_batch_s"] / results[0]["cpu_per_batch_s"]
    report = {"results": results, "cpu_per_batch_ratio_largest_to_smallest": round(ratio, 3)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        "| keys | rebuild CPU, s | index bytes a key | CPU per batch, s | CPU per update, µs |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['keys']:,} | {r['rebuild_cpu_s']} | {r['bytes_per_key']} | {r['cpu_per_batch_s']} "
            f"| {r['cpu_per_update_us']} |"
        )
    lines.append(f"\nCPU per batch, {sizes[-1]:,} keys against {sizes[0]:,}: {ratio:.2f}x")
    (args.out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
