"""The SASL_SSL broker of the secured tests: ``scripts/kafka-local.sh`` with
``PARKA_KAFKA_SECURITY=sasl_ssl`` (SCRAM-SHA-512 and -256, a CA the script made), on a port of
its own (``PARKA_TEST_SECURED_KAFKA_PORT``, default 19680), started once per session and
stopped at the end. Its client settings, password included, come from the file the script
writes (``client-config``). A broker that cannot be started fails the run; it never skips.

The Spark test imports :func:`secured_broker` from here, so both directories share one broker.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[3]
SECURED_PORT = os.environ.get("PARKA_TEST_SECURED_KAFKA_PORT", "19680")
SCRIPT = str(REPO / "scripts" / "kafka-local.sh")


@dataclass(frozen=True)
class SecuredBroker:
    """``conf``: librdkafka settings that reach the broker (bootstrap.servers, security.protocol,
    sasl.*, ssl.ca.location); ``password`` is the SCRAM user's, for the log greps."""

    conf: dict[str, str] = field(repr=False)

    @property
    def bootstrap(self) -> str:
        return self.conf["bootstrap.servers"]

    @property
    def password(self) -> str:
        return self.conf["sasl.password"]

    def client(self, **extra: object) -> dict[str, object]:
        """The client settings plus ``extra``."""
        return {**self.conf, **extra}

    def settings_env(self, **override: str) -> str:
        """The settings but bootstrap.servers as ``PARKA_KAFKA_SETTINGS`` (comma-separated
        key=value): how a daemon gets its credentials from the environment."""
        conf = {k: v for k, v in self.conf.items() if k != "bootstrap.servers"}
        return ",".join(f"{k}={v}" for k, v in {**conf, **override}.items())

    def new_topic(self, partitions: int = 1) -> str:
        """A uniquely named topic, once every partition has a leader."""
        admin = AdminClient(self.conf)
        name = f"sec-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            md = admin.list_topics(name, timeout=10).topics.get(name)
            ready = md is not None and md.error is None and len(md.partitions) == partitions
            if ready and all(p.leader >= 0 for p in md.partitions.values()):
                return name
            time.sleep(0.1)  # between metadata reads
        raise RuntimeError(f"topic {name} not ready on the secured broker")


def _read_properties(path: str) -> dict[str, str]:
    out = {}
    for line in Path(path).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            out[key.strip()] = value.strip()
    return out


@pytest.fixture(scope="session")
def secured_broker() -> Iterator[SecuredBroker]:
    env = dict(os.environ, PARKA_KAFKA_SECURITY="sasl_ssl", PARKA_KAFKA_PORT=SECURED_PORT)
    started = time.monotonic()
    subprocess.run([SCRIPT, "up"], check=True, env=env, timeout=300)
    try:
        path = subprocess.run([SCRIPT, "client-config"], check=True, env=env, capture_output=True, text=True)
        broker = SecuredBroker(_read_properties(path.stdout.strip()))
        md = AdminClient(broker.conf).list_topics(timeout=60)
        if not md.brokers:
            raise RuntimeError(f"the secured broker at {broker.bootstrap} returned no metadata")
        print(f"\nsecured broker ready in {time.monotonic() - started:.1f} s")
        yield broker
    finally:
        subprocess.run([SCRIPT, "down"], check=False, env=env, timeout=120)
