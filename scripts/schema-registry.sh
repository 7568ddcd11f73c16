#!/usr/bin/env bash
# Runs a private Apicurio Registry (in-memory H2 storage) on 127.0.0.1 for
# the schema-registry tests: a real registry with the Confluent-compatible
# REST API at /apis/ccompat/v7.
#
#   scripts/schema-registry.sh fetch   # only fetch and unpack the registry into the cache
#   scripts/schema-registry.sh start   # fetch if needed, start, wait until it answers, print:
#                                      #   export SLUICE_SCHEMA_REGISTRY=http://127.0.0.1:<port>/apis/ccompat/v7
#                                      #   export SLUICE_SCHEMA_REGISTRY_RUN=<run dir>
#   scripts/schema-registry.sh status  # print the same lines and exit 0 if running, exit 1 otherwise
#   scripts/schema-registry.sh stop    # stop it (SIGTERM, then SIGKILL) and remove its run dir
#
# By hand:  eval "$(scripts/schema-registry.sh start)"   … tests …   scripts/schema-registry.sh stop
#
# Which registry and why: Apicurio Registry, an Apache-2.0 registry whose
# ccompat API speaks Confluent's Schema Registry protocol, and one that
# Maven Central serves ready to run: every release deploys
# io.apicurio:apicurio-registry-app:<version>:tar.gz:all, the Quarkus
# "fast-jar" build (quarkus-run.jar for 3.x, a -runner.jar for
# 2.x) with all its libraries. Its default storage is an in-memory H2
# database, so nothing outlives the process. Confluent's own registry is not
# on Maven Central (io.confluent artifacts live in Confluent's repository,
# which this machine does not reach), and Karapace needs a Kafka cluster as
# its store and is not in the package lists of the registries reached here.
#
# Version: $SLUICE_SCHEMA_REGISTRY_VERSION, default 3.3.3, which needs Java
# 21 or later. The java used is the first of $SLUICE_SCHEMA_REGISTRY_JAVA,
# $JAVA_HOME/bin/java, java on PATH and /usr/lib/jvm/*/bin/java (newest
# first; that directory is $SLUICE_SCHEMA_REGISTRY_JVM_DIR when set) that is
# new enough. When the version is not set and no Java 21+ is found, it falls
# back to 2.6.13.Final, which runs on Java 17, and says so.
#
# The tar.gz comes from Maven Central through `mvn dependency:copy` (the
# local Maven repository keeps its copy, as for every artifact) and is
# unpacked into $SLUICE_SCHEMA_REGISTRY_CACHE (default
# $HOME/.cache/sluice/apicurio-registry-<version>, beside kafka.sh's cache).
# The registry's log, PID and temporary files live in its run dir,
# $SLUICE_SCHEMA_REGISTRY_RUN: start makes a new one (mktemp) when it is
# unset; status and stop need it set and touch only the registry of that run
# dir. The heap is small (SCHEMA_REGISTRY_HEAP_OPTS, default -Xmx192m
# -Xms64m) because the machine is shared. The HTTP port and Quarkus's
# management port are free loopback ports picked at start. The global
# compatibility level is set to $SLUICE_SCHEMA_REGISTRY_COMPATIBILITY
# (default BACKWARD, Confluent's default; Apicurio's is NONE) through
# PUT /config once it answers. start waits at most
# $SLUICE_SCHEMA_REGISTRY_START_TIMEOUT seconds (default 120) for
# GET <url>/subjects to answer 200; on failure it prints the tail of the
# log, <run dir>/registry.log.
set -euo pipefail

DEFAULT_VERSION=3.3.3
FALLBACK_VERSION=2.6.13.Final # runs on Java 17
START_TIMEOUT="${SLUICE_SCHEMA_REGISTRY_START_TIMEOUT:-120}" # seconds
HEAP="${SCHEMA_REGISTRY_HEAP_OPTS:--Xmx192m -Xms64m}"

LIB_NAME=schema-registry.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUN="${SLUICE_SCHEMA_REGISTRY_RUN:-}"
case "${1:-}" in
  fetch) ;;
  start) ;; # start makes the run dir once java, curl and the registry are there
  status | stop)
    [[ -n "$RUN" ]] || {
      log "set SLUICE_SCHEMA_REGISTRY_RUN to the run dir that start printed"
      exit 2
    }
    ;;
  *)
    echo "usage: $0 fetch|start|status|stop" >&2
    exit 2
    ;;
esac

# java_major JAVA: the feature version of that java (17, 21, 25…), or 0.
java_major() {
  local v
  v=$("$1" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}') || true
  v=${v%%.*}
  [[ "$v" =~ ^[0-9]+$ ]] && echo "$v" || echo 0
}

# find_java MIN: prints the first java of at least feature version MIN.
find_java() {
  local min=$1 c
  local candidates=()
  [[ -n "${SLUICE_SCHEMA_REGISTRY_JAVA:-}" ]] && candidates+=("$SLUICE_SCHEMA_REGISTRY_JAVA")
  [[ -n "${JAVA_HOME:-}" ]] && candidates+=("$JAVA_HOME/bin/java")
  command -v java >/dev/null && candidates+=("$(command -v java)")
  while IFS= read -r c; do candidates+=("$c"); done < <(printf '%s\n' "${SLUICE_SCHEMA_REGISTRY_JVM_DIR:-/usr/lib/jvm}"/*/bin/java | sort -rV)
  for c in "${candidates[@]}"; do
    [[ -x "$c" ]] || continue
    if (($(java_major "$c") >= min)); then
      echo "$c"
      return 0
    fi
  done
  return 1
}

# min_java VERSION: the Java feature version that registry version needs.
min_java() {
  case "$1" in
    1.* | 2.*) echo 17 ;;
    *) echo 21 ;;
  esac
}

# Pick the version and the java that runs it.
if [[ -n "${SLUICE_SCHEMA_REGISTRY_VERSION:-}" ]]; then
  VERSION=$SLUICE_SCHEMA_REGISTRY_VERSION
  JAVA=$(find_java "$(min_java "$VERSION")") || JAVA=""
else
  VERSION=$DEFAULT_VERSION
  if ! JAVA=$(find_java "$(min_java "$VERSION")"); then
    VERSION=$FALLBACK_VERSION
    JAVA=$(find_java "$(min_java "$VERSION")") || JAVA=""
    if [[ -n "$JAVA" && "${1:-}" != status && "${1:-}" != stop ]]; then
      log "no Java $(min_java $DEFAULT_VERSION)+ found (set SLUICE_SCHEMA_REGISTRY_JAVA); using Apicurio Registry $VERSION on $JAVA"
    fi
  fi
fi
CACHE="${SLUICE_SCHEMA_REGISTRY_CACHE:-$HOME/.cache/sluice/apicurio-registry-$VERSION}"

# fill DIR: the registry's files, unpacked into DIR (for cache_fill,
# which renames DIR into place when whole: a second run fetching at the
# same time never sees half a cache).
fill() {
  local part=$1 tmp artifact="io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all"
  tmp=$(mktemp -d)
  if ! mvn_quiet "$tmp" "$artifact into $CACHE" dependency:copy -Dartifact="$artifact" -DoutputDirectory="$tmp/dl"; then
    rm -rf "$tmp"
    return 1
  fi
  if ! tar -xzf "$tmp"/dl/apicurio-registry-app-*-all.tar.gz -C "$part"; then
    rm -rf "$tmp"
    log "could not unpack $artifact"
    return 1
  fi
  rm -rf "$tmp"
  if [[ ! -f "$part/quarkus-run.jar" ]] && ! ls "$part"/apicurio-registry-app-*-runner.jar >/dev/null 2>&1; then
    log "$artifact holds no quarkus-run.jar or *-runner.jar"
    return 1
  fi
}

fetch() {
  if [[ -f "$CACHE/.complete" ]]; then return 0; fi
  need mvn "apt-get install maven"
  cache_fill "$CACHE" fill || die "could not fetch Apicurio Registry $VERSION into $CACHE"
}

# launcher: the jar to run — quarkus-run.jar (3.x) or the -runner.jar (2.x).
launcher() {
  local j
  for j in "$CACHE/quarkus-run.jar" "$CACHE"/apicurio-registry-app-*-runner.jar; do
    if [[ -f "$j" ]]; then
      echo "$j"
      return 0
    fi
  done
  return 1
}

url() { echo "http://127.0.0.1:$(cat "$RUN/port")/apis/ccompat/v7"; }

address() {
  echo "# Apicurio Registry $(cat "$RUN/version" 2>/dev/null || echo "$VERSION") (ccompat API)"
  echo "export SLUICE_SCHEMA_REGISTRY=$(url)"
  echo "export SLUICE_SCHEMA_REGISTRY_RUN=$RUN"
}

running() { pid_alive "$RUN/pid"; }

# ready: GET <url>/subjects answers 200.
ready() { [[ $(http_code "$(url)/subjects") == 200 ]]; }

stop_registry() { stop_pid "$RUN/pid" TERM registry; }

start() {
  if running; then
    log "already running"
    address
    return 0
  fi
  need curl "apt-get install curl"
  [[ -n "$JAVA" ]] || die "no Java $(min_java "$VERSION")+ found for Apicurio Registry $VERSION (3.x needs Java 21+, 2.x Java 17+): install one (apt-get install default-jre-headless) or set SLUICE_SCHEMA_REGISTRY_JAVA to its java; SLUICE_SCHEMA_REGISTRY_VERSION picks the registry version"
  fetch
  local jar port mport
  jar=$(launcher) || die "no quarkus-run.jar or *-runner.jar in $CACHE"
  RUN=$(new_run_dir schema-registry)
  rm -rf "$RUN"
  mkdir -p "$RUN/tmp"
  chmod 700 "$RUN"
  port=$(free_port)
  mport=$(free_port)
  echo "$port" >"$RUN/port"
  echo "$VERSION" >"$RUN/version"
  log "starting Apicurio Registry $VERSION on 127.0.0.1:$port with $JAVA (run dir $RUN)"
  # Connection pool: Apicurio keeps 20 H2 connections by default; a test
  # registry needs few. registry.ccompat.use-canonical-hash (2.x; 3.x does
  # this already) makes a schema registered again with other whitespace
  # return its id instead of making a new version, as Confluent's does.
  # shellcheck disable=SC2086
  (cd "$RUN" && exec nohup "$JAVA" $HEAP -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k \
    -Djava.awt.headless=true -Djava.io.tmpdir="$RUN/tmp" \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$mport" \
    -Dapicurio.datasource.jdbc.initial-size=2 -Dapicurio.datasource.jdbc.min-size=2 \
    -Dapicurio.datasource.jdbc.max-size=20 \
    -Dapicurio.storage.snapshot.location="$RUN/tmp" \
    -Dregistry.ccompat.use-canonical-hash=true \
    -jar "$jar" >"$RUN/registry.log" 2>&1 </dev/null) &
  echo $! >"$RUN/pid"
  local rc=0
  wait_for "$START_TIMEOUT" "$RUN/pid" 0.25 ready || rc=$?
  if ((rc)); then
    tail -n 50 "$RUN/registry.log" >&2 2>/dev/null || true
    ((rc == 1)) && die "registry exited during start (log: $RUN/registry.log)"
    stop_registry
    die "registry did not answer GET $(url)/subjects with 200 within ${START_TIMEOUT}s (log: $RUN/registry.log)"
  fi
  # Confluent's registry checks BACKWARD compatibility unless told
  # otherwise; Apicurio's global default is NONE. Tests see Confluent's.
  local compat="${SLUICE_SCHEMA_REGISTRY_COMPATIBILITY:-BACKWARD}" code
  code=$(curl -s -o "$RUN/config.out" -m 10 -w '%{http_code}' -X PUT \
    -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
    -d "{\"compatibility\":\"$compat\"}" "$(url)/config") || true
  if [[ "$code" != 200 ]]; then
    cat "$RUN/config.out" >&2 2>/dev/null || true
    stop_registry
    die "PUT $(url)/config {\"compatibility\":\"$compat\"} answered HTTP $code"
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
    stop_registry
    rm -rf "$RUN"
    ;;
esac
