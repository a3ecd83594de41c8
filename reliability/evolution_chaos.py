"""The producer's schema evolves while ``parka ingest`` workers are killed.

One topic (4 partitions) gets good segments from a producer whose schema moves from
:data:`~.catalogue.EVENTS` to v2 (a new struct column) and v3 (a field inside that struct, a
list-of-structs column) while it produces (``set_schema`` between segments); a group of
workers with ``--schema-evolution merge`` ingests it while the seeded plan crashes them at the
crash points and SIGKILLs them (the same steps as :mod:`.ingest_chaos`). Segments of every
version land raw; the table's schema grows in step 5 of the commit protocol, so a worker killed
around an evolution must neither lose nor duplicate a record, nor refuse an older segment
after the table moved on. No bad inputs, no other writer: the schema is the fault here.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any

from .feed import Feeder, IdSource, Ledger, create_topic, high_watermarks
from .ingest_chaos import PARTITIONS, ForeignWriter, IngestChaos, IngestPlan, Step, plan
from .procs import stop_all, wait_for

__all__ = ["run_evolution_chaos"]

log = logging.getLogger("reliability")


class EvolutionChaos(IngestChaos):
    def run(self, ids: IdSource) -> dict[str, Any]:
        started = time.monotonic()
        create_topic(self.bootstrap, self.topic, PARTITIONS)
        ledger = Ledger()
        rng = random.Random(f"{self.seed}-evolution-feed")
        feeder = Feeder(self.bootstrap, self.topic, PARTITIONS, ledger, ids, rng)
        idle = ForeignWriter(self.table, rng)  # never started: the verdict's other writer, with no rows
        final = None
        try:
            feeder.start()
            self.start()
            wait_for(self.table.exists, "the table to be created", 120)
            for i, step in enumerate(self.steps):
                log.info(
                    "evolution step %d/%d: %s (producer at v%d)",
                    i + 1,
                    len(self.steps),
                    step.describe(),
                    feeder.version + 1,
                )
                self.events.append(f"step {i + 1}: {step.describe()} (producer at v{feeder.version + 1})")
                {"crash": self.crash, "kill": self.kill, "leave": self.leave_step}[step.action](step)
                if i < 2:  # v2 after the first step, v3 after the second: the next ones meet them
                    feeder.evolve()
            wait_for(lambda: feeder.version == 2, "the producer to reach v3", 60)
            feeder.finish()
            self.resize(max(1, len(self.live())))
            highs = high_watermarks(self.bootstrap, self.topic, PARTITIONS)
            wait_for(lambda: self.table.caught_up(self.app_id, highs), "the workers to catch up", 300, poll_s=1.0)
            for w in self.live():
                self.leave(w)
            final = self.final_pass()
        finally:
            stop_all(self.everyone)
            if feeder.is_alive():
                feeder.finish(60)
        result = self.verdict(ledger, idle, final, time.monotonic() - started)
        schema = self.table.schema()
        origin = schema.field("origin").type if "origin" in schema.names else None
        evolved = origin is not None and "rack" in origin.names and "readings" in schema.names
        if not evolved:
            result["problems"].append(f"the table did not take the evolved schema: {schema}")
        result["table_schema"] = str(schema)
        return result


def evolution_steps(rng: random.Random, *, quick: bool) -> list[Step]:
    """Quick: crashes mid-write, after the files are written (new-schema files waiting for the
    schema change), after the Delta commit, and a SIGKILL right after a commit; full: the
    ingest scenario's plan, every crash point once."""
    if not quick:
        return plan(rng, IngestPlan(crashes_per_point=1, kills=2, leaves=1))
    return [
        Step("crash", 2, "mid-write", rng.randint(1, 4)),
        Step("crash", 2, "after-write", rng.randint(1, 4)),
        Step("crash", 1, "after-delta-commit", 1),
        Step("kill", 2, when="next-commit"),
    ]


def run_evolution_chaos(
    bootstrap: str, run_id: str, out: Path, ids: IdSource, seed: int, *, quick: bool
) -> dict[str, Any]:
    steps = evolution_steps(random.Random(f"{seed}-evolution-plan"), quick=quick)
    chaos = EvolutionChaos(
        bootstrap, run_id, out, seed, steps, None, flags=("--schema-evolution", "merge"), name="evolution"
    )
    return chaos.run(ids)
