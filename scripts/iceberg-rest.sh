#!/usr/bin/env bash
# Start, stop or inspect Apache Iceberg's own REST catalog server (the class the
# apache/iceberg-rest-fixture image runs, org.apache.iceberg.rest.RESTCatalogServer) on this
# machine, from Maven Central jars and the machine's Java 17. No Docker needed.
#
#   scripts/iceberg-rest.sh up         # idempotent: fetch the jars once, start, wait for /v1/config
#   scripts/iceberg-rest.sh fetch      # fetch the jars only (make test: beside the set-up)
#   scripts/iceberg-rest.sh down       # stop the server started here
#   scripts/iceberg-rest.sh status     # exit 0 when /v1/config answers on its port
#   scripts/iceberg-rest.sh url        # the catalog's URI for a REST client (pyiceberg's `uri`)
#   scripts/iceberg-rest.sh warehouse  # the warehouse folder
#   scripts/iceberg-rest.sh reset      # down, then remove the catalog (and the default warehouse)
#
# Why a classpath of our own: the image is built from a shadow jar that Iceberg does not publish.
# Central has the server's classes (iceberg-open-api's test-fixtures jar) and RESTCatalogAdapter
# (iceberg-core's tests jar); the jars below are those, iceberg-core's runtime dependencies, the
# fixture's own (Jetty 12, sqlite-jdbc, slf4j) at the versions Iceberg's build uses
# (gradle/libs.versions.toml), and the few Hadoop jars that `new Configuration()` and
# HadoopFileIO on file:// need (hadoop-common's own dependencies, Jersey, Jetty 9, ZooKeeper,
# Kerberos..., serve no local file system).
# curl fetches them at once (scripts/fetch-central.sh), each checked against the SHA-1 pinned
# here: no resolution, so no Maven.
#
# The backend is the image's: a JdbcCatalog on SQLite (a file, so the catalog outlives a restart)
# with HadoopFileIO, so metadata files are written to local disk under a file:// warehouse, where
# a client on this machine (pyiceberg's PyArrowFileIO) reads and writes data files directly.
# The fixture's Jetty connector takes no host: it listens on every interface, not loopback only.
#
# Environment: PARKA_ICEBERG_REST_PORT (default 8181), PARKA_ICEBERG_REST_HOME (jars, catalog
# database, log; default ~/.cache/parka/iceberg-rest-<version>), PARKA_ICEBERG_REST_WAREHOUSE (an
# absolute folder; default <home>/warehouse-<port>), PARKA_ICEBERG_REST_HEAP (default 256m),
# PARKA_ICEBERG_REST_LOG_LEVEL (slf4j-simple's level; default warn),
# PARKA_ICEBERG_REST_START_TIMEOUT_S (default 90). As with the image, every CATALOG_* variable of
# the environment becomes a catalog property (CATALOG_ stripped, `__` to `-`, `_` to `.`, lower
# case); the ones this script sets win.
set -euo pipefail

VERSION=1.11.0
HOME_DIR="${PARKA_ICEBERG_REST_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/parka/iceberg-rest-$VERSION}"
PORT="${PARKA_ICEBERG_REST_PORT:-8181}"
HEAP="${PARKA_ICEBERG_REST_HEAP:-256m}"
DEFAULT_WAREHOUSE="$HOME_DIR/warehouse-$PORT"
WAREHOUSE="${PARKA_ICEBERG_REST_WAREHOUSE:-$DEFAULT_WAREHOUSE}"
LIBS="$HOME_DIR/libs"
CATALOG_DB="$HOME_DIR/catalog-$PORT.db"
PIDFILE="$HOME_DIR/iceberg-rest-$PORT.pid"
LOG="$HOME_DIR/iceberg-rest-$PORT.log"
URL="http://127.0.0.1:$PORT"

# groupId:artifactId:version[:classifier] and the jar's SHA-1 (from Central's .sha1 files)
JARS=(
  "org.apache.iceberg:iceberg-open-api:$VERSION:test-fixtures fa55627b2e1177d6fb667d409d2aeedc93569100"
  "org.apache.iceberg:iceberg-core:$VERSION:tests d354d9d8f3710b3f0617c13b779ce2e25c264c10"
  "org.apache.iceberg:iceberg-core:$VERSION 2ff648c286563c97bb603700f65016f539be1ec8"
  "org.apache.iceberg:iceberg-api:$VERSION e79df06680ac9546bf383b396eb3c10ded7e41b5"
  "org.apache.iceberg:iceberg-common:$VERSION 21ff9e5f4d0ebed26f4fec19337319ee0f394d35"
  "org.apache.iceberg:iceberg-bundled-guava:$VERSION 2532ecc4a881463474552fff3a0d9df8ecaaeb35"
  "org.apache.avro:avro:1.12.1 1c6294ac1d67ce396f51827c87ba2e01de304500"
  "io.airlift:aircompressor:2.0.3 d7032ede4ff2c124d4913807ebd6868af66f1721"
  "org.apache.httpcomponents.client5:httpclient5:5.6.1 b418ba210ace28adf920f1decf64d673953d07cf"
  "org.apache.httpcomponents.core5:httpcore5:5.4 e40011ec0dae056466399f8e414ede4772001621"
  "org.apache.httpcomponents.core5:httpcore5-h2:5.4 83cdd62ef3140664f46be59c2c2727141d1c5a32"
  "com.fasterxml.jackson.core:jackson-core:2.21.3 3358e9345dd0f2537c47bee152c0377df6c81ad5"
  "com.fasterxml.jackson.core:jackson-databind:2.21.3 aa7ccec161c275f3e6332666ab758916f3120714"
  "com.fasterxml.jackson.core:jackson-annotations:2.21 b1bc1868bf02dc0bd6c7836257a036a331005309"
  "com.github.ben-manes.caffeine:caffeine:2.9.3 b162491f768824d21487551873f9b3b374a7fe19"
  "org.checkerframework:checker-qual:3.19.0 838b42bb6f7f73315167b359d24649845cef1c48"
  "com.google.errorprone:error_prone_annotations:2.10.0 9bc20b94d3ac42489cf6ce1e42509c86f6f861a1"
  "org.roaringbitmap:RoaringBitmap:1.6.14 89f3566f478de1d4a39c7aa6a36c612702ff5662"
  "org.apache.commons:commons-compress:1.28.0 e482f2c7a88dac3c497e96aa420b6a769f59c8d7"
  "commons-io:commons-io:2.20.0 36f3474daec2849c149e877614e7f979b2082cd2"
  "commons-codec:commons-codec:1.19.0 8c0dbe3ae883fceda9b50a6c76e745e548073388"
  "org.apache.commons:commons-lang3:3.18.0 fb14946f0e39748a6571de0635acbe44e7885491"
  "org.eclipse.jetty.ee10:jetty-ee10-servlet:12.1.8 33b226821b5a88f6785ea5f13a90ecb4112cec87"
  "org.eclipse.jetty:jetty-server:12.1.8 0685b1767938944fdf846b233902afdc375767d0"
  "org.eclipse.jetty:jetty-http:12.1.8 f81c67e84bdac2a1bd0ce343a927b8b0c35d91a1"
  "org.eclipse.jetty:jetty-io:12.1.8 d3c296acc6b8faa9ed69bd10f5a6afab05a61222"
  "org.eclipse.jetty:jetty-util:12.1.8 96a48334b31af4d852a25e150a89255e117b5045"
  "org.eclipse.jetty:jetty-security:12.1.8 7f232a53199b527eee7047550efd84cdb11bf6ad"
  "org.eclipse.jetty:jetty-session:12.1.8 4c9e22e3db77591958eb9a10d963a60e26c0333a"
  "jakarta.servlet:jakarta.servlet-api:6.0.0 abecc699286e65035ebba9844c03931357a6a963"
  "org.eclipse.jetty.compression:jetty-compression-server:12.1.8 300f082a6a913929c625eb70c8927fde44ef9dc4"
  "org.eclipse.jetty.compression:jetty-compression-gzip:12.1.8 cb44ba5d5a05383e8fa612bf265aa86b238e0893"
  "org.eclipse.jetty.compression:jetty-compression-common:12.1.8 a88edf9dbf4dad0deb8b799483fbc9f8f217af78"
  "org.xerial:sqlite-jdbc:3.53.0.0 49ffc58becb5972d9789e42b59d37860aff89edf"
  "org.slf4j:slf4j-api:2.0.17 d9e58ac9c7779ba3bf8142aff6c830617a7fe60f"
  "org.slf4j:slf4j-simple:2.0.17 9872a3fd794ffe7b18d17747926a64d61526ca96"
  "org.apache.hadoop:hadoop-common:3.4.3 205920c1d8897ffc5b6921ee9f0be4ac4275973f"
  "org.apache.hadoop:hadoop-auth:3.4.3 4a0c7875fa2b7d127dd121f5f3b3a7608166d757"
  "org.apache.hadoop.thirdparty:hadoop-shaded-guava:1.5.0 f2ca5a1a9151cb9e14ea069770eba750b38ddb70"
  "com.fasterxml.woodstox:woodstox-core:5.4.0 3e05dcce371d3f672feba29f086ad78a93ae3996"
  "org.codehaus.woodstox:stax2-api:4.2.1 a3f7325c52240418c2ba257b103c3c550e140c83"
  "org.apache.commons:commons-collections4:4.4 62ebe7544cb7164d87e0637a2a6a2bdc981395e8"
  "org.apache.commons:commons-configuration2:2.10.1 2b681b3bcddeaa5bf5c2a2939cd77e2f9ad6efda"
)

log() { echo "iceberg-rest: $*" >&2; }
# shellcheck source=scripts/_daemon.sh
source "$(dirname "${BASH_SOURCE[0]}")/_daemon.sh"

fetch_jars() {
  [[ -f "$LIBS/.complete" ]] && return 0
  fetch_once "$LIBS/.complete" resolve_jars
}

# JARS is the whole classpath, each jar with its SHA-1: fetched with curl and checked
resolve_jars() {
  log "fetching Iceberg $VERSION's REST catalog server and its runtime classpath (${#JARS[@]} jars, ~40 MB) from Maven Central into $LIBS"
  rm -rf "$LIBS.part" "$LIBS"
  local line
  for line in "${JARS[@]}"; do echo "${line##* } $(central_path "${line% *}")"; done \
    | fetch_central "$LIBS.part" || { log "could not fetch the jars"; exit 3; }
  mv "$LIBS.part" "$LIBS"
  touch "$LIBS/.complete"
}

is_up() { curl -sf -o /dev/null --max-time 2 "$URL/v1/config"; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

# The warehouse as an absolute folder, made if missing; exit 2 when it cannot be a plain file:// URI.
warehouse_dir() {
  if [[ "$WAREHOUSE" != /* || ! "$WAREHOUSE" =~ ^[A-Za-z0-9._/+-]+$ ]]; then
    log "PARKA_ICEBERG_REST_WAREHOUSE must be an absolute folder of letters, digits and ._/+- (it becomes a file:// URI), got '$WAREHOUSE'"
    exit 2
  fi
  mkdir -p "$WAREHOUSE"
  echo "$WAREHOUSE"
}

wait_ready() {
  wait_until_up "REST catalog" "${PARKA_ICEBERG_REST_START_TIMEOUT_S:-90}" "$URL/v1/config"
  log "ready at $URL (warehouse $(cat "$PIDFILE.warehouse" 2>/dev/null || echo "$WAREHOUSE"))"
}

up() {
  need_java "Iceberg's REST catalog $VERSION"
  if pid=$(running_pid); then log "already running (pid $pid) at $URL"; wait_ready; return 0; fi
  # The fixture's connector sets SO_REUSEPORT, so a second server would share a busy port: refuse first.
  if port_taken; then log "port $PORT is already in use by another process; set PARKA_ICEBERG_REST_PORT"; exit 4; fi
  fetch_jars
  local warehouse
  warehouse=$(warehouse_dir)
  echo "$warehouse" > "$PIDFILE.warehouse"
  log "starting Iceberg's REST catalog $VERSION at $URL, warehouse file://$warehouse (log: $LOG)"
  CATALOG_CATALOG__IMPL=org.apache.iceberg.jdbc.JdbcCatalog \
    CATALOG_URI="jdbc:sqlite:$CATALOG_DB" \
    CATALOG_JDBC_SCHEMA__VERSION=V1 \
    CATALOG_JDBC_STRICT__MODE=true \
    CATALOG_IO__IMPL=org.apache.iceberg.hadoop.HadoopFileIO \
    CATALOG_WAREHOUSE="file://$warehouse" \
    CATALOG_REST_PORT="$PORT" \
    nohup java -Xms32m -Xmx"$HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel="${PARKA_ICEBERG_REST_LOG_LEVEL:-warn}" \
    -Dorg.slf4j.simpleLogger.log.org.apache.hadoop.util.NativeCodeLoader=error \
    -Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd'T'HH:mm:ss.SSS" \
    -cp "$LIBS/*" org.apache.iceberg.rest.RESTCatalogServer >>"$LOG" 2>&1 &
  write_pid $!
  wait_ready
}

down() { stop_server "REST catalog"; rm -f "$PIDFILE.warehouse"; }

reset() {
  down
  rm -f "$CATALOG_DB"
  if [[ "$WAREHOUSE" == "$DEFAULT_WAREHOUSE" ]]; then
    rm -rf "$WAREHOUSE"
    log "catalog and warehouse removed: $CATALOG_DB, $WAREHOUSE"
  else
    log "catalog removed: $CATALOG_DB; the warehouse given by PARKA_ICEBERG_REST_WAREHOUSE stays: $WAREHOUSE"
  fi
}

case "${1:-}" in
  up) up ;;
  fetch) fetch_jars ;;
  down) down ;;
  status) if is_up; then log "up at $URL"; else log "down"; exit 1; fi ;;
  url) echo "$URL" ;;
  warehouse) echo "$WAREHOUSE" ;;
  reset) reset ;;
  *) echo "usage: $0 up|down|fetch|status|url|warehouse|reset" >&2; exit 2 ;;
esac
