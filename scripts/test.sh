#!/usr/bin/env bash
# Runs the whole test suite: formatting, vet, staticcheck, and every test
# with the race detector. It installs what it needs (Go tools come from the
# Go module proxy) and starts whatever services the tests need.
#
#   scripts/test.sh            # everything
#   scripts/test.sh -short     # the quick subset (passes -short to go test)
#
# The servers start concurrently, in the background, at most
# $SLUICE_TEST_START_JOBS at a time (default 3), while go vet and
# staticcheck run and the race-instrumented test binaries compile, so that
# `go test` starts with the servers up and its packages compiled. A server
# that does not start fails the run after all of them were waited for,
# naming it and showing its script's output. Each phase prints its
# elapsed seconds. `go test` runs $SLUICE_TEST_P packages and up to
# $SLUICE_TEST_PARALLEL parallel tests of a package at a time (default 4
# and 4).
set -euo pipefail
cd "$(dirname "$0")/.."

short=""
if [[ "${1:-}" == "-short" ]]; then short="-short"; fi

began=$SECONDS
phase_began=$SECONDS
# phase_done NAME: print the seconds since the previous phase_done.
phase_done() {
  echo "== $1: $((SECONDS - phase_began)) s"
  phase_began=$SECONDS
}

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
phase_done gofmt

# Servers started by this run are stopped on exit, whatever the exit: the
# start scripts still running are ended first (SIGTERM, then their jobs
# are waited for), then the servers, whose run dirs were registered
# before they started, are stopped.
cleanup=()
start_jobs=()
on_exit() {
  local c p f
  if [[ -n "${state:-}" ]]; then
    for f in "$state"/*.pid; do
      [[ -e "$f" ]] || continue
      kill "$(cat "$f")" 2>/dev/null || true
    done
  fi
  for p in "${start_jobs[@]}"; do wait "$p" 2>/dev/null || true; done
  for c in "${cleanup[@]}"; do eval "$c" || true; done
  if [[ -n "${state:-}" ]]; then rm -rf "$state"; fi
}
trap on_exit EXIT
# state: the start jobs' output, status and VAR=… lines (a URL may hold a
# password: the dir is private and removed on exit).
state=$(mktemp -d "${TMPDIR:-/tmp}/sluice-test.XXXXXX")
chmod 700 "$state"

need_java() {
  if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    echo "installing Java and Maven from Debian's packages"
    apt-get update -qq && apt-get install -y -qq default-jre-headless maven >/dev/null
  fi
}

# Concurrent starts share two cores: each script's start timeout (a hang
# guard) gets more room unless set by the caller.
export SLUICE_KAFKA_START_TIMEOUT="${SLUICE_KAFKA_START_TIMEOUT:-300}"
export SLUICE_SCHEMA_REGISTRY_START_TIMEOUT="${SLUICE_SCHEMA_REGISTRY_START_TIMEOUT:-300}"
export SLUICE_POSTGRES_START_TIMEOUT="${SLUICE_POSTGRES_START_TIMEOUT:-180}"
export SLUICE_S3_START_TIMEOUT="${SLUICE_S3_START_TIMEOUT:-180}"
export SLUICE_OPENSEARCH_START_TIMEOUT="${SLUICE_OPENSEARCH_START_TIMEOUT:-400}"
export SLUICE_ELASTICSEARCH_START_TIMEOUT="${SLUICE_ELASTICSEARCH_START_TIMEOUT:-400}"
export SLUICE_HIVE_METASTORE_START_TIMEOUT="${SLUICE_HIVE_METASTORE_START_TIMEOUT:-400}"
export SLUICE_ICEBERG_REST_START_TIMEOUT="${SLUICE_ICEBERG_REST_START_TIMEOUT:-300}"

max_jobs=${SLUICE_TEST_START_JOBS:-3}
[[ "$max_jobs" =~ ^[1-9][0-9]*$ ]] || { echo "SLUICE_TEST_START_JOBS=$max_jobs: want a positive integer" >&2; exit 2; }
# go test's -p and -parallel (see "go test -race" below).
test_p=${SLUICE_TEST_P:-4}
test_parallel=${SLUICE_TEST_PARALLEL:-4}
[[ "$test_p" =~ ^[1-9][0-9]*$ ]] || { echo "SLUICE_TEST_P=$test_p: want a positive integer" >&2; exit 2; }
[[ "$test_parallel" =~ ^[1-9][0-9]*$ ]] || { echo "SLUICE_TEST_PARALLEL=$test_parallel: want a positive integer" >&2; exit 2; }
started=() # the NAMEs of the start jobs, in start order
declare -A title script_of vars_of runvar_of
# start_server TITLE RUNVAR NAME SCRIPT START STOP VARS: start the server
# of scripts/SCRIPT.sh in the background with `scripts/SCRIPT.sh START`,
# in a new run dir (exported as RUNVAR; "" = the script has none), after
# registering `scripts/SCRIPT.sh STOP` for the exit ("" = nothing to
# stop). Its stdout and stderr go to $state/NAME.out and NAME.log, its
# exit status to NAME.rc; VARS is the extended regex of the variable
# names whose VAR=… lines (with or without a leading "export ") are
# exported once it is up (collect_servers).
start_server() {
  local t=$1 runvar=$2 name=$3 scr=$4 start=$5 stop=$6 vars=$7 run
  while (($(jobs -rp | wc -l) >= max_jobs)); do wait -n || true; done
  echo "== starting the $t"
  if [[ -n "$runvar" ]]; then
    run=$(mktemp -d "${TMPDIR:-/tmp}/sluice-$name.XXXXXX")
    export "$runvar=$run"
    echo "$runvar=$run"
  fi
  if [[ -n "$stop" ]]; then cleanup+=("$runvar=$run scripts/$scr.sh $stop"); fi
  title[$name]=$t script_of[$name]="scripts/$scr.sh $start" vars_of[$name]=$vars runvar_of[$name]=$runvar
  (
    set +e
    s=$SECONDS
    scripts/"$scr".sh "$start" >"$state/$name.out" 2>"$state/$name.log" </dev/null &
    echo $! >"$state/$name.pid"
    wait $!
    rc=$?
    rm -f "$state/$name.pid"
    echo $((SECONDS - s)) >"$state/$name.secs"
    echo "$rc" >"$state/$name.rc"
  ) &
  start_jobs+=($!)
  started+=("$name")
}

# collect_servers: wait for every start job, export the VAR=… lines of
# those that started, and exit 1 naming those that did not (with their
# script's output) once all were waited for.
collect_servers() {
  local p name rc line failed=()
  for p in "${start_jobs[@]}"; do wait "$p" || true; done
  start_jobs=()
  for name in "${started[@]}"; do
    rc=$(cat "$state/$name.rc" 2>/dev/null || echo "none")
    line=""
    if [[ "$rc" == 0 ]]; then
      line=$(grep -E "^(export )?(${vars_of[$name]})=" "$state/$name.out") || line=""
    fi
    if [[ -z "$line" ]]; then
      echo "== the ${title[$name]} did not start: ${script_of[$name]} exited $rc after $(cat "$state/$name.secs" 2>/dev/null || echo "?") s; its output:" >&2
      cat "$state/$name.log" "$state/$name.out" >&2 || true
      failed+=("${title[$name]}")
      continue
    fi
    while IFS= read -r l; do
      l=${l#export }
      export "${l?}"
    done <<<"$line"
    echo "== the ${title[$name]} is up after $(cat "$state/$name.secs") s"
  done
  if ((${#failed[@]} > 0)); then
    printf 'servers that did not start:' >&2
    printf ' %s;' "${failed[@]}" >&2
    echo >&2
    exit 1
  fi
}

# What the servers need from Debian's packages is installed first, one
# apt-get at a time.
if [[ -z "$short" ]]; then
  for v in SLUICE_KAFKA_BROKERS SLUICE_KAFKA_SECURE SLUICE_SCHEMA_REGISTRY SLUICE_OPENSEARCH_URL \
    SLUICE_OPENSEARCH_SECURE SLUICE_ELASTICSEARCH_URL SLUICE_HIVE_METASTORE SLUICE_ICEBERG_REST; do
    if [[ -z "${!v:-}" ]]; then need_java; break; fi
  done
  if [[ -z "${SLUICE_ICEBERG_REST:-}" ]] && ! command -v javac >/dev/null; then # iceberg-rest.sh compiles a small launcher
    echo "installing a JDK from Debian's packages"
    apt-get update -qq && apt-get install -y -qq default-jdk-headless >/dev/null
  fi
  if [[ -z "${SLUICE_POSTGRES_URL:-}" ]] && ! command -v initdb >/dev/null &&
    ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    echo "installing PostgreSQL from Debian's packages"
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  fi
fi

# The servers, slowest first, each skipped when its variable is set (a
# server of the caller's). The quick subset needs none of them: its tests
# run against in-process fakes or skip.
if [[ -z "$short" ]]; then
  # The OpenSearch connector's real-node tests run against OpenSearch's
  # integration-test distribution (Maven Central, cached), one node on
  # 127.0.0.1 in a run dir of its own, and its TLS and authentication
  # tests against a second node with the security plugin.
  if [[ -z "${SLUICE_OPENSEARCH_SECURE:-}" ]]; then
    start_server "OpenSearch node with TLS and basic authentication" SLUICE_OPENSEARCH_SECURE_RUN opensearch-secure opensearch start-secure stop-secure SLUICE_OPENSEARCH_SECURE
  fi
  # The schema formats (Avro, Protobuf, JSON Schema) are proven against a
  # real schema registry with the Confluent-compatible API: Apicurio
  # Registry with in-memory storage (Maven Central, cached). Its tests
  # skip without SLUICE_SCHEMA_REGISTRY, as in the quick subset.
  if [[ -z "${SLUICE_SCHEMA_REGISTRY:-}" ]]; then
    start_server "schema registry (Apicurio Registry, Confluent-compatible API)" SLUICE_SCHEMA_REGISTRY_RUN schema-registry schema-registry start stop SLUICE_SCHEMA_REGISTRY
  fi
  # The PostgreSQL connector's claims are proven against a private
  # PostgreSQL server (Debian's postgresql package; initdb into a run dir
  # of its own on a free loopback port).
  if [[ -z "${SLUICE_POSTGRES_URL:-}" ]]; then
    start_server "PostgreSQL server" SLUICE_POSTGRES_RUN postgres postgres start stop SLUICE_POSTGRES_URL
  fi
  if [[ -z "${SLUICE_OPENSEARCH_URL:-}" ]]; then
    start_server "OpenSearch node" SLUICE_OPENSEARCH_RUN opensearch opensearch start stop SLUICE_OPENSEARCH_URL
  fi
  # The Kafka connector's exactly-once claims are proven against a real
  # Apache Kafka broker (Maven Central, cached); the security tests
  # against a second broker with a SASL_SSL listener, SASL PLAIN/SCRAM
  # users and ACL authorization.
  if [[ -z "${SLUICE_KAFKA_BROKERS:-}" ]]; then
    start_server "Kafka broker" SLUICE_KAFKA_RUN kafka kafka start stop SLUICE_KAFKA_BROKERS
  fi
  # The object storage claims (s3:// file sources and sinks, checkpoints
  # on S3) are proven against a private S3-compatible server: versitygw
  # (Apache-2.0) with its POSIX backend, random keys, installed into
  # ~/.cache/sluice with go install when missing. Its tests skip without
  # SLUICE_S3_ENDPOINT, as in the quick subset.
  if [[ -z "${SLUICE_S3_ENDPOINT:-}" ]]; then
    start_server "S3-compatible server (versitygw)" SLUICE_S3_RUN s3 s3 start stop 'SLUICE_S3_(ENDPOINT|ACCESS_KEY|SECRET_KEY)'
  fi
  # The same tests' Elasticsearch flavor runs against Elasticsearch's
  # integration-test distribution (Maven Central, cached), security off.
  if [[ -z "${SLUICE_ELASTICSEARCH_URL:-}" ]]; then
    start_server "Elasticsearch node" SLUICE_ELASTICSEARCH_RUN elasticsearch elasticsearch start stop SLUICE_ELASTICSEARCH_URL
  fi
  if [[ -z "${SLUICE_KAFKA_SECURE:-}" ]]; then
    start_server "Kafka broker with TLS, SASL and ACLs" SLUICE_KAFKA_SECURE_RUN kafka-secure kafka start-secure stop-secure SLUICE_KAFKA_SECURE
  fi
  # The Hive partition commit policy (connectors/hive) is proven against
  # a private standalone Hive Metastore 4.0.1 (Maven Central jars,
  # cached; embedded Derby and Thrift on 127.0.0.1; 16 s to start at load
  # 11, up to 100 s at load 30-40).
  if [[ -z "${SLUICE_HIVE_METASTORE:-}" ]]; then
    start_server "Hive Metastore" SLUICE_HIVE_METASTORE_RUN hive-metastore hive-metastore start stop SLUICE_HIVE_METASTORE
  fi
  # The Iceberg sink's REST catalog tests run against Apache Iceberg's own
  # REST catalog server (the iceberg-open-api test fixture from Maven
  # Central, cached; SQLite backend and a file:// warehouse). They skip
  # without SLUICE_ICEBERG_REST.
  if [[ -z "${SLUICE_ICEBERG_REST:-}" ]]; then
    start_server "Iceberg REST catalog" SLUICE_ICEBERG_REST_RUN iceberg-rest iceberg-rest start stop SLUICE_ICEBERG_REST
  fi
  # The Iceberg sink's tables are read back by an independent reader,
  # PyIceberg from PyPI, in a venv under ~/.cache/sluice (no server).
  if [[ -z "${SLUICE_PYICEBERG:-}" ]]; then
    start_server "PyIceberg reader" "" pyiceberg pyiceberg setup "" SLUICE_PYICEBERG
  fi
fi

# While the servers start: vet with the race-instrumented build of every
# test binary, staticcheck, and the binaries the tests build. go vet runs
# inside the race build of the tests (go test -vet=all: every vet check,
# on each package with its tests, as `go vet ./...` does),
# using the race build's compiled dependencies: a separate `go vet ./...`
# compiled every dependency a second time, without -race (306 s of a
# 2073-s run on a cold cache). -run '^$' -exec true: built and vetted,
# not run; `go test` below finds the packages compiled in the build cache.
echo "== go vet and the race build of the tests (go test -race -vet=all -run '^\$' -exec true)"
if ! go test -race -vet=all -count=1 $short -run '^$' -exec true ./... >"$state/build.log" 2>&1; then
  grep -v -E '^(ok|\?) ' "$state/build.log" >&2 || true
  echo "go vet or the build of the tests failed (above)" >&2
  exit 1
fi
phase_done "go vet and compiling the tests"

echo "== staticcheck"
# A semver tag: the module proxy serves v0.6.1 (= staticcheck 2025.1.1) but
# not the "2025.1.1" form from an empty module cache.
STATICCHECK_VERSION=v0.6.1
go run "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}" ./...
phase_done staticcheck

echo "== compiling the binaries the tests build"
# Binaries that tests build when they run: cmd/sluice's TestMain builds
# sluice (CGO_ENABLED=0), its cluster tests and internal/cluster/etcdcoord
# etcd from the module. Compiled here, their builds in the tests only link
# (on a cold cache sluice's compile fell inside cmd/sluice, the longest
# package).
CGO_ENABLED=0 go build -o /dev/null ./cmd/sluice >/dev/null 2>&1 || true
if [[ -z "$short" ]]; then go build -o /dev/null go.etcd.io/etcd/server/v3 >/dev/null 2>&1 || true; fi
phase_done "compiling the binaries the tests build"

if ((${#started[@]} > 0)); then
  echo "== waiting for the servers"
  collect_servers
  phase_done "waiting for the servers"
fi

echo "== go test -race"
# -count=1: never trust a cached pass in CI. -vet=off: vet ran above.
log="$state/test.log"
set +e
# go test starts the packages' test binaries in the order given (-p of
# them at once): the longest packages first, so that none of them starts
# last and runs alone at the end; then the rest (./... adds each package
# once).
#
# -p and -parallel: most tests wait (on sluice processes, servers,
# checkpoints, restarts), not compute; with go test's default of
# GOMAXPROCS (2) packages and parallel tests at a time the two cores were
# mostly idle (user+sys about 57 % of 2 cores over the whole run,
# compile phases included). SLUICE_TEST_P and SLUICE_TEST_PARALLEL
# override the defaults (4 and 4; checked at the start).
slowest=(./cmd/sluice ./connectors/kafka ./connectors/postgres ./connectors/opensearch ./connectors/iceberg ./connectors/file)
go test -race -vet=off -count=1 $short -p "$test_p" -parallel "$test_parallel" -timeout 45m "${slowest[@]}" ./... 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
phase_done "go test -race"
passed=$(grep -c '^ok ' "$log" || true)
failed=$(grep -c $'^FAIL\t' "$log" || true)
echo "packages: $passed passed, $failed failed"
if [ "$status" -ne 0 ]; then
  # The end of the output is what a reader of a CI run sees first (a
  # timed-out package's goroutine dump can hide everything above it):
  # repeat what failed, and which tests were running when a package timed
  # out, below it.
  echo "== what failed"
  awk '/^panic: test timed out/ {p = 1} p && /^$/ {p = 0} p' "$log" | head -40 || true
  grep -E '^\s*--- FAIL|^FAIL\s|^WARNING: DATA RACE|^panic: ' "$log" | head -60 || true
fi
echo "== total: $((SECONDS - began)) s"
exit "$status"
