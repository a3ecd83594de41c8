#!/usr/bin/env bash
# Print the path of parquet-mr's tests jar, which holds InMemoryKMS (the KMS client whose master
# keys come from the Hadoop setting parquet.encryption.key.list): the Spark twin of parka's local
# KMS (parka/encryption.py). Spark 4 ships parquet-hadoop without it. Fetched once from Maven
# Central with mvn, at the version of the parquet-hadoop jar in the installed pyspark, into
# ~/.cache/parka/parquet-kms. For tests and demos only: a production KMS has its own client jar.
#
#   scripts/parquet-kms-jar.sh [python]   # python: the interpreter with pyspark (default: python3)
set -euo pipefail

PY="${1:-python3}"
log() { echo "parquet-kms-jar: $*" >&2; }
# shellcheck source=scripts/_maven.sh
source "$(dirname "${BASH_SOURCE[0]}")/_maven.sh"
JARS=$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
HADOOP_JAR=$(ls "$JARS"/parquet-hadoop-*.jar 2>/dev/null | head -1)
[[ -n "$HADOOP_JAR" ]] || { log "no parquet-hadoop jar in $JARS"; exit 3; }
VERSION=$(basename "$HADOOP_JAR" .jar | sed 's/^parquet-hadoop-//')
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/parka/parquet-kms"
JAR="$DIR/parquet-hadoop-$VERSION-tests.jar"
# the jar's SHA-1 per version (Central's .sha1 file): fetched with curl and checked; another
# version (another pyspark's) comes through Maven
declare -A JAR_SHA1=([1.15.2]=40addc8921c8fa2f50c30db2d0f0c997151571a8)
if [[ ! -f "$JAR" ]]; then
  mkdir -p "$DIR"
  log "fetching org.apache.parquet:parquet-hadoop:$VERSION:tests from Maven Central"
  if [[ -n "${JAR_SHA1[$VERSION]:-}" ]]; then
    # into a folder of its own first: the jar's name appears only once it is whole and checked
    part=$(mktemp -d "$DIR/.part.XXXXXX")
    echo "${JAR_SHA1[$VERSION]} $(central_path "org.apache.parquet:parquet-hadoop:$VERSION:tests")" \
      | fetch_central "$part" || { rm -rf "$part"; exit 3; }
    mv "$part/$(basename "$JAR")" "$JAR" && rm -rf "$part"
  else
    need_maven "the KMS jar"
    maven dependency:copy \
      "-Dartifact=org.apache.parquet:parquet-hadoop:$VERSION:jar:tests" "-DoutputDirectory=$DIR" >&2
  fi
fi
LISTING=$("$PY" -m zipfile -l "$JAR")  # not piped into grep -q: pipefail would see the writer's SIGPIPE
grep -q 'org/apache/parquet/crypto/keytools/mocks/InMemoryKMS.class' <<<"$LISTING" \
  || { log "$JAR has no InMemoryKMS"; exit 3; }
echo "$JAR"
