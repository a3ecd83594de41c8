"""One place decides where the integration tests' Kafka broker comes from.

1. ``PARKA_BOOTSTRAP`` set: that broker.
2. Else, a Docker engine answers: a testcontainers Kafka.
3. Else: the repo's own broker, ``scripts/kafka-local.sh`` (Maven Central jars, Java 17), on a
   port of its own so a developer's broker on 9092 is left alone: one for the run, however many
   pytest-xdist workers share it, started with the other servers (:mod:`._servers`) and
   stopped after the last worker is done.

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
SPARK_TESTS = Path(__file__).resolve().parent / "spark"


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
    _servers.up("bootstrap")
    address = f"127.0.0.1:{_servers.BROKER_PORT}"
    _wait_for_metadata(address)
    yield address


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
def iceberg_rest_url() -> str:
    """Iceberg's own REST catalog server (``scripts/iceberg-rest.sh``: a SQLite JdbcCatalog whose
    warehouse is a local folder, so a client here reads and writes its data files), once per run."""
    return _servers.up("iceberg_rest_url").run("url", check=True, capture_output=True).stdout.strip()


@pytest.fixture(scope="session")
def registry_url() -> str:
    """A real schema registry (Apicurio, Confluent-compatible API): :mod:`._servers` starts it
    (``scripts/schema-registry.sh``) once per session, or ``PARKA_SCHEMA_REGISTRY_URL`` names one;
    a start that fails fails the tests."""
    address = os.environ.get("PARKA_SCHEMA_REGISTRY_URL")
    if address:
        return address
    return _servers.up("registry_url").run("url", check=True, capture_output=True).stdout.strip()


@pytest.fixture(scope="session")
def secured_broker() -> SecuredBroker:
    """The SASL_SSL broker (``scripts/kafka-local.sh``, ``PARKA_KAFKA_SECURITY=sasl_ssl``)."""
    return connect()


def _spark_group(item: pytest.Item) -> bool:
    return item.path.is_relative_to(SPARK_TESTS)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``long`` tests first, longest first (``@pytest.mark.long(SECONDS)``, as measured: the
    workers should not wait at the end for one of them), then Spark's session tests (one worker
    runs them all, see ``tests/conftest.py``). Then tests without a server, then those on the
    broker alone, then those that need another server of :mod:`._servers` (stable otherwise), so
    that the starts overlap the tests before. The ``tail`` tests after all of them."""

    def tier(item: pytest.Item) -> int:
        servers = set(_servers.needed(getattr(item, "fixturenames", ())))
        return 0 if not servers else 1 if servers == {"bootstrap"} else 2

    def length(item: pytest.Item) -> float:
        long = item.get_closest_marker("long")
        return -float(long.args[0]) if long is not None else 0.0

    items.sort(
        key=lambda item: (item.get_closest_marker("tail") is not None, length(item), not _spark_group(item), tier(item))
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    _servers.start_in_background({n for i in session.items for n in _servers.needed(getattr(i, "fixturenames", ()))})
