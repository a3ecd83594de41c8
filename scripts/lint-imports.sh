#!/usr/bin/env bash
# The import contracts of ARCHITECTURE.md ([tool.importlinter] in pyproject.toml) over parka as
# it is installed (scripts/package_tree.py lays the folders out as one package,
# a directory per package with a link per file: grimp walks directories and os.walk does not follow folder links).
# Usage: scripts/lint-imports.sh [path/to/lint-imports]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
lint=${1:-.venv/bin/lint-imports}
tree=build/imports
"$(dirname "$lint")/python" scripts/package_tree.py "$tree"
cd "$tree"
# the tree first on the path (before the editable install's finder); scripts/ for our contract type
PYTHONPATH="$repo/$tree:$repo/scripts" exec "$repo/$lint" "$repo/pyproject.toml" --no-cache
