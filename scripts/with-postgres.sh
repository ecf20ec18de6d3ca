#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL 15 cluster (with pgvector, both installed by
# `make setup-test`): E2E_POSTGRES_URL names the server (no database: each test server
# creates its own). The cluster is stopped and removed when the command ends. As root the server
# runs as the `postgres` user, since PostgreSQL refuses to run as root.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
[ -x "$bin/initdb" ] || { echo "with-postgres: PostgreSQL 15 is missing; run make setup-test" >&2; exit 1; }
dir="$(mktemp -d)"
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
stop() {
  as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT
as_postgres "$bin/initdb" -D "$dir/data" -A trust -U engram -E UTF8 --no-sync >/dev/null
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w start \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null
E2E_POSTGRES_URL="postgres://engram@127.0.0.1:$port" "$@"
