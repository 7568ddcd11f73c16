#!/usr/bin/env bash
# Runs a private single-node OpenSearch on 127.0.0.1 for the OpenSearch
# connector's real-node tests.
#
#   scripts/opensearch.sh fetch    # only fetch the distribution into the cache
#   scripts/opensearch.sh start    # fetch if needed, start, wait for health green/yellow, print SLUICE_OPENSEARCH_URL=…
#   scripts/opensearch.sh status   # print SLUICE_OPENSEARCH_URL=… and exit 0 if running, exit 1 otherwise
#   scripts/opensearch.sh stop     # stop the node (SIGTERM, then SIGKILL), remove its run dir
#   scripts/opensearch.sh kill9    # kill -9 the node, keep its data (for crash tests)
#   scripts/opensearch.sh restart  # start again on the same port and data after kill9
#
# A second, secured node for the TLS and authentication tests runs beside
# it, with its own run dir ($SLUICE_OPENSEARCH_SECURE_RUN), ports and pid:
#
#   scripts/opensearch.sh start-secure   # print SLUICE_OPENSEARCH_SECURE=<run dir>/client.json
#   scripts/opensearch.sh status-secure  # the same, exit 1 if not running
#   scripts/opensearch.sh stop-secure    # stop it, remove its run dir
#
# The integration-test zip has no security plugin, and the plugin on Maven
# Central (org.opensearch.plugin:opensearch-security) must match the
# node's version exactly and is not published for 2.19.6; so the secured
# node is $SLUICE_OPENSEARCH_SECURE_VERSION (default 2.19.4) with
# opensearch-security 2.19.4.0 installed and its demo configuration: TLS
# on HTTP with the plugin's demo certificates (the server certificate
# names 127.0.0.1 and localhost), basic authentication, the internal user
# "admin" with a random password per start. client.json (mode 0600):
#   {"url": "https://127.0.0.1:<port>", "ca_file": "<run dir>/…/root-ca.pem",
#    "user": "admin", "password": "…"}
#
# The distribution is OpenSearch's integration-test zip,
# org.opensearch.distribution.integ-test-zip:opensearch:$SLUICE_OPENSEARCH_VERSION
# (default 2.19.6), fetched from Maven Central with `mvn dependency:copy`
# (so MAVEN_OPTS / ~/.m2/settings.xml select the repository, as for
# scripts/kafka.sh) and cached as a zip in $SLUICE_OPENSEARCH_CACHE (default
# $HOME/.cache/sluice/opensearch). It has no plugins — no security
# plugin, so the node speaks plain HTTP without authentication — and one
# module (transport-netty4). Java 17 (the machine's default) runs it.
# Nor has it the ingest-common module (the set, rename, ... processors),
# and that module is not on Maven Central (neither as
# org.opensearch.module:ingest-common nor org.opensearch.plugin:ingest-common):
# the connector's TestIngestPipeline runs its processor case only on a
# node that has them.
#
# Each start unpacks the zip into its own run dir, $SLUICE_OPENSEARCH_RUN
# (start makes a new one with mktemp when it is unset and prints
# SLUICE_OPENSEARCH_RUN=<dir>); config, data, logs and the PID live there;
# status, stop, kill9 and restart need it set and touch only the node of
# that run dir. The node binds 127.0.0.1 only (HTTP and transport on free
# loopback ports), discovery.type=single-node, heap OPENSEARCH_HEAP
# (default -Xms256m -Xmx512m) because the machine is shared. OpenSearch
# refuses to run as root: when this script runs as root, the node runs as
# the user nobody (setpriv) and the run dir is handed to it.
#
# Usage in a test script:
#   export SLUICE_OPENSEARCH_RUN=$(mktemp -d)
#   trap 'scripts/opensearch.sh stop' EXIT
#   eval "$(scripts/opensearch.sh start | grep '^SLUICE_OPENSEARCH_URL=')"
#   export SLUICE_OPENSEARCH_URL
# or, by hand:  eval "$(scripts/opensearch.sh start)"; export SLUICE_OPENSEARCH_URL SLUICE_OPENSEARCH_RUN
set -euo pipefail

SECURE=0
case "${1:-}" in
  *-secure) SECURE=1 ;;
esac
if ((SECURE)); then
  # The security plugin on Maven Central must match the node's version
  # exactly, and is not published for every release (2.19.4.0: yes;
  # 2.19.5.0, 2.19.6.0: no).
  VERSION="${SLUICE_OPENSEARCH_SECURE_VERSION:-2.19.4}"
  RUNVAR=SLUICE_OPENSEARCH_SECURE_RUN
else
  VERSION="${SLUICE_OPENSEARCH_VERSION:-2.19.6}"
  RUNVAR=SLUICE_OPENSEARCH_RUN
fi
CACHE="${SLUICE_OPENSEARCH_CACHE:-$HOME/.cache/sluice/opensearch}"
HEAP="${OPENSEARCH_HEAP:--Xms256m -Xmx512m}"
START_TIMEOUT="${SLUICE_OPENSEARCH_START_TIMEOUT:-180}" # seconds
RUN="${!RUNVAR:-}"
LIB_NAME=opensearch.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-}" in
  fetch | fetch-secure) ;;
  start | start-secure) RUN=$(new_run_dir opensearch) ;;
  *) [[ -n "$RUN" ]] || { log "set $RUNVAR to the run dir that start printed"; exit 2; } ;;
esac

ZIP="$CACHE/opensearch-$VERSION.zip"
SECZIP="$CACHE/opensearch-security-$VERSION.0.zip"

fetch() {
  need mvn "apt-get install maven"
  need java "Java 17+ is required"
  mkdir -p "$CACHE"
  if [[ ! -f "$CACHE/.complete-$VERSION" ]]; then
    mvn_copy "org.opensearch.distribution.integ-test-zip:opensearch:$VERSION:zip" "$ZIP"
    touch "$CACHE/.complete-$VERSION"
  fi
  if ((SECURE)) && [[ ! -f "$CACHE/.complete-security-$VERSION" ]]; then
    mvn_copy "org.opensearch.plugin:opensearch-security:$VERSION.0:zip" "$SECZIP"
    touch "$CACHE/.complete-security-$VERSION"
  fi
}

CONF="$RUN/opensearch-$VERSION/config"

url() {
  if ((SECURE)); then
    echo "https://127.0.0.1:$(cat "$RUN/port")"
  else
    echo "http://127.0.0.1:$(cat "$RUN/port")"
  fi
}

address() {
  if ((SECURE)); then
    echo "SLUICE_OPENSEARCH_SECURE=$RUN/client.json"
  else
    echo "SLUICE_OPENSEARCH_URL=$(url)"
  fi
  echo "$RUNVAR=$RUN"
}

java_home() {
  local h="${OPENSEARCH_JAVA_HOME:-${JAVA_HOME:-}}"
  if [[ -z "$h" ]]; then
    h=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
  fi
  echo "$h"
}

running() { pid_alive "$RUN/pid"; }

# health prints the cluster health status (green, yellow, red) or nothing.
health() {
  python3 - "$(url)/_cluster/health?timeout=2s" "$RUN/client.json" <<'EOF' 2>/dev/null || true
import base64, json, os, ssl, sys, urllib.request
try:
    req, ctx = urllib.request.Request(sys.argv[1]), None
    if sys.argv[1].startswith("https:"):
        c = json.load(open(sys.argv[2]))
        ctx = ssl.create_default_context(cafile=c["ca_file"])
        tok = base64.b64encode((c["user"] + ":" + c["password"]).encode()).decode()
        req.add_header("Authorization", "Basic " + tok)
    with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
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
    python3 -m zipfile -e "$1" "$2" && chmod +x "$2/opensearch-$VERSION/bin/"*
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
  cat >"$CONF/opensearch.yml" <<EOF
cluster.name: sluice
node.name: sluice-1
network.host: 127.0.0.1
http.port: $port
transport.port: $tport
discovery.type: single-node
path.data: $RUN/data
path.logs: $RUN/logs
# the machine is shared and its disk may be fuller than OpenSearch likes
cluster.routing.allocation.disk.threshold_enabled: false
action.auto_create_index: true
EOF
  # the heap comes from OPENSEARCH_JAVA_OPTS; drop the distribution's 1g
  sed -i -e 's/^-Xms.*$//' -e 's/^-Xmx.*$//' \
    -e "s#^-XX:HeapDumpPath=.*#-XX:HeapDumpPath=$RUN/logs#" \
    -e "s#logs/gc.log#$RUN/logs/gc.log#" \
    -e "s#^-XX:ErrorFile=.*#-XX:ErrorFile=$RUN/logs/hs_err_pid%p.log#" \
    "$CONF/jvm.options"
  echo "$port" >"$RUN/port"
  if ((SECURE)); then secure_config "$port"; fi
}

# secure_config PORT: the security plugin with its demo configuration
# (TLS on HTTP and transport with the plugin's demo certificates, whose
# server certificate names 127.0.0.1 and localhost; the internal user
# "admin" with a random password), and client.json (mode 0600) with what
# a client needs: {"url", "ca_file", "user", "password"}.
secure_config() {
  local home="$RUN/opensearch-$VERSION" pw
  pw="Sx-$(python3 -c 'import secrets, string; print("".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(24)))')-9q"
  OPENSEARCH_JAVA_HOME="$(java_home)" OPENSEARCH_PATH_CONF="$CONF" \
    "$home/bin/opensearch-plugin" install --batch "file://$SECZIP" >"$RUN/plugin.log" 2>&1 ||
    { cat "$RUN/plugin.log" >&2; die "could not install the security plugin"; }
  OPENSEARCH_JAVA_HOME="$(java_home)" OPENSEARCH_INITIAL_ADMIN_PASSWORD="$pw" \
    bash "$home/plugins/opensearch-security/tools/install_demo_configuration.sh" -y -i -s >"$RUN/demo.log" 2>&1 ||
    { cat "$RUN/demo.log" >&2; die "the security plugin's demo configuration failed"; }
  (
    umask 077
    cat >"$RUN/client.json" <<EOF
{"url": "https://127.0.0.1:$1", "ca_file": "$CONF/root-ca.pem", "user": "admin", "password": "$pw"}
EOF
  )
}

launch() {
  local home="$RUN/opensearch-$VERSION" port
  port=$(cat "$RUN/port")
  log "starting OpenSearch $VERSION on 127.0.0.1:$port (run dir $RUN)"
  local asuser=()
  if [[ $(id -u) == 0 ]]; then
    # OpenSearch will not run as root.
    chown -R nobody:nogroup "$RUN" 2>/dev/null || chown -R 65534:65534 "$RUN"
    asuser=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  OPENSEARCH_JAVA_HOME="$(java_home)" OPENSEARCH_PATH_CONF="$CONF" OPENSEARCH_TMPDIR="$RUN/tmp" \
    OPENSEARCH_JAVA_OPTS="$HEAP -XX:-HeapDumpOnOutOfMemoryError" \
    nohup "${asuser[@]}" "$home/bin/opensearch" -p "$RUN/os.pid" \
    >"$RUN/stdout.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local rc=0
  wait_for "$START_TIMEOUT" "$RUN/pid" 0.5 healthy || rc=$?
  if ((rc)); then
    show_logs
    ((rc == 1)) && die "OpenSearch exited during start (logs in $RUN)"
    stop_node KILL
    die "OpenSearch did not report health green/yellow on $(url) within ${START_TIMEOUT}s"
  fi
  log "OpenSearch is $(health) after ${SECONDS}s"
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

stop_node() {
  stop_pid "$RUN/pid" "${1:-TERM}" node
  rm -f "$RUN/os.pid"
}

cmd="${1:-}"
case "$cmd" in
  fetch | fetch-secure) fetch ;;
  start | start-secure) start ;;
  status | status-secure)
    if running; then
      address
    else
      log "not running"
      exit 1
    fi
    ;;
  stop | stop-secure)
    stop_node TERM
    rm -rf "$RUN"
    ;;
  kill9) stop_node KILL ;;
  restart)
    [[ -f "$CONF/opensearch.yml" ]] || die "no node to restart in $RUN (run start first)"
    running && die "node is still running"
    launch
    ;;
  *)
    echo "usage: $0 fetch|start|status|stop|kill9|restart|fetch-secure|start-secure|status-secure|stop-secure" >&2
    exit 2
    ;;
esac
