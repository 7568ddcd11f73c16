#!/usr/bin/env bash
# Runs a private PostgreSQL server on 127.0.0.1 for the PostgreSQL
# connector's tests: initdb into a run dir of its own, a free loopback port,
# the unix socket in the run dir, stopped and removed by the invocation that
# started it.
#
#   scripts/postgres.sh start    # initdb, start, wait; print SLUICE_POSTGRES_URL=… and SLUICE_POSTGRES_RUN=…
#   scripts/postgres.sh status   # print them and exit 0 if running, exit 1 otherwise
#   scripts/postgres.sh stop     # stop the server (fast shutdown, then SIGKILL), remove the run dir
#   scripts/postgres.sh kill9    # kill -9 the postmaster and its backends, keep the data (crash tests)
#   scripts/postgres.sh restart  # start again on the same port and data (after kill9); crash recovery runs
#
# The server: wal_level $SLUICE_POSTGRES_WAL_LEVEL (default logical; the
# tests start a second server with replica to check the CDC source's
# error), max_prepared_transactions
# $SLUICE_POSTGRES_MAX_PREPARED (default 20; the tests start a second
# server with 0 to check the sink's error), listen_addresses=127.0.0.1,
# small shared_buffers, and PostgreSQL's default durability (fsync on: the
# crash tests kill -9 the server and expect what it committed to survive).
# One superuser, "sluice", with a random password (scram-sha-256 over TCP;
# trust only on the unix socket in the run dir), and a database "sluice".
# SLUICE_POSTGRES_URL is
#   postgres://sluice:<password>@127.0.0.1:<port>/sluice?sslmode=disable
#
# The binaries (initdb, pg_ctl, postgres, pg_isready) come from PATH or
# Debian's /usr/lib/postgresql/<version>/bin; when missing:
#   apt-get install -y postgresql   (Debian's package; the service need not run)
# initdb refuses to run as root: as root the script runs the server as the
# user $SLUICE_POSTGRES_USER (default postgres, which Debian's package
# creates) and hands the run dir to it.
#
# The run dir is $SLUICE_POSTGRES_RUN: start makes a new one (mktemp) when
# it is unset; every other command needs it set and touches only the server
# of that run dir. Its log is <run dir>/server.log, shown when start fails.
#
# Usage in a test script:
#   export SLUICE_POSTGRES_RUN=$(mktemp -d)
#   trap 'scripts/postgres.sh stop' EXIT
#   eval "$(scripts/postgres.sh start | grep '^SLUICE_POSTGRES_URL=')"
#   export SLUICE_POSTGRES_URL
# or, by hand:  eval "$(scripts/postgres.sh start)"; export SLUICE_POSTGRES_URL SLUICE_POSTGRES_RUN
set -euo pipefail

RUN="${SLUICE_POSTGRES_RUN:-}"
START_TIMEOUT="${SLUICE_POSTGRES_START_TIMEOUT:-60}" # seconds
MAX_PREPARED="${SLUICE_POSTGRES_MAX_PREPARED:-20}"
WAL_LEVEL="${SLUICE_POSTGRES_WAL_LEVEL:-logical}"
RUNAS="${SLUICE_POSTGRES_USER:-postgres}"

LIB_NAME=postgres.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-}" in
  start) ;;
  status | stop | kill9 | restart)
    [[ -n "$RUN" ]] || die "set SLUICE_POSTGRES_RUN to the run dir that start printed"
    ;;
  *) die "usage: $0 start|status|stop|kill9|restart" ;;
esac

# bin finds a PostgreSQL program: PATH first, then Debian's versioned dirs.
bin() {
  local p
  if p=$(command -v "$1" 2>/dev/null); then echo "$p"; return 0; fi
  for p in /usr/lib/postgresql/*/bin/"$1"; do
    if [[ -x "$p" ]]; then echo "$p"; return 0; fi
  done
  die "$1 not found: install PostgreSQL (Debian: apt-get install -y postgresql) or put its bin dir on PATH"
}

# as runs a command as the server's user (itself unless root).
as() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u "$RUNAS" -- "$@"
  else
    "$@"
  fi
}

address() {
  echo "SLUICE_POSTGRES_URL=postgres://sluice:$(cat "$RUN/password")@127.0.0.1:$(cat "$RUN/port")/sluice?sslmode=disable"
  echo "SLUICE_POSTGRES_RUN=$RUN"
}

pid() { head -1 "$RUN/data/postmaster.pid" 2>/dev/null; }

running() {
  local p
  p=$(pid) && [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null
}

ready() {
  "$(bin pg_isready)" -q -h 127.0.0.1 -p "$(cat "$RUN/port")" -d sluice -U sluice
}

# launch starts the server of the run dir and waits until it accepts
# connections, bounded by START_TIMEOUT.
launch() {
  as "$(bin pg_ctl)" -D "$RUN/data" -l "$RUN/server.log" -o "-p $(cat "$RUN/port") -k $RUN" -w -t "$START_TIMEOUT" start >"$RUN/pg_ctl.log" 2>&1 || {
    cat "$RUN/pg_ctl.log" >&2
    tail -50 "$RUN/server.log" >&2 2>/dev/null || true
    die "the server did not start (logs in $RUN)"
  }
  if ! wait_for "$START_TIMEOUT" "" 0.2 ready; then
    tail -50 "$RUN/server.log" >&2 2>/dev/null || true
    die "the server did not accept connections on 127.0.0.1:$(cat "$RUN/port") within ${START_TIMEOUT}s (logs in $RUN)"
  fi
}

start() {
  RUN=$(new_run_dir postgres)
  mkdir -p "$RUN"
  if [[ $(id -u) == 0 ]]; then
    id "$RUNAS" >/dev/null 2>&1 || die "running as root: the server runs as user $RUNAS, which does not exist (set SLUICE_POSTGRES_USER, or apt-get install -y postgresql, which creates postgres)"
    chown "$RUNAS" "$RUN"
  fi
  chmod 0755 "$RUN"
  if running; then address; return 0; fi
  free_port >"$RUN/port"
  random_secret 24 >"$RUN/password"
  chmod 0644 "$RUN/port" "$RUN/password"
  as "$(bin initdb)" -D "$RUN/data" -U sluice --pwfile="$RUN/password" -A trust --auth-host=scram-sha-256 \
    --auth-local=trust -E UTF8 --locale=C.UTF-8 >"$RUN/initdb.log" 2>&1 || {
    cat "$RUN/initdb.log" >&2
    die "initdb failed (logs in $RUN)"
  }
  cat >>"$RUN/data/postgresql.conf" <<EOF
# scripts/postgres.sh
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RUN'
max_connections = 200
max_prepared_transactions = $MAX_PREPARED
wal_level = $WAL_LEVEL
max_wal_senders = 10
max_replication_slots = 10
shared_buffers = 32MB
password_encryption = 'scram-sha-256'
log_min_messages = warning
log_line_prefix = '%m [%p] '
EOF
  # Only TCP from 127.0.0.1 with a password, and the run dir's socket.
  cat >"$RUN/data/pg_hba.conf" <<EOF
local   all          all                    trust
host    all          all    127.0.0.1/32    scram-sha-256
local   replication  all                    trust
host    replication  all    127.0.0.1/32    scram-sha-256
EOF
  launch
  as "$(bin psql)" -q -h "$RUN" -p "$(cat "$RUN/port")" -U sluice -d postgres -c "CREATE DATABASE sluice" >"$RUN/createdb.log" 2>&1 || {
    cat "$RUN/createdb.log" >&2
    die "could not create database sluice (logs in $RUN)"
  }
  address
}

stop() {
  if running; then
    as "$(bin pg_ctl)" -D "$RUN/data" -m fast -w -t 30 stop >/dev/null 2>&1 || kill9
  fi
  rm -rf "$RUN"
}

# kill9 kills the postmaster and its backends with SIGKILL, like a machine
# crash: a restart runs crash recovery from the WAL.
kill9() {
  local p children
  p=$(pid) || return 0
  [[ -n "$p" ]] || return 0
  children=$(ps -o pid= --ppid "$p" 2>/dev/null || true)
  # One kill for all of them, as close to a machine crash as a signal gets.
  # shellcheck disable=SC2086
  kill -9 "$p" $children 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while kill -0 "$p" 2>/dev/null; do
    ((SECONDS < deadline)) || die "postmaster $p survived SIGKILL"
    sleep 0.1
  done
}

case "$1" in
  start) start ;;
  status)
    if running && ready; then address; else exit 1; fi
    ;;
  stop) stop ;;
  kill9) kill9 ;;
  restart)
    if running; then address; exit 0; fi
    launch
    address
    ;;
esac
