"""The local servers the integration tests need, in one place: the Kafka broker, s3proxy (Maven
Central), Azurite (npm), the Apicurio schema registry (built from Maven Central), the SASL_SSL
broker and Iceberg's REST catalog server (Maven Central), each run by the repo's own script in
``scripts/``.

A first start on a fresh machine downloads or builds the server (Azurite ~80 s, the registry
~60 s, the REST catalog ~40 s on 2 cores), so each server some collected test needs is started in
the background as soon as collection ends (the broker first, alone: every integration test needs
it; the others once it is up), and the tests that need one run after the others (stable order
otherwise): the starts overlap the rest of the suite instead of adding to it. A
fixture waits for its server's start (:func:`up`). A server that cannot be had fails its tests:
they never skip.

One run, several processes (pytest-xdist): every worker collects the same tests and may need the
same server. The run's folder (``PARKA_TEST_RUN_DIR``, made by the process that configures the
run, inherited by the workers) holds a lock per server, so one ``up`` runs at a time and the
later ones find it up, and a mark per server started. The configuring process stops the marked
servers at the very end (:func:`stop_all`, from ``pytest_unconfigure``), after every worker has
exited, so no client of the run is left to complain that its broker went away.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN_DIR_VAR = "PARKA_TEST_RUN_DIR"

# The JVM options of the JVMs the tests start (brokers, Spark drivers and daemons): a JVM that lives
# for one run on 2 shared cores spends more on C2's compiler threads and G1's than it gets back.
# The client JIT alone and the serial collector took a Spark kill test's CPU from 132 s to 81 s,
# and a broker's from 7.6 + 17.7 CPU-s (start + test_ingest.py, test_shim_batches.py and
# test_placement.py) to 3.5 + 11.1. And the classes of the application's jars (Spark's, Delta's,
# Kafka's, from Maven Central) are loaded unverified, as the JDK's own are: the bytecode verifier
# took some 2 of a Spark driver's 12 CPU-s and 0.35 of a broker start's 2.1 (three and two runs
# of each, side by side).
SHORT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
# every broker of the run (scripts/kafka-local.sh: the session's, the secured one, those the outage
# tests start and kill) inherits it from the environment
os.environ.setdefault("PARKA_KAFKA_JVM_OPTS", SHORT_JVM)
BROKER_PORT = os.environ.get("PARKA_TEST_KAFKA_PORT", "19092")
S3PROXY_PORT = os.environ.get("PARKA_TEST_S3PROXY_PORT", "19180")
# Azurite's own default port, which hadoop-azure's emulator mode (wasb://, the Spark test) assumes
AZURITE_PORT = os.environ.get("PARKA_TEST_AZURITE_PORT", "10000")
REGISTRY_PORT = os.environ.get("PARKA_TEST_REGISTRY_PORT", "19081")
SECURED_PORT = os.environ.get("PARKA_TEST_SECURED_KAFKA_PORT", "19680")
# not 19181: scripts/azurite.sh's default
ICEBERG_REST_PORT = os.environ.get("PARKA_TEST_ICEBERG_REST_PORT", "19182")
FRESH = {"PARKA_KAFKA_FRESH": "1"}
START_TIMEOUT_S = 900  # a cold start: downloads and a Maven build, on a busy 2-core machine


@dataclass(frozen=True)
class Server:
    """``script`` in ``scripts/`` runs it with ``env`` added to the environment; the tests that
    use ``fixture`` need it, unless ``external`` names a variable that points them elsewhere."""

    fixture: str
    script: str
    env: dict[str, str] = field(default_factory=dict)
    external: str | None = None

    def command(self, command: str) -> list[str]:
        return [str(REPO / "scripts" / self.script), command]

    def run(self, command: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            self.command(command), env={**os.environ, **self.env}, text=True, **kwargs
        )

    def locked(self, name: str, command: str) -> list[str]:
        """``command`` under the run's lock for this server: one start at a time, across workers."""
        return ["flock", "--close", str(run_dir() / f"{name}.lock"), *self.command(command)]

    @property
    def wanted(self) -> bool:
        return self.external is None or not os.environ.get(self.external)


SERVERS = {
    s.fixture: s
    for s in (
        # the run's brokers start empty (PARKA_KAFKA_FRESH): not with every topic of earlier runs
        Server("bootstrap", "kafka-local.sh", {"PARKA_KAFKA_PORT": BROKER_PORT, **FRESH}, "PARKA_BOOTSTRAP"),
        Server("s3proxy", "s3proxy.sh", {"PARKA_S3PROXY_PORT": S3PROXY_PORT, "PARKA_S3PROXY_BUCKET": "lake"}),
        Server("azurite", "azurite.sh", {"PARKA_AZURITE_PORT": AZURITE_PORT, "PARKA_AZURITE_CONTAINER": "lake"}),
        Server(
            "registry_url", "schema-registry.sh", {"PARKA_REGISTRY_PORT": REGISTRY_PORT}, "PARKA_SCHEMA_REGISTRY_URL"
        ),
        Server(
            "secured_broker",
            "kafka-local.sh",
            {"PARKA_KAFKA_SECURITY": "sasl_ssl", "PARKA_KAFKA_PORT": SECURED_PORT, **FRESH},
        ),
        Server("iceberg_rest_url", "iceberg-rest.sh", {"PARKA_ICEBERG_REST_PORT": ICEBERG_REST_PORT}),
    )
}

_starting: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}


def run_dir() -> Path:
    """This run's folder, shared by its processes (see the module's docstring)."""
    path = os.environ.get(RUN_DIR_VAR)
    if not path:
        raise RuntimeError(f"{RUN_DIR_VAR} is not set: tests/conftest.py's pytest_configure makes it")
    return Path(path)


def make_run_dir() -> bool:
    """Make the run's folder unless a parent process did; True when this process owns it."""
    if os.environ.get(RUN_DIR_VAR):
        return False
    os.environ[RUN_DIR_VAR] = tempfile.mkdtemp(prefix="parka-test-run-")
    return True


def needed(fixturenames: object) -> list[str]:
    """The servers a test with these fixtures needs."""
    names = set(fixturenames) if isinstance(fixturenames, (list, tuple, set)) else set()
    return [name for name, server in SERVERS.items() if name in names and server.wanted]


def _mark(name: str) -> None:
    """Note that the run starts ``name``, unless it was running before the run (a developer's own
    server, which the run leaves running) or a mark exists already."""
    mark = run_dir() / f"{name}.started"
    if mark.exists() or (run_dir() / f"{name}.before").exists():
        return
    if SERVERS[name].run("status", capture_output=True, timeout=60, check=False).returncode == 0:
        (run_dir() / f"{name}.before").touch()
        return
    mark.touch()


# Every integration test needs the broker: it starts alone, the other servers once it is up. All
# at once, six server starts and the Spark session's shared 2 cores, and the broker (with its
# storage format, two JVMs more) was the last to answer while two workers waited for it.
FIRST = "bootstrap"


def start_in_background(names: set[str]) -> None:
    """Begin ``up`` of each server named, each logging to a file of its own: the broker now, the
    others on a thread once the broker's start has ended (a test that asks for one earlier
    starts it itself, :func:`up`)."""
    names = names - set(_starting)
    if FIRST in names:
        _launch(FIRST)
    later = sorted(names - {FIRST})
    if not later:
        return

    def after_the_broker() -> None:
        if FIRST in _starting:
            _starting[FIRST][0].wait()
        for name in later:
            if name not in _starting:
                _launch(name)

    threading.Thread(target=after_the_broker, name="server-starts", daemon=True).start()


def _launch(name: str) -> None:
    server = SERVERS[name]
    log_path = run_dir() / f"{name}-{os.getpid()}.log"
    _mark(name)
    with open(log_path, "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            server.locked(name, "up"), env={**os.environ, **server.env}, stdout=log, stderr=subprocess.STDOUT
        )
    _starting[name] = (proc, log_path)
    timeline_event({"server": name, "launched": time.time()})


def timeline_event(event: dict[str, object]) -> None:
    """With ``PARKA_TEST_TIMELINE`` set: one JSON line of this process's (a test's, from
    ``tests/conftest.py``; a server start's, from here), with its xdist worker."""
    if path := os.environ.get("PARKA_TEST_TIMELINE"):
        with open(path, "a") as out:
            out.write(json.dumps({**event, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}) + "\n")


def up(name: str) -> Server:
    """The server ``name``, running: waits for its background start (or starts it now)."""
    server = SERVERS[name]
    background = ""
    if name in _starting:
        proc, log_path = _starting[name]
        asked = time.time()
        code = proc.wait(timeout=START_TIMEOUT_S)
        timeline_event({"server": name, "asked": asked, "ready": log_path.stat().st_mtime, "code": code})
        if code != 0:
            # The start at collection, when every server and Spark start at once on two cores, can
            # outlast the script's wait for the port. Its JVM may still come up: `up` below finds
            # it running and waits again, or starts it again; only a second failure is an error.
            background = f"the start at collection:\n{log_path.read_text()[-2000:]}\nthe start again:\n"
            del _starting[name]
    _mark(name)
    out = subprocess.run(  # at once when it is up
        server.locked(name, "up"), env={**os.environ, **server.env}, capture_output=True, text=True,
        timeout=START_TIMEOUT_S, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"{server.script} up failed:\n{background}{(out.stdout + out.stderr)[-4000:]}")
    return server


def reap_starts() -> None:
    """At a process's end: wait for the server starts it launched in the background that no test
    of its own waited for (another worker's tests used the server), so each child's exit status
    is read (Python warns of a child never waited for when its ``Popen`` goes)."""
    for proc, _ in _starting.values():
        proc.wait(timeout=START_TIMEOUT_S)


def stop_all() -> None:
    """Stop every server the run started, quietly, and remove the run's folder (its owner only)."""
    folder = run_dir()
    for mark in sorted(folder.glob("*.started")):
        name = mark.name.removesuffix(".started")
        server = SERVERS[name]  # under the lock: after a start still running, if any
        subprocess.run(server.locked(name, "down"), env={**os.environ, **server.env}, capture_output=True, timeout=300)
    shutil.rmtree(folder, ignore_errors=True)
