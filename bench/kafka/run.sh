#!/usr/bin/env bash
# Runs the Kafka → Kafka exactly-once benchmark (bench/kafka/README.md).
#
#   bench/kafka/run.sh                                   # defaults: 2M × 100 B, 3 rounds, p 1,2
#   bench/kafka/run.sh -records 200000 -rounds 1         # a quick check
#   bench/kafka/run.sh -contenders loop-raw,sluice-json,flink
#   bench/kafka/run.sh -format avro -contenders loop-raw,sluice-raw,loop-avro,sluice-avro
#
# Arguments go to the driver (bench/kafka/driver; `go run ./bench/kafka/driver -h`).
# It builds the sluice CLI (CGO_ENABLED=0, as released), the loop and the
# driver into $BENCH_WORK/bin (BENCH_WORK default: a new temporary
# directory), builds the Flink job when a flink contender is asked for
# and its jar is missing or older than its sources, and uses the broker named by
# SLUICE_KAFKA_BROKERS (with SLUICE_KAFKA_RUN for its pid, so that the
# broker's CPU is measured), or starts one with scripts/kafka.sh and
# stops it at the end; for -format avro likewise SLUICE_SCHEMA_REGISTRY or
# scripts/schema-registry.sh. BENCH_PROFILE=1 builds sluice from
# bench/kafka/sluiceprof and writes CPU profiles to $BENCH_WORK/profiles.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
work=${BENCH_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")}
mkdir -p "$work/bin"
echo "run.sh: building into $work/bin" >&2
if [[ "${BENCH_PROFILE:-}" == 1 ]]; then
  CGO_ENABLED=0 go build -o "$work/bin/sluice" ./bench/kafka/sluiceprof
  mkdir -p "$work/profiles"
  set -- -profile "$work/profiles" "$@"
else
  CGO_ENABLED=0 go build -o "$work/bin/sluice" ./cmd/sluice
fi
go build -o "$work/bin/loop" ./bench/kafka/loop
go build -o "$work/bin/goapi" ./bench/kafka/goapi
go build -o "$work/bin/driver" ./bench/kafka/driver

jar=bench/kafka/flink/target/sluice-bench-flink.jar
if [[ " $* " == *flink* ]] && [[ ! -f $jar || -n $(find bench/kafka/flink/pom.xml bench/kafka/flink/src -newer "$jar" -type f) ]]; then
  echo "run.sh: building the Flink job (mvn package)" >&2
  mvn -B -q -f bench/kafka/flink/pom.xml package -DskipTests >&2
fi

cleanup=()
stop_all() {
  local c
  for c in "${cleanup[@]}"; do $c || true; done
}
trap stop_all EXIT

if [[ -z "${SLUICE_KAFKA_BROKERS:-}" ]]; then
  export SLUICE_KAFKA_RUN
  SLUICE_KAFKA_RUN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench-kafka.XXXXXX")
  cleanup+=("scripts/kafka.sh stop")
  eval "$(scripts/kafka.sh start | grep '^SLUICE_KAFKA_BROKERS=')"
  export SLUICE_KAFKA_BROKERS
fi

# -format avro needs a schema registry: SLUICE_SCHEMA_REGISTRY, or one
# started here with scripts/schema-registry.sh.
if [[ " $* " == *" avro "* && -z "${SLUICE_SCHEMA_REGISTRY:-}" ]]; then
  [[ -x scripts/schema-registry.sh ]] || { echo "run.sh: -format avro needs SLUICE_SCHEMA_REGISTRY (no scripts/schema-registry.sh here)" >&2; exit 2; }
  cleanup+=("scripts/schema-registry.sh stop")
  eval "$(scripts/schema-registry.sh start | grep '^export ')"
fi

"$work/bin/driver" -work "$work" -sluice "$work/bin/sluice" -loop "$work/bin/loop" -goapi "$work/bin/goapi" "$@"
