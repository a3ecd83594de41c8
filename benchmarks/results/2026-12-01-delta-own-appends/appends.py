"""What the committer's calls cost per append as a Delta table grows, two ways side by side: the
append through delta-rs (its commit, ``create_write_transaction``, then the handle's load of the
new version, and ``update_incremental`` for the next commit's read of the table: what
``lake/delta/_rs.py`` did until the commit that added this script) and through ``RsTableLog`` as
it is now (parka writes the commit, the handle is not loaded again, the next read of the table
is one lookup of the next version's file).

    python benchmarks/results/2026-12-01-delta-own-appends/appends.py --commits 600 --every 100

Each commit is what ``Committer.commit`` asks of the log for one batch of four Kafka
partitions: the refresh and the four ``txn`` versions of step 3, then one commit of four add
actions with statistics and their four ``txn``s. The two tables take turns, commit by commit, so
the machine's noise falls on both alike. A checkpoint every ten commits, on a handle of its own
and outside the timing (parka writes it beside the commits). The add actions name files that
are not written: neither way reads data files. Prints, after each ``--every`` commits, the live
files and the mean CPU time (the process's, delta-rs' threads included) per commit of each way.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.transaction import AddAction, CommitProperties, PostCommitHookProperties, Transaction
from parka.lake import DataFile
from parka.lake.delta import RsEngine

NO_HOOK = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
STATS = '{"numRecords":50,"minValues":{"id":0},"maxValues":{"id":49},"nullCount":{"id":0}}'
SCHEMA = pa.schema([("id", pa.int64())])


def through_delta_rs(table: DeltaTable, i: int) -> None:
    table.update_incremental()
    for p in range(4):
        table.transaction_version(f"app-{p}")
    version = table.version()
    now = int(time.time() * 1000)
    adds = [AddAction(f"part-{i}-{p}.parquet", 1000, {}, now, True, STATS) for p in range(4)]
    txns = [Transaction(f"app-{p}", i) for p in range(4)]
    table.create_write_transaction(
        adds,
        mode="append",
        schema=table.schema(),
        partition_by=[],
        commit_properties=CommitProperties(max_commit_retries=0, app_transactions=txns),
        post_commithook_properties=NO_HOOK,
    )
    table.load_as_version(version + 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=600)
    parser.add_argument("--every", type=int, default=100)
    args = parser.parse_args()
    root = tempfile.mkdtemp()
    old_uri, new_uri = f"{root}/delta-rs", f"{root}/parka"
    engine = RsEngine()
    engine.create(old_uri, SCHEMA, partition_by=[])
    log = engine.create(new_uri, SCHEMA, partition_by=[])
    old = DeltaTable(old_uri)
    old_cp, new_cp = DeltaTable(old_uri), DeltaTable(new_uri)
    old_s = new_s = 0.0
    print(f"{'commits':>7} {'live files':>10} {'delta-rs ms':>11} {'parka ms':>8} {'ratio':>6}")
    for i in range(1, args.commits + 1):
        began = time.process_time()
        through_delta_rs(old, i)
        old_s += time.process_time() - began

        began = time.process_time()
        log.refresh()
        for p in range(4):
            log.txn_version(f"app-{p}")
        files = [DataFile(f"part-{i}-{p}.parquet", 1000, STATS) for p in range(4)]
        log.commit_add_files(files, txns={f"app-{p}": i for p in range(4)})
        new_s += time.process_time() - began

        if i % 10 == 0:
            for cp in (old_cp, new_cp):
                cp.update_incremental()
                cp.create_checkpoint()
        if i % args.every == 0:
            live = 4 * i
            print(
                f"{i:7} {live:10} {old_s / args.every * 1e3:11.2f} {new_s / args.every * 1e3:8.2f} {new_s / old_s:6.3f}"
            )
            old_s = new_s = 0.0


if __name__ == "__main__":
    main()
