"""docs/configuration.md against what it describes, so it cannot drift: the flag tables against the
commands' Setting declarations (scripts/config_reference.py), each server script's table against
the ``PARKA_*`` variables the script reads and their defaults, and the test suite's ports against
tests/integration."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "configuration.md"
_VARIABLE = re.compile(r"\bPARKA_[A-Z0-9_]+")
# ${PARKA_X:-default} with a literal default (none computed from another variable)
_SHELL_DEFAULT = re.compile(r"\$\{(PARKA_[A-Z0-9_]+):-([^}$]+)\}")
_PYTHON_DEFAULT = re.compile(r"""os\.environ\.get\(\s*"(PARKA_[A-Z0-9_]+)"(?:,\s*"([^"]*)")?\)""")


def _load_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_docs_config_reference", REPO / "scripts" / "config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _section(heading: str) -> str:
    """The page's text under ``heading`` (a ``#``-line's text), up to the next heading of any level."""
    text = PAGE.read_text(encoding="utf-8")
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#|\Z)", text, re.MULTILINE | re.DOTALL)
    assert match is not None, f"docs/configuration.md has no section {heading!r}"
    return match.group(1)


def _rows(section: str) -> dict[str, list[str]]:
    """A section's table rows by their first cell's variable: the other cells."""
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = _VARIABLE.search(cells[0]) if line.startswith("|") else None
        if name is not None:
            rows[name.group()] = cells[1:]
    return rows


def _server_scripts() -> dict[Path, str]:
    """Every scripts/*.sh that reads a PARKA_* variable, with its text."""
    scripts = {p: p.read_text(encoding="utf-8") for p in sorted((REPO / "scripts").glob("*.sh"))}
    return {p: text for p, text in scripts.items() if _VARIABLE.search(text)}


def test_the_flag_tables_are_the_declarations() -> None:
    reference = _load_reference()
    page = PAGE.read_text(encoding="utf-8")
    from parka.cli import COMMANDS

    for command in COMMANDS:  # a new command gets a table
        assert f"<!-- flags: {command} -->" in page, f"docs/configuration.md has no flag table for parka {command}"
    assert reference.render(page) == page, "stale flag tables: run python scripts/config_reference.py"


def test_the_rendered_table_has_each_flag_its_variable_and_default() -> None:
    from parka.consumer._cli import build_parser

    table = _load_reference().flag_table("ingest")
    for s in build_parser().settings.values():
        (row,) = [line for line in table.splitlines() if line.startswith(f"| `{s.flags[0] if s.flags else s.flag}`")]
        assert all(var in row for var in s.env_vars), row
    assert "| `-l`, `--allowed-latency` | `PARKA_ALLOWED_LATENCY` | 30 s |" in table
    assert "| `--end-at-latest` | `PARKA_END_AT_LATEST=1` | off |" in table
    assert "| `TOPIC` | `PARKA_TOPIC` | required |" in table
    assert "parka-&lt;topic&gt;" in table  # no raw <topic> for Markdown to take as HTML


@pytest.mark.parametrize("script", sorted(p.name for p in _server_scripts()))
def test_each_scripts_variables_are_on_the_page_with_their_defaults(script: str) -> None:
    text = (REPO / "scripts" / script).read_text(encoding="utf-8")
    rows = _rows(_section(f"scripts/{script}"))
    read = set(_VARIABLE.findall(text))
    assert set(rows) == read, f"on the page, not read: {set(rows) - read}; read, not on the page: {read - set(rows)}"
    for name, default in _SHELL_DEFAULT.findall(text):
        assert default.strip() in rows[name][0], (
            f"{script}: {name} defaults to {default!r}, the page says {rows[name][0]!r}"
        )


def test_the_ports_table_names_each_servers_port_and_its_default() -> None:
    section = _section("Local servers")
    # the servers: the scripts with a port to set (not the helpers, sourced or run by the others)
    scripts = {p: text for p, text in _server_scripts().items() if re.search(r"PARKA_[A-Z0-9_]*PORT\b", text)}
    assert {p.name for p in scripts} >= {"kafka-local.sh", "s3proxy.sh", "azurite.sh", "iceberg-rest.sh"}
    for path, text in scripts.items():
        lines = [line for line in section.splitlines() if f"`scripts/{path.name}`" in line]
        assert len(lines) == 1, f"{path.name} has no row in the ports table"
        port_cell = re.search(r"`(PARKA_[A-Z0-9_]*PORT)`, (\d+)", lines[0])
        assert port_cell is not None, f"{path.name}: its row names no port variable and default: {lines[0]}"
        port_var, port = port_cell.groups()
        defaults: dict[str, str] = {}
        for name, default in _SHELL_DEFAULT.findall(text):  # the first: kafka-local.sh's plain broker, not sasl_ssl's
            defaults.setdefault(name, default)
        assert defaults[port_var] == port, f"{path.name}: {port_var} defaults to {defaults[port_var]}, not {port}"


def test_the_test_suites_ports_are_tests_integrations() -> None:
    rows = _rows(_section("The test suite's servers"))
    read: dict[str, str | None] = {}
    for path in (REPO / "tests" / "integration").rglob("*.py"):
        for name, default in _PYTHON_DEFAULT.findall(path.read_text(encoding="utf-8")):
            if name.endswith("_PORT") or name == "PARKA_BOOTSTRAP":
                read[name] = default or None
    assert set(rows) == set(read), f"on the page, not read: {set(rows) - set(read)}; unlisted: {set(read) - set(rows)}"
    for name, default in read.items():
        if default is not None:
            assert rows[name][0] == default, f"{name} defaults to {default}, the page says {rows[name][0]}"


def test_the_librarys_variables_are_read_by_the_library() -> None:
    source = "\n".join(
        p.read_text(encoding="utf-8") for folder in ("parka", "spark_ext") for p in (REPO / folder).rglob("*.py")
    )
    rows = _rows(_section("In the library"))
    assert rows
    for name in rows:
        assert f'"{name}"' in source, f"{name}: no module of parka reads it"
