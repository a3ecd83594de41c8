"""What one append costs delta-rs as its table grows: the commit parka makes
(``create_write_transaction`` of four add actions with stats, ``max_commit_retries=0``, no post-commit
hook) and the handle's load of the new version (``load_as_version``, as ``lake/delta/_rs.py``
does after each commit), with a checkpoint every ten commits (parka's default interval).

    python benchmarks/results/2026-12-01-delta-commit-cost/commit_cost.py --commits 600 --every 100

Prints, after each ``--every`` commits, the table's live files and the mean wall time per call
of the last ``--every`` commits (the calls block on delta-rs' runtime, so their wall time is
what the committing thread waits). The add actions name files that are not written: neither
call reads data files.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction, CommitProperties, PostCommitHookProperties

NO_HOOK = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
STATS = '{"numRecords":50,"minValues":{"id":0},"maxValues":{"id":49},"nullCount":{"id":0}}'


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=600)
    parser.add_argument("--every", type=int, default=100)
    args = parser.parse_args()
    uri = tempfile.mkdtemp() + "/t"
    write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}))
    table = DeltaTable(uri)
    commit_s = load_s = 0.0
    print(f"{'commits':>7} {'live files':>10} {'commit ms':>9} {'load ms':>7}")
    for i in range(1, args.commits + 1):
        version = table.version()
        now = int(time.time() * 1000)
        adds = [AddAction(f"part-{i}-{p}.parquet", 1000, {}, now, True, STATS) for p in range(4)]
        began = time.perf_counter()
        table.create_write_transaction(
            adds,
            mode="append",
            schema=table.schema(),
            partition_by=[],
            commit_properties=CommitProperties(max_commit_retries=0),
            post_commithook_properties=NO_HOOK,
        )
        committed = time.perf_counter()
        table.load_as_version(version + 1)
        commit_s += committed - began
        load_s += time.perf_counter() - committed
        if i % 10 == 0:
            table.create_checkpoint()
        if i % args.every == 0:
            files = 1 + 4 * i
            print(f"{i:7} {files:10} {commit_s / args.every * 1e3:9.2f} {load_s / args.every * 1e3:7.2f}")
            commit_s = load_s = 0.0


if __name__ == "__main__":
    main()
