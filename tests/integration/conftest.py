"""One place decides where the integration tests' Kafka broker comes from.

1. ``PARKA_BOOTSTRAP`` set: that broker.
2. Else, a Docker engine answers: a testcontainers Kafka.
3. Else: the repo's own broker, ``scripts/kafka-local.sh`` (Maven Central jars, Java 17), on a
   port of its own so a developer's broker on 9092 is left alone; stopped at the end.

A broker that cannot be had fails the run: integration tests never skip for want of one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from . import _servers
from ._ingest_util import create_topic
from ._objectstores import ObjectStoreServer, serve
from ._secured import SecuredBroker, connect

REPO = Path(__file__).resolve().parents[2]
TEST_PORT = os.environ.get("PARKA_TEST_KAFKA_PORT", "19092")


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _wait_for_metadata(bootstrap: str, timeout_s: float = 60.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=timeout_s)
    if not md.brokers:
        raise RuntimeError(f"broker at {bootstrap} returned no metadata")


@pytest.fixture(scope="session")
def bootstrap() -> Iterator[str]:
    address = os.environ.get("PARKA_BOOTSTRAP")
    if address:
        _wait_for_metadata(address)
        yield address
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as kafka:
            address = kafka.get_bootstrap_server()
            _wait_for_metadata(address)
            yield address
        return
    env = dict(os.environ, PARKA_KAFKA_PORT=TEST_PORT)
    script = str(REPO / "scripts" / "kafka-local.sh")
    subprocess.run([script, "up"], check=True, env=env)
    address = f"127.0.0.1:{TEST_PORT}"
    try:
        _wait_for_metadata(address)
        yield address
    finally:
        subprocess.run([script, "down"], check=False, env=env)


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def new_topic(admin: AdminClient, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a uniquely named topic for this test; returns its name."""

    def make(partitions: int = 1, **config: str) -> str:
        name = f"t-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")
        return create_topic(admin, name, partitions, **config)

    return make


@pytest.fixture
def group_id() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def s3proxy() -> ObjectStoreServer:
    """s3proxy from Maven Central (``scripts/s3proxy.sh``), bucket ``lake``, once per run."""
    return serve("s3proxy", "s3://lake")


@pytest.fixture(scope="session")
def azurite() -> ObjectStoreServer:
    """Azurite from npm (``scripts/azurite.sh``), container ``lake``, once per run."""
    # abfss:// as ADLS Gen2 users write it; the endpoint option sends it to the emulator
    return serve("azurite", "abfss://lake@devstoreaccount1.dfs.core.windows.net")


@pytest.fixture(scope="session")
def secured_broker() -> SecuredBroker:
    """The SASL_SSL broker (``scripts/kafka-local.sh``, ``PARKA_KAFKA_SECURITY=sasl_ssl``)."""
    return connect()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need a server of :mod:`._servers` run last, so that its start overlaps the rest."""
    later = [item for item in items if _servers.needed(getattr(item, "fixturenames", ()))]
    if later:
        ids = {id(item) for item in later}
        items[:] = [item for item in items if id(item) not in ids] + later


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    _servers.start_in_background({n for i in session.items for n in _servers.needed(getattr(i, "fixturenames", ()))})


def pytest_sessionfinish() -> None:
    _servers.stop_all()
