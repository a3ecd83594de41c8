"""scripts/import_contracts.py's contract types, on an import graph built in memory (grimp's own
``ImportGraph``): what ``make lint`` relies on to keep the layers of ARCHITECTURE.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import grimp

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
PACKAGES = ["parka.consumer", "parka.lake", "parka.ops"]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_import_contracts", SCRIPTS / "import_contracts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


contracts = _load()


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for name in ("parka", "parka.errors", "parka._validate", "parka.crash", *PACKAGES):
        graph.add_module(name)
    for name in ("parka.consumer._cli", "parka.lake._plan", "parka.lake._files", "parka.ops.health"):
        graph.add_module(name)
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported, line_number=3, line_contents=f"import {imported}")
    return graph


def _check(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    contract = contracts.CorePrivateContract(
        name="no subpackage imports the core's underscored modules",
        session_options={},
        contract_options={"core": "parka", "packages": PACKAGES},
    )
    check = contract.check(graph, verbose=False)
    links = [(link["importer"], link["imported"]) for link in check.metadata["links"]]
    assert check.kept == (not links)
    return links


def test_a_subpackage_importing_a_private_core_module_breaks_the_contract() -> None:
    graph = _graph(
        ("parka.ops.health", "parka.errors"),
        ("parka.lake._files", "parka.crash"),
        ("parka.consumer._cli", "parka._validate"),
        ("parka.ops.health", "parka._validate"),
    )
    assert _check(graph) == [("parka.consumer._cli", "parka._validate"), ("parka.ops.health", "parka._validate")]


def test_the_core_its_own_private_modules_and_a_package_its_own_are_allowed() -> None:
    graph = _graph(
        ("parka.errors", "parka._validate"),  # the core's own
        ("parka.lake._plan", "parka.lake._files"),  # a package's own underscored module
        ("parka.consumer._cli", "parka.ops.health"),  # public modules
        ("parka.ops.health", "parka.errors"),
    )
    assert _check(graph) == []
