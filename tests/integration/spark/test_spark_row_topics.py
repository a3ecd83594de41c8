"""``parka spark-ingest --value-format``: row records (JSON, and Avro as confluent-kafka's own
``AvroSerializer`` frames it, its schema in the real registry) decoded in bulk on the executors by
the decoders ``parka ingest`` uses, landed in offset order with the segments of the same
partitions, exactly once across runs and across the two daemons, each record the table cannot
take a dead letter; with no table yet, the table is made from the first records that decode."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from deltalake import DeltaTable
from parka.spark_ext import SparkIngestSettings, ingest

from parka.errors import ConfigError

from .._ingest_util import (
    EVENTS_AVRO,
    assert_no_orphans,
    events,
    last_json,
    produce_events,
    produce_json,
    run_ingest,
    table_ids,
)
from ..registry._client import TestRegistryClient
from ._util import SPARK

pytestmark = [*SPARK, pytest.mark.timeout(900)]  # a first run builds the registry (see test_registry.py)


def _produce(bootstrap: str, topic: str, values: list[bytes | None], *, key: bytes | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value, key=key, partition=0)
    assert producer.flush(30) == 0


def test_json_records_and_segments_land_in_offset_order_once_and_parka_ingest_continues(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce_json(bootstrap, topic, 0, 300)  # keyed by device: both partitions
    produce_events(bootstrap, topic, 300, 200, batch=50)  # the topic moving to segments
    _produce(bootstrap, topic, [b"not json", b'{"id": "seven"}'])  # two records the table cannot take
    produce_json(bootstrap, topic, 500, 100)  # a producer not moved yet
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    schema = tmp_path / "event.avsc"  # the segments' schema: an inferred one would read "day" as a timestamp
    schema.write_text(json.dumps(EVENTS_AVRO))
    settings = SparkIngestSettings(
        topic=topic,
        table_uri=str(table),
        bootstrap_servers=bootstrap,
        value_format="json",
        value_schema_path=str(schema),
        dlq_table_uri=str(dlq),
        max_offsets_per_trigger=150,
    )
    stats = ingest(spark, settings)
    assert (stats.mode, stats.records, stats.dead_letters) == ("raw", 600, 2)
    assert stats.schema_source == "first segment" and stats.batches >= 2  # the table made from the records
    rows = DeltaTable(str(table)).to_pyarrow_table().sort_by("id").to_pylist()
    assert [r["id"] for r in rows] == list(range(600))
    want = events(0, 600).to_pylist()
    assert [(r["device"], r["value"], r["at"]) for r in rows] == [(w["device"], w["value"], w["at"]) for w in want]
    json_rows = [r for r in rows if r["id"] < 300 or r["id"] >= 500]
    # each record's key and headers are columns, as a segment's are
    assert all(r["__parka_key"] == r["device"].encode() for r in json_rows)
    assert all(r["__parka_headers"] == [{"key": "source", "value": b"json"}] for r in json_rows)
    letters = DeltaTable(str(dlq)).to_pyarrow_table().sort_by("offset").to_pylist()
    assert [d["value"] for d in letters] == [b"not json", b'{"id": "seven"}']
    assert all("--value-format json" in d["error"] for d in letters)

    produce_json(bootstrap, topic, 600, 100)
    again = ingest(spark, settings)
    assert (again.records, again.dead_letters, again.schema_source) == (100, 0, "table")
    produce_json(bootstrap, topic, 700, 50)
    flags = ("--end-at-latest", "--value-format", "json", "--value-schema", str(schema))
    result = last_json(run_ingest(topic, table, bootstrap, *flags))
    assert result["records"] == 50  # parka ingest goes on from spark-ingest's txn versions
    assert sorted(table_ids(table)) == list(range(750))
    assert_no_orphans(table)


def test_avro_records_from_the_registry_land_and_an_unknown_schema_id_is_a_dead_letter(
    spark: Any, bootstrap: str, registry_url: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    client = TestRegistryClient({"url": registry_url})
    try:
        serializer = AvroSerializer(client, json.dumps(EVENTS_AVRO))
        context = SerializationContext(topic, MessageField.VALUE)
        rows = events(0, 400).to_pylist()
        values: list[bytes | None] = [serializer(r, context) for r in rows[:200]]
        unknown = struct.pack(">bI", 0, 987_654_321) + b"\x02"  # a frame naming no schema the registry holds
        values += [unknown, *(serializer(r, context) for r in rows[200:])]
    finally:
        client.close()
    _produce(bootstrap, topic, values, key=b"k")
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    settings = SparkIngestSettings(
        topic=topic,
        table_uri=str(table),
        bootstrap_servers=bootstrap,
        value_format="avro",
        schema_registry_url=registry_url,
        dlq_table_uri=str(dlq),
    )
    stats = ingest(spark, settings)
    assert (stats.records, stats.dead_letters) == (400, 1)
    landed = DeltaTable(str(table)).to_pyarrow_table().sort_by("id").to_pylist()
    assert [(r["id"], r["device"], r["day"], r["value"], r["at"]) for r in landed] == [
        (r["id"], r["device"], r["day"], r["value"], r["at"]) for r in rows
    ]
    [dead] = DeltaTable(str(dlq)).to_pyarrow_table().to_pylist()
    assert (dead["offset"], dead["value"]) == (200, unknown)
    assert "schema id 987654321 is not in the registry" in dead["error"]
    assert_no_orphans(table)


def test_value_format_needs_raw_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--value-format lands row records as files"):
        SparkIngestSettings(
            topic="t", table_uri=str(tmp_path / "t"), bootstrap_servers="b", value_format="json", mode="decode"
        )
