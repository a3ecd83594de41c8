#!/usr/bin/env bash
# mypy over parka as it is installed: one package `parka` with producer/, consumer/, lake/ and
# spark_ext/ inside it (setuptools' package-dir mapping, which mypy cannot follow). A tree of
# symlinks in build/typecheck lays the folders out that way (scripts/package_tree.py), so every import between them
# (spark_ext and consumer calling into parka.lake) is checked for real. Settings: [tool.mypy] in
# pyproject.toml. Then the fault suite, reliability/, against that tree.
# Usage: scripts/typecheck.sh [path/to/mypy]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
mypy=${1:-.venv/bin/mypy}
tree=build/typecheck
# the folders come from pyproject.toml's package-dir (scripts/package_tree.py, as the docs site's)
"$(dirname "$mypy")/python" scripts/package_tree.py "$tree"
# one cache for both runs: the second then reads parka's analysis instead of redoing it (from
# the two folders mypy kept one cache each, and a cold `make lint` spent 11 of its 24 mypy
# seconds analysing parka again for the fault suite)
cache="$repo/.mypy_cache"
cd "$tree"
MYPYPATH="$repo/$tree" "$repo/$mypy" --config-file "$repo/pyproject.toml" --cache-dir "$cache" -p parka
# the fault suite (a program beside the package, like benchmarks/) imports parka as installed
cd "$repo"
MYPYPATH="$repo/$tree" exec "$repo/$mypy" --config-file "$repo/pyproject.toml" --cache-dir "$cache" reliability
