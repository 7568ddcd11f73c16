#!/usr/bin/env bash
# Runs a private standalone Apache Hive Metastore (Thrift service) on
# 127.0.0.1 for the Hive partition commit policy's real-server tests
# (connectors/hive).
#
#   scripts/hive-metastore.sh fetch    # only fetch the jars into the cache
#   scripts/hive-metastore.sh start    # fetch if needed, start, wait for the Thrift port, print SLUICE_HIVE_METASTORE=127.0.0.1:<port>
#   scripts/hive-metastore.sh status   # print SLUICE_HIVE_METASTORE=… and exit 0 if running, exit 1 otherwise
#   scripts/hive-metastore.sh stop     # stop the metastore (SIGTERM, then SIGKILL), remove its run dir
#   scripts/hive-metastore.sh kill9    # kill -9 the metastore, keep its Derby database (for crash tests)
#   scripts/hive-metastore.sh restart  # start again on the same port and database after kill9
#
# The jars are org.apache.hive:hive-standalone-metastore-server:$SLUICE_HIVE_METASTORE_VERSION
# (default 4.0.1) and its runtime dependencies, fetched from Maven Central
# with `mvn dependency:copy-dependencies` on a generated pom (so MAVEN_OPTS /
# ~/.m2/settings.xml select the repository, as for scripts/kafka.sh) and
# cached in $SLUICE_HIVE_METASTORE_CACHE (default
# $HOME/.cache/sluice/hive-metastore-<version>, about 130 MB). The pom
# leaves out jdk.tools (a Java 8 system jar that Java 17 has not) and the
# old hadoop-common 2.6.0 that a metrics reporter drags in (its hadoop-auth
# clashes with Hadoop 3); it adds hadoop-client-runtime 3.3.5 (the shaded
# classes hadoop-client-api needs), hadoop-hdfs 3.3.5 without its
# dependencies (create_table's Warehouse.mkdirs catches its
# SnapshotException: NoClassDefFoundError without it) and commons-cli. The metadata
# transformer is off (-Dmetastore.metadata.transformer.class= ; an empty
# value in metastore-site.xml counts as unset): it
# translates tables for Hive's own clients and needs HDFS classes that
# are not there (create_table failed with NoClassDefFoundError
# org/apache/hadoop/hdfs/protocol/SnapshotException).
#
# The metastore keeps its catalog in an embedded Derby database in its run
# dir, created on the first start by DataNucleus
# (datanucleus.schema.autoCreateAll; the server jar has no schematool SQL
# scripts), and its warehouse in <run dir>/warehouse. Thrift (binary
# protocol, buffered transport, no SASL) listens on 127.0.0.1 only, on a
# free port. The run dir is $SLUICE_HIVE_METASTORE_RUN (start makes a new
# one with mktemp when it is unset and prints SLUICE_HIVE_METASTORE_RUN=<dir>);
# status, stop, kill9 and restart need it set and touch only the metastore
# of that run dir. The heap is HIVE_METASTORE_HEAP (default -Xms128m
# -Xmx512m) because the machine is shared. Logs (WARN and up):
# <run dir>/metastore.log and stdout.log.
#
# Usage in a test script:
#   export SLUICE_HIVE_METASTORE_RUN=$(mktemp -d)
#   trap 'scripts/hive-metastore.sh stop' EXIT
#   eval "$(scripts/hive-metastore.sh start | grep '^SLUICE_HIVE_METASTORE=')"
#   export SLUICE_HIVE_METASTORE
# or, by hand:  eval "$(scripts/hive-metastore.sh start)"; export SLUICE_HIVE_METASTORE SLUICE_HIVE_METASTORE_RUN
set -euo pipefail

VERSION="${SLUICE_HIVE_METASTORE_VERSION:-4.0.1}"
RUNVAR=SLUICE_HIVE_METASTORE_RUN
CACHE="${SLUICE_HIVE_METASTORE_CACHE:-$HOME/.cache/sluice/hive-metastore-$VERSION}"
HEAP="${HIVE_METASTORE_HEAP:--Xms128m -Xmx512m}"
START_TIMEOUT="${SLUICE_HIVE_METASTORE_START_TIMEOUT:-240}" # seconds
RUN="${!RUNVAR:-}"
case "${1:-}" in
  fetch) ;;
  start)
    if [[ -z "$RUN" ]]; then RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-hive-metastore.XXXXXX"); fi
    ;;
  *)
    [[ -n "$RUN" ]] || { echo "hive-metastore.sh: set $RUNVAR to the run dir that start printed" >&2; exit 2; }
    ;;
esac

LIB_NAME=hive-metastore.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fetch() {
  need mvn "apt-get install maven"
  need java "Java 17 is required"
  if [[ -f "$CACHE/.complete" ]]; then return 0; fi
  local tmp
  tmp=$(mktemp -d)
  cat >"$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.sluice.scripts</groupId>
  <artifactId>hive-metastore-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.hive</groupId>
      <artifactId>hive-standalone-metastore-server</artifactId>
      <version>$VERSION</version>
      <exclusions>
        <exclusion><groupId>jdk.tools</groupId><artifactId>jdk.tools</artifactId></exclusion>
        <exclusion><groupId>org.apache.hadoop</groupId><artifactId>hadoop-common</artifactId></exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-client-runtime</artifactId>
      <version>3.3.5</version>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-hdfs</artifactId>
      <version>3.3.5</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
    <dependency>
      <groupId>commons-cli</groupId>
      <artifactId>commons-cli</artifactId>
      <version>1.5.0</version>
    </dependency>
  </dependencies>
</project>
EOF
  mvn_quiet "$tmp" "hive-standalone-metastore-server $VERSION and its dependencies into $CACHE" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/lib" || {
    rm -rf "$tmp"
    exit 1
  }
  rm -rf "$CACHE"
  mkdir -p "$(dirname "$CACHE")"
  mv "$tmp/lib" "$CACHE"
  rm -rf "$tmp"
  touch "$CACHE/.complete"
}

address() {
  echo "SLUICE_HIVE_METASTORE=127.0.0.1:$(cat "$RUN/port")"
  echo "$RUNVAR=$RUN"
}

running() { pid_alive "$RUN/pid"; }

# listening: the Thrift port accepts connections (the metastore opens it
# after it created its schema and the default database).
listening() {
  python3 - "$(cat "$RUN/port")" <<'EOF' 2>/dev/null
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
s.close()
EOF
}

show_logs() {
  tail -n 60 "$RUN/stdout.log" >&2 2>/dev/null || true
  tail -n 60 "$RUN/metastore.log" >&2 2>/dev/null || true
}

write_config() {
  local port=$1
  mkdir -p "$RUN/conf" "$RUN/warehouse" "$RUN/tmp"
  cat >"$RUN/conf/metastore-site.xml" <<EOF
<?xml version="1.0"?>
<configuration>
  <property><name>metastore.thrift.bind.host</name><value>127.0.0.1</value></property>
  <property><name>metastore.thrift.port</name><value>$port</value></property>
  <property><name>metastore.thrift.uris</name><value>thrift://127.0.0.1:$port</value></property>
  <property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:derby:;databaseName=$RUN/metastore_db;create=true</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name><value>org.apache.derby.jdbc.EmbeddedDriver</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>metastore.schema.verification</name><value>false</value></property>
  <property><name>metastore.warehouse.dir</name><value>file://$RUN/warehouse</value></property>
  <property><name>metastore.warehouse.external.dir</name><value>file://$RUN/warehouse/external</value></property>
  <property><name>metastore.event.db.notification.api.auth</name><value>false</value></property>
</configuration>
EOF
  cat >"$RUN/conf/log4j2.properties" <<EOF
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = $RUN/metastore.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
EOF
  echo "$port" >"$RUN/port"
}

launch() {
  local port
  port=$(cat "$RUN/port")
  log "starting Hive Metastore $VERSION on 127.0.0.1:$port (run dir $RUN)"
  # shellcheck disable=SC2086 # HEAP is a list of JVM options
  (cd "$RUN" && exec nohup java $HEAP -XX:-HeapDumpOnOutOfMemoryError \
    -Djava.io.tmpdir="$RUN/tmp" -Dderby.system.home="$RUN" \
    -Dlog4j2.configurationFile="$RUN/conf/log4j2.properties" \
    -Dmetastore.metadata.transformer.class= \
    -cp "$RUN/conf:$CACHE/*" org.apache.hadoop.hive.metastore.HiveMetaStore -p "$port" \
    >"$RUN/stdout.log" 2>&1 </dev/null) &
  echo $! >"$RUN/pid"
  local start=$SECONDS rc=0
  wait_for "$START_TIMEOUT" "$RUN/pid" 0.5 listening || rc=$?
  if ((rc)); then
    show_logs
    ((rc == 1)) && die "the metastore exited during start (logs in $RUN)"
    stop_node KILL
    die "the metastore did not open 127.0.0.1:$port within ${START_TIMEOUT}s"
  fi
  log "Hive Metastore is up after $((SECONDS - start))s"
  address
}

start() {
  if running; then
    log "already running"
    address
    return 0
  fi
  fetch
  rm -rf "$RUN"
  mkdir -p "$RUN"
  chmod 700 "$RUN"
  write_config "$(free_port)"
  launch
}

# stop_node SIG: signal the JVM and wait for it to exit (SIGKILL after 30 s).
stop_node() { stop_pid "$RUN/pid" "${1:-TERM}"; }

cmd="${1:-}"
case "$cmd" in
  fetch) fetch ;;
  start) start ;;
  status)
    if running; then
      address
    else
      log "not running"
      exit 1
    fi
    ;;
  stop)
    stop_node TERM
    rm -rf "$RUN"
    ;;
  kill9) stop_node KILL ;;
  restart)
    [[ -f "$RUN/conf/metastore-site.xml" ]] || die "no metastore to restart in $RUN (run start first)"
    running && die "the metastore is still running"
    launch
    ;;
  *)
    echo "usage: $0 fetch|start|status|stop|kill9|restart" >&2
    exit 2
    ;;
esac
