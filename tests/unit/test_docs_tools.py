"""The docs site's build tools (scripts/): link rewriting, reST in docstrings, the package tree.

``make docs-build`` (mkdocs --strict, in ``make test``) catches links that reach no page; these
check what the site shows for the links it cannot check: code and checked-in runs outside docs/.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_docs_{name}", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


hooks = _load("mkdocs_hooks")
rest = _load("griffe_rest")
tree = _load("package_tree")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for name in (
        "docs/client.md",
        "ARCHITECTURE.md",
        "benchmarks/results/r1/report.md",
        "benchmarks/results/r1/README.md",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    return tmp_path


def test_a_root_file_included_in_docs_gets_links_that_work_in_the_site(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(hooks._included, "ARCHITECTURE.md", "architecture.md")
    text = (
        "See [the client](docs/client.md#where-parka-differs), [layers](ARCHITECTURE.md), "
        "[KIP](https://example.org/kip), [up](#quick-start) and [a run](benchmarks/results/r1/report.md).\n"
        "```sh\n[not a link](docs/x.md)\n```\n"
    )
    out = hooks._rewrite_links(text, "", "", repo, repo / "docs", None)
    assert "[the client](client.md#where-parka-differs)" in out
    assert "[layers](architecture.md)" in out
    assert "[KIP](https://example.org/kip)" in out and "[up](#quick-start)" in out
    assert "a run (`benchmarks/results/r1/report.md`)" in out  # no repo_url: the path stays readable
    assert "[not a link](docs/x.md)" in out  # code blocks are left alone


def test_a_docs_page_keeps_its_page_links_and_sends_code_links_to_the_repository(repo: Path) -> None:
    text = "[Spark](spark.md#on-a-cluster), [`benchmarks/results/r1`](../benchmarks/results/r1/README.md)\n"
    out = hooks._rewrite_links(text, "docs", "", repo, repo / "docs", None, only_outside=True)
    assert "[Spark](spark.md#on-a-cluster)" in out
    assert out.rstrip().endswith("`benchmarks/results/r1` (`benchmarks/results/r1/README.md`)")
    linked = hooks._rewrite_links(
        text, "docs", "", repo, repo / "docs", "https://github.com/o/parka/", only_outside=True
    )
    assert "(https://github.com/o/parka/blob/main/benchmarks/results/r1/README.md)" in linked


def test_a_page_in_a_subfolder_links_relative_to_it(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(hooks._included, "ARCHITECTURE.md", "architecture.md")
    out = hooks._rewrite_links("[a](../../ARCHITECTURE.md)", "docs/reference", "reference", repo, repo / "docs", None)
    assert out == "[a](../architecture.md)"


def test_a_link_to_a_missing_file_or_out_of_the_repository_is_a_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "there.md").write_text("")
    text = "[KIP](../shared/seed.txt) [old run](benchmarks/gone.md) [run](benchmarks/there.md)"
    with caplog.at_level(logging.WARNING, logger="mkdocs"):
        out = hooks._rewrite_links(text, "", "", tmp_path, tmp_path / "docs", None, page="README.md in index.md")
    assert [r.getMessage() for r in caplog.records] == [
        "Doc file 'README.md in index.md': the link '../shared/seed.txt' leaves the repository",
        "Doc file 'README.md in index.md': the link 'benchmarks/gone.md' names benchmarks/gone.md, which is missing",
    ]
    assert out == "[KIP](../shared/seed.txt) [old run](benchmarks/gone.md) run (`benchmarks/there.md`)"


def test_rest_roles_and_literal_blocks_become_markdown() -> None:
    doc = (
        "Uses :class:`ParquetProducer` and :func:`~parka.segment.encode`. Errors::\n\n    Root\n    └── Child\n\nDone."
    )
    assert rest.rest_to_markdown(doc) == (
        "Uses `ParquetProducer` and `parka.segment.encode`. Errors:\n\n```text\nRoot\n└── Child\n```\n\nDone."
    )


def test_package_tree_lays_out_package_dir(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "prod").mkdir()
    (tmp_path / "prod" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "prod" / "wing").mkdir()  # a subpackage inside a mapped folder
    (tmp_path / "prod" / "wing" / "__init__.py").write_text("Y = 2\n")
    mapping = '{ "pk" = "core", "pk.producer" = "prod" }'
    (tmp_path / "pyproject.toml").write_text(f"[tool.setuptools]\npackage-dir = {mapping}\n")
    tree.package_tree(tmp_path, tmp_path / "out")
    assert (tmp_path / "out" / "pk" / "__init__.py").resolve() == (tmp_path / "core" / "__init__.py").resolve()
    assert (tmp_path / "out" / "pk" / "producer" / "__init__.py").read_text() == "X = 1\n"
    wing = tmp_path / "out" / "pk" / "producer" / "wing"
    assert wing.is_dir() and not wing.is_symlink()  # a directory the tools walk, its files links
    assert (wing / "__init__.py").is_symlink() and (wing / "__init__.py").read_text() == "Y = 2\n"

    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackage-dir = { "pk" = "gone" }\n')
    with pytest.raises(ValueError, match="maps 'pk' to 'gone', which is not a folder"):
        tree.package_tree(tmp_path, tmp_path / "out")
