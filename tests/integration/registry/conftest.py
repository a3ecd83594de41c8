"""A real schema registry (Apicurio, Confluent-compatible API) for the tests in this folder,
started once per session by scripts/schema-registry.sh; a start that fails fails the tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
REGISTRY_PORT = os.environ.get("PARKA_TEST_REGISTRY_PORT", "19081")


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    address = os.environ.get("PARKA_SCHEMA_REGISTRY_URL")
    if address:
        yield address
        return
    env = dict(os.environ, PARKA_REGISTRY_PORT=REGISTRY_PORT)
    script = str(REPO / "scripts" / "schema-registry.sh")
    subprocess.run([script, "up"], check=True, env=env)
    try:
        yield subprocess.run([script, "url"], check=True, env=env, capture_output=True, text=True).stdout.strip()
    finally:
        subprocess.run([script, "down"], check=False, env=env)
