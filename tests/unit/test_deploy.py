"""deploy/: the systemd unit and the Kubernetes Deployment, checked by the tools that read them
(``systemd-analyze verify``; kubernetes-validate's schemas, strict, offline) and against
``parka ingest``'s own settings: the variables they set are its flags', and the probes ask the
port the metrics are served on. The Grafana dashboard's queries name only samples that
``parka ingest``'s metrics serve, with the labels they carry."""

from __future__ import annotations

import configparser
import json
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
from parka.consumer._ingest import IngestStats
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from parka.metrics import IngestMetrics

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "parka-ingest@.service"
DEPLOYMENT = ROOT / "deploy" / "kubernetes" / "deployment.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "parka-ingest.json"
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


def served_samples() -> dict[str, set[str]]:
    """Each sample name ``parka ingest``'s /metrics serves (counters' ``_total``, histograms'
    ``_bucket``, ``_sum`` and ``_count``), with its label names: the daemon's own metrics, every
    kind of them given a value."""
    registry = CollectorRegistry()
    metrics = IngestMetrics(registry, topic="gps")
    metrics.watch(lambda: vars(IngestStats()))
    metrics.observe_commit(0.1)
    metrics.observe_checkpoint(0.2)
    metrics.set_lag({0: 3})
    metrics.hold([0])
    served: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            served.setdefault(sample.name, set()).update(sample.labels)
    return served


def dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
    queries += [v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return queries


def test_the_dashboards_queries_name_samples_parka_ingest_serves_with_their_labels() -> None:
    served = served_samples()
    queries = dashboard_queries()
    assert len(queries) >= 10
    named = set()
    for query in queries:
        for name in re.findall(r"\bparka_[a-z_]+", query):
            named.add(name)
            assert name in served, f"{name} (in {query}) is not served; served: {sorted(served)}"
            labels = set(re.findall(r"\b(\w+)\s*=~?", query.split(name, 1)[1].split("}", 1)[0]))
            assert labels <= served[name], f"{query}: labels {labels - served[name]} not on {name}"
        assert "topic" in query  # every panel per topic
    # what the dashboard must show: lag, freshness, commit latency, files, compaction, segment size
    for name in (
        "parka_consumer_lag",
        "parka_table_staleness_seconds",
        "parka_commit_latency_seconds_bucket",
        "parka_files_total",
        "parka_compactions_total",
        "parka_segments_total",
    ):
        assert name in named


def test_the_dashboards_panels_are_laid_out_once_each_on_the_prometheus_variable() -> None:
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in board["panels"]]
    assert len(cells) == len(set(cells))
    sources = {json.dumps(t["datasource"]) for p in board["panels"] for t in p["targets"]}
    assert sources == {json.dumps({"type": "prometheus", "uid": "${datasource}"})}
