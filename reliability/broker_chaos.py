"""A broker restarted mid-ingest and mid-produce, with an idempotent producer.

The suite starts a broker of its own (``scripts/kafka-local.sh`` on ``--broker-port``; the
shared one is never touched) and removes it at the end (``reset``). A producer keeps producing
(idempotent, 5 minutes of ``message.timeout.ms``) and two ``parka ingest`` workers keep
ingesting. Then:

1. the broker is stopped (SIGTERM) while both run, once a worker has seen it go; while it is
   down the producer keeps producing into its queue; the broker starts again;
2. once everything produced so far is in the table and more is coming, the broker is killed
   (SIGKILL) with records in flight, one worker is killed too (SIGKILL) while it is down, and
   the broker starts again with a fresh worker in place of the killed one.

At the end every record the producer had acknowledged must be in the table once (records
whose delivery failed may be there at most once), and no file is left unreferenced.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import forkserver, tables
from .feed import Feeder, IdSource, Ledger, create_topic, end_problems, high_watermarks
from .procs import Proc, ingest_command, stop_all, wait_for

__all__ = ["run_broker_chaos"]

log = logging.getLogger("reliability")

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 2


def broker(port: int, action: str) -> None:
    env = dict(os.environ, PARKA_KAFKA_PORT=str(port))
    subprocess.run([str(REPO / "scripts" / "kafka-local.sh"), action], check=True, env=env, timeout=240)


@dataclass
class BrokerChaos:
    port: int
    run_id: str
    out: Path
    seed: int
    faults: Counter[str] = field(default_factory=Counter)
    events: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    everyone: list[Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.topic = f"rel-broker-{self.run_id}"
        self.table = tables.DeltaTarget(self.out / "table")
        self.group = f"rel-broker-group-{self.run_id}"
        self.app_id = self.table.app_id(self.topic)
        self.started = 0

    def start_worker(self) -> Proc:
        self.started += 1
        name = f"w{self.started}"
        flags = ("-g", self.group, "--allowed-latency", "1", "--max-segments-per-commit", "5")
        command = ingest_command(self.topic, self.table.name, self.bootstrap, *flags)
        proc = Proc.start(name, command, self.out / "logs" / f"{name}.log")
        self.everyone.append(proc)
        return proc

    def wait_caught_up(self, timeout_s: float) -> None:
        """Until every partition's last offset as of now is in the table's ``txn``. The target is
        taken once: the feeder may still be producing, and a target that moves with it is never
        met while the workers run ``--allowed-latency`` behind it."""
        target = high_watermarks(self.bootstrap, self.topic, PARTITIONS)
        wait_for(lambda: self.table.caught_up(self.app_id, target), "the workers to catch up", timeout_s, poll_s=1.0)

    def run(self, ids: IdSource) -> dict[str, Any]:
        started = time.monotonic()
        broker(self.port, "reset")  # a clean broker: nothing left from an interrupted run
        broker(self.port, "up")
        ledger = Ledger()
        feeder = Feeder(
            self.bootstrap, self.topic, PARTITIONS, ledger, ids, random.Random(f"{self.seed}-broker"), interval_s=0.1
        )
        final: subprocess.CompletedProcess[str] | None = None
        try:
            create_topic(self.bootstrap, self.topic, PARTITIONS)
            feeder.start()
            workers = [self.start_worker(), self.start_worker()]
            wait_for(lambda: self.table.version() >= 3, "the workers' first commits", 120, poll_s=0.5)

            # 1. a clean stop and start, mid-ingest and mid-produce
            broker(self.port, "down")
            self.faults["broker stop (SIGTERM) and start"] += 1
            wait_for(lambda: any(w.has("Connection refused") for w in workers), "a worker to lose the broker", 60)
            produced = feeder.batches
            wait_for(lambda: feeder.batches >= produced + 20, "the producer to queue 20 segments", 60)
            self.events.append(f"broker down: the producer queued {feeder.batches - produced} segments meanwhile")
            broker(self.port, "up")
            acknowledged = len(ledger.acknowledged)
            wait_for(lambda: len(ledger.acknowledged) > acknowledged, "acknowledgements after the restart", 120)
            self.wait_caught_up(180)
            self.events.append(f"caught up after the restart: table version {self.table.version()}")

            # 2. a SIGKILL of the broker with records in flight, and of a worker while it is away
            in_flight = len(feeder.producer)
            broker(self.port, "kill")
            self.faults["broker SIGKILL and start"] += 1
            self.events.append(f"broker SIGKILLed with {in_flight} records not yet acknowledged")
            victim = workers.pop(0)
            victim.kill_group()
            victim.wait_exit(30)
            self.faults["SIGKILL of a parka ingest worker while the broker is away"] += 1
            produced = feeder.batches
            wait_for(lambda: feeder.batches >= produced + 20, "the producer to queue 20 segments", 60)
            broker(self.port, "up")
            workers.append(self.start_worker())
            feeder.finish()
            self.wait_caught_up(300)
            for w in workers:
                w.signal(signal.SIGTERM)
                code = w.wait_exit(90)
                if code != 0:
                    self.problems.append(f"{w.name} exited {code} after SIGTERM: {w.tail(1500)}")
            command = ingest_command(
                self.topic, self.table.name, self.bootstrap, "-g", self.group, "--end-at-latest", "-q"
            )
            final = forkserver.run(command, capture_output=True, text=True, timeout=300)
            if final.returncode != 0:
                self.problems.append(f"the final pass exited {final.returncode}: {final.stderr[-1500:]}")
        finally:
            stop_all(self.everyone)
            if feeder.is_alive():
                feeder.finish(60)
        verdict = self.verdict(ledger, final, time.monotonic() - started)
        broker(self.port, "reset")
        return verdict

    def verdict(self, ledger: Ledger, final: subprocess.CompletedProcess[str] | None, wall_s: float) -> dict[str, Any]:
        tally = tables.tally(self.table.ids(), ledger.acknowledged, ledger.failed)
        orphans = self.table.orphans()
        problems = end_problems(self.problems, ledger, orphans, unexpected_ids=tally.unexpected)
        return {
            "topic": self.topic,
            "table": str(self.table),
            "wall_s": round(wall_s, 1),
            "faults": dict(self.faults),
            **tally.as_dict(),
            "segments_acknowledged": ledger.segments,
            "records_not_acknowledged": len(ledger.failed),
            "orphans": len(orphans),
            "final_pass": final.stdout.strip().splitlines()[-1] if final and final.stdout.strip() else None,
            "problems": problems,
            "events": self.events,
        }


def run_broker_chaos(port: int, run_id: str, out: Path, ids: IdSource, seed: int) -> dict[str, Any]:
    return BrokerChaos(port, run_id, out, seed).run(ids)
