"""Two racing `parka ingest --end-at-latest` runs (one app id, groups gA/gB) into an Iceberg SQL
table while a third consumer keeps joining and leaving group gA (on another topic): rebalances
mid-run. Checks every id lands once. Usage: repro.py BOOTSTRAP OUTDIR ROUND"""
import json, os, subprocess, sys, threading, time, uuid
from pathlib import Path
sys.path.insert(0, os.getcwd())
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.integration._ingest_util import produce_events
from pyiceberg.catalog import load_catalog

bootstrap, out, rnd = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
d = out / f"r{rnd}"; d.mkdir(parents=True)
topic = f"race-{uuid.uuid4().hex[:8]}"; other = f"other-{uuid.uuid4().hex[:8]}"
admin = AdminClient({"bootstrap.servers": bootstrap})
for f in admin.create_topics([NewTopic(topic, 2, 1), NewTopic(other, 1, 1)]).values(): f.result()
N = int(os.environ.get("N", "4000")); produce_events(bootstrap, topic, 0, N, batch=100)
wh = d / "warehouse"
ga, gb = 'gA-' + rnd.split('-')[0], 'gB-' + rnd.split('-')[0]
stop = threading.Event()
def disturb():
    while not stop.is_set():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": ga, "session.timeout.ms": 3000, "heartbeat.interval.ms": 500})
        c.subscribe([other]); t = time.time()
        while time.time() - t < 0.7 and not stop.is_set(): c.poll(0.1)
        c.close()
        time.sleep(0.3)
th = threading.Thread(target=disturb); th.start()
procs = []
for g, name in ((ga, "a"), (gb, "b")):
    cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, "db.race", "-k", bootstrap, "-K", "session.timeout.ms=3000", "-K", "heartbeat.interval.ms=500",
           "-v", "--catalog", "test", "--catalog-option", f"warehouse={wh}", "--end-at-latest", "--max-segments-per-commit", "2", "-a", "racing", "-g", g]
    procs.append(subprocess.Popen(cmd, stdout=open(d / f"{name}.out", "w"), stderr=open(d / f"{name}.log", "w")))
codes = [p.wait(300) for p in procs]
stop.set(); th.join()
c = load_catalog("test", type="sql", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
ids = sorted(c.load_table("db.race").scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())
ok = ids == list(range(N))
missing = sorted(set(range(N)) - set(ids))
print(json.dumps({"round": rnd, "codes": codes, "ok": ok, "n": len(ids), "missing": len(missing), "first_missing": missing[:3], "dups": len(ids) - len(set(ids))}), flush=True)
