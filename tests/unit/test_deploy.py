"""deploy/: the systemd unit and the Kubernetes Deployment, checked by the tools that read them
(``systemd-analyze verify``; kubernetes-validate's schemas, strict, offline) and against
``parka ingest``'s own settings: the variables they set are its flags', and the probes ask the
port the metrics are served on."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from parka.consumer._cli import build_parser, settings_from_args

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "parka-ingest@.service"
DEPLOYMENT = ROOT / "deploy" / "kubernetes" / "deployment.yaml"
KUBERNETES_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())
"""The oldest Kubernetes the Deployment is checked against, and the newest the validator knows."""


def ingest_variables() -> set[str]:
    return set(re.findall(r"PARKA_[A-Z_]+", build_parser().format_help()))


def unit() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, delimiters=("=",), comment_prefixes=("#",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def test_systemd_analyze_verifies_the_unit_without_a_warning(tmp_path: Path) -> None:
    """Its ExecStart is pointed at this environment's ``parka`` (verify checks the program
    exists); every other line is the file's. An unknown key or a bad value is only a warning to
    systemd, so the test wants none at all. Without the validator the test fails: it never skips."""
    assert shutil.which("systemd-analyze"), "systemd-analyze not found: install Debian's systemd package"
    parka = Path(sys.executable).with_name("parka")
    assert parka.exists(), parka
    text = UNIT.read_text()
    assert "ExecStart=/opt/parka/venv/bin/parka " in text
    instance = tmp_path / "parka-ingest@events.service"
    instance.write_text(text.replace("/opt/parka/venv/bin/parka ", f"{parka} "))
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(instance)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
    )
    assert (done.returncode, done.stderr.strip()) == (0, ""), done.stderr


def test_the_unit_stops_gracefully_restarts_on_failure_and_keeps_credentials_in_its_env_file() -> None:
    service = unit()["Service"]
    assert service["ExecStart"].split()[1:] == ["ingest"]  # every setting from the env file
    assert service["EnvironmentFile"] == "/etc/parka/%i.env"
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= 60
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == "2"  # a configuration error: a restart cannot fix it
    # the example env file in its comment names only variables parka ingest reads (plus AWS_*)
    example = {m for m in re.findall(r"^#   (PARKA_[A-Z_]+)=", UNIT.read_text(), re.M)}
    assert {"PARKA_TOPIC", "PARKA_TABLE_URI", "PARKA_METRICS_PORT"} <= example <= ingest_variables()


def deployment() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(DEPLOYMENT.read_text())
    return data


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_deployment_passes_the_kubernetes_schema_strictly(version: str) -> None:
    kubernetes_validate.validate(deployment(), version, strict=True)


def test_the_validator_refuses_a_field_kubernetes_does_not_have() -> None:
    broken = deployment()
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


def test_the_deployment_probes_the_health_endpoints_where_parka_ingest_serves_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (container,) = deployment()["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert set(env) <= ingest_variables()
    assert [source["secretRef"]["name"] for source in container["envFrom"]]  # credentials from a Secret
    for name in list(os.environ):
        if name.startswith("PARKA_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(container["args"][1:])
    settings = settings_from_args(args)
    assert (settings.topic, settings.table_uri) == ("events", "s3://lake/events")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == args.metrics_port == 9100
    assert args.metrics_bind_address == "0.0.0.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["args"][0] == "ingest"
    assert deployment()["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 60
