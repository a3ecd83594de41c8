"""Two racing ``parka ingest --end-at-latest`` runs (one app id, groups gA-R and gB-R) into an
Iceberg table of the embedded catalog, while a third consumer keeps joining and leaving group
gA-R (subscribed to another topic): rebalances mid-run. Prints whether every id landed once.

Usage, from the repo's root: ``N=8000 python repro.py BOOTSTRAP OUTDIR ROUND`` (ROUND ``R-x``:
rounds ``R-x`` and ``R-y`` share the groups)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog import load_catalog

sys.path.insert(0, os.getcwd())
from tests.integration._ingest_util import produce_events


def main(bootstrap: str, out: Path, round_name: str) -> None:
    n = int(os.environ.get("N", "4000"))
    folder = out / f"r{round_name}"
    folder.mkdir(parents=True)
    topic, other = f"race-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1), NewTopic(other, 1, 1)]).values():
        future.result()
    produce_events(bootstrap, topic, 0, n, batch=100)
    warehouse = folder / "warehouse"
    shared = round_name.split("-")[0]
    groups = {"a": f"gA-{shared}", "b": f"gB-{shared}"}
    stop = threading.Event()

    def disturb() -> None:
        while not stop.is_set():
            conf = {"bootstrap.servers": bootstrap, "group.id": groups["a"], "session.timeout.ms": 3000}
            consumer = Consumer({**conf, "heartbeat.interval.ms": 500})
            consumer.subscribe([other])
            began = time.monotonic()
            while time.monotonic() - began < 0.7 and not stop.is_set():
                consumer.poll(0.1)
            consumer.close()
            stop.wait(0.3)

    disturber = threading.Thread(target=disturb)
    disturber.start()
    runs = []
    for name, group in groups.items():
        command = [sys.executable, "-m", "parka.cli", "ingest", topic, "db.race", "-k", bootstrap, "-v"]
        command += ["-K", "session.timeout.ms=3000", "-K", "heartbeat.interval.ms=500"]
        command += ["--catalog", "test", "--catalog-option", f"warehouse={warehouse}", "--end-at-latest"]
        command += ["--max-segments-per-commit", "2", "-a", "racing", "-g", group]
        with open(folder / f"{name}.out", "w") as stdout, open(folder / f"{name}.log", "w") as stderr:
            runs.append(subprocess.Popen(command, stdout=stdout, stderr=stderr))
    codes = [run.wait(300) for run in runs]
    stop.set()
    disturber.join()
    catalog = load_catalog("test", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    ids = sorted(catalog.load_table("db.race").scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())
    missing = sorted(set(range(n)) - set(ids))
    print(json.dumps({
        "round": round_name, "codes": codes, "ok": ids == list(range(n)), "n": len(ids),
        "missing": len(missing), "first_missing": missing[:3], "dups": len(ids) - len(set(ids)),
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3])
