#!/usr/bin/env bash
# Lay the folders out as the installed package `parka` (setuptools' package-dir mapping:
# producer/, consumer/, lake/ and spark_ext/ become parka.producer, ...), one symlink per file,
# under DIR/parka. Tools that read a package from disk (mypy, import-linter's grimp) then see
# the one package; a file link rather than a folder link, since os.walk does not follow folder
# links. Usage: scripts/package-tree.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
tree=$1
rm -rf "$tree"
mkdir -p "$tree/parka"
for f in parka/*.py parka/py.typed; do
  ln -s "$repo/$f" "$tree/parka/$(basename "$f")"
done
for d in producer consumer lake spark_ext; do
  mkdir -p "$tree/parka/$d"
  for f in "$d"/*.py; do
    ln -s "$repo/$f" "$tree/parka/$d/$(basename "$f")"
  done
done
