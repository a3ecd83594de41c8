"""A real schema registry (Apicurio, Confluent-compatible API) for the tests in this folder:
:mod:`.._servers` starts it (``scripts/schema-registry.sh``) once per session, or
``PARKA_SCHEMA_REGISTRY_URL`` names one; a start that fails fails the tests."""

from __future__ import annotations

import os

import pytest

from .._servers import up


@pytest.fixture(scope="session")
def registry_url() -> str:
    address = os.environ.get("PARKA_SCHEMA_REGISTRY_URL")
    if address:
        return address
    return up("registry_url").run("url", check=True, capture_output=True).stdout.strip()
