"""parka's Spark worker daemon: importlib.invalidate_caches without re-reading unchanged zips."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from pathlib import Path

import pytest
from parka.spark_ext._daemon import skipping_unchanged_zips


def _write(archive: Path, files: dict[str, str]) -> None:
    with zipfile.ZipFile(archive, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def test_unchanged_zip_archives_are_not_reread_and_a_changed_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "lib.zip"
    _write(archive, {"parka_zip_probe/__init__.py": "X = 1\n", "parka_zip_probe/a.py": "A = 1\n"})
    monkeypatch.syspath_prepend(str(archive))
    for name in ("parka_zip_probe", "parka_zip_probe.a", "parka_zip_probe.b"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.import_module("parka_zip_probe.a")

    def ours() -> set[str]:
        return {
            path
            for path, finder in sys.path_importer_cache.items()
            if isinstance(finder, zipimport.zipimporter) and finder.archive == str(archive)
        }

    importers = ours()
    assert len(importers) == 2  # the archive's root and its package each have an importer
    during: list[set[str]] = []
    invalidate = skipping_unchanged_zips(lambda: (during.append(ours()), importlib.invalidate_caches()))

    invalidate()
    assert during[-1] == set()  # not re-read: unchanged since the baseline
    assert ours() == importers  # and put back

    _write(archive, {"parka_zip_probe/__init__.py": "X = 2\n", "parka_zip_probe/b.py": "B = 'new'\n"})
    invalidate()
    assert during[-1] == importers  # changed: re-read, so its new module is importable
    assert importlib.import_module("parka_zip_probe.b").B == "new"

    invalidate()
    assert during[-1] == set()  # the changed archive's stat is the new baseline
