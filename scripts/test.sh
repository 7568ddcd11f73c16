#!/usr/bin/env bash
# Runs the whole test suite: formatting, vet, staticcheck, and every test
# with the race detector. It installs what it needs (Go tools come from the
# Go module proxy) and starts whatever services the tests need.
#
#   scripts/test.sh            # everything
#   scripts/test.sh -short     # the quick subset (passes -short to go test)
set -euo pipefail
cd "$(dirname "$0")/.."

short=""
if [[ "${1:-}" == "-short" ]]; then short="-short"; fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
# A semver tag: the module proxy serves v0.6.1 (= staticcheck 2025.1.1) but
# not the "2025.1.1" form from an empty module cache.
STATICCHECK_VERSION=v0.6.1
go run "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}" ./...

# The Kafka connector's exactly-once claims are proven against a real Apache
# Kafka broker (fetched from Maven Central into a cache, started on
# 127.0.0.1, stopped on exit); the security tests against a second broker
# with a SASL_SSL listener, SASL PLAIN/SCRAM users and ACL authorization.
# Each invocation runs its own brokers in run dirs of its own and stops
# only those, so two runs at once never touch each other's. The quick
# subset runs against kfake only.
cleanup=()
on_exit() {
  local c
  for c in "${cleanup[@]}"; do eval "$c" || true; done
}
trap on_exit EXIT
need_java() {
  if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    echo "installing Java and Maven from Debian's packages"
    apt-get update -qq && apt-get install -y -qq default-jre-headless maven >/dev/null
  fi
}
# start_server TITLE RUNVAR NAME START STOP VAR: starts one server with
# `scripts/NAME.sh START` in a new run dir (exported as RUNVAR), registers
# `scripts/NAME.sh STOP` for the exit, and exports the VAR=… line the
# script prints (with or without a leading "export ").
start_server() {
  local title=$1 runvar=$2 name=$3 start=$4 stop=$5 var=$6 run line
  echo "== $title"
  run=$(mktemp -d "${TMPDIR:-/tmp}/sluice-$name.XXXXXX")
  export "$runvar=$run"
  cleanup+=("$runvar=$run scripts/${name%-secure}.sh $stop")
  line=$(scripts/"${name%-secure}".sh "$start" | grep -E "^(export )?$var=") || {
    echo "the $title did not start; see scripts/${name%-secure}.sh output above" >&2
    exit 1
  }
  line=${line#export }
  export "${line?}"
  echo "$runvar=$run" # not the line: a URL may hold a password
}
if [[ -z "$short" && -z "${SLUICE_KAFKA_BROKERS:-}" ]]; then
  need_java
  start_server "Kafka broker" SLUICE_KAFKA_RUN kafka start stop SLUICE_KAFKA_BROKERS
fi
if [[ -z "$short" && -z "${SLUICE_KAFKA_SECURE:-}" ]]; then
  need_java
  start_server "Kafka broker with TLS, SASL and ACLs" SLUICE_KAFKA_SECURE_RUN kafka-secure start-secure stop-secure SLUICE_KAFKA_SECURE
fi

# The schema formats (Avro, Protobuf, JSON Schema) are proven against a
# real schema registry with the Confluent-compatible API: Apicurio Registry
# with in-memory storage (fetched from Maven Central into a cache, started
# on 127.0.0.1 in a run dir of its own, stopped on exit; a few seconds to
# start). Its tests skip without SLUICE_SCHEMA_REGISTRY, as in the quick
# subset.
if [[ -z "$short" && -z "${SLUICE_SCHEMA_REGISTRY:-}" ]]; then
  need_java
  start_server "schema registry (Apicurio Registry, Confluent-compatible API)" SLUICE_SCHEMA_REGISTRY_RUN schema-registry start stop SLUICE_SCHEMA_REGISTRY
fi

# The PostgreSQL connector's claims are proven against a private PostgreSQL
# server (Debian's postgresql package, installed when missing; initdb into a
# run dir of its own on a free loopback port; stopped and removed on exit).
# The quick subset skips those tests.
if [[ -z "$short" && -z "${SLUICE_POSTGRES_URL:-}" ]]; then
  if ! command -v initdb >/dev/null && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    echo "installing PostgreSQL from Debian's packages"
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  fi
  start_server "PostgreSQL server" SLUICE_POSTGRES_RUN postgres start stop SLUICE_POSTGRES_URL
fi

# The object storage claims (s3:// file sources and sinks, checkpoints on
# S3) are proven against a private S3-compatible server: versitygw
# (Apache-2.0) with its POSIX backend in a run dir of its own on a free
# loopback port, random keys, installed into ~/.cache/sluice with go
# install when missing; stopped and removed on exit. Its tests skip
# without SLUICE_S3_ENDPOINT, as in the quick subset.
if [[ -z "$short" && -z "${SLUICE_S3_ENDPOINT:-}" ]]; then
  echo "== S3-compatible server (versitygw)"
  SLUICE_S3_RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-s3.XXXXXX")
  export SLUICE_S3_RUN
  cleanup+=("SLUICE_S3_RUN=$SLUICE_S3_RUN scripts/s3.sh stop")
  s3vars=$(scripts/s3.sh start | grep -E '^SLUICE_S3_(ENDPOINT|ACCESS_KEY|SECRET_KEY)=') || {
    echo "the S3-compatible server did not start; see scripts/s3.sh output above" >&2
    exit 1
  }
  while IFS= read -r line; do export "${line?}"; done <<<"$s3vars"
  echo "SLUICE_S3_RUN=$SLUICE_S3_RUN"
fi

# The OpenSearch connector's real-node tests run against OpenSearch's
# integration-test distribution (Maven Central, cached), one node on
# 127.0.0.1 in a run dir of its own, and its TLS and authentication tests
# against a second node with the security plugin; both stopped on exit.
if [[ -z "$short" && -z "${SLUICE_OPENSEARCH_URL:-}" ]]; then
  need_java
  start_server "OpenSearch node" SLUICE_OPENSEARCH_RUN opensearch start stop SLUICE_OPENSEARCH_URL
fi
if [[ -z "$short" && -z "${SLUICE_OPENSEARCH_SECURE:-}" ]]; then
  need_java
  start_server "OpenSearch node with TLS and basic authentication" SLUICE_OPENSEARCH_SECURE_RUN opensearch-secure start-secure stop-secure SLUICE_OPENSEARCH_SECURE
fi
# The same tests' Elasticsearch flavor runs against Elasticsearch's
# integration-test distribution (Maven Central, cached), security off.
if [[ -z "$short" && -z "${SLUICE_ELASTICSEARCH_URL:-}" ]]; then
  need_java
  start_server "Elasticsearch node" SLUICE_ELASTICSEARCH_RUN elasticsearch start stop SLUICE_ELASTICSEARCH_URL
fi

# The Hive partition commit policy (connectors/hive) is proven against a
# private standalone Hive Metastore 4.0.1 (Maven Central jars, cached;
# embedded Derby and Thrift on 127.0.0.1 in a run dir of its own; stopped
# on exit; 16 s to start at load 11, up to 100 s at load 30-40).
if [[ -z "$short" && -z "${SLUICE_HIVE_METASTORE:-}" ]]; then
  need_java
  start_server "Hive Metastore" SLUICE_HIVE_METASTORE_RUN hive-metastore start stop SLUICE_HIVE_METASTORE
fi

# The Iceberg sink's tables are read back by an independent reader,
# PyIceberg from PyPI, in a venv under ~/.cache/sluice (scripts/pyiceberg.sh).
if [[ -z "$short" && -z "${SLUICE_PYICEBERG:-}" ]]; then
  echo "== PyIceberg"
  eval "$(scripts/pyiceberg.sh setup | grep '^SLUICE_PYICEBERG=')"; export SLUICE_PYICEBERG
fi

# The Iceberg sink's REST catalog tests run against Apache Iceberg's own
# REST catalog server (the iceberg-open-api test fixture from Maven Central,
# cached; SQLite backend and a file:// warehouse in a run dir of its own,
# 127.0.0.1; stopped on exit). They skip without SLUICE_ICEBERG_REST.
if [[ -z "$short" && -z "${SLUICE_ICEBERG_REST:-}" ]]; then
  need_java
  if ! command -v javac >/dev/null; then # the script compiles a small launcher
    echo "installing a JDK from Debian's packages"
    apt-get update -qq && apt-get install -y -qq default-jdk-headless >/dev/null
  fi
  start_server "Iceberg REST catalog" SLUICE_ICEBERG_REST_RUN iceberg-rest start stop SLUICE_ICEBERG_REST
fi

echo "== go test -race"
# -count=1: never trust a cached pass in CI.
log=$(mktemp)
set +e
go test -race -count=1 $short -timeout 45m ./... 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -c '^ok ' "$log" || true)
failed=$(grep -c $'^FAIL\t' "$log" || true)
rm -f "$log"
echo "packages: $passed passed, $failed failed"
exit "$status"
