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
# A second, secured broker for the security tests runs beside it, with its
# own run dir, ports and pid file:
#
#   scripts/kafka.sh start-secure   # start, wait, print SLUICE_KAFKA_SECURE=<run dir>/client.json
#   scripts/kafka.sh status-secure  # print SLUICE_KAFKA_SECURE=… and exit 0 if running, exit 1 otherwise
#   scripts/kafka.sh stop-secure    # stop it, remove its data
#
# It has one SASL_SSL listener for clients and inter-broker traffic
# (self-signed CA and server certificate for 127.0.0.1, made with openssl
# or keytool), SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER
# (unsecured JWTs: see write_secure_listeners), and ACL
# authorization (StandardAuthorizer, allow.everyone.if.no.acl.found=false). The controller
# listener is SASL_PLAINTEXT on loopback. Users: "admin" (PLAIN, super user;
# the broker authenticates to itself and its controller as admin) and
# "client" (PLAIN, no ACLs: tests grant what they need). SCRAM users are
# created by the tests through the admin API. Passwords are random per
# start. client.json (mode 0600) holds what a client needs:
#   {"brokers": ["127.0.0.1:<port>"], "ca_file": "<run dir>/ca.pem",
#    "admin": {"user": "admin", "password": "…"}, "client": {"user": "client", "password": "…"}}
# Its run dir is $SLUICE_KAFKA_SECURE_RUN (start makes a new one when it is
# unset and prints SLUICE_KAFKA_SECURE_RUN=<dir>), its heap KAFKA_SECURE_HEAP_OPTS (default -Xmx384m -Xms128m).
#
# The jars (org.apache.kafka:kafka_2.13 and its runtime dependencies) come from
# Maven Central through `mvn dependency:copy-dependencies` and are cached in
# $SLUICE_KAFKA_CACHE (default $HOME/.cache/sluice/kafka-$SLUICE_KAFKA_VERSION).
# The broker's config, data, PID and logs live in its run dir,
# $SLUICE_KAFKA_RUN: start makes a new one (mktemp) when it is unset and
# prints SLUICE_KAFKA_RUN=<dir>; status, stop, kill9 and restart need it set
# and touch only the broker of that run dir. The heap is small (KAFKA_HEAP_OPTS, default
# -Xmx512m -Xms256m) because the machine is shared.
#
# Usage in a test script:
#   export SLUICE_KAFKA_RUN=$(mktemp -d)
#   trap 'scripts/kafka.sh stop' EXIT
#   eval "$(scripts/kafka.sh start | grep '^SLUICE_KAFKA_BROKERS=')"
#   export SLUICE_KAFKA_BROKERS
# or, by hand:  eval "$(scripts/kafka.sh start)"; export SLUICE_KAFKA_BROKERS SLUICE_KAFKA_RUN
set -euo pipefail

VERSION="${SLUICE_KAFKA_VERSION:-4.4.0}"
CACHE="${SLUICE_KAFKA_CACHE:-$HOME/.cache/sluice/kafka-$VERSION}"
SECURE=0
case "${1:-}" in
  *-secure) SECURE=1 ;;
esac
if ((SECURE)); then
  RUNVAR=SLUICE_KAFKA_SECURE_RUN
  HEAP="${KAFKA_SECURE_HEAP_OPTS:--Xmx384m -Xms128m}"
else
  RUNVAR=SLUICE_KAFKA_RUN
  HEAP="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"
fi
# Every broker has a run dir of its own: start makes a new one unless the
# caller names one, and every other command acts only on the run dir it is
# given, so two invocations never stop or delete each other's broker.
RUN="${!RUNVAR:-}"
case "${1:-}" in
  fetch) ;;
  start | start-secure)
    if [[ -z "$RUN" ]]; then RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-kafka.XXXXXX"); fi
    ;;
  *)
    [[ -n "$RUN" ]] || { echo "kafka.sh: set $RUNVAR to the run dir that start printed" >&2; exit 2; }
    ;;
esac
START_TIMEOUT="${SLUICE_KAFKA_START_TIMEOUT:-120}" # seconds

LIB_NAME=kafka.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

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
  mvn_quiet "$tmp" "org.apache.kafka:kafka_2.13:$VERSION and dependencies into $CACHE" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$CACHE" || {
    rm -rf "$tmp"
    exit 1
  }
  rm -rf "$tmp"
  ls "$CACHE"/kafka_2.13-*.jar >/dev/null 2>&1 || die "kafka_2.13 jar missing in $CACHE"
  touch "$CACHE/.complete-2"
}

# password: 24 random alphanumeric characters.
password() { random_secret 24; }

# make_certs STOREPASS: a self-signed CA and a server certificate for
# 127.0.0.1 signed by it. Writes $RUN/ca.pem (for clients and for the
# broker as a client of itself) and $RUN/server.p12 (the broker's key and
# chain). openssl is used when present (fast); otherwise keytool, which
# comes with Java (a JVM start per step, a few seconds in all).
# SLUICE_KAFKA_CERT_TOOL=keytool|openssl forces one.
make_certs() {
  local pw=$1 t="$RUN/tls" tool="${SLUICE_KAFKA_CERT_TOOL:-}"
  mkdir -p "$t"
  if [[ -z "$tool" ]]; then
    if command -v openssl >/dev/null; then tool=openssl; else tool=keytool; fi
  fi
  case "$tool" in
    openssl) make_certs_openssl "$pw" "$t" >"$t/certs.log" 2>&1 ;;
    keytool) make_certs_keytool "$pw" "$t" >"$t/certs.log" 2>&1 ;;
    *) die "SLUICE_KAFKA_CERT_TOOL is $tool; allowed: openssl, keytool" ;;
  esac
}

make_certs_openssl() {
  local pw=$1 t=$2
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\n' >"$t/server.ext"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$t/ca.key" -out "$RUN/ca.pem" \
    -days 30 -subj "/CN=sluice-test-ca" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$t/server.key" -out "$t/server.csr" -subj "/CN=127.0.0.1" &&
    openssl x509 -req -in "$t/server.csr" -CA "$RUN/ca.pem" -CAkey "$t/ca.key" -CAcreateserial -days 30 \
      -extfile "$t/server.ext" -out "$t/server.pem" &&
    openssl pkcs12 -export -name broker -inkey "$t/server.key" -in "$t/server.pem" -certfile "$RUN/ca.pem" \
      -passout "pass:$pw" -out "$RUN/server.p12"
}

make_certs_keytool() {
  local pw=$1 t=$2 kt=(keytool -J-Xmx64m -J-XX:TieredStopAtLevel=1)
  "${kt[@]}" -genkeypair -alias ca -keyalg EC -groupname secp256r1 -dname "CN=sluice-test-ca" \
    -ext bc:c -validity 30 -keystore "$t/ca.p12" -storetype PKCS12 -storepass "$pw" &&
    "${kt[@]}" -exportcert -rfc -alias ca -keystore "$t/ca.p12" -storepass "$pw" -file "$RUN/ca.pem" &&
    "${kt[@]}" -genkeypair -alias broker -keyalg EC -groupname secp256r1 -dname "CN=127.0.0.1" \
      -validity 30 -keystore "$RUN/server.p12" -storetype PKCS12 -storepass "$pw" &&
    "${kt[@]}" -certreq -alias broker -keystore "$RUN/server.p12" -storepass "$pw" -file "$t/server.csr" &&
    "${kt[@]}" -gencert -alias ca -keystore "$t/ca.p12" -storepass "$pw" -infile "$t/server.csr" -outfile "$t/server.pem" -rfc \
      -validity 30 -ext "SAN=ip:127.0.0.1,dns:localhost" -ext "EKU=serverAuth,clientAuth" &&
    cat "$RUN/ca.pem" "$t/server.pem" >"$t/chain.pem" &&
    "${kt[@]}" -importcert -noprompt -alias broker -file "$t/chain.pem" -keystore "$RUN/server.p12" -storepass "$pw"
}

# write_secure_listeners PORT CPORT: prints the listener, TLS, SASL and ACL
# part of the secure broker's config; makes the certificates and passwords
# first and writes client.json.
write_secure_listeners() {
  local port=$1 cport=$2 adminpw clientpw storepw
  adminpw=$(password)
  clientpw=$(password)
  storepw=$(password)
  make_certs "$storepw" || { cat "$RUN/tls/certs.log" >&2; die "could not make the certificates"; }
  (
    umask 077
    cat >"$RUN/client.json" <<EOF
{"brokers": ["127.0.0.1:$port"], "ca_file": "$RUN/ca.pem",
 "admin": {"user": "admin", "password": "$adminpw"},
 "client": {"user": "client", "password": "$clientpw"}}
EOF
  )
  local plain="org.apache.kafka.common.security.plain.PlainLoginModule required"
  local scram="org.apache.kafka.common.security.scram.ScramLoginModule required"
  # OAUTHBEARER with Kafka's unsecured validator (no sasl.server.callback.
  # handler.class): it accepts an unsigned JWT ({"alg":"none"}) whose "sub"
  # is the principal and checks its "exp" — enough to test the client's
  # token path (file, command, refresh); a real cluster validates signed
  # tokens against its identity provider.
  local oauth="org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"admin\""
  cat <<EOF
listeners=SASL_SSL://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=SASL_SSL://127.0.0.1:$port
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
sasl.mechanism.inter.broker.protocol=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=$plain username="admin" password="$adminpw" user_admin="$adminpw";
listener.name.sasl_ssl.plain.sasl.jaas.config=$plain username="admin" password="$adminpw" user_admin="$adminpw" user_client="$clientpw";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$scram;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$scram;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=$oauth;
ssl.keystore.type=PKCS12
ssl.keystore.location=$RUN/server.p12
ssl.keystore.password=$storepw
ssl.key.password=$storepw
ssl.truststore.type=PEM
ssl.truststore.location=$RUN/ca.pem
ssl.client.auth=none
ssl.endpoint.identification.algorithm=https
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin
EOF
}

# address prints the line a test script evaluates: the broker's address,
# or for the secure broker the file that describes it.
address() {
  if ((SECURE)); then
    echo "SLUICE_KAFKA_SECURE=$RUN/client.json"
  else
    echo "SLUICE_KAFKA_BROKERS=127.0.0.1:$(cat "$RUN/port")"
  fi
  echo "$RUNVAR=$RUN"
}

running() { pid_alive "$RUN/pid"; }

write_config() {
  local port=$1 cport=$2
  mkdir -p "$RUN/data"
  if ((SECURE)); then
    write_secure_listeners "$port" "$cport" >"$RUN/server.properties"
  else
    cat >"$RUN/server.properties" <<EOF
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
EOF
  fi
  cat >>"$RUN/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
controller.listener.names=CONTROLLER
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
  local rc=0 started=$SECONDS
  wait_for "$START_TIMEOUT" "$RUN/pid" 0.5 port_open "$port" || rc=$?
  if ((rc)); then
    tail -n 50 "$RUN/stdout.log" "$RUN/server.log" >&2 2>/dev/null || true
    ((rc == 1)) && die "broker exited during start"
    stop_broker KILL
    die "broker did not answer on 127.0.0.1:$port within ${START_TIMEOUT}s"
  fi
  # The port opens before the broker has registered with its controller;
  # wait (bounded) for the startup line too.
  local left=$((START_TIMEOUT - (SECONDS - started)))
  ((left < 30)) || left=30
  rc=0
  wait_for "$left" "$RUN/pid" 0.5 grep -q "Kafka Server started" "$RUN/server.log" 2>/dev/null || rc=$?
  ((rc == 1)) && die "broker exited during start"
  ((rc == 2)) && log "no startup line in $RUN/server.log; going on since the port answers"
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
  chmod 700 "$RUN" # the secure broker's config and client.json hold passwords
  write_config "$(free_port)" "$(free_port)"
  local cluster_id
  # A Kafka Uuid: 16 random bytes, base64url without padding, not starting
  # with "-" (what StorageTool random-uuid prints, without starting a JVM).
  cluster_id=$(python3 -c 'import base64, os
while True:
    u = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    if not u.startswith("-"):
        print(u)
        break')
  [[ -n "$cluster_id" ]] || die "could not create a cluster id"
  java -Xmx256m -Dlog4j2.configurationFile="$RUN/log4j2.properties" -cp "$CACHE/*" kafka.tools.StorageTool format \
    -t "$cluster_id" -c "$RUN/server.properties" >"$RUN/format.log" 2>&1 ||
    java -Xmx256m -Dlog4j2.configurationFile="$RUN/log4j2.properties" -cp "$CACHE/*" kafka.tools.StorageTool format \
      -t "$cluster_id" -c "$RUN/server.properties" --standalone >>"$RUN/format.log" 2>&1 ||
    { cat "$RUN/format.log" >&2; die "storage format failed"; }
  launch
}

# stop_broker SIGNAL: signals the broker and waits (bounded) until it is gone.
stop_broker() { stop_pid "$RUN/pid" "${1:-TERM}" broker; }

cmd="${1:-}"
case "$cmd" in
  fetch) fetch ;;
  start) start ;;
  start-secure) start ;;
  status | status-secure)
    if running; then
      address
    else
      log "not running"
      exit 1
    fi
    ;;
  stop | stop-secure)
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
    echo "usage: $0 fetch|start|status|stop|kill9|restart|start-secure|status-secure|stop-secure" >&2
    exit 2
    ;;
esac
