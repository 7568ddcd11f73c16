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
if [[ -z "$short" && -z "${SLUICE_KAFKA_BROKERS:-}" ]]; then
  echo "== Kafka broker"
  need_java
  SLUICE_KAFKA_RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-kafka.XXXXXX")
  export SLUICE_KAFKA_RUN
  cleanup+=("SLUICE_KAFKA_RUN=$SLUICE_KAFKA_RUN scripts/kafka.sh stop")
  brokers=$(scripts/kafka.sh start | grep '^SLUICE_KAFKA_BROKERS=') || {
    echo "the Kafka broker did not start; see scripts/kafka.sh output above" >&2
    exit 1
  }
  export "${brokers?}"
  echo "$brokers"
fi
if [[ -z "$short" && -z "${SLUICE_KAFKA_SECURE:-}" ]]; then
  echo "== Kafka broker with TLS, SASL and ACLs"
  need_java
  SLUICE_KAFKA_SECURE_RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-kafka-secure.XXXXXX")
  export SLUICE_KAFKA_SECURE_RUN
  cleanup+=("SLUICE_KAFKA_SECURE_RUN=$SLUICE_KAFKA_SECURE_RUN scripts/kafka.sh stop-secure")
  secure=$(scripts/kafka.sh start-secure | grep '^SLUICE_KAFKA_SECURE=') || {
    echo "the secured Kafka broker did not start; see scripts/kafka.sh output above" >&2
    exit 1
  }
  export "${secure?}"
  echo "$secure"
fi

# The schema formats (Avro, Protobuf, JSON Schema) are proven against a
# real schema registry with the Confluent-compatible API: Apicurio Registry
# with in-memory storage (fetched from Maven Central into a cache, started
# on 127.0.0.1 in a run dir of its own, stopped on exit; a few seconds to
# start). Its tests skip without SLUICE_SCHEMA_REGISTRY, as in the quick
# subset.
if [[ -z "$short" && -z "${SLUICE_SCHEMA_REGISTRY:-}" ]]; then
  echo "== schema registry (Apicurio Registry, Confluent-compatible API)"
  need_java
  SLUICE_SCHEMA_REGISTRY_RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-schema-registry.XXXXXX")
  export SLUICE_SCHEMA_REGISTRY_RUN
  cleanup+=("SLUICE_SCHEMA_REGISTRY_RUN=$SLUICE_SCHEMA_REGISTRY_RUN scripts/schema-registry.sh stop")
  registry=$(scripts/schema-registry.sh start | grep '^export SLUICE_SCHEMA_REGISTRY=') || {
    echo "the schema registry did not start; see scripts/schema-registry.sh output above" >&2
    exit 1
  }
  eval "$registry"
  echo "${registry#export }"
fi

# The PostgreSQL connector's claims are proven against a private PostgreSQL
# server (Debian's postgresql package, installed when missing; initdb into a
# run dir of its own on a free loopback port; stopped and removed on exit).
# The quick subset skips those tests.
if [[ -z "$short" && -z "${SLUICE_POSTGRES_URL:-}" ]]; then
  echo "== PostgreSQL server"
  if ! command -v initdb >/dev/null && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    echo "installing PostgreSQL from Debian's packages"
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  fi
  SLUICE_POSTGRES_RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-postgres.XXXXXX")
  export SLUICE_POSTGRES_RUN
  cleanup+=("SLUICE_POSTGRES_RUN=$SLUICE_POSTGRES_RUN scripts/postgres.sh stop")
  pgurl=$(scripts/postgres.sh start | grep '^SLUICE_POSTGRES_URL=') || {
    echo "the PostgreSQL server did not start; see scripts/postgres.sh output above" >&2
    exit 1
  }
  export "${pgurl?}"
  echo "SLUICE_POSTGRES_RUN=$SLUICE_POSTGRES_RUN"
fi

# The OpenSearch connector's real-node tests run against OpenSearch's
# integration-test distribution (Maven Central, cached), one node on
# 127.0.0.1 in a run dir of its own, and its TLS and authentication tests
# against a second node with the security plugin; both stopped on exit.
if [[ -z "$short" && -z "${SLUICE_OPENSEARCH_URL:-}" ]]; then
  echo "== OpenSearch node"
  need_java
  SLUICE_OPENSEARCH_RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-opensearch.XXXXXX")
  export SLUICE_OPENSEARCH_RUN
  cleanup+=("SLUICE_OPENSEARCH_RUN=$SLUICE_OPENSEARCH_RUN scripts/opensearch.sh stop")
  osurl=$(scripts/opensearch.sh start | grep '^SLUICE_OPENSEARCH_URL=') || {
    echo "the OpenSearch node did not start; see scripts/opensearch.sh output above" >&2
    exit 1
  }
  export "${osurl?}"
  echo "$osurl"
fi
if [[ -z "$short" && -z "${SLUICE_OPENSEARCH_SECURE:-}" ]]; then
  echo "== OpenSearch node with TLS and basic authentication"
  need_java
  SLUICE_OPENSEARCH_SECURE_RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-opensearch-secure.XXXXXX")
  export SLUICE_OPENSEARCH_SECURE_RUN
  cleanup+=("SLUICE_OPENSEARCH_SECURE_RUN=$SLUICE_OPENSEARCH_SECURE_RUN scripts/opensearch.sh stop-secure")
  ossecure=$(scripts/opensearch.sh start-secure | grep '^SLUICE_OPENSEARCH_SECURE=') || {
    echo "the secured OpenSearch node did not start; see scripts/opensearch.sh output above" >&2
    exit 1
  }
  export "${ossecure?}"
  echo "$ossecure"
fi

echo "== go test -race"
# -count=1: never trust a cached pass in CI.
log=$(mktemp)
set +e
go test -race -count=1 $short -timeout 30m ./... 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -c '^ok ' "$log" || true)
failed=$(grep -c $'^FAIL\t' "$log" || true)
rm -f "$log"
echo "packages: $passed passed, $failed failed"
exit "$status"
