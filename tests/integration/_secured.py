"""The SASL_SSL broker of the secured tests (``secured/`` and Spark's): ``scripts/kafka-local.sh``
with ``PARKA_KAFKA_SECURITY=sasl_ssl`` (SCRAM-SHA-512 and -256, a CA the script made), on a port
of its own (``PARKA_TEST_SECURED_KAFKA_PORT``, default 19680), run by :mod:`._servers` (started
in the background when collection ends, its tests last). Its client settings, password
included, come from the file the script writes (``client-config``). A broker that cannot be
started fails the run; it never skips."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from ._ingest_util import create_topic
from ._servers import up


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
        return create_topic(AdminClient(self.conf), f"sec-{uuid.uuid4().hex[:10]}", partitions)


def _read_properties(path: str) -> dict[str, str]:
    out = {}
    for line in Path(path).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def connect() -> SecuredBroker:
    """The secured broker, running (waits for its start), with its client settings."""
    started = time.monotonic()
    server = up("secured_broker")
    path = server.run("client-config", check=True, capture_output=True).stdout.strip()
    broker = SecuredBroker(_read_properties(path))
    md = AdminClient(broker.conf).list_topics(timeout=60)
    if not md.brokers:
        raise RuntimeError(f"the secured broker at {broker.bootstrap} returned no metadata")
    print(f"\nsecured broker ready in {time.monotonic() - started:.1f} s")
    return broker
