"""Scrape a Prometheus endpoint over HTTP and read its samples (prometheus_client's own parser)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

BOUND = re.compile(r"serving metrics on http://[^:]+:(\d+)/metrics")
BOUND_HOST = re.compile(r"serving metrics on http://([^:]+):\d+/metrics")

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def bound_port(log: Path) -> int | None:
    """The port a daemon's ``serving metrics on ...`` log line names, once it is there."""
    found = BOUND.search(log.read_text(errors="replace")) if log.exists() else None
    return int(found.group(1)) if found else None


def bound_host(log: Path) -> str | None:
    """The address that line names (``--metrics-bind-address``)."""
    found = BOUND_HOST.search(log.read_text(errors="replace")) if log.exists() else None
    return found.group(1) if found else None


def health(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """A health endpoint's status code and JSON body (503 is an answer, not an error)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as failed:
        return failed.code, json.loads(failed.read())


def scrape(port: int) -> tuple[str, Samples]:
    """The exposition text and its samples, keyed by (name, labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        body: str = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return body, samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def lag(samples: Samples, topic: str, *, name: str = "parka_consumer_lag") -> dict[int, float]:
    """``parka_consumer_lag`` (or another per-partition gauge, ``name``) per partition of ``topic``."""
    out = {}
    for (found, labels), v in samples.items():
        d = dict(labels)
        if found == name and d.get("topic") == topic:
            out[int(d["partition"])] = v
    return out
