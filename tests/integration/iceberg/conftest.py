"""The ``lake`` fixture: each Iceberg test runs on the embedded SQL catalog and on the REST catalog server."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._lake import Lake


@pytest.fixture(params=["sql", "rest"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Lake:
    if request.param == "rest":
        return Lake(tmp_path / "warehouse", request.getfixturevalue("iceberg_rest_url"))
    return Lake(tmp_path / "warehouse")
