#!/usr/bin/env bash
# The import contracts of ARCHITECTURE.md ([tool.importlinter] in pyproject.toml) over parka as
# it is installed (scripts/package-tree.sh lays the folders out as one package).
# Usage: scripts/lint-imports.sh [path/to/lint-imports]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
lint=${1:-.venv/bin/lint-imports}
tree=build/imports
scripts/package-tree.sh "$tree"
cd "$tree"
# the tree first on the path (before the editable install's finder); scripts/ for our contract type
PYTHONPATH="$repo/$tree:$repo/scripts" exec "$repo/$lint" "$repo/pyproject.toml" --no-cache
