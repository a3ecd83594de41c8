#!/usr/bin/env bash
# Start, stop or inspect a schema registry with Confluent's REST API on loopback: Apicurio
# Registry (in-memory H2 storage), built from Maven Central artifacts and run with the machine's
# Java 17. Its Confluent-compatible API is at http://127.0.0.1:<port>/apis/ccompat/v7.
#
#   scripts/schema-registry.sh up       # idempotent: build once (about a minute), start, wait for the API
#   scripts/schema-registry.sh fetch    # build only (make test: beside the set-up)
#   scripts/schema-registry.sh down     # stop the registry started here
#   scripts/schema-registry.sh status   # exit 0 when the API answers
#   scripts/schema-registry.sh url      # print the Confluent-compatible URL
#
# Why 2.4.2.Final and a build here: Maven Central has no runnable Apicurio artifact, only the
# Quarkus app's plain jar, so this script runs Quarkus' build over it. 3.3.3 needs Java 21 and its
# apicurio-registry-schema-util-provider is not on Central; 3.3.2's parent POM and 2.6.x's
# utils-kafka are not either. 2.4.2.Final resolves with two patches: everit-json-schema from its
# Central coordinates (com.github.erosb), and the build step of the config-index Quarkus extension,
# whose -deployment jar Central lacks (written below, ~40 lines). Storage is in memory: schemas
# live as long as the process.
#
# Environment: PARKA_REGISTRY_PORT (default 8081), PARKA_REGISTRY_HOME (default
# ~/.cache/parka/apicurio-registry-<version>), PARKA_REGISTRY_HEAP (default 384m).
set -euo pipefail

VERSION=2.4.2.Final
QUARKUS=2.16.4.Final
HOME_DIR="${PARKA_REGISTRY_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/parka/apicurio-registry-$VERSION}"
PORT="${PARKA_REGISTRY_PORT:-8081}"
HEAP="${PARKA_REGISTRY_HEAP:-384m}"
BUILD="$HOME_DIR/build"
APP="$HOME_DIR/app"
PIDFILE="$HOME_DIR/registry-$PORT.pid"
LOG="$HOME_DIR/registry-$PORT.log"
URL="http://127.0.0.1:$PORT/apis/ccompat/v7"

log() { echo "schema-registry: $*" >&2; }
# shellcheck source=scripts/_daemon.sh
source "$(dirname "${BASH_SOURCE[0]}")/_daemon.sh"

need_tools() {
  command -v java >/dev/null || { log "java not found: install a Java 17 runtime (apt-get install openjdk-17-jre-headless)"; exit 3; }
  need_maven "the registry"
  command -v unzip >/dev/null || { log "unzip not found: apt-get install unzip"; exit 3; }
}

write_build() {
  rm -rf "$BUILD"
  mkdir -p "$BUILD/ext/src/main/java/parka/registry" "$BUILD/ext/src/main/resources/META-INF" "$BUILD/app/src/main/resources"
  # Apicurio's parent POM lists repositories besides Central; this build reads Central only.
  cat > "$BUILD/settings.xml" <<'XML'
<settings><mirrors>
  <mirror><id>central-only</id><mirrorOf>*,!central</mirrorOf><url>http://0.0.0.0/</url><blocked>true</blocked></mirror>
</mirrors></settings>
XML
  cat > "$BUILD/pom.xml" <<'XML'
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>parka.local</groupId><artifactId>schema-registry-build</artifactId><version>1</version>
  <packaging>pom</packaging>
  <modules><module>ext</module><module>app</module></modules>
</project>
XML
  cat > "$BUILD/ext/pom.xml" <<XML
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.apicurio</groupId><artifactId>apicurio-common-app-components-config-index-deployment</artifactId><version>0.1.18.Final</version>
  <properties>
    <maven.compiler.source>11</maven.compiler.source><maven.compiler.target>11</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencyManagement><dependencies>
    <dependency><groupId>io.quarkus</groupId><artifactId>quarkus-bom</artifactId><version>$QUARKUS</version><type>pom</type><scope>import</scope></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-common-app-components-config-index</artifactId><version>0.1.18.Final</version></dependency>
    <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-common-app-components-config-definitions</artifactId><version>0.1.18.Final</version></dependency>
    <dependency><groupId>io.quarkus</groupId><artifactId>quarkus-arc-deployment</artifactId></dependency>
  </dependencies>
</project>
XML
  echo parka.registry.DynamicPropertiesStep > "$BUILD/ext/src/main/resources/META-INF/quarkus-build-steps.list"
  cat > "$BUILD/ext/src/main/java/parka/registry/DynamicPropertiesStep.java" <<'JAVA'
package parka.registry;

import apicurio.common.app.components.config.index.DynamicPropertiesInfoRecorder;
import io.apicurio.common.apps.config.DynamicConfigPropertyDef;
import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import io.quarkus.arc.deployment.BeanDiscoveryFinishedBuildItem;
import io.quarkus.arc.deployment.SyntheticBeanBuildItem;
import io.quarkus.arc.processor.InjectionPointInfo;
import io.quarkus.deployment.annotations.BuildProducer;
import io.quarkus.deployment.annotations.BuildStep;
import io.quarkus.deployment.annotations.ExecutionTime;
import io.quarkus.deployment.annotations.Record;
import java.util.ArrayList;
import java.util.List;
import org.jboss.jandex.AnnotationInstance;
import org.jboss.jandex.AnnotationValue;
import org.jboss.jandex.DotName;

/**
 * Build step of the config-index extension, whose deployment jar Maven Central lacks:
 * every injected {@code @Dynamic @ConfigProperty Supplier<T>} field becomes an entry of
 * the registry's list of properties that can be changed at run time.
 */
public class DynamicPropertiesStep {
    private static final DotName CONFIG_PROPERTY =
            DotName.createSimple("org.eclipse.microprofile.config.inject.ConfigProperty");
    private static final DotName DYNAMIC = DotName.createSimple("io.apicurio.common.apps.config.Dynamic");

    @BuildStep
    @Record(ExecutionTime.RUNTIME_INIT)
    void dynamicProperties(DynamicPropertiesInfoRecorder recorder, BeanDiscoveryFinishedBuildItem beans,
            BuildProducer<SyntheticBeanBuildItem> synthetic) throws ClassNotFoundException {
        List<DynamicConfigPropertyDef> defs = new ArrayList<>();
        for (InjectionPointInfo point : beans.getInjectionPoints()) {
            AnnotationInstance property = point.getRequiredQualifier(CONFIG_PROPERTY);
            if (property == null || !point.isField()) {
                continue;
            }
            AnnotationInstance dynamic = point.getTarget().asField().annotation(DYNAMIC);
            if (dynamic == null) {
                continue;
            }
            String name = property.value("name").asString();
            AnnotationValue fallback = property.value("defaultValue");
            if (fallback == null) {
                throw new IllegalStateException("dynamic property " + name + " has no default value");
            }
            String typeName = point.getRequiredType().asParameterizedType().arguments().get(0).name().toString();
            Class<?> type = Class.forName(typeName, false, Thread.currentThread().getContextClassLoader());
            DynamicConfigPropertyDef def = new DynamicConfigPropertyDef(name, type, fallback.asString());
            AnnotationValue label = dynamic.value("label");
            AnnotationValue description = dynamic.value("description");
            AnnotationValue requires = dynamic.value("requires");
            if (label != null) {
                def.setLabel(label.asString());
            }
            if (description != null) {
                def.setDescription(description.asString());
            }
            if (requires != null) {
                def.setRequires(requires.asStringArray());
            }
            defs.add(def);
        }
        synthetic.produce(SyntheticBeanBuildItem.configure(DynamicConfigPropertyList.class)
                .runtimeValue(recorder.initializePropertiesInfo(defs))
                .unremovable()
                .setRuntimeInit()
                .done());
    }
}
JAVA
  cat > "$BUILD/app/pom.xml" <<XML
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>parka.local</groupId><artifactId>schema-registry-app</artifactId><version>1</version>
  <properties><project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
  <dependencyManagement><dependencies>
    <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-registry</artifactId><version>$VERSION</version><type>pom</type><scope>import</scope></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-registry-app</artifactId><version>$VERSION</version>
      <exclusions><exclusion><groupId>com.github.everit-org.json-schema</groupId><artifactId>org.everit.json.schema</artifactId></exclusion></exclusions>
    </dependency>
    <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-common-app-components-config-index-deployment</artifactId><version>0.1.18.Final</version><scope>provided</scope></dependency>
    <dependency><groupId>com.github.erosb</groupId><artifactId>everit-json-schema</artifactId><version>1.14.2</version></dependency>
  </dependencies>
  <build><plugins>
    <plugin>
      <groupId>io.quarkus</groupId><artifactId>quarkus-maven-plugin</artifactId><version>$QUARKUS</version>
      <executions><execution><goals><goal>build</goal></goals></execution></executions>
    </plugin>
  </plugins></build>
</project>
XML
}

build() {
  [[ -f "$APP/.complete" ]] && return 0
  need_tools
  fetch_once "$APP/.complete" build_app
}

build_app() {
  log "building Apicurio Registry $VERSION from Maven Central into $APP (once; about a minute)"
  write_build
  local mvn=(maven -s "$BUILD/settings.xml")
  # The app jar's own application.properties becomes the application's, plus an index of the jar's beans.
  (cd "$BUILD" && "${mvn[@]}" dependency:copy -Dartifact="io.apicurio:apicurio-registry-app:$VERSION" -DoutputDirectory="$BUILD/jar") >>"$HOME_DIR/build.log" 2>&1 \
    || { log "resolving apicurio-registry-app failed; see $HOME_DIR/build.log"; tail -20 "$HOME_DIR/build.log" >&2; exit 5; }
  { unzip -p "$BUILD/jar/apicurio-registry-app-$VERSION.jar" application.properties
    echo "quarkus.index-dependency.apicurio-app.group-id=io.apicurio"
    echo "quarkus.index-dependency.apicurio-app.artifact-id=apicurio-registry-app"
  } > "$BUILD/app/src/main/resources/application.properties"
  (cd "$BUILD" && "${mvn[@]}" package -DskipTests) >>"$HOME_DIR/build.log" 2>&1 \
    || { log "Quarkus build failed; see $HOME_DIR/build.log"; grep ERROR "$HOME_DIR/build.log" | head -20 >&2; exit 5; }
  rm -rf "$APP"
  mkdir -p "$APP"
  cp -r "$BUILD/app/target/lib" "$BUILD/app/target/schema-registry-app-1-runner.jar" "$APP/"
  touch "$APP/.complete"
}

is_up() { curl -sf -o /dev/null --max-time 2 "$URL/subjects"; }

up() {
  mkdir -p "$HOME_DIR"
  if pid=$(running_pid); then log "registry already running (pid $pid) at $URL"; wait_ready; return 0; fi
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then log "port $PORT is already in use; set PARKA_REGISTRY_PORT"; exit 4; fi
  build
  log "starting Apicurio Registry $VERSION at $URL (log: $LOG)"
  # C1 only: a one-user registry that should start fast on 2 cores. Its in-memory H2 storage is
  # not safe for registrations at once (a suite's workers) as Apicurio configures it: two took one
  # content id, or timed out on the sequence table's lock, and failed with HTTP 500, some after
  # writing the subject (8 threads registering 10 schemas each on new subjects: 23 of 80 failed).
  # Serializable transactions, a 60 s lock timeout and a pool that two connections per request
  # at 8 requests at once fit in made such failures rarer, but registrations at once still
  # deadlocked on the sequence table: some failed with H2's "Deadlock detected", others waited
  # until the transaction manager's 60 s timeout, in a suite run (four tests stalled 60 s) and in
  # 16 threads of 20 registrations each (16 failed and one call took 306 s; the next round, none
  # failed and one took 125 s). So the registry serves one request at a time (Quarkus' worker
  # pool of one thread): the same 16 x 20 and 32 x 10 three times each, 0 failed, the slowest
  # call 0.62 s. A registry for tests, not for load.
  HTTP_PORT="$PORT" QUARKUS_HTTP_HOST=127.0.0.1 QUARKUS_THREAD_POOL_MAX_THREADS=1 \
    QUARKUS_DATASOURCE_JDBC_MIN_SIZE=1 QUARKUS_DATASOURCE_JDBC_INITIAL_SIZE=1 QUARKUS_DATASOURCE_JDBC_MAX_SIZE=20 \
    REGISTRY_DATASOURCE_URL="jdbc:h2:mem:registry_db;LOCK_TIMEOUT=60000" QUARKUS_DATASOURCE_JDBC_TRANSACTION_ISOLATION_LEVEL=serializable \
    nohup java -Xms64m -Xmx"$HEAP" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \
    -jar "$APP/schema-registry-app-1-runner.jar" >>"$LOG" 2>&1 &
  write_pid $!
  wait_ready
}

wait_ready() {
  wait_until_up registry "${PARKA_REGISTRY_START_TIMEOUT_S:-120}" "$URL"
  log "registry ready at $URL"
}

down() { stop_server registry; }

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) if is_up; then log "up at $URL"; else log "down"; exit 1; fi ;;
  url) echo "$URL" ;;
  build|fetch) mkdir -p "$HOME_DIR"; build ;;
  *) echo "usage: $0 up|down|status|url|build|fetch" >&2; exit 2 ;;
esac
