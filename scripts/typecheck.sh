#!/usr/bin/env bash
# mypy over parka as it is installed: one package `parka` with producer/, consumer/, lake/ and
# spark_ext/ inside it (setuptools' package-dir mapping, which mypy cannot follow). A tree of
# symlinks in build/typecheck (scripts/package-tree.sh) lays the folders out that way, so every
# import between them (spark_ext and consumer calling into parka.lake) is checked for real. Settings: [tool.mypy] in
# pyproject.toml. Then the fault suite, reliability/, against that tree.
# Usage: scripts/typecheck.sh [path/to/mypy]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
mypy=${1:-.venv/bin/mypy}
tree=build/typecheck
scripts/package-tree.sh "$tree"
cd "$tree"
MYPYPATH="$repo/$tree" "$repo/$mypy" --config-file "$repo/pyproject.toml" -p parka
# the fault suite (a program beside the package, like benchmarks/) imports parka as installed
cd "$repo"
MYPYPATH="$repo/$tree" exec "$repo/$mypy" --config-file "$repo/pyproject.toml" reliability
