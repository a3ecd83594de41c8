"""cProfile of ``parka ingest --value-format json`` on 100,000 web_requests rows, in process, with a
broker on 127.0.0.1:19300; from the repository's root::

    python benchmarks/results/2026-11-30-row-ingest/profile_json.py \
        "$(PARKA_KAFKA_PORT=19300 scripts/kafka-local.sh data-dir)"

Its output of 2026-11-30 is ``profile_json.txt`` beside it.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, ".")

from benchmarks import encodings as enc
from benchmarks.broker import Broker
from benchmarks.clients import produce_values
from benchmarks.datasets import load
from benchmarks.lake import ingest
from benchmarks.row_decode import json_values


def main(data_dir: str) -> None:
    ds = load("web_requests", 100_000)
    broker = Broker("127.0.0.1:19300", data_dir)
    topic = f"prof-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic)
    conf = enc.row_producer_conf(broker.bootstrap, "zstd", 10_000, broker.max_message_bytes_cached())
    produce_values(conf, topic, json_values(ds.table))
    folder = Path(tempfile.mkdtemp(prefix="parka-profile-json-"))
    try:
        schema = folder / "schema.avsc"
        schema.write_text(json.dumps(ds.avro_schema))
        profile = cProfile.Profile()
        profile.enable()
        run = ingest(broker.bootstrap, topic, str(folder / "t"), value_format="json", value_schema_path=str(schema))
        profile.disable()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("cpu", run.span.cpu_s, "rows", run.rows)
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main(sys.argv[1])
