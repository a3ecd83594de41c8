"""``python -m reliability --mode full|quick --bootstrap HOST:PORT --seed N --out DIR``.

Runs the scenarios in order (bad inputs, ``parka ingest`` chaos on Delta tables, the same on
Iceberg tables, the producer's schema evolving under ``parka ingest`` chaos, upserts under
``parka ingest --upsert`` chaos, Spark raw mode chaos, broker restarts), prints the
summary and writes it to ``DIR/summary.json``. Exit code 0 only when no record is lost or
duplicated, every bad input got its answer, and no scenario saw a problem
(a worker exiting unasked, an orphan file, a fault plan not carried out).

The seed decides every choice (crash points, ``PARKA_TEST_CRASH_AFTER``, group sizes, who
leaves, data sizes); topic names add a random suffix so that runs never share a topic. Timing
comes from conditions (log lines, exits, table ``txn`` versions), never from sleeps.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bad_inputs import run_bad_inputs
from .broker_chaos import run_broker_chaos
from .evolution_chaos import run_evolution_chaos
from .feed import CLIENT_LOG, IdSource
from .fleet_chaos import run_fleet_chaos
from .history_chaos import run_history_chaos
from .ingest_chaos import IngestPlan, run_ingest_chaos
from .report import exit_code, render, summarize
from .spark_chaos import SparkPlan, run_spark_chaos
from .upsert_chaos import run_upsert_chaos

__all__ = ["MODES", "Mode", "main"]

log = logging.getLogger("reliability")


@dataclass(frozen=True)
class Mode:
    ingest: IngestPlan
    ingest_iceberg: IngestPlan
    spark: SparkPlan | None
    broker_restarts: bool
    history_kills: int  # the long-history scenario's SIGKILLs (0: not run)
    # parka's commands forked from a fork server that imported parka once (reliability.forkserver),
    # or each a new interpreter, as deployments start them
    forked: bool


# The quick mode's crash points: the ones where the chaos around a kill matters (a rebalance under
# way, dead letters just committed while bad input keeps coming); the evolution scenario's quick
# plan kills mid-write, after-write and after the Delta commit amid its own. Every point is killed at alone,
# a restart after each, by the tests (tests/integration/test_ingest.py for Delta,
# tests/integration/iceberg/test_iceberg_ingest.py for each Iceberg catalog), and all six amid
# the chaos, five times each, by the full mode.
_QUICK_POINTS = ("after-dead-letters", "on-revoke")
# 20 SIGTERMs at moments the plan does not choose (a worker may be compacting, checkpointing,
# cleaning orphans or committing): each must exit 0 within the stop bound (report.STOP_BOUND_S)
_FULL_INGEST = IngestPlan(crashes_per_point=5, kills=6, leaves=20)
_QUICK_INGEST = IngestPlan(crashes_per_point=1, kills=1, leaves=1, points=_QUICK_POINTS)
MODES = {
    # 6 points x 5 crashes + 6 kills: 36 SIGKILLs of parka ingest workers, 20 SIGTERMs; 5 Spark driver kills
    "full": Mode(_FULL_INGEST, _FULL_INGEST, SparkPlan(crashes=4, group_kills=1), True, history_kills=6, forked=False),
    # 2 points x 1 + 1 kill on either format (_QUICK_POINTS): 3 SIGKILLs each; no JVM start-up
    # (Spark) and no broker of its own; its workers fork from the fork server, as the tests' do
    "quick": Mode(
        _QUICK_INGEST,
        _QUICK_INGEST,
        None,
        False,
        history_kills=0,
        forked=True,
    ),
}
SCENARIOS = (
    "bad-inputs", "ingest", "ingest-iceberg", "evolution", "upsert", "upsert-cdc", "upsert-iceberg", "history",
    "fleet", "spark", "broker",
)  # fmt: skip
# The fleet scenario (reliability/fleet_chaos.py): topics at start and created later, daemons of
# the topic pattern, SIGKILLs of a daemon, one table unwritable for a while
FLEET = {
    "full": {"topics": 20, "late": 2, "daemons": 3, "kills": 6},
    "quick": {"topics": 4, "late": 1, "daemons": 2, "kills": 2},
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m reliability", description=__doc__.split("\n\n")[1])
    p.add_argument("--mode", choices=sorted(MODES), default="quick")
    p.add_argument("--bootstrap", default=os.environ.get("PARKA_BOOTSTRAP", "127.0.0.1:9092"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, required=True, help="logs, tables and summary.json go here")
    p.add_argument(
        "--broker-port",
        type=int,
        default=int(os.environ.get("PARKA_RELIABILITY_KAFKA_PORT", "19292")),
        help="port of the broker the suite starts, restarts and removes (broker scenario)",
    )
    p.add_argument("--only", action="append", choices=SCENARIOS, help="run only these scenarios (repeatable)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    mode = MODES[args.mode]
    if not mode.forked:
        os.environ["PARKA_TEST_FORK_SERVER"] = "0"
    out: Path = args.out.resolve()
    if out.exists() and any(out.iterdir()):
        # a run's tables and logs stay in --out: a second run there would mix with them
        print(f"python -m reliability: --out {out} is not empty; give a new or empty folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    clients = logging.FileHandler(out / "kafka-clients.log")
    clients.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    CLIENT_LOG.addHandler(clients)
    CLIENT_LOG.propagate = False
    run_id = f"{args.seed}-{uuid.uuid4().hex[:6]}"
    ids = IdSource()
    wanted = set(args.only or SCENARIOS)
    started = time.monotonic()
    results: dict[str, Any] = {}

    def scenario(name: str, run: Callable[[], Any]) -> None:
        if name not in wanted:
            return
        log.info("scenario %s", name)
        began = time.monotonic()
        try:
            results[name] = run()
        except Exception as exc:  # the summary says which scenario broke and how
            log.exception("scenario %s failed", name)
            results[name] = {"problems": [f"the scenario failed: {type(exc).__name__}: {exc}"]}
        results[name].setdefault("wall_s", round(time.monotonic() - began, 1))

    scenario("bad-inputs", lambda: run_bad_inputs(args.bootstrap, run_id, out / "bad-inputs", ids, args.seed))
    scenario("ingest", lambda: run_ingest_chaos(args.bootstrap, run_id, out / "ingest", ids, args.seed, mode.ingest))
    scenario(
        "ingest-iceberg",
        lambda: run_ingest_chaos(
            args.bootstrap, run_id, out / "ingest-iceberg", ids, args.seed, mode.ingest_iceberg, table_format="iceberg"
        ),
    )
    quick = args.mode == "quick"
    scenario(
        "evolution", lambda: run_evolution_chaos(args.bootstrap, run_id, out / "evolution", ids, args.seed, quick=quick)
    )
    rounds = 1 if quick else 3
    scenario("upsert", lambda: run_upsert_chaos(args.bootstrap, run_id, out / "upsert", args.seed, rounds=rounds))
    scenario(
        "upsert-cdc",
        lambda: run_upsert_chaos(args.bootstrap, run_id, out / "upsert-cdc", args.seed, rounds=rounds, cdc=True),
    )
    if not quick or (args.only and "upsert-iceberg" in args.only):  # make test runs the Delta one
        scenario(
            "upsert-iceberg",
            lambda: run_upsert_chaos(
                args.bootstrap, run_id, out / "upsert-iceberg", args.seed, rounds=rounds, table_format="iceberg"
            ),
        )
    fleet = FLEET[args.mode]
    scenario("fleet", lambda: run_fleet_chaos(args.bootstrap, run_id, out / "fleet", ids, args.seed, **fleet))
    if mode.history_kills:
        kills = mode.history_kills
        scenario("history", lambda: run_history_chaos(args.bootstrap, run_id, out / "history", ids, args.seed, kills))
    if mode.spark is not None:
        spark = mode.spark
        scenario("spark", lambda: run_spark_chaos(args.bootstrap, run_id, out / "spark", ids, args.seed, spark))
    if mode.broker_restarts:
        scenario("broker", lambda: run_broker_chaos(args.broker_port, run_id, out / "broker", ids, args.seed))
    summary = summarize(
        results,
        mode=args.mode,
        seed=args.seed,
        bootstrap=args.bootstrap,
        command=" ".join(["python -m reliability", *(argv if argv is not None else sys.argv[1:])]),
        wall_s=time.monotonic() - started,
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    text = render(summary)
    (out / "summary.txt").write_text(text + "\n")
    print(text, flush=True)
    return exit_code(summary)
