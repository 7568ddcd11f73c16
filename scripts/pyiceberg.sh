#!/usr/bin/env bash
# Sets up PyIceberg (from PyPI) in a virtual environment of its own, the
# independent reader that the Iceberg sink's tests read tables back with.
#
#   scripts/pyiceberg.sh setup   # create/refresh the venv; print SLUICE_PYICEBERG=<venv python>
#   scripts/pyiceberg.sh python  # print the venv's python if it is set up (exit 1 otherwise)
#
# The venv is ${SLUICE_PYICEBERG_VENV:-~/.cache/sluice/pyiceberg-<version>},
# with pinned versions: pyiceberg (with its pyarrow and sql-sqlite/
# sql-postgres extras' drivers), SQLAlchemy, pyarrow, psycopg2-binary
# (PyIceberg's SQL catalog on PostgreSQL). A venv whose pins match is
# reused. Python's venv module comes from Debian's python3-venv when
# missing (apt-get install, as root).
#
# Usage in a test script:
#   eval "$(scripts/pyiceberg.sh setup | grep '^SLUICE_PYICEBERG=')"; export SLUICE_PYICEBERG
set -euo pipefail

PYICEBERG_VERSION=0.12.0
SQLALCHEMY_VERSION=2.1.9
PYARROW_VERSION=26.0.1
PSYCOPG2_VERSION=2.9.11
pins="pyiceberg==$PYICEBERG_VERSION sqlalchemy==$SQLALCHEMY_VERSION pyarrow==$PYARROW_VERSION psycopg2-binary==$PSYCOPG2_VERSION"
venv=${SLUICE_PYICEBERG_VENV:-$HOME/.cache/sluice/pyiceberg-$PYICEBERG_VERSION}
py=$venv/bin/python

ready() {
  [[ -x $py && -f $venv/.sluice-pins && "$(cat "$venv/.sluice-pins")" == "$pins" ]] &&
    "$py" -c 'import pyiceberg, sqlalchemy, pyarrow' 2>/dev/null
}

case "${1:-}" in
setup)
  if ! ready; then
    base=$(command -v python3 || true)
    [[ -n $base ]] || { echo "pyiceberg.sh: python3 not found" >&2; exit 1; }
    if ! "$base" -c 'import venv, ensurepip' 2>/dev/null; then
      echo "pyiceberg.sh: installing python3-venv from Debian's packages" >&2
      apt-get update -qq >&2 && apt-get install -y -qq python3-venv >&2
      base=/usr/bin/python3
    fi
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    "$base" -m venv "$venv" >&2
    "$py" -m pip install -q --disable-pip-version-check $pins >&2
    echo "$pins" >"$venv/.sluice-pins"
    ready || { echo "pyiceberg.sh: the venv at $venv does not import pyiceberg" >&2; exit 1; }
  fi
  echo "SLUICE_PYICEBERG=$py"
  ;;
python)
  ready && echo "$py"
  ;;
*)
  echo "usage: $0 setup|python" >&2
  exit 2
  ;;
esac
