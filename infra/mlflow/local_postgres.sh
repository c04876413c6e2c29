#!/usr/bin/env bash
# A throwaway PostgreSQL for the MLflow tracking server, on 127.0.0.1 only.
#
#   PGPASSWORD=... infra/mlflow/local_postgres.sh up DIR [PORT]    # initdb, start, create role+db
#   infra/mlflow/local_postgres.sh down DIR
#
# Creates the role and database `mlflow` (password from PGPASSWORD, scram-sha-256 over TCP; no
# trust authentication anywhere). PostgreSQL refuses to run as root, so as root the server runs
# as the `postgres` user that the OS package creates. Install the package with
# infra/ci/install_test_deps.sh. For production use a managed PostgreSQL instead.
set -euo pipefail

die() { echo "local_postgres: $*" >&2; exit 1; }

bindir() {
  local dir
  for dir in /usr/lib/postgresql/*/bin /usr/pgsql-*/bin; do
    [[ -x "$dir/initdb" ]] && { echo "$dir"; return; }
  done
  command -v initdb >/dev/null && { dirname "$(command -v initdb)"; return; }
  die "PostgreSQL is not installed; run infra/ci/install_test_deps.sh"
}

as_owner() {
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

up() {
  local dir=$1 port=${2:-5432} bin
  [[ -n "${PGPASSWORD:-}" ]] || die "set PGPASSWORD to the password for the role 'mlflow'"
  bin=$(bindir)
  mkdir -p "$dir"
  [[ $(id -u) == 0 ]] && chown postgres: "$dir"
  chmod 700 "$dir"
  local pwfile
  pwfile=$(mktemp)
  printf '%s\n' "$PGPASSWORD" >"$pwfile"
  [[ $(id -u) == 0 ]] && chown postgres: "$pwfile"
  as_owner "$bin/initdb" -D "$dir/data" -U mlflow --pwfile="$pwfile" -A scram-sha-256 \
    -E UTF8 >"$dir/initdb.log" 2>&1 || { rm -f "$pwfile"; die "initdb failed: $dir/initdb.log"; }
  rm -f "$pwfile"
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" >/dev/null \
    || die "PostgreSQL did not start: $dir/server.log"
  PGPASSWORD=$PGPASSWORD "$bin/createdb" -h 127.0.0.1 -p "$port" -U mlflow mlflow
  echo "local_postgres: postgresql://mlflow@127.0.0.1:$port/mlflow (password: \$PGPASSWORD)"
}

down() {
  local dir=$1
  [[ -d "$dir/data" ]] || return 0
  as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null || true
}

case "${1:-}" in
  up) up "${2:?usage: $0 up DIR [PORT]}" "${3:-5432}" ;;
  down) down "${2:?usage: $0 down DIR}" ;;
  *) die "usage: $0 up DIR [PORT] | down DIR" ;;
esac
