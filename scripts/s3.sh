#!/usr/bin/env bash
# Runs a private S3-compatible object store on 127.0.0.1 for the object
# storage tests: versitygw (github.com/versity/versitygw, Apache-2.0) with
# its POSIX backend in a run dir of its own, on a free loopback port, with a
# random access key and secret key; stopped and removed by the invocation
# that started it.
#
#   scripts/s3.sh start    # start, wait; print SLUICE_S3_ENDPOINT=…, SLUICE_S3_ACCESS_KEY=…,
#                          #   SLUICE_S3_SECRET_KEY=… and SLUICE_S3_RUN=…
#   scripts/s3.sh status   # print them and exit 0 if running, exit 1 otherwise
#   scripts/s3.sh stop     # stop the server (SIGTERM, then SIGKILL), remove the run dir
#
# SLUICE_S3_ENDPOINT is http://127.0.0.1:<port> (path-style addressing,
# region us-east-1). Buckets are directories under <run dir>/data; the
# tests create their own. Multipart uploads in progress live under
# <run dir>/data/<bucket>/.sgwtmp until completed or aborted.
#
# The binary is $SLUICE_S3_VERSITYGW if set, else versitygw from the cache
# ~/.cache/sluice (installed there when missing with
#   GOBIN=~/.cache/sluice go install github.com/versity/versitygw/cmd/versitygw@$VERSION
# from the Go module proxy; a few minutes the first time).
#
# The run dir is $SLUICE_S3_RUN: start makes a new one (mktemp) when it is
# unset; every other command needs it set and touches only the server of
# that run dir. Its log is <run dir>/server.log, shown when start fails.
#
# Usage in a test script:
#   export SLUICE_S3_RUN=$(mktemp -d)
#   trap 'scripts/s3.sh stop' EXIT
#   eval "$(scripts/s3.sh start | grep '^SLUICE_S3_')"
#   export SLUICE_S3_ENDPOINT SLUICE_S3_ACCESS_KEY SLUICE_S3_SECRET_KEY
set -euo pipefail

VERSION=v1.8.0
RUN="${SLUICE_S3_RUN:-}"
START_TIMEOUT="${SLUICE_S3_START_TIMEOUT:-60}" # seconds
CACHE="${SLUICE_CACHE:-$HOME/.cache/sluice}"

LIB_NAME=s3.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-}" in
  start) ;;
  status | stop)
    [[ -n "$RUN" ]] || die "set SLUICE_S3_RUN to the run dir that start printed"
    ;;
  *) die "usage: $0 start|status|stop" ;;
esac

# binary prints the versitygw binary, installing it into the cache when
# missing.
binary() {
  if [[ -n "${SLUICE_S3_VERSITYGW:-}" ]]; then echo "$SLUICE_S3_VERSITYGW"; return 0; fi
  local bin="$CACHE/versitygw-$VERSION/versitygw"
  if [[ ! -x "$bin" ]]; then
    command -v go >/dev/null || die "versitygw is not in $CACHE and go is not on PATH to install it"
    log "installing versitygw $VERSION into $CACHE/versitygw-$VERSION (go install)"
    mkdir -p "$CACHE/versitygw-$VERSION"
    GOBIN="$CACHE/versitygw-$VERSION" GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2 ||
      die "go install github.com/versity/versitygw/cmd/versitygw@$VERSION failed"
  fi
  echo "$bin"
}

address() {
  echo "SLUICE_S3_ENDPOINT=http://127.0.0.1:$(cat "$RUN/port")"
  echo "SLUICE_S3_ACCESS_KEY=$(cat "$RUN/access")"
  echo "SLUICE_S3_SECRET_KEY=$(cat "$RUN/secret")"
  echo "SLUICE_S3_RUN=$RUN"
}

running() { pid_alive "$RUN/pid"; }

# ready: the port answers HTTP (an unauthenticated request gets an S3
# error document, which is an answer).
ready() {
  curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$(cat "$RUN/port")/" 2>/dev/null
}

start() {
  RUN=$(new_run_dir s3)
  mkdir -p "$RUN"
  chmod 0700 "$RUN"
  if running; then address; return 0; fi
  local bin
  bin=$(binary)
  mkdir -p "$RUN/data"
  free_port >"$RUN/port"
  random_secret 20 >"$RUN/access"
  random_secret 40 >"$RUN/secret"
  # setsid: the server outlives this script in a session of its own, so
  # the caller's terminal signals do not reach it; stop kills it by pid.
  ROOT_ACCESS_KEY="$(cat "$RUN/access")" ROOT_SECRET_KEY="$(cat "$RUN/secret")" \
    setsid "$bin" --port "127.0.0.1:$(cat "$RUN/port")" --region us-east-1 \
    posix "$RUN/data" >"$RUN/server.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  local rc=0
  wait_for "$START_TIMEOUT" "$RUN/pid" 0.2 ready || rc=$?
  if ((rc)); then
    tail -50 "$RUN/server.log" >&2 || true
    ((rc == 1)) && die "versitygw exited at start (logs in $RUN)"
    die "versitygw did not answer on 127.0.0.1:$(cat "$RUN/port") within ${START_TIMEOUT}s (logs in $RUN)"
  fi
  address
}

stop() {
  stop_pid "$RUN/pid" TERM versitygw
  rm -rf "$RUN"
}

case "$1" in
  start) start ;;
  status)
    if running && ready; then address; else exit 1; fi
    ;;
  stop) stop ;;
esac
