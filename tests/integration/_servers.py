"""The local servers the integration tests need besides the main broker, in one place: s3proxy
(Maven Central), Azurite (npm), the Apicurio schema registry (built from Maven Central) and the
SASL_SSL broker, each run by the repo's own script in ``scripts/``.

A first start on a fresh machine downloads or builds the server (Azurite ~80 s, the registry
~60 s on 2 cores), so each server some collected test needs is started in the background as soon
as collection ends, and the tests that need one run last (stable order otherwise): the starts
overlap the rest of the suite instead of adding to it. A fixture waits for its server's start
(:func:`up`), and every server started is stopped when the session ends. A server that cannot
be had fails its tests: they never skip for want of one.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
S3PROXY_PORT = os.environ.get("PARKA_TEST_S3PROXY_PORT", "19180")
# Azurite's own default port, which hadoop-azure's emulator mode (wasb://, the Spark test) assumes
AZURITE_PORT = os.environ.get("PARKA_TEST_AZURITE_PORT", "10000")
REGISTRY_PORT = os.environ.get("PARKA_TEST_REGISTRY_PORT", "19081")
SECURED_PORT = os.environ.get("PARKA_TEST_SECURED_KAFKA_PORT", "19680")
START_TIMEOUT_S = 900  # a cold start: downloads and a Maven build, on a busy 2-core machine


@dataclass(frozen=True)
class Server:
    """``script`` in ``scripts/`` runs it with ``env`` added to the environment; the tests that
    use ``fixture`` need it, unless ``external`` names a variable that points them elsewhere."""

    fixture: str
    script: str
    env: dict[str, str] = field(default_factory=dict)
    external: str | None = None

    def run(self, command: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            [str(REPO / "scripts" / self.script), command], env={**os.environ, **self.env}, text=True, **kwargs
        )

    @property
    def wanted(self) -> bool:
        return self.external is None or not os.environ.get(self.external)


SERVERS = {
    s.fixture: s
    for s in (
        Server("s3proxy", "s3proxy.sh", {"PARKA_S3PROXY_PORT": S3PROXY_PORT, "PARKA_S3PROXY_BUCKET": "lake"}),
        Server("azurite", "azurite.sh", {"PARKA_AZURITE_PORT": AZURITE_PORT, "PARKA_AZURITE_CONTAINER": "lake"}),
        Server(
            "registry_url", "schema-registry.sh", {"PARKA_REGISTRY_PORT": REGISTRY_PORT}, "PARKA_SCHEMA_REGISTRY_URL"
        ),
        Server(
            "secured_broker", "kafka-local.sh", {"PARKA_KAFKA_SECURITY": "sasl_ssl", "PARKA_KAFKA_PORT": SECURED_PORT}
        ),
    )
}

_starting: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
_started: set[str] = set()


def needed(fixturenames: object) -> list[str]:
    """The servers a test with these fixtures needs."""
    names = set(fixturenames) if isinstance(fixturenames, (list, tuple, set)) else set()
    return [name for name, server in SERVERS.items() if name in names and server.wanted]


def start_in_background(names: set[str]) -> None:
    """Begin ``up`` of each server named, each logging to a file of its own."""
    for name in sorted(names - set(_starting)):
        server = SERVERS[name]
        log_path = Path(tempfile.gettempdir()) / f"parka-test-{name}-{os.getpid()}.log"
        with open(log_path, "wb") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                [str(REPO / "scripts" / server.script), "up"],
                env={**os.environ, **server.env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        _starting[name] = (proc, log_path)
        _started.add(name)


def up(name: str) -> Server:
    """The server ``name``, running: waits for its background start (or starts it now)."""
    server = SERVERS[name]
    if name in _starting:
        proc, log_path = _starting[name]
        if proc.wait(timeout=START_TIMEOUT_S) != 0:
            raise RuntimeError(f"{server.script} up failed:\n{log_path.read_text()[-4000:]}")
    _started.add(name)
    server.run("up", check=True, timeout=START_TIMEOUT_S)  # at once when it is up
    return server


def stop_all() -> None:
    """Stop every server this session started (after any start still running)."""
    for name in sorted(_started):
        if name in _starting:
            proc, log_path = _starting[name]
            if proc.wait(timeout=START_TIMEOUT_S) == 0:
                log_path.unlink(missing_ok=True)  # a failed start's log stays, for the reader
        SERVERS[name].run("down", check=False, timeout=120, capture_output=True)
