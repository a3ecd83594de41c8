# shellcheck shell=bash
# Sourced by the scripts that fetch jars from Maven Central (the servers' scripts through
# _daemon.sh, and parquet-kms-jar.sh): the one way they call Maven, which resolves what they have
# no list of (the schema registry's build, a version other than the listed one), and the one way
# they fetch what they have a list of (fetch_central, below: no Maven).

# Maven runs for seconds: the client compiler and the serial collector spend less CPU on that than
# the JVM's defaults (a cold `make fetch`, two runs each way: 95 and 99 CPU-s against 109 and
# 128). A MAVEN_OPTS of the caller's wins.
export MAVEN_OPTS="${MAVEN_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"

# Maven's local repository is parka's own cache folder, not ~/.m2. Spark's resolver of
# spark.jars.packages (Ivy) looks in ~/.m2 before Maven Central, and takes a POM it finds there
# without its jar (Maven often fetches a POM alone) as the artifact's home, then fails: "download
# failed: commons-logging#commons-logging;1.2!commons-logging.jar", as when the tests' Spark jars
# were resolved on a fresh machine while the registry's build (make test's background fetch)
# wrote into ~/.m2. Settings such as a mirror still come from ~/.m2/settings.xml.
MAVEN_REPO="${XDG_CACHE_HOME:-$HOME/.cache}/parka/maven"

# Maven itself is 3.9.16, from Maven Central (its binary archive, checked against Central's
# .sha512) into parka's cache folder once, not the system's mvn: Maven 3.8 (Debian's) collects a
# project's dependencies one POM after another, a request's round trip each, while 3.9's
# breadth-first collector fetches them 16 at a time. On a fresh machine (cold fetches, one after
# another, when Maven still fetched every server's jars) Kafka's jars took 10.0 s instead of 42.3, s3proxy's 12.4 instead of 31.4, the Iceberg
# REST catalog's 11.2 instead of 46.8 and the schema registry's build 64.1 s instead of 199.1,
# with the same CPU and the same files (benchmarks/results/2026-12-01-maven-parallel-poms/).
# PARKA_MVN=PATH runs a mvn of your own instead (one set up for a network that cannot reach
# Central directly, say).
MAVEN_VERSION=3.9.16
MAVEN_DIST="${XDG_CACHE_HOME:-$HOME/.cache}/parka/apache-maven-$MAVEN_VERSION"
MAVEN_URL="https://repo1.maven.org/maven2/org/apache/maven/apache-maven/$MAVEN_VERSION/apache-maven-$MAVEN_VERSION-bin.tar.gz"
MAVEN_PARALLEL=(-Daether.dependencyCollector.impl=bf -Daether.dependencyCollector.bf.threads=16 -Daether.connector.basic.threads=16)

# The mvn to run: PARKA_MVN, else Maven 3.9.16 in parka's cache, fetched on first use (one fetch
# at a time: make fetches the servers at once, under a lock in the cache folder)
mvn_command() {
  if [[ -n "${PARKA_MVN:-}" ]]; then echo "$PARKA_MVN"; return 0; fi
  if [[ ! -x "$MAVEN_DIST/bin/mvn" ]]; then
    local parent
    parent=$(dirname "$MAVEN_DIST")
    mkdir -p "$parent"
    if command -v flock >/dev/null; then
      ( flock 8; [[ -x "$MAVEN_DIST/bin/mvn" ]] || fetch_maven "$parent" ) 8>"$parent/.maven.lock" >&2 || return 1
    else
      fetch_maven "$parent" >&2 || return 1
    fi
  fi
  echo "$MAVEN_DIST/bin/mvn"
}

fetch_maven() {
  local parent=$1 part archive
  command -v curl >/dev/null || { echo "curl not found: it fetches Maven from Maven Central (apt-get install curl)" >&2; return 3; }
  echo "fetching Maven $MAVEN_VERSION from Maven Central into $MAVEN_DIST" >&2
  part=$(mktemp -d "$parent/.apache-maven.XXXXXX")
  archive="$part/maven.tar.gz"
  if ! curl -fsSL --retry 3 -o "$archive" "$MAVEN_URL" \
    || ! echo "$(curl -fsSL --retry 3 "$MAVEN_URL.sha512" | cut -c1-128)  $archive" | sha512sum -c --quiet -; then
    echo "could not fetch $MAVEN_URL (or it did not match Central's .sha512)" >&2
    rm -rf "$part"
    return 3
  fi
  tar -xzf "$archive" -C "$part" && rm -rf "$MAVEN_DIST" && mv "$part/apache-maven-$MAVEN_VERSION" "$MAVEN_DIST"
  rm -rf "$part"
}

# need_maven WHAT: exit 3, saying what is missing for fetching WHAT, unless Maven can run here
need_maven() {
  command -v java >/dev/null || { echo "java not found: Maven needs a Java runtime to fetch $1 (apt-get install openjdk-17-jre-headless)" >&2; exit 3; }
  [[ -n "${PARKA_MVN:-}" || -x "$MAVEN_DIST/bin/mvn" ]] || command -v curl >/dev/null \
    || { echo "curl not found: it fetches Maven from Maven Central, to fetch $1 (apt-get install curl)" >&2; exit 3; }
}

# maven ARGS...: Maven, quiet and in batch mode, into that repository, collecting in parallel
maven() {
  local mvn
  mvn=$(mvn_command) || exit 3
  "$mvn" -q -B -Dstyle.color=never "-Dmaven.repo.local=$MAVEN_REPO" "${MAVEN_PARALLEL[@]}" "$@"
}

# central_path GROUP:ARTIFACT:VERSION[:CLASSIFIER]: the jar's path under Maven Central's root
central_path() {
  local group artifact version classifier
  IFS=: read -r group artifact version classifier <<<"$1"
  echo "${group//.//}/$artifact/$version/$artifact-$version${classifier:+-$classifier}.jar"
}

# fetch_central DEST < LIST: the files LIST names ("SHA-1 PATH" lines) into the folder DEST, 16 at
# a time, each checked against its SHA-1 (scripts/fetch-central.sh): for what the scripts know
# the files of (on a fresh machine make fetch-early took 1 CPU-s this way, 26-30 through Maven:
# benchmarks/results/2026-12-01-fetch-central/)
fetch_central() {
  "$(dirname "${BASH_SOURCE[0]}")/fetch-central.sh" "$1"
}
