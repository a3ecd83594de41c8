"""Schemas by subject through a real registry: the producer registers or fetches, the segments
carry the id, the shim resolves it; unknown subjects and an unreachable registry fail clearly."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable

import pytest
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from parka.errors import RegistryError
from parka.segment import SCHEMA_ID_HEADER

AVRO = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": ["null", "double"]},
    ],
}
# the first run on a machine builds the registry from Maven Central (minutes) inside the
# session fixture, which the first test's timeout covers
pytestmark = pytest.mark.timeout(900)

RECORDS = [{"id": i, "sensor": f"s{i % 3}", "value": None if i % 4 == 0 else i / 2} for i in range(50)]


def _producer(bootstrap: str, registry_url: str) -> ParquetProducer:
    return ParquetProducer(
        {
            "bootstrap.servers": bootstrap,
            "columnar.encoding": "parquet",
            "columnar.batch.records": 20,
            "schema.registry.url": registry_url,
        }
    )


def _consume(bootstrap: str, registry_url: str, topic: str, count: int) -> list[dict[str, object]]:
    consumer = ParquetConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:10]}",
            "auto.offset.reset": "earliest",
            "schema.registry.url": registry_url,
        }
    )
    consumer.subscribe([topic])
    values: list[dict[str, object]] = []
    try:
        for _ in range(600):
            if len(values) >= count:
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_register_then_read_back_through_the_registry(
    bootstrap: str, registry_url: str, new_topic: Callable[..., str]
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    topic = new_topic()
    subject = f"{topic}-value"
    producer = _producer(bootstrap, registry_url)
    producer.set_schema(topic, json.dumps(AVRO), subject=subject, register=True)
    for record in RECORDS:
        producer.produce(topic, value=record)
    assert producer.flush(30) == 0

    client = SchemaRegistryClient({"url": registry_url})
    registered = client.get_latest_version(subject)
    client.close()
    assert json.loads(registered.schema.schema_str)["name"] == "Reading"

    # a second producer takes the latest version by subject alone: the same id
    second = _producer(bootstrap, registry_url)
    second.set_schema(topic, subject=subject)
    assert second.schema(topic) == producer.schema(topic)

    from confluent_kafka import Consumer

    raw = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:10]}", "auto.offset.reset": "earliest"}
    )
    raw.subscribe([topic])
    msg = None
    for _ in range(120):
        msg = raw.poll(0.5)
        if msg is not None and msg.error() is None:
            break
    raw.close()
    assert msg is not None
    assert dict(msg.headers())[SCHEMA_ID_HEADER] == str(registered.schema_id).encode()

    assert _consume(bootstrap, registry_url, topic, len(RECORDS)) == RECORDS
    producer.close()
    second.close()


def test_shim_refuses_a_segment_whose_id_names_another_schema(
    bootstrap: str, registry_url: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    other = dict(AVRO, name="Other", fields=[{"name": "x", "type": "int"}])
    producer = _producer(bootstrap, registry_url)
    other_id = producer._registry.register(f"{topic}-other", json.dumps(other))  # type: ignore[union-attr]
    producer.set_schema(topic, AVRO)
    producer._topics[topic].schema_id = other_id  # a producer that lies about its schema
    for record in RECORDS[:5]:
        producer.produce(topic, value=record)
    assert producer.flush(30) == 0
    producer.close()
    from parka.errors import SegmentDecodeError

    with pytest.raises(SegmentDecodeError, match=f"writer schema {other_id}"):
        _consume(bootstrap, registry_url, topic, 5)


def test_unknown_subject_is_a_clear_error(bootstrap: str, registry_url: str) -> None:
    producer = _producer(bootstrap, registry_url)
    with pytest.raises(RegistryError, match=r"refused subject 'no-such-subject-\w+'.*HTTP 404") as info:
        producer.set_schema("t", subject=f"no-such-subject-{uuid.uuid4().hex[:6]}")
    producer.close(5)
    assert info.value.subject is not None


def test_unreachable_registry_is_a_clear_error(bootstrap: str) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    producer = ParquetProducer(
        {
            "bootstrap.servers": bootstrap,
            "columnar.encoding": "parquet",
            "schema.registry.url": url,
            "schema.registry.max.retries": 0,
            "schema.registry.basic.auth.user.info": "alice:s3cret",
        }
    )
    with pytest.raises(RegistryError, match=f"registry at {url} could not be reached") as info:
        producer.set_schema("t", subject="any")
    producer.close(5)
    assert "s3cret" not in str(info.value)


def _nested(version: int) -> dict[str, object]:
    """An event whose ``actor`` record gains ``site_admin`` (with a default: a compatible change)
    in v2; v3 changes ``actor.login`` from string to long (incompatible)."""
    actor: list[dict[str, object]] = [{"name": "id", "type": "long"}]
    actor.append({"name": "login", "type": "long" if version == 3 else "string"})
    if version >= 2:
        actor.append({"name": "site_admin", "type": ["null", "boolean"], "default": None})
    return {
        "type": "record",
        "name": "Event",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "actor", "type": {"type": "record", "name": "Actor", "fields": actor}},
        ],
    }


def test_an_evolved_nested_schema_is_registered_under_the_subjects_rule_and_a_refused_one_fails_set_schema(
    bootstrap: str, registry_url: str, new_topic: Callable[..., str]
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    topic = new_topic()
    subject = f"{topic}-value"
    client = SchemaRegistryClient({"url": registry_url})
    producer = _producer(bootstrap, registry_url)
    try:
        producer.set_schema(topic, json.dumps(_nested(1)), subject=subject, register=True)
        client.set_compatibility(subject, "BACKWARD")
        for i in range(5):
            producer.produce(topic, value={"id": i, "actor": {"id": i, "login": f"u{i}"}})
        producer.set_schema(topic, json.dumps(_nested(2)), subject=subject, register=True)  # v2 joins the subject
        for i in range(5, 10):
            producer.produce(topic, value={"id": i, "actor": {"id": i, "login": f"u{i}", "site_admin": i % 2 == 0}})
        assert producer.flush(30) == 0
        assert len(client.get_versions(subject)) == 2
        with pytest.raises(RegistryError, match=f"subject '{subject}'") as err:
            producer.set_schema(topic, json.dumps(_nested(3)), subject=subject, register=True)
        assert "incompatible" in str(err.value).lower() and "BACKWARD" in str(err.value)
        assert len(client.get_versions(subject)) == 2
        # each segment names its writer's id; the shim resolves both
        values = sorted(_consume(bootstrap, registry_url, topic, 10), key=lambda r: int(str(r["id"])))
        assert values[0]["actor"] == {"id": 0, "login": "u0"}
        assert values[6]["actor"] == {"id": 6, "login": "u6", "site_admin": True}
    finally:
        producer.close()
        client.close()
