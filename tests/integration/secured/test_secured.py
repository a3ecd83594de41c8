"""Producer, shim and ``parka ingest`` against a SASL_SSL listener (SCRAM, the script's CA): the
data goes through, a wrong password stops ``parka ingest`` with an error naming it, and the
password shows in no output of the daemon."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError
from parka.consumer import ParquetConsumer
from parka.producer import ParquetProducer

from reliability import forkserver

from .._ingest_util import EVENTS, events, table_ids
from .._secured import SecuredBroker


def _ingest(broker: SecuredBroker, topic: str, table: Path, settings: str) -> subprocess.CompletedProcess[str]:
    """``parka ingest`` at INFO level (its start-up line shows the Kafka settings), with the
    client settings from the environment, as a deployment passes credentials."""
    cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, str(table), "-k", broker.bootstrap, "--end-at-latest"]
    env = {**os.environ, "PARKA_KAFKA_SETTINGS": settings}
    return forkserver.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_producer_and_shim_round_trip_over_sasl_ssl(secured_broker: SecuredBroker) -> None:
    topic = secured_broker.new_topic(partitions=2)
    conf = secured_broker.client(**{"columnar.encoding": "parquet", "columnar.batch.records": 100})
    with ParquetProducer(conf) as producer:  # SCRAM-SHA-512, the client file's mechanism
        producer.set_schema(topic, EVENTS)
        producer.produce_batch(topic, events(0, 500), key_column="device")
        assert producer.flush(30) == 0
        assert producer.stats()["segments"] >= 5
    got: list[Any] = []
    consumer_conf = secured_broker.client(
        **{"sasl.mechanisms": "SCRAM-SHA-256", "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    with ParquetConsumer(consumer_conf) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < 500 and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.append(msg.value()["id"])
    assert sorted(got) == list(range(500))


def test_parka_ingest_over_sasl_ssl_logs_no_secret(secured_broker: SecuredBroker, tmp_path: Path) -> None:
    topic = secured_broker.new_topic(partitions=2)
    conf = secured_broker.client(**{"columnar.encoding": "parquet", "columnar.batch.records": 50})
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, EVENTS)
        producer.produce_batch(topic, events(0, 300), key_column="device")
        assert producer.flush(30) == 0
    table = tmp_path / "events"
    proc = _ingest(secured_broker, topic, table, secured_broker.settings_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert sorted(table_ids(table)) == list(range(300))
    output = proc.stdout + proc.stderr
    # the start-up line dumps the Kafka settings: it ran, and masked the password
    assert "'sasl.username': 'parka'" in output and "'sasl.password': '***'" in output, output[-2000:]
    assert secured_broker.password not in output


def test_wrong_password_stops_parka_ingest_naming_the_failure(secured_broker: SecuredBroker, tmp_path: Path) -> None:
    topic = secured_broker.new_topic()
    wrong = "not-the-" + secured_broker.password[:8]
    started = time.monotonic()
    proc = _ingest(secured_broker, topic, tmp_path / "t", secured_broker.settings_env(**{"sasl.password": wrong}))
    elapsed = time.monotonic() - started
    # exit 2, bad configuration (docs/operating.md): the start-up probe names it before anything is
    # consumed; it was exit 1 from the consume loop before that probe existed
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert f"stopped: Kafka refused the credentials at {secured_broker.bootstrap}" in proc.stderr, proc.stderr[-4000:]
    assert "invalid credentials" in proc.stderr
    assert elapsed < 45, f"parka ingest took {elapsed:.0f} s to give up"  # librdkafka alone retries forever
    assert wrong not in proc.stdout + proc.stderr
    assert not (tmp_path / "t" / "_delta_log").exists() or not table_ids(tmp_path / "t")


def test_wrong_password_reaches_error_cb_of_producer_and_shim(secured_broker: SecuredBroker) -> None:
    """As with confluent_kafka: the failure goes to ``error_cb``, served by ``poll``."""
    seen: dict[str, list[KafkaError]] = {"producer": [], "consumer": []}
    bad = secured_broker.client(**{"sasl.password": "wrong", "log_level": 0})
    producer = ParquetProducer({**bad, "columnar.encoding": "parquet", "error_cb": seen["producer"].append})
    consumer = ParquetConsumer({**bad, "group.id": "g-wrong", "error_cb": seen["consumer"].append})
    consumer.subscribe(["never-read"])

    def failed(errors: list[KafkaError]) -> bool:
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    try:
        deadline = time.monotonic() + 30
        while not (failed(seen["producer"]) and failed(seen["consumer"])) and time.monotonic() < deadline:
            producer.poll(0.2)
            consumer.poll(0.2)
        for client, errors in seen.items():
            assert failed(errors), (client, [e.name() for e in errors])
            assert "invalid credentials" in next(str(e) for e in errors if e.code() == KafkaError._AUTHENTICATION)
    finally:
        consumer.close()
        producer.close(0)
