#!/usr/bin/env bash
# Fetch a known list of files from Maven Central with curl, 16 at a time, each checked against its
# SHA-1: the one way the servers' scripts and the tests' Spark jars (tests/integration/spark/
# _jars.py) get files whose list is written down. Maven, which resolves one POM after another and
# costs a JVM's start, is left for what has no list (scripts/_maven.sh).
#
#   scripts/fetch-central.sh [--tree] DEST < LIST
#
# LIST: lines "SHA-1 PATH", PATH under Central's root (org/apache/kafka/.../kafka-clients-4.3.1.jar);
# blank lines and lines starting with '#' are skipped. Each file goes into the folder DEST by its
# name, or with --tree at PATH under DEST (Maven's layout). Files come from PARKA_MAVEN_CENTRAL
# when set (a mirror of Central), else https://repo1.maven.org/maven2/. Exit 0 when every file
# arrived and matches its SHA-1; else 3, naming what is wrong (a file that does not match is
# removed).
set -euo pipefail

tree=0
if [[ "${1:-}" == --tree ]]; then tree=1; shift; fi
[[ $# -eq 1 ]] || { echo "usage: $0 [--tree] DEST < LIST" >&2; exit 2; }
DEST=$1
ROOT="${PARKA_MAVEN_CENTRAL:-https://repo1.maven.org/maven2/}"
[[ "$ROOT" == */ ]] || ROOT="$ROOT/"
command -v curl >/dev/null || { echo "fetch-central: curl not found (apt-get install curl)" >&2; exit 3; }

mkdir -p "$DEST"
config=$(mktemp)
sums=$(mktemp)
trap 'rm -f "$config" "$sums"' EXIT
while read -r sha path _; do
  [[ -z "$sha" || "$sha" == \#* ]] && continue
  if ((tree)); then file="$DEST/$path"; else file="$DEST/${path##*/}"; fi
  printf 'url = "%s%s"\noutput = "%s"\n' "$ROOT" "$path" "$file" >>"$config"
  printf '%s  %s\n' "$sha" "$file" >>"$sums"
done
[[ -s "$config" ]] || { echo "fetch-central: the list names no file" >&2; exit 3; }
if ! curl --silent --no-progress-meter --show-error --fail --retry 3 --create-dirs --parallel --parallel-max 16 --config "$config"; then
  echo "fetch-central: curl could not fetch every file from $ROOT" >&2
  exit 3
fi
if ! bad=$(sha1sum --check --quiet "$sums" 2>&1); then
  echo "fetch-central: files that do not match their SHA-1 (removed):" >&2
  echo "$bad" >&2
  sed -n 's/: FAILED.*//p' <<<"$bad" | while read -r file; do rm -f "$file"; done
  exit 3
fi
