"""``parka ingest`` on row topics: CPU per million rows, Kafka fetch included, for JSON values
(``--value-format json`` against a declared schema), Confluent-framed Avro values
(``--value-format avro``, writer schema from a real schema registry) and Confluent-framed
Protobuf values (``--value-format protobuf``, web_requests only: :data:`WEB_REQUESTS_PROTO`,
registered as .proto source), beside the same rows as
parka's segments and the suite's row baseline (fastavro per record, then ``write_deltalake``:
:func:`benchmarks.lake.row_baseline`), measured side by side in one run.

Per data set, three topics are produced once, before any clock starts: the rows as zstd segments
of 10,000 rows, as JSON objects (ISO-8601 timestamps, as :class:`parka.rowdecode.JsonRows`
reads them) and as Confluent Avro, both in zstd record batches of 10,000 records. The Avro
values carry the id the registry gave the data set's schema. Each repeat runs every arm in a
shuffled order, into a fresh Delta table, in this process (``time.process_time``: every thread),
and checks the table: its rows and the content fingerprint of the data set's columns equal the
data set. The figure per arm is the median over repeats of CPU-seconds per million rows; the
ratios are medians of per-repeat ratios (paired: the same repeat)::

    python -m benchmarks.row_ingest --bootstrap HOST:PORT --registry-url URL --rows 500000 --repeats 3 --out DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import shutil
import statistics
import struct
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from . import encodings as enc
from .broker import Broker
from .checks import CheckFailed, fingerprint
from .clients import produce_parquet, produce_values
from .datasets import Dataset, load
from .lake import LakeRun, ingest, row_baseline
from .row_decode import json_values

ARMS = ("segments", "json", "avro", "protobuf", "row baseline (Avro)")
# web_requests as a Protobuf message (the one data set the protobuf arm has a .proto for)
WEB_REQUESTS_PROTO = """
syntax = "proto3";
package kafka_delta_ingest.example;

message WebRequest {
  int32 status = 1;
  string session_id = 2;
  string method = 3;
  Meta meta = 4;
  string uuid = 5;
  string url = 6;

  message Meta {
    Producer producer = 1;

    message Producer {
      string timestamp = 1;
    }
  }
}
"""
SEGMENT_ROWS = 10_000

log = logging.getLogger("parka.bench")


def _register(registry_url: str, subject: str, schema: dict[str, Any]) -> int:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": registry_url})
    try:
        return int(client.register_schema(subject, Schema(json.dumps(schema), "AVRO")))
    finally:
        client.close()


def _protobuf_values(ds: Dataset, registry_url: str, subject: str) -> list[bytes]:
    """The data set's rows as Confluent-framed Protobuf values of :data:`WEB_REQUESTS_PROTO`,
    registered as .proto source under ``subject``."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from google.protobuf.json_format import ParseDict

    from parka.protodecode import registered_class

    client = SchemaRegistryClient({"url": registry_url})
    try:
        schema_id = int(client.register_schema(subject, Schema(WEB_REQUESTS_PROTO, "PROTOBUF")))
    finally:
        client.close()
    cls = registered_class(WEB_REQUESTS_PROTO, [], schema_id)  # its first message, WebRequest
    frame = struct.pack(">bI", 0, schema_id) + b"\x00"
    return [frame + ParseDict(row, cls()).SerializeToString() for row in ds.table.to_pylist()]


def _topics(broker: Broker, ds: Dataset, arms: list[str], registry_url: str) -> dict[str, str]:
    max_bytes = broker.max_message_bytes_cached()
    run = uuid.uuid4().hex[:6]
    kinds = ("segments", "json", "avro", "protobuf")
    topics = {arm: f"bench-rows-{ds.name}-{arm}-{run}" for arm in kinds}
    for topic in topics.values():
        broker.create_topic(topic)
    produce_parquet(
        enc.parka_producer_conf(broker.bootstrap, "zstd", SEGMENT_ROWS, max_bytes),
        topics["segments"],
        ds.avro_schema,
        ds.table,
    )
    conf = enc.row_producer_conf(broker.bootstrap, "zstd", SEGMENT_ROWS, max_bytes)
    produce_values(conf, topics["json"], json_values(ds.table))
    if "avro" in arms or any(a.startswith("row baseline") for a in arms):
        produce_values(conf, topics["avro"], enc.serialize(ds, "avro", enc.rows_for(ds, "avro")))
    if "protobuf" in arms:
        produce_values(conf, topics["protobuf"], _protobuf_values(ds, registry_url, f"{topics['protobuf']}-value"))
    return topics


def _run(arm: str, broker: Broker, ds: Dataset, topics: dict[str, str], schema_file: str, registry: str) -> LakeRun:
    folder = tempfile.mkdtemp(prefix=f"parka-bench-rows-{ds.name}-")
    try:
        if arm == "segments":
            run = ingest(broker.bootstrap, topics["segments"], folder)
        elif arm == "json":
            run = ingest(broker.bootstrap, topics["json"], folder, value_format="json", value_schema_path=schema_file)
        elif arm in ("avro", "protobuf"):
            run = ingest(broker.bootstrap, topics[arm], folder, value_format=arm, schema_registry_url=registry)
        else:
            run = row_baseline(broker.bootstrap, topics["avro"], folder, ds, ds.rows)
        data = DeltaTable(folder).to_pyarrow_table(columns=ds.table.schema.names)
        if data.num_rows != ds.rows or fingerprint(data, ds.table.schema) != fingerprint(ds.table, ds.table.schema):
            raise CheckFailed(f"{ds.name} {arm}: the table ({data.num_rows} rows) is not the data set")
        return run
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_rows(
    broker: Broker,
    registry_url: str | None,
    datasets: list[str],
    rows: int,
    repeats: int,
    seed: int,
    out: Path,
) -> dict[str, Any]:
    """Every arm on each data set, ``repeats`` times in a shuffled order (see the module
    docstring); per data set its medians, samples and paired ratios. The suite's ``rows``
    section calls it too."""
    arms = [a for a in ARMS if registry_url or ("avro" not in a.lower() and a != "protobuf")]
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    results: dict[str, Any] = {}
    for name in datasets:
        ds = load(name, rows)
        if registry_url:  # the values carry the id the registry gives the schema
            schema_id = _register(registry_url, f"bench-rows-{name}-{uuid.uuid4().hex[:6]}", ds.avro_schema)
            ds = dataclasses.replace(ds, schema_id=schema_id)
            assert enc.serialize(ds, "avro", enc.rows_for(ds, "avro")[:1])[0][:5] == struct.pack(">bI", 0, schema_id)
        schema_file = str(out / f"{name}.avsc")
        Path(schema_file).write_text(json.dumps(ds.avro_schema))
        arms_here = [a for a in arms if a != "protobuf" or name == "web_requests"]
        topics = _topics(broker, ds, arms_here, registry_url or "")
        per_arm: dict[str, list[float]] = {arm: [] for arm in arms_here}
        for repeat in range(repeats):
            order = list(arms_here)
            rng.shuffle(order)
            for arm in order:
                run = _run(arm, broker, ds, topics, schema_file, registry_url or "")
                per_arm[arm].append(run.span.cpu_s / ds.rows * 1e6)
                log.warning("%s repeat %d %s: %.2f CPU-s per million rows", name, repeat, arm, per_arm[arm][-1])
        ratios = {
            f"{arm} / {base}": statistics.median(a / b for a, b in zip(per_arm[arm], per_arm[base], strict=True))
            for arm in arms_here
            for base in arms_here
            if arm != base and (base == "segments" or (arm, base) in (("avro", "json"), ("protobuf", "avro")))
        }
        results[name] = {
            "rows": ds.rows,
            "cpu_s_per_million_rows": {arm: statistics.median(v) for arm, v in per_arm.items()},
            "samples": per_arm,
            "ratios (median of paired)": ratios,
        }
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.row_ingest", description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--kafka-data-dir", required=True, help="the broker's log dir (scripts/kafka-local.sh data-dir)")
    p.add_argument("--registry-url", help="a schema registry (Confluent's API); without it, no Avro arms")
    p.add_argument("--datasets", default="web_requests")
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    broker = Broker(args.bootstrap, args.kafka_data_dir)
    results: dict[str, Any] = {"command": " ".join(["python -m benchmarks.row_ingest", *(argv or sys.argv[1:])])}
    results |= run_rows(
        broker, args.registry_url, args.datasets.split(","), args.rows, args.repeats, args.seed, args.out
    )
    (args.out / "row_ingest.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
