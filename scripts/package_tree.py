"""Lay parka's folders out as the installed package, in symlinks: ``python scripts/package_tree.py DEST``.

setuptools' ``package-dir`` (pyproject.toml) installs ``producer/`` as ``parka.producer`` and so on;
tools that read the source rather than the installed package cannot follow that mapping. mypy
(scripts/typecheck.sh) and the docs site's API reference (scripts/mkdocs_hooks.py) read this tree
instead. pyproject.toml's ``package-dir`` table is the one list of the folders.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]  # the dev extra has it on 3.10


def package_tree(root: Path, dest: Path) -> None:
    """Lay out ``[tool.setuptools] package-dir`` of ``root/pyproject.toml`` under ``dest`` (emptied
    first): each package a directory, the entries of its folder symlinked into it (its
    subpackages' folders as directories too).

    Raises:
        ValueError: pyproject.toml has no ``package-dir`` table, or a mapped folder is missing.
    """
    with open(root / "pyproject.toml", "rb") as f:
        mapping = tomllib.load(f).get("tool", {}).get("setuptools", {}).get("package-dir")
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError(f"{root / 'pyproject.toml'}: no [tool.setuptools] package-dir table to lay out")
    shutil.rmtree(dest, ignore_errors=True)
    # parents before their subpackages, so a subpackage's directory goes inside its parent's
    for package in sorted(mapping, key=lambda name: name.count(".")):
        folder = root / mapping[package]
        if not folder.is_dir():
            raise ValueError(f"package-dir maps {package!r} to {mapping[package]!r}, which is not a folder")
        _link_files(folder, dest.joinpath(*package.split(".")))


def _link_files(folder: Path, target: Path) -> None:
    """``folder``'s files symlinked into the directory ``target``; a subpackage of it (a folder
    with an ``__init__.py``, such as ``lake/delta``) a directory of its own, linked likewise
    (the tools walk directories, not links to them)."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(folder.iterdir()):
        if entry.name == "__pycache__" or (target / entry.name).exists():
            continue
        if entry.is_dir() and (entry / "__init__.py").is_file():
            _link_files(entry, target / entry.name)
        else:
            (target / entry.name).symlink_to(entry.resolve())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/package_tree.py DEST")
    package_tree(Path(__file__).resolve().parent.parent, Path(sys.argv[1]))
