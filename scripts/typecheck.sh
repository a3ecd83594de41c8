#!/usr/bin/env bash
# mypy over parka as it is installed: one package `parka` with producer/, consumer/, lake/ and
# spark_ext/ inside it (setuptools' package-dir mapping, which mypy cannot follow). A tree of
# symlinks in build/typecheck lays the folders out that way, so every import between them
# (spark_ext and consumer calling into parka.lake) is checked for real. Settings: [tool.mypy] in
# pyproject.toml. Then the fault suite, reliability/, against that tree.
# Usage: scripts/typecheck.sh [path/to/mypy]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
mypy=${1:-.venv/bin/mypy}
tree=build/typecheck
rm -rf "$tree"
mkdir -p "$tree/parka"
for f in parka/*.py parka/py.typed; do
  ln -s "$repo/$f" "$tree/parka/$(basename "$f")"
done
for d in producer consumer lake spark_ext; do
  ln -s "$repo/$d" "$tree/parka/$d"
done
cd "$tree"
MYPYPATH="$repo/$tree" "$repo/$mypy" --config-file "$repo/pyproject.toml" -p parka
# the fault suite (a program beside the package, like benchmarks/) imports parka as installed
cd "$repo"
MYPYPATH="$repo/$tree" exec "$repo/$mypy" --config-file "$repo/pyproject.toml" reliability
