#!/usr/bin/env bash
# Runs a private Apache Iceberg REST catalog on 127.0.0.1 for the Iceberg
# sink's REST catalog tests: Apache Iceberg's own REST catalog server
# (org.apache.iceberg.rest.RESTCatalogServer from the test-fixtures jar of
# org.apache.iceberg:iceberg-open-api, the code of the apache/iceberg-rest-fixture
# Docker image) in front of a JdbcCatalog on a SQLite file, with a local
# file:// warehouse in its run dir.
#
#   scripts/iceberg-rest.sh fetch    # only fetch the jars and build the launcher into the cache
#   scripts/iceberg-rest.sh start    # fetch if needed, start, wait until it answers, print:
#                                    #   SLUICE_ICEBERG_REST=http://127.0.0.1:<port>
#                                    #   SLUICE_ICEBERG_REST_WAREHOUSE=file://<run dir>/warehouse
#                                    #   SLUICE_ICEBERG_REST_RUN=<run dir>
#   scripts/iceberg-rest.sh status   # print the same lines and exit 0 if running, exit 1 otherwise
#   scripts/iceberg-rest.sh stop     # stop it (SIGTERM, then SIGKILL) and remove its run dir
#
# Usage in a test script:
#   export SLUICE_ICEBERG_REST_RUN=$(mktemp -d)
#   trap 'scripts/iceberg-rest.sh stop' EXIT
#   eval "$(scripts/iceberg-rest.sh start | grep '^SLUICE_ICEBERG_REST')"
#   export SLUICE_ICEBERG_REST SLUICE_ICEBERG_REST_WAREHOUSE
#
# The jars: the iceberg-open-api POM declares no dependencies (the fixture's
# dependencies live only in Iceberg's Gradle build, testFixturesImplementation
# of project(':iceberg-open-api'), and no fat jar is published), so a
# generated POM lists them by hand for Iceberg $VERSION: iceberg-core and its
# tests jar (RESTCatalogAdapter, RESTCatalogServlet), iceberg-aws/-gcp/-azure
# (whose property classes the server's adapter uses), hadoop-common (a Hadoop
# Configuration and HadoopFileIO for the file:// warehouse; its Jetty 9,
# Jersey, ZooKeeper and logging dependencies excluded), Jetty 11 (Jakarta
# servlets, as the fixture is compiled against), sqlite-jdbc and
# slf4j-simple. `mvn dependency:copy-dependencies` puts them in
# $SLUICE_ICEBERG_REST_CACHE (default $HOME/.cache/sluice/iceberg-rest-<version>).
#
# The launcher: RESTCatalogServer.main listens on every interface on a fixed
# port (8181 or rest.port). A small launcher (compiled here with javac into
# the cache, in the server's package because its catalog context and
# adapter are package-private) builds the same servlet, adapter and backend
# catalog (CATALOG_* environment variables are still read, as by the fixture)
# but listens on 127.0.0.1 only, on a free port it picks itself, and writes
# that port to <run dir>/port once Jetty is started. The backend catalog is
# a SQLite file in the run dir, so it outlives a restart of the server.
#
# The server's log and PID live in its run dir, $SLUICE_ICEBERG_REST_RUN:
# start makes a new one (mktemp) when it is unset; status and stop need it
# set and touch only the server of that run dir. The heap is small
# (ICEBERG_REST_HEAP_OPTS, default -Xmx256m -Xms64m) because the machine is
# shared. start waits at most $SLUICE_ICEBERG_REST_START_TIMEOUT seconds
# (default 120) for GET <url>/v1/config to answer 200.
set -euo pipefail

VERSION="${SLUICE_ICEBERG_REST_VERSION:-1.10.1}"
HADOOP_VERSION=3.4.1
JETTY_VERSION=11.0.25
SQLITE_JDBC_VERSION=3.50.3.0
SLF4J_VERSION=2.0.17
CACHE="${SLUICE_ICEBERG_REST_CACHE:-$HOME/.cache/sluice/iceberg-rest-$VERSION}"
START_TIMEOUT="${SLUICE_ICEBERG_REST_START_TIMEOUT:-120}" # seconds
HEAP="${ICEBERG_REST_HEAP_OPTS:--Xmx256m -Xms64m}"

LIB_NAME=iceberg-rest.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUN="${SLUICE_ICEBERG_REST_RUN:-}"
case "${1:-}" in
  fetch) ;;
  start)
    RUN=$(new_run_dir iceberg-rest)
    ;;
  status | stop)
    [[ -n "$RUN" ]] || {
      echo "iceberg-rest.sh: set SLUICE_ICEBERG_REST_RUN to the run dir that start printed" >&2
      exit 2
    }
    ;;
  *)
    echo "usage: $0 fetch|start|status|stop" >&2
    exit 2
    ;;
esac

pom() {
  local dep
  cat <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.sluice.scripts</groupId>
  <artifactId>iceberg-rest-fixture</artifactId>
  <version>1</version>
  <dependencies>
EOF
  for dep in \
    "org.apache.iceberg iceberg-open-api $VERSION test-fixtures" \
    "org.apache.iceberg iceberg-core $VERSION" \
    "org.apache.iceberg iceberg-core $VERSION tests" \
    "org.apache.iceberg iceberg-aws $VERSION" \
    "org.apache.iceberg iceberg-gcp $VERSION" \
    "org.apache.iceberg iceberg-azure $VERSION" \
    "org.eclipse.jetty jetty-servlet $JETTY_VERSION" \
    "org.eclipse.jetty jetty-server $JETTY_VERSION" \
    "org.xerial sqlite-jdbc $SQLITE_JDBC_VERSION" \
    "org.slf4j slf4j-simple $SLF4J_VERSION"; do
    # shellcheck disable=SC2086
    set -- $dep
    echo "    <dependency><groupId>$1</groupId><artifactId>$2</artifactId><version>$3</version>${4:+<classifier>$4</classifier>}</dependency>"
  done
  cat <<EOF
    <dependency>
      <groupId>org.apache.hadoop</groupId><artifactId>hadoop-common</artifactId><version>$HADOOP_VERSION</version>
      <exclusions>
EOF
  for dep in org.eclipse.jetty com.sun.jersey com.github.pjfanning org.apache.zookeeper org.apache.curator \
    org.apache.kerby ch.qos.reload4j org.slf4j log4j; do
    echo "        <exclusion><groupId>$dep</groupId><artifactId>*</artifactId></exclusion>"
  done
  cat <<EOF
        <exclusion><groupId>org.apache.avro</groupId><artifactId>avro</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
EOF
}

launcher_source() {
  cat <<'EOF'
package org.apache.iceberg.rest;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.gzip.GzipHandler;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

/** RESTCatalogServer's server on 127.0.0.1 and a free port: args RUN_DIR. */
public final class SluiceRestFixture {
  private SluiceRestFixture() {}

  public static void main(String[] args) throws Exception {
    Path run = Paths.get(args[0]).toAbsolutePath();
    Path warehouse = run.resolve("warehouse");
    Files.createDirectories(warehouse);
    Map<String, String> props = new HashMap<>(RCKUtils.environmentCatalogConfig());
    props.putIfAbsent("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");
    props.putIfAbsent("uri", "jdbc:sqlite:" + run.resolve("catalog.db"));
    props.putIfAbsent("jdbc.schema-version", "V1");
    props.putIfAbsent("warehouse", "file://" + warehouse);
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", props, new Configuration());
    RESTCatalogServlet servlet =
        new RESTCatalogServlet(
            new RESTServerCatalogAdapter(new RESTCatalogServer.CatalogContext(catalog, props)));
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(servlet), "/*");
    context.insertHandler(new GzipHandler());
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(0);
    server.addConnector(connector);
    server.setHandler(context);
    server.setStopAtShutdown(true);
    server.start();
    Path tmp = run.resolve("port.tmp");
    Files.writeString(tmp, Integer.toString(connector.getLocalPort()));
    Files.move(tmp, run.resolve("port"), StandardCopyOption.ATOMIC_MOVE);
    server.join();
  }
}
EOF
}

# fetch_into DIR: the fixture's jars (DIR/lib) and the compiled launcher
# (DIR/classes).
fetch_into() {
  local part=$1
  pom >"$part/pom.xml"
  mvn_quiet "$part" "Apache Iceberg $VERSION's REST catalog fixture and its dependencies into $CACHE" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$part/lib" || return 1
  mkdir -p "$part/src/org/apache/iceberg/rest" "$part/classes"
  launcher_source >"$part/src/org/apache/iceberg/rest/SluiceRestFixture.java"
  if ! javac -nowarn -d "$part/classes" -cp "$part/lib/*" "$part/src/org/apache/iceberg/rest/SluiceRestFixture.java" >"$part/javac.log" 2>&1; then
    cat "$part/javac.log" >&2
    log "javac could not compile the launcher"
    return 1
  fi
}

fetch() {
  if [[ -f "$CACHE/.complete" ]]; then return 0; fi
  need mvn "apt-get install maven"
  need javac "apt-get install default-jdk-headless"
  cache_fill "$CACHE" fetch_into || die "could not fetch the REST catalog fixture into $CACHE"
}

url() { echo "http://127.0.0.1:$(cat "$RUN/port")"; }

address() {
  echo "SLUICE_ICEBERG_REST=$(url)"
  echo "SLUICE_ICEBERG_REST_WAREHOUSE=file://$RUN/warehouse"
  echo "SLUICE_ICEBERG_REST_RUN=$RUN"
}

running() { pid_alive "$RUN/pid"; }

ready() { [[ -f "$RUN/port" && $(http_code "$(url)/v1/config") == 200 ]]; }

stop_server() { stop_pid "$RUN/pid" TERM server; }

start() {
  if running && ready; then
    log "already running"
    address
    return 0
  fi
  command -v java >/dev/null || die "java not found (apt-get install default-jre-headless)"
  command -v curl >/dev/null || die "curl not found (apt-get install curl)"
  fetch
  mkdir -p "$RUN/tmp"
  chmod 700 "$RUN"
  rm -f "$RUN/port"
  log "starting Apache Iceberg $VERSION's REST catalog on 127.0.0.1 (run dir $RUN)"
  # shellcheck disable=SC2086
  (cd "$RUN" && exec nohup java $HEAP -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k \
    -Djava.awt.headless=true -Djava.io.tmpdir="$RUN/tmp" \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$CACHE/classes:$CACHE/lib/*" org.apache.iceberg.rest.SluiceRestFixture "$RUN" \
    >"$RUN/server.log" 2>&1 </dev/null) &
  echo $! >"$RUN/pid"
  local rc=0
  wait_for "$START_TIMEOUT" "$RUN/pid" 0.25 ready || rc=$?
  if ((rc)); then
    tail -n 50 "$RUN/server.log" >&2 2>/dev/null || true
    ((rc == 1)) && die "the REST catalog exited during start (log: $RUN/server.log)"
    stop_server
    die "the REST catalog did not answer GET /v1/config with 200 within ${START_TIMEOUT}s (log: $RUN/server.log)"
  fi
  address
}

case "$1" in
  fetch) fetch ;;
  start) start ;;
  status)
    if running && ready; then
      address
    else
      log "not running"
      exit 1
    fi
    ;;
  stop)
    stop_server
    rm -rf "$RUN"
    ;;
esac
