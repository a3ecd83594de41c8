"""Real object stores for the tests (``objectstore/``, and Spark's s3a test), each started once
per run by the repo's own script and stopped at the end: s3proxy (Maven Central, filesystem
backend) and Azurite (npm). The fixtures are in ``conftest.py``, so every directory shares one
server of each. A server that cannot be had fails the run: these tests never skip for want of
one."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
S3PROXY_PORT = os.environ.get("PARKA_TEST_S3PROXY_PORT", "19180")
AZURITE_PORT = os.environ.get("PARKA_TEST_AZURITE_PORT", "19181")


@dataclass(frozen=True)
class ObjectStoreServer:
    """A running store: table URIs under ``root`` take ``storage_options``; ``script`` and
    ``env`` run its ``scripts/`` helper (``data-dir``: the server's own files)."""

    root: str
    storage_options: dict[str, str]
    script: Path
    env: dict[str, str]

    def table_uri(self, name: str) -> str:
        return f"{self.root}/{name}-{uuid.uuid4().hex[:8]}"

    def data_dir(self) -> Path:
        out = subprocess.run([str(self.script), "data-dir"], env=self.env, capture_output=True, text=True, check=True)
        return Path(out.stdout.strip())


def serve(script_name: str, env: dict[str, str], root: str) -> Iterator[ObjectStoreServer]:
    script = REPO / "scripts" / script_name
    subprocess.run([str(script), "up"], check=True, env=env, timeout=900)
    try:
        out = subprocess.run([str(script), "env"], env=env, capture_output=True, text=True, check=True).stdout
        options = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        yield ObjectStoreServer(root, options, script, env)
    finally:
        subprocess.run([str(script), "down"], check=False, env=env)
