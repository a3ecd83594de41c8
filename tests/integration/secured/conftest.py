"""The SASL_SSL broker of the secured tests: ``scripts/kafka-local.sh`` with
``PARKA_KAFKA_SECURITY=sasl_ssl`` (SCRAM-SHA-512 and -256, a CA the script made), on a port of
its own (``PARKA_TEST_SECURED_KAFKA_PORT``, default 19680), started once per session and
stopped at the end. Its client settings, password included, come from the file the script
writes (``client-config``). A broker that cannot be started fails the run; it never skips.

The Spark test imports :func:`secured_broker` from here, so both directories share one broker.

A second broker costs ~25 s to start on a busy 2-core machine, so when the collected tests use
it, it is started in the background as soon as collection ends, and the tests of this directory
run last: the start overlaps the rest of the suite instead of adding to it. The fixture waits
for that start (and starts the broker itself when run without it); the broker is stopped when
the session ends, whatever happened.
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
from confluent_kafka.admin import AdminClient

from .._ingest_util import create_topic

HERE = Path(__file__).resolve().parent

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
        return create_topic(AdminClient(self.conf), f"sec-{uuid.uuid4().hex[:10]}", partitions)


def _read_properties(path: str) -> dict[str, str]:
    out = {}
    for line in Path(path).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def _env() -> dict[str, str]:
    return dict(os.environ, PARKA_KAFKA_SECURITY="sasl_ssl", PARKA_KAFKA_PORT=SECURED_PORT)


_background: subprocess.Popen[bytes] | None = None  # the start begun when collection ended
_background_log = Path(os.environ.get("TMPDIR", "/tmp")) / f"parka-secured-broker-{SECURED_PORT}-start.log"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """This directory's tests last, so that the background start has the suite to hide in."""
    mine = [item for item in items if HERE in Path(item.path).resolve().parents]
    if mine:
        ids = {id(item) for item in mine}
        items[:] = [item for item in items if id(item) not in ids] + mine


def pytest_collection_finish(session: pytest.Session) -> None:
    global _background
    if session.config.option.collectonly:
        return
    if _background is None and any("secured_broker" in getattr(i, "fixturenames", ()) for i in session.items):
        with open(_background_log, "wb") as log:  # the child keeps its own descriptor
            _background = subprocess.Popen([SCRIPT, "up"], env=_env(), stdout=log, stderr=subprocess.STDOUT)


def pytest_sessionfinish() -> None:
    if _background is not None:
        if _background.poll() is None:
            _background.wait(timeout=300)
        subprocess.run([SCRIPT, "down"], check=False, env=_env(), timeout=120)


@pytest.fixture(scope="session")
def secured_broker() -> Iterator[SecuredBroker]:
    env = _env()
    started = time.monotonic()
    if _background is not None and _background.wait(timeout=300) != 0:
        raise RuntimeError(f"the secured broker did not start:\n{_background_log.read_text()[-4000:]}")
    subprocess.run([SCRIPT, "up"], check=True, env=env, timeout=300)  # returns at once when it is up
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
