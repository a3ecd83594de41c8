"""cProfile of parka ingest --value-format json on 100,000 web_requests rows, in process (a broker on
127.0.0.1:19300): python benchmarks/results/2026-11-30-row-ingest/profile_json.py "$(PARKA_KAFKA_PORT=19300 scripts/kafka-local.sh data-dir)"
"""
import cProfile, pstats, sys, json, uuid
sys.path.insert(0, '.')
from benchmarks.datasets import load
from benchmarks.broker import Broker
from benchmarks import encodings as enc
from benchmarks.clients import produce_values
from benchmarks.row_decode import json_values
from benchmarks.lake import ingest
import tempfile
ds = load("web_requests", 100000)
b = Broker("127.0.0.1:19300", sys.argv[1])
t = f"prof-{uuid.uuid4().hex[:6]}"
b.create_topic(t)
produce_values(enc.row_producer_conf(b.bootstrap, "zstd", 10000, b.max_message_bytes_cached()), t, json_values(ds.table))
sf = tempfile.mktemp(suffix=".avsc"); open(sf, "w").write(json.dumps(ds.avro_schema))
d = tempfile.mkdtemp()
pr = cProfile.Profile()
pr.enable()
run = ingest(b.bootstrap, t, d, value_format="json", value_schema_path=sf)
pr.disable()
print("cpu", run.span.cpu_s, "rows", run.rows)
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
