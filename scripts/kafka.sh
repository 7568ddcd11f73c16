#!/usr/bin/env bash
# Runs a private single-node Apache Kafka 4.x broker (KRaft, broker+controller
# in one process) on 127.0.0.1 for the Kafka connector's real-broker tests.
#
#   scripts/kafka.sh fetch    # only fetch the jars into the cache
#   scripts/kafka.sh start    # fetch if needed, start, wait, print SLUICE_KAFKA_BROKERS=127.0.0.1:<port>
#   scripts/kafka.sh status   # print SLUICE_KAFKA_BROKERS=… and exit 0 if running, exit 1 otherwise
#   scripts/kafka.sh stop     # stop the broker (SIGTERM, then SIGKILL), remove its data
#   scripts/kafka.sh kill9    # kill -9 the broker, keep its data (for crash tests)
#   scripts/kafka.sh restart  # start again on the same port and data after kill9/stop-keep
#
# The jars (org.apache.kafka:kafka_2.13 and its runtime dependencies) come from
# Maven Central through `mvn dependency:copy-dependencies` and are cached in
# $SLUICE_KAFKA_CACHE (default $HOME/.cache/sluice/kafka-$SLUICE_KAFKA_VERSION).
# The broker's config, data, PID and logs live in $SLUICE_KAFKA_RUN (default
# ${TMPDIR:-/tmp}/sluice-kafka). The heap is small (KAFKA_HEAP_OPTS, default
# -Xmx512m -Xms256m) because the machine is shared.
#
# Usage in a test script:
#   eval "$(scripts/kafka.sh start | grep '^SLUICE_KAFKA_BROKERS=')"
#   export SLUICE_KAFKA_BROKERS
#   trap 'scripts/kafka.sh stop' EXIT
set -euo pipefail

VERSION="${SLUICE_KAFKA_VERSION:-4.4.0}"
CACHE="${SLUICE_KAFKA_CACHE:-$HOME/.cache/sluice/kafka-$VERSION}"
RUN="${SLUICE_KAFKA_RUN:-${TMPDIR:-/tmp}/sluice-kafka}"
HEAP="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"
START_TIMEOUT="${SLUICE_KAFKA_START_TIMEOUT:-120}" # seconds

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }

fetch() {
  if [[ -f "$CACHE/.complete-2" ]]; then return 0; fi
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
  command -v java >/dev/null || die "java not found (Java 17+ is required)"
  mkdir -p "$CACHE"
  local tmp
  tmp=$(mktemp -d)
  cat >"$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.sluice</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
EOF
  log "fetching org.apache.kafka:kafka_2.13:$VERSION and dependencies into $CACHE"
  if ! mvn -B -q -f "$tmp/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$CACHE" >"$tmp/mvn.log" 2>&1; then
    cat "$tmp/mvn.log" >&2
    rm -rf "$tmp"
    die "maven could not fetch kafka_2.13:$VERSION"
  fi
  rm -rf "$tmp"
  ls "$CACHE"/kafka_2.13-*.jar >/dev/null 2>&1 || die "kafka_2.13 jar missing in $CACHE"
  touch "$CACHE/.complete-2"
}

free_port() {
  python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running() {
  [[ -f "$RUN/pid" ]] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null
}

write_config() {
  local port=$1 cport=$2
  mkdir -p "$RUN/data"
  cat >"$RUN/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$RUN/data
num.partitions=1
num.network.threads=2
num.io.threads=2
background.threads=2
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
min.insync.replicas=1
default.replication.factor=1
group.initial.rebalance.delay.ms=0
transaction.max.timeout.ms=900000
transaction.abort.timed.out.transaction.cleanup.interval.ms=10000
transaction.remove.expired.transaction.cleanup.interval.ms=60000
auto.create.topics.enable=true
delete.topic.enable=true
log.segment.bytes=67108864
log.retention.check.interval.ms=300000
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
  cat >"$RUN/log4j2.properties" <<EOF
appender.f.type = File
appender.f.name = F
appender.f.fileName = $RUN/server.log
appender.f.layout.type = PatternLayout
appender.f.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.f.ref = F
logger.ks.name = kafka.server.KafkaRaftServer
logger.ks.level = INFO
EOF
  echo "$port" >"$RUN/port"
}

launch() {
  local port
  port=$(cat "$RUN/port")
  log "starting broker on 127.0.0.1:$port (run dir $RUN)"
  # shellcheck disable=SC2086
  nohup java $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$RUN/log4j2.properties" \
    -cp "$CACHE/*" kafka.Kafka "$RUN/server.properties" \
    >"$RUN/stdout.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local deadline=$((SECONDS + START_TIMEOUT))
  while ! port_open "$port"; do
    if ! running; then
      tail -n 50 "$RUN/stdout.log" "$RUN/server.log" >&2 2>/dev/null || true
      die "broker exited during start"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 50 "$RUN/stdout.log" "$RUN/server.log" >&2 2>/dev/null || true
      stop_broker KILL
      die "broker did not answer on 127.0.0.1:$port within ${START_TIMEOUT}s"
    fi
    sleep 0.5
  done
  # The port opens before the broker has registered with its controller;
  # wait (bounded) for the startup line too.
  local ready=$((SECONDS + 30))
  while ! grep -q "Kafka Server started" "$RUN/server.log" 2>/dev/null; do
    if ((SECONDS >= ready || SECONDS >= deadline)); then
      log "no startup line in $RUN/server.log; going on since the port answers"
      break
    fi
    running || die "broker exited during start"
    sleep 0.5
  done
  echo "SLUICE_KAFKA_BROKERS=127.0.0.1:$port"
}

start() {
  if running; then
    log "already running"
    echo "SLUICE_KAFKA_BROKERS=127.0.0.1:$(cat "$RUN/port")"
    return 0
  fi
  fetch
  rm -rf "$RUN"
  mkdir -p "$RUN"
  write_config "$(free_port)" "$(free_port)"
  local cluster_id
  cluster_id=$(java -cp "$CACHE/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  [[ -n "$cluster_id" ]] || die "could not create a cluster id"
  java -Xmx256m -Dlog4j2.configurationFile="$RUN/log4j2.properties" -cp "$CACHE/*" kafka.tools.StorageTool format \
    -t "$cluster_id" -c "$RUN/server.properties" --standalone >"$RUN/format.log" 2>&1 ||
    java -Xmx256m -Dlog4j2.configurationFile="$RUN/log4j2.properties" -cp "$CACHE/*" kafka.tools.StorageTool format \
      -t "$cluster_id" -c "$RUN/server.properties" >>"$RUN/format.log" 2>&1 ||
    { cat "$RUN/format.log" >&2; die "storage format failed"; }
  launch
}

# stop_broker SIGNAL: signals the broker and waits (bounded) until it is gone.
stop_broker() {
  local sig=${1:-TERM}
  [[ -f "$RUN/pid" ]] || return 0
  local pid
  pid=$(cat "$RUN/pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 60; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "broker $pid ignored SIG$sig for 30s; killing"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 20; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
      done
    fi
  fi
  rm -f "$RUN/pid"
}

cmd="${1:-}"
case "$cmd" in
  fetch) fetch ;;
  start) start ;;
  status)
    if running; then
      echo "SLUICE_KAFKA_BROKERS=127.0.0.1:$(cat "$RUN/port")"
    else
      log "not running"
      exit 1
    fi
    ;;
  stop)
    stop_broker TERM
    rm -rf "$RUN"
    ;;
  kill9) stop_broker KILL ;;
  restart)
    [[ -f "$RUN/server.properties" ]] || die "no broker to restart in $RUN (run start first)"
    running && die "broker is still running"
    launch
    ;;
  *)
    echo "usage: $0 fetch|start|status|stop|kill9|restart" >&2
    exit 2
    ;;
esac
