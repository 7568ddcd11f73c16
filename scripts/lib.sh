# shellcheck shell=bash
# Shell functions the server scripts (scripts/<server>.sh) share: messages,
# free ports and secrets, run dirs, pid files, waiting for a server and
# stopping it, and fetching into a cache. A script names itself and
# sources this file:
#
#   LIB_NAME=s3.sh
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Sourcing defines functions only: it sets no shell option, reads no
# argument and starts nothing. Every wait is bounded.

# log MESSAGE...: MESSAGE on stderr, after the script's name.
log() { echo "${LIB_NAME:-sluice}: $*" >&2; }

# die MESSAGE...: log MESSAGE and exit 1.
die() {
  log "$*"
  exit 1
}

# free_port: a TCP port on 127.0.0.1 that is free now.
free_port() {
  python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

# random_secret N: N random letters and digits (passwords, keys).
random_secret() {
  python3 -c 'import secrets, string, sys; print("".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(int(sys.argv[1]))))' "$1"
}

# port_open PORT: a TCP connection to 127.0.0.1:PORT succeeds.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# http_code URL: the status code of a GET of URL (5 s at most; 000 when
# nothing answers).
http_code() {
  local code
  code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$1" 2>/dev/null) || true
  echo "${code:-000}"
}

# new_run_dir PREFIX: the run dir to use: $RUN when set, else a new one
# (mktemp, named after PREFIX); the caller assigns it: RUN=$(new_run_dir x).
new_run_dir() {
  if [[ -n "${RUN:-}" ]]; then
    echo "$RUN"
  else
    mktemp -d "${TMPDIR:-/tmp}/sluice-$1.XXXXXX"
  fi
}

# pid_alive FILE: FILE holds the pid of a live process.
pid_alive() {
  local p
  [[ -f "$1" ]] && p=$(cat "$1" 2>/dev/null) && [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null
}

# stop_pid FILE [SIGNAL] [WHAT]: send SIGNAL (default TERM) to the process
# whose pid FILE holds, wait up to 30 s for it to exit, then SIGKILL it and
# wait up to 10 s more; remove FILE. WHAT names it in the message about the
# SIGKILL (default "process <pid>"). Nothing when FILE is missing.
stop_pid() {
  local file=$1 sig=${2:-TERM} pid i
  [[ -f "$file" ]] || return 0
  pid=$(cat "$file" 2>/dev/null) || pid=""
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "${3:-process} $pid ignored SIG$sig for 30s; killing"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 20; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
      done
    fi
  fi
  rm -f "$file"
}

# wait_for TIMEOUT PIDFILE INTERVAL COMMAND...: run COMMAND every INTERVAL
# seconds until it succeeds (return 0), the process of PIDFILE exits
# (return 1; PIDFILE "" = no process to watch) or TIMEOUT seconds passed
# (return 2).
wait_for() {
  local timeout=$1 pidfile=$2 interval=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    if [[ -n "$pidfile" ]] && ! pid_alive "$pidfile"; then return 1; fi
    if ((SECONDS >= deadline)); then return 2; fi
    sleep "$interval"
  done
}

# need COMMAND HINT: die unless COMMAND is on PATH ("COMMAND not found
# (HINT)").
need() { command -v "$1" >/dev/null || die "$1 not found ($2)"; }

# mvn_quiet DIR WHAT MAVEN-ARGS...: run maven in DIR, quietly, in batch
# mode and with strict checksums (a file whose checksum does not match
# the repository's fails the fetch); its output goes to DIR/mvn.log, shown
# when it fails. WHAT names the fetch in the messages; returns maven's
# status.
mvn_quiet() {
  local dir=$1 what=$2
  shift 2
  log "fetching $what"
  if ! (cd "$dir" && mvn -B -q --strict-checksums "$@") >"$dir/mvn.log" 2>&1; then
    cat "$dir/mvn.log" >&2
    log "maven could not fetch $what"
    return 1
  fi
}

# mvn_copy GROUP:ARTIFACT:VERSION:TYPE[:CLASSIFIER] DEST: fetch one artifact
# (mvn_quiet) into the file DEST, replacing it only when the fetch is
# whole; a zip is checked to open. Dies on a failure.
mvn_copy() {
  local tmp f
  tmp=$(mktemp -d)
  mvn_quiet "$tmp" "$1 into $(dirname "$2")" dependency:copy -Dartifact="$1" -DoutputDirectory="$tmp/out" || {
    rm -rf "$tmp"
    exit 1
  }
  f=$(find "$tmp/out" -maxdepth 1 -type f | head -1)
  [[ -n "$f" ]] || { rm -rf "$tmp"; die "$1: no file after the fetch"; }
  if [[ "$2" == *.zip ]] && ! python3 -m zipfile -t "$f" >/dev/null; then
    rm -rf "$tmp"
    die "$1 is not a valid zip"
  fi
  mv "$f" "$2" || { rm -rf "$tmp"; die "could not move $1 to $2"; }
  rm -rf "$tmp"
}

# cache_fill CACHE FUNCTION: fill the cache directory CACHE once: when
# CACHE/.complete is missing, FUNCTION DIR puts its files into DIR, a new
# directory beside CACHE, which is then marked complete and renamed to
# CACHE, so that a run fetching at the same time never sees half a cache
# (the first to finish wins). Returns FUNCTION's failure.
cache_fill() {
  local cache=$1 fill=$2 part
  [[ -f "$cache/.complete" ]] && return 0
  mkdir -p "$(dirname "$cache")"
  part=$(mktemp -d "$cache.partial.XXXXXX")
  if ! "$fill" "$part"; then
    rm -rf "$part"
    return 1
  fi
  touch "$part/.complete"
  if [[ -f "$cache/.complete" ]]; then # another run got there first
    rm -rf "$part"
    return 0
  fi
  rm -rf "$cache"
  mv -T "$part" "$cache" || {
    rm -rf "$part"
    [[ -f "$cache/.complete" ]] || die "could not move the fetched files into $cache"
  }
}
