#!/usr/bin/env bash
# Runs a private single-node Elasticsearch on 127.0.0.1 for the OpenSearch
# connector's real-node tests of its Elasticsearch flavor.
#
#   scripts/elasticsearch.sh fetch    # only fetch the distribution into the cache
#   scripts/elasticsearch.sh start    # fetch if needed, start, wait for health green/yellow, print SLUICE_ELASTICSEARCH_URL=…
#   scripts/elasticsearch.sh status   # print SLUICE_ELASTICSEARCH_URL=… and exit 0 if running, exit 1 otherwise
#   scripts/elasticsearch.sh stop     # stop the node (SIGTERM, then SIGKILL), remove its run dir
#   scripts/elasticsearch.sh kill9    # kill -9 the node, keep its data (for crash tests)
#   scripts/elasticsearch.sh restart  # start again on the same port and data after kill9
#
# The distribution is Elasticsearch's integration-test zip,
# org.elasticsearch.distribution.integ-test-zip:elasticsearch:$SLUICE_ELASTICSEARCH_VERSION
# (default 8.19.21, the newest 8.19.x on Maven Central), fetched with
# `mvn dependency:copy` (so MAVEN_OPTS / ~/.m2/settings.xml select the
# repository, as for scripts/kafka.sh and scripts/opensearch.sh) and
# cached as a zip in $SLUICE_ELASTICSEARCH_CACHE (default
# $HOME/.cache/sluice/elasticsearch). It has no bundled JDK (Java 17, the
# machine's default, runs it), no plugins and four modules
# (transport-netty4, x-pack-core, x-pack-security, apm): no ingest-common,
# so no ingest processors. Security is turned off
# (xpack.security.enabled: false): plain HTTP, no authentication.
#
# Each start unpacks the zip into its own run dir, $SLUICE_ELASTICSEARCH_RUN
# (start makes a new one with mktemp when it is unset and prints
# SLUICE_ELASTICSEARCH_RUN=<dir>); config, data, logs and the PID live
# there; status, stop, kill9 and restart need it set and touch only the
# node of that run dir. The node binds 127.0.0.1 only (HTTP and transport
# on free loopback ports), discovery.type=single-node, heap ES_HEAP
# (default -Xms256m -Xmx512m) because the machine is shared.
# Elasticsearch refuses to run as root: when this script runs as root, the
# node runs as the user nobody (setpriv) and the run dir is handed to it.
#
# Usage in a test script:
#   export SLUICE_ELASTICSEARCH_RUN=$(mktemp -d)
#   trap 'scripts/elasticsearch.sh stop' EXIT
#   eval "$(scripts/elasticsearch.sh start | grep '^SLUICE_ELASTICSEARCH_URL=')"
#   export SLUICE_ELASTICSEARCH_URL
# or, by hand:  eval "$(scripts/elasticsearch.sh start)"; export SLUICE_ELASTICSEARCH_URL SLUICE_ELASTICSEARCH_RUN
set -euo pipefail

VERSION="${SLUICE_ELASTICSEARCH_VERSION:-8.19.21}"
RUNVAR=SLUICE_ELASTICSEARCH_RUN
CACHE="${SLUICE_ELASTICSEARCH_CACHE:-$HOME/.cache/sluice/elasticsearch}"
HEAP="${ES_HEAP:--Xms256m -Xmx512m}"
START_TIMEOUT="${SLUICE_ELASTICSEARCH_START_TIMEOUT:-180}" # seconds
RUN="${!RUNVAR:-}"
LIB_NAME=elasticsearch.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-}" in
  fetch) ;;
  start) RUN=$(new_run_dir elasticsearch) ;;
  *) [[ -n "$RUN" ]] || { log "set $RUNVAR to the run dir that start printed"; exit 2; } ;;
esac

ZIP="$CACHE/elasticsearch-$VERSION.zip"

fetch() {
  need mvn "apt-get install maven"
  need java "Java 17+ is required"
  mkdir -p "$CACHE"
  if [[ ! -f "$CACHE/.complete-$VERSION" ]]; then
    mvn_copy "org.elasticsearch.distribution.integ-test-zip:elasticsearch:$VERSION:zip" "$ZIP"
    touch "$CACHE/.complete-$VERSION"
  fi
}

HOME_DIR="$RUN/elasticsearch-$VERSION"
CONF="$HOME_DIR/config"

url() { echo "http://127.0.0.1:$(cat "$RUN/port")"; }

address() {
  echo "SLUICE_ELASTICSEARCH_URL=$(url)"
  echo "$RUNVAR=$RUN"
}

java_home() {
  local h="${ES_JAVA_HOME:-${JAVA_HOME:-}}"
  if [[ -z "$h" ]]; then
    h=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
  fi
  echo "$h"
}

running() { pid_alive "$RUN/pid"; }

# health prints the cluster health status (green, yellow, red) or nothing.
health() {
  python3 - "$(url)/_cluster/health?timeout=2s" <<'EOF' 2>/dev/null || true
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        print(json.load(r)["status"])
except Exception:
    pass
EOF
}

# unpack ZIP DIR: unzip, or Python's zipfile (which drops the executable
# bits: put them back on the launchers).
unpack() {
  if command -v unzip >/dev/null; then
    unzip -q "$1" -d "$2"
  else
    python3 -m zipfile -e "$1" "$2" && chmod +x "$2/elasticsearch-$VERSION/bin/"*
  fi
}

# healthy: the cluster health is green or yellow.
healthy() {
  local status
  status=$(health)
  [[ "$status" == green || "$status" == yellow ]]
}

show_logs() {
  tail -n 60 "$RUN/stdout.log" >&2 2>/dev/null || true
  tail -n 60 "$RUN/logs/sluice.log" >&2 2>/dev/null || true
}

write_config() {
  local port=$1 tport=$2
  mkdir -p "$RUN/data" "$RUN/logs" "$RUN/tmp"
  cat >"$CONF/elasticsearch.yml" <<EOF
cluster.name: sluice
node.name: sluice-1
network.host: 127.0.0.1
http.port: $port
transport.port: $tport
discovery.type: single-node
path.data: $RUN/data
path.logs: $RUN/logs
# plain HTTP, no authentication: a private test node on loopback
xpack.security.enabled: false
# the machine is shared and its disk may be fuller than Elasticsearch likes
cluster.routing.allocation.disk.threshold_enabled: false
action.auto_create_index: true
EOF
  # the heap comes from ES_JAVA_OPTS; drop the distribution's settings
  sed -i -e 's/^-Xms.*$//' -e 's/^-Xmx.*$//' \
    -e "s#^-XX:HeapDumpPath=.*#-XX:HeapDumpPath=$RUN/logs#" \
    -e "s#logs/gc.log#$RUN/logs/gc.log#" \
    -e "s#^-XX:ErrorFile=.*#-XX:ErrorFile=$RUN/logs/hs_err_pid%p.log#" \
    "$CONF/jvm.options"
  echo "$port" >"$RUN/port"
}

launch() {
  local port
  port=$(cat "$RUN/port")
  log "starting Elasticsearch $VERSION on 127.0.0.1:$port (run dir $RUN)"
  local asuser=()
  if [[ $(id -u) == 0 ]]; then
    # Elasticsearch will not run as root.
    chown -R nobody:nogroup "$RUN" 2>/dev/null || chown -R 65534:65534 "$RUN"
    asuser=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  ES_JAVA_HOME="$(java_home)" ES_PATH_CONF="$CONF" ES_TMPDIR="$RUN/tmp" \
    ES_JAVA_OPTS="$HEAP -XX:-HeapDumpOnOutOfMemoryError" \
    nohup "${asuser[@]}" "$HOME_DIR/bin/elasticsearch" -p "$RUN/es.pid" \
    >"$RUN/stdout.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local rc=0
  wait_for "$START_TIMEOUT" "$RUN/pid" 0.5 healthy || rc=$?
  if ((rc)); then
    show_logs
    ((rc == 1)) && die "Elasticsearch exited during start (logs in $RUN)"
    stop_node KILL
    die "Elasticsearch did not report health green/yellow on $(url) within ${START_TIMEOUT}s"
  fi
  log "Elasticsearch is $(health) after ${SECONDS}s"
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
  unpack "$ZIP" "$RUN" || die "could not unpack $ZIP into $RUN"
  write_config "$(free_port)" "$(free_port)"
  launch
}

# stop_node SIG: signal the launcher's process (the node's JVM is its
# child: the launcher forwards the signal) and wait for it to exit, then
# for the JVM (signalled too if it outlived the launcher); KILL kills the
# JVM first.
stop_node() {
  local sig=${1:-TERM}
  [[ -f "$RUN/pid" ]] || return 0
  if [[ "$sig" == KILL ]]; then stop_pid "$RUN/es.pid" KILL node; fi
  stop_pid "$RUN/pid" "$sig" launcher
  stop_pid "$RUN/es.pid" "$sig" node
}

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
    [[ -f "$CONF/elasticsearch.yml" ]] || die "no node to restart in $RUN (run start first)"
    running && die "node is still running"
    launch
    ;;
  *)
    echo "usage: $0 fetch|start|status|stop|kill9|restart" >&2
    exit 2
    ;;
esac
