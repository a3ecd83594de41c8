"""stress.py URL THREADS N: THREADS threads each register N Avro schemas on new subjects (and
read each back by id) at once; prints the failures and the slowest call."""

import json
import sys
import threading
import time
import uuid

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

URL, THREADS, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
errors: list[str] = []
slowest = [0.0]
lock = threading.Lock()


def work(t: int) -> None:
    client = SchemaRegistryClient({"url": URL})
    for i in range(N):
        subject = f"s-{uuid.uuid4().hex[:8]}-value"
        record = {"type": "record", "name": f"R{t}x{i}", "fields": [{"name": f"f{i}", "type": "long"}]}
        began = time.monotonic()
        try:
            client.get_schema(client.register_schema(subject, Schema(json.dumps(record), "AVRO")))
        except Exception as exc:
            with lock:
                errors.append(repr(exc)[:200])
        took = time.monotonic() - began
        with lock:
            slowest[0] = max(slowest[0], took)


began = time.monotonic()
threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(f"{THREADS}x{N}: {len(errors)} failed, slowest call {slowest[0]:.2f} s, all {time.monotonic() - began:.1f} s")
for error in errors[:5]:
    print("  ", error)
