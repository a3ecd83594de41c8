"""docker-compose.yml and the worker's Dockerfile, checked without a Docker engine.

The file is resolved by the Compose CLI when one is installed (``docker compose config``, which
also validates it against the Compose Specification), else by PyYAML plus the spec's variable
interpolation below; every check runs on either. The worker's command goes through
``parka ingest``'s own parser and settings, under the worker's environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from parka.consumer._cli import build_parser, settings_from_args

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^${}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Compose's interpolation: ``${VAR}``, ``$VAR``, ``${VAR:-default}`` (unset or empty),
    ``${VAR-default}`` (unset), ``${VAR:?error}``, defaults nesting other variables, ``$$``
    for a literal ``$``."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        current = env.get(name)
        if (op in (":-", ":?") and not current) or (op in ("-", "?") and current is None):
            if op.endswith("?"):
                raise ValueError(f"{name}: {arg or 'required'}")
            return arg
        return current or ""

    text = value.replace("$$", "\0")
    while True:  # innermost first, so a default may hold another variable
        new = _VAR.sub(one, text)
        if new == text:
            return new.replace("\0", "$")
        text = new


def _compose_cli() -> list[str] | None:
    """``docker compose`` (the plugin) or ``docker-compose``, when installed and working."""
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) is None:
            continue
        probe = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=30, check=False)
        if probe.returncode == 0:
            return cmd
    return None


COMPOSE_CLI = _compose_cli()


def resolve(env: Mapping[str, str]) -> dict[str, Any]:
    """The compose model with ``env`` as the only variables set: ``docker compose config`` when
    the CLI exists (failing the test on any error it reports), else YAML plus interpolation."""
    if COMPOSE_CLI is not None:
        base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_CONFIG")}
        done = subprocess.run(
            [*COMPOSE_CLI, "-f", str(COMPOSE_FILE), "config", "--format", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**base, **env},
        )
        assert done.returncode == 0, f"docker compose config failed:\n{done.stderr}"
        model: dict[str, Any] = json.loads(done.stdout)
        return model
    raw = yaml.safe_load(COMPOSE_FILE.read_text())  # SafeLoader applies the `<<` merge keys
    resolved: dict[str, Any] = interpolate(raw, env)
    return resolved


def env_of(service: Mapping[str, Any]) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):  # the `- KEY=value` form
        raw = dict(item.partition("=")[::2] for item in raw)
    return {k: "" if v is None else str(v) for k, v in raw.items()}


def args_of(service: Mapping[str, Any], key: str) -> list[str]:
    value = service.get(key) or []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return resolve({})


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = compose["services"]
    return out


def internal_bootstrap(kafka: Mapping[str, Any]) -> str:
    """host:port of the listener the broker names for inter-broker traffic, as it advertises it."""
    env = env_of(kafka)
    name = env["KAFKA_INTER_BROKER_LISTENER_NAME"]
    advertised = dict(entry.split("://", 1) for entry in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    return advertised[name]


def test_the_services_and_their_images(services: dict[str, Any]) -> None:
    assert set(services) == {"kafka", "kafka-topics", "schema-registry", "s3", "s3-bucket", "ingest"}
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["schema-registry"]["image"].startswith("apicurio/apicurio-registry:")
    assert services["s3"]["image"].startswith("andrewgaul/s3proxy:")
    for name in ("ingest", "s3-bucket"):  # the worker's image, built from this repo
        assert services[name]["image"] == "parka:local"
        build = services[name]["build"]
        context = build if isinstance(build, str) else build["context"]
        assert (COMPOSE_FILE.parent / context).resolve() == ROOT


def test_every_server_has_a_healthcheck_and_every_dependency_a_condition(services: dict[str, Any]) -> None:
    one_shots = {name for name, s in services.items() if str(s.get("restart", "")) == "no"}
    assert one_shots == {"kafka-topics", "s3-bucket"}
    for name in ("kafka", "schema-registry", "s3", "ingest"):
        check = services[name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert len(check["test"]) > 1 and not check.get("disable"), name
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on without conditions"
        for target, spec in depends.items():
            want = "service_completed_successfully" if target in one_shots else "service_healthy"
            assert spec["condition"] == want, f"{name} -> {target}"
            if want == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits on {target}, which has no healthcheck"
    assert set(services["ingest"]["depends_on"]) == {"kafka", "kafka-topics", "s3", "s3-bucket"}
    assert services["schema-registry"]["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_the_clients_reach_the_broker_where_it_listens(services: dict[str, Any]) -> None:
    kafka = services["kafka"]
    bootstrap = internal_bootstrap(kafka)
    host, port = bootstrap.rsplit(":", 1)
    assert host == "kafka"
    listeners = env_of(kafka)["KAFKA_LISTENERS"]
    assert f"{env_of(kafka)['KAFKA_INTER_BROKER_LISTENER_NAME']}://:{port}" in listeners.split(",")
    health = kafka["healthcheck"]["test"]
    assert any(a.endswith("kafka-broker-api-versions.sh") for a in health)
    assert flag(health, "--bootstrap-server") == f"localhost:{port}"
    topics = [*args_of(services["kafka-topics"], "entrypoint"), *args_of(services["kafka-topics"], "command")]
    assert topics[0].endswith("kafka-topics.sh")
    assert flag(topics, "--bootstrap-server") == bootstrap
    assert {"--create", "--if-not-exists"} <= set(topics)
    assert env_of(services["schema-registry"])["APICURIO_KAFKASQL_BOOTSTRAP_SERVERS"] == bootstrap
    assert env_of(services["schema-registry"])["APICURIO_STORAGE_KIND"] == "kafkasql"


def test_the_registry_healthcheck_asks_its_readiness(services: dict[str, Any]) -> None:
    health = services["schema-registry"]["healthcheck"]["test"]
    assert health[1] == "curl" and "-f" in health[2]
    assert urlparse(health[-1]).path == "/health/ready"


def test_the_store_healthcheck_and_endpoint_agree(services: dict[str, Any]) -> None:
    s3 = env_of(services["s3"])
    port = urlparse(s3["S3PROXY_ENDPOINT"]).port
    assert s3["JCLOUDS_PROVIDER"] == "filesystem"
    assert s3["S3PROXY_AUTHORIZATION"] != "none"
    health = services["s3"]["healthcheck"]["test"]
    assert f"/dev/tcp/127.0.0.1/{port} " in health[-1] and "GET /healthz" in health[-1]
    assert env_of(services["s3-bucket"])["S3_ENDPOINT"] == f"http://s3:{port}"


def _parse_worker(service: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The worker's command through ``parka ingest``'s parser and settings, with only the
    worker's environment set (the parser reads its defaults from PARKA_* variables)."""
    for name in list(os.environ):
        if name.startswith(("PARKA_", "AWS_")):
            monkeypatch.delenv(name)
    for name, value in env_of(service).items():
        monkeypatch.setenv(name, value)
    argv = args_of(service, "command")
    assert argv[0] == "ingest"  # the image's entrypoint is `parka`
    return settings_from_args(build_parser().parse_args(argv[1:]))


def test_the_worker_command_is_one_parka_ingest_accepts(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = services["ingest"]
    settings = _parse_worker(worker, monkeypatch)
    assert settings.topic == flag(args_of(services["kafka-topics"], "command"), "--topic") == "events"
    bucket = env_of(services["s3-bucket"])["PARKA_S3_BUCKET"]
    assert settings.table_uri == f"s3://{bucket}/events"
    assert settings.dlq_table_uri == f"s3://{bucket}/events_dead_letters"
    assert settings.kafka_conf["bootstrap.servers"] == internal_bootstrap(services["kafka"])
    # PARKA_APP_ID left empty: the table's default app id, chosen at start, and its group
    assert settings.app_id is None and "group.id" not in settings.kafka_conf
    options = settings.storage_options
    assert options["AWS_ENDPOINT_URL"] == env_of(services["s3-bucket"])["S3_ENDPOINT"]
    assert options["AWS_CONDITIONAL_PUT"] == "etag"  # concurrent commits safe on the store
    assert options["AWS_ALLOW_HTTP"] == "true"
    assert settings.allowed_latency_s == 10


def test_the_worker_healthcheck_asks_readiness_where_it_serves_metrics(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = services["ingest"]
    _parse_worker(worker, monkeypatch)  # the worker's environment, set
    args = build_parser().parse_args(args_of(worker, "command")[1:])
    check = worker["healthcheck"]["test"]
    assert check[:3] == ["CMD", "python", "-c"]
    compile(check[3], "healthcheck", "exec")
    url = re.search(r"'(http://[^']+)'", check[3])
    assert url is not None, check
    assert urlparse(url.group(1)).port == args.metrics_port == 9100
    assert urlparse(url.group(1)).path == "/readyz"


def test_the_worker_environment_names_only_flags_parka_ingest_lists(services: dict[str, Any]) -> None:
    documented = set(re.findall(r"PARKA_[A-Z_]+", build_parser().format_help()))
    given = {name for name in env_of(services["ingest"]) if name.startswith("PARKA_")}
    assert given, "the worker takes no PARKA_* setting"
    assert given <= documented, f"not flags of parka ingest: {sorted(given - documented)}"


def test_credentials_come_from_variables_and_stay_off_command_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "PARKA_S3_ACCESS_KEY": "team-key",
        "PARKA_S3_SECRET_KEY": "s3cr3t-from-env",
        "PARKA_S3_BUCKET": "bronze",
        "PARKA_TOPIC": "gps",
    }
    services = resolve(env)["services"]
    s3 = env_of(services["s3"])
    assert (s3["S3PROXY_IDENTITY"], s3["S3PROXY_CREDENTIAL"]) == ("team-key", "s3cr3t-from-env")
    for client in ("s3-bucket", "ingest"):
        client_env = env_of(services[client])
        assert (client_env["AWS_ACCESS_KEY_ID"], client_env["AWS_SECRET_ACCESS_KEY"]) == ("team-key", "s3cr3t-from-env")
    for name, service in services.items():
        argv = " ".join(args_of(service, "command") + args_of(service, "entrypoint"))
        assert "s3cr3t-from-env" not in argv, f"{name} has the secret on its command line"
    settings = _parse_worker(services["ingest"], monkeypatch)
    assert (settings.topic, settings.table_uri) == ("gps", "s3://bronze/gps")
    assert settings.dlq_table_uri == "s3://bronze/gps_dead_letters"
    assert flag(args_of(services["kafka-topics"], "command"), "--topic") == "gps"
    assert env_of(services["s3-bucket"])["PARKA_S3_BUCKET"] == "bronze"


def test_the_bucket_job_is_valid_python(services: dict[str, Any]) -> None:
    job = services["s3-bucket"]
    assert args_of(job, "entrypoint") == ["python", "-c"]
    (source,) = args_of(job, "command")
    compile(source, "s3-bucket", "exec")
    assert "allow_bucket_creation=True" in source


def test_the_image_holds_the_package_and_runs_parka() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = set(pyproject["tool"]["setuptools"]["package-dir"].values())
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = {
        src
        for line in dockerfile.splitlines()
        if line.startswith("COPY ")
        for src in line.split()[1:-1]
        if not src.startswith("--")
    }
    assert folders | {"pyproject.toml", pyproject["project"]["readme"]} <= copied
    allowed = {line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    assert copied <= allowed, f"copied but excluded from the build context: {sorted(copied - allowed)}"
    assert "*" in (ROOT / ".dockerignore").read_text().splitlines()  # an allow-list
    assert 'ENTRYPOINT ["parka"]' in dockerfile and "parka" in pyproject["project"]["scripts"]
    assert dockerfile.splitlines()[[ln.startswith("FROM") for ln in dockerfile.splitlines()].index(True)] == (
        "FROM python:3.11-slim"
    )


def test_interpolation_follows_the_spec() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d}/${EMPTY:-d}/${EMPTY-d}/${UNSET-d}/$SET/$${SET}", env) == "x/d//d/x/${SET}"
    assert interpolate("${UNSET:-a${SET}b}", env) == "axb"
    with pytest.raises(ValueError, match="UNSET: needed"):
        interpolate("${UNSET:?needed}", env)
