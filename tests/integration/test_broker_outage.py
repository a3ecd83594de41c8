"""A broker that goes away: ingestion waits, keeps what it has, and loses nothing."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from ._ingest_util import log_has, produce_events, start_ingest, table_ids, wait_for, wait_for_rows
from .conftest import REPO

OUTAGE_PORT = os.environ.get("PARKA_TEST_OUTAGE_PORT", "19192")


def _broker(action: str) -> None:
    env = dict(os.environ, PARKA_KAFKA_PORT=OUTAGE_PORT)
    subprocess.run([str(REPO / "scripts" / "kafka-local.sh"), action], check=True, env=env, timeout=180)


@pytest.mark.long(130)
def test_ingest_survives_a_broker_restart(tmp_path: Path) -> None:
    # A broker of its own: this test stops it, which the shared one must never be.
    _broker("up")
    bootstrap = f"127.0.0.1:{OUTAGE_PORT}"
    proc = None
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = f"outage-{time.time_ns()}"
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
        produce_events(bootstrap, topic, 0, 500, batch=50)
        table = tmp_path / "t"
        proc = start_ingest(topic, str(table), bootstrap, "--allowed-latency", "1", log=tmp_path / "log")
        assert wait_for_rows(table, 500, timeout_s=60) == 500

        _broker("down")
        # the worker's client notices the broker is gone (librdkafka logs it), and the worker keeps running
        wait_for(lambda: log_has(tmp_path / "log", "Connection refused"), "the worker's client to lose the broker")
        assert proc.poll() is None, "ingestion died with the broker:\n" + (tmp_path / "log").read_text()[-3000:]

        _broker("up")
        produce_events(bootstrap, topic, 500, 500, batch=50)
        assert wait_for_rows(table, 1000, timeout_s=90) >= 1000
        # said once when the broker went, once when it came back (docs/operating.md)
        wait_for(lambda: log_has(tmp_path / "log", "recovered after"), "the worker to say the broker is back")
        text = (tmp_path / "log").read_text()
        lost = f"lost the Kafka brokers at {bootstrap}"
        # librdkafka's count in brackets depends on the brokers it had learned of: 1/1, 2/2
        said = re.findall(rf"{re.escape(lost)} \(\d+/\d+ brokers are down\); retrying", text)
        assert len(said) == 1, text[-3000:]
        assert text.count("recovered after") == 1 and f": {lost}" in text, text[-3000:]
        assert "%3|" not in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, (tmp_path / "log").read_text()[-3000:]
        assert sorted(table_ids(table)) == list(range(1000))
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)  # reaped here, not by a later test's garbage collection
        _broker("reset")
