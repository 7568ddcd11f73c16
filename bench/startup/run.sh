#!/usr/bin/env bash
# Measures sluice's start-up against floors (bench/startup/README.md).
#
#   bench/startup/run.sh                      # 20 rounds: sluice, hello world, the Kafka loop
#   bench/startup/run.sh -rounds 5            # a quick check
#   SLUICE_BASE=/tmp/sluice-main bench/startup/run.sh   # and another sluice binary in the same rounds
#
# Arguments go to the driver (`go run ./bench/startup -h`). It builds the
# sluice CLI (CGO_ENABLED=0, as released), the hello-world floor, the
# Kafka benchmark's loop and the driver into $BENCH_WORK/bin (BENCH_WORK
# default: a new temporary directory), then runs the driver, which
# writes benchstat files into $BENCH_WORK/benchstat. No server is needed;
# nothing connects outside the process. The measurement itself takes well
# under a minute on a quiet machine (the first build longer).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
work=${BENCH_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/sluice-startup.XXXXXX")}
mkdir -p "$work/bin/linked"
echo "run.sh: building into $work/bin" >&2
CGO_ENABLED=0 go build -o "$work/bin/linked/sluice" ./cmd/sluice
go build -o "$work/bin/linked/hello" ./bench/startup/hello
go build -o "$work/bin/linked/loop" ./bench/kafka/loop
go build -o "$work/bin/startup" ./bench/startup

# Every measured binary is a fresh cp(1) of the linker's output, the base
# one too: the peak RSS of a process depends on how its executable's file
# was written (one straight from the linker showed about 30 MiB more than
# a copy of the same bytes, its page cache filled in larger pieces that a
# page fault maps whole), so all contenders are written the same way, as
# a download or an install would be (README.md, "What is measured").
for b in sluice hello loop; do
  cp "$work/bin/linked/$b" "$work/bin/$b"
done
base=()
if [[ -n "${SLUICE_BASE:-}" ]]; then
  cp "$SLUICE_BASE" "$work/bin/sluice-base"
  base=(-base "$work/bin/sluice-base")
fi
"$work/bin/startup" -sluice "$work/bin/sluice" -hello "$work/bin/hello" -loop "$work/bin/loop" \
  -benchstat "$work/benchstat" "${base[@]}" "$@"
echo "run.sh: benchstat files in $work/benchstat (benchstat $work/benchstat/sluice@base.txt $work/benchstat/sluice.txt)" >&2
