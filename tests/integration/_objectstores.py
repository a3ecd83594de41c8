"""Real object stores for the tests (``objectstore/``, and Spark's s3a test): s3proxy (Maven
Central, filesystem backend) and Azurite (npm), run by :mod:`._servers`. The fixtures are in
``conftest.py``, so every directory shares one server of each."""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from ._servers import REPO, up


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


def serve(name: str, root: str) -> ObjectStoreServer:
    """The store ``name`` (``s3proxy`` or ``azurite``), running, with table URIs under ``root``."""
    server = up(name)
    out = server.run("env", capture_output=True, check=True).stdout
    options = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return ObjectStoreServer(root, options, REPO / "scripts" / server.script, {**os.environ, **server.env})
