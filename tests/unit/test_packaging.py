"""pyproject.toml's metadata for pyspark (``[[tool.uv.dependency-metadata]]``, which spares
``make setup`` a second download of pyspark's 434 MB sdist) is the metadata of the pyspark
installed, at the version the spark extra pins: uv trusts that table without checking it."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_static_metadata_of_pyspark_is_the_installed_pyspark_s_at_the_pinned_version() -> None:
    project = tomllib.loads(PYPROJECT.read_text())
    [entry] = [e for e in project["tool"]["uv"]["dependency-metadata"] if e["name"] == "pyspark"]
    installed = importlib.metadata.metadata("pyspark")
    assert entry["version"] == installed["Version"]
    assert f"pyspark=={entry['version']}" in project["project"]["optional-dependencies"]["spark"]
    assert entry["requires-python"] == installed["Requires-Python"]
    given = sorted(str(Requirement(r)) for r in entry["requires-dist"])
    assert given == sorted(str(Requirement(r)) for r in importlib.metadata.requires("pyspark") or [])
