# shellcheck shell=bash
# Sourced by the scripts that fetch jars from Maven Central with mvn (the servers' scripts through
# _daemon.sh, and parquet-kms-jar.sh): the one way they call Maven.

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

# maven ARGS...: mvn, quiet and in batch mode, into that repository
maven() {
  mvn -q -B -Dstyle.color=never "-Dmaven.repo.local=$MAVEN_REPO" "$@"
}
