#!/usr/bin/env bash
# Start a throwaway PostgreSQL for the tests: a cluster in a temp dir, owned by the
# unprivileged `postgres` user, listening on 127.0.0.1:$PORT only (no Unix socket in
# /run, no system service).  Debian's `postgresql` package, installed when missing.
# Idempotent: a cluster already running is kept.  Writes $B/env (KEY=VALUE lines):
#   CAMPAIGN_TEST_DATABASE_URL  postgresql://campaign@127.0.0.1:PORT/campaign (no password in it)
#   PGPASSFILE                  the .pgpass (mode 600) that holds the role's password
set -euo pipefail
B=${CAMPAIGN_PG_DIR:-/tmp/campaign-pg}
PORT=${CAMPAIGN_PG_PORT:-55432}
t0=$(date +%s)
[ "$(id -u)" = 0 ] || { echo "postgres_up.sh: run as root (it installs packages and runs the server as postgres)" >&2; exit 2; }

bin_dir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
if [ -z "$(bin_dir)" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # the package's own cluster and service are not used: policy may deny their start, fine
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
PG=$(bin_dir)
id -u postgres >/dev/null 2>&1 || useradd -r -m -s /bin/sh postgres
as_pg() { runuser -u postgres -- "$@"; }

install -d -m 0755 "$B"
install -d -m 0700 -o postgres "$B/data" "$B/run" "$B/log"
if [ ! -s "$B/data/PG_VERSION" ]; then
  as_pg "$PG/initdb" -D "$B/data" -U postgres --auth-local=peer --auth-host=scram-sha-256 -E UTF8 >/dev/null
fi
if ! as_pg "$PG/pg_ctl" -D "$B/data" status >/dev/null 2>&1; then
  as_pg "$PG/pg_ctl" -D "$B/data" -l "$B/log/postgres.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$B/run -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" >/dev/null
fi

# the role the tests connect as: its password lives only in the .pgpass
if [ ! -s "$B/pgpass" ]; then
  umask 077
  printf '127.0.0.1:%s:*:campaign:%s\n' "$PORT" "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" > "$B/pgpass.tmp"
  mv "$B/pgpass.tmp" "$B/pgpass"
fi
chmod 600 "$B/pgpass"
PASS=$(cut -d: -f5 "$B/pgpass")
psql_pg() { as_pg "$PG/psql" -h "$B/run" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
if [ "$(psql_pg -c "SELECT 1 FROM pg_roles WHERE rolname = 'campaign'")" != 1 ]; then
  psql_pg -c "CREATE ROLE campaign LOGIN CREATEDB"
fi
# the password reaches psql on stdin, never a command line
printf "ALTER ROLE campaign PASSWORD '%s';\n" "$PASS" | psql_pg
if [ "$(psql_pg -c "SELECT 1 FROM pg_database WHERE datname = 'campaign'")" != 1 ]; then
  psql_pg -c "CREATE DATABASE campaign OWNER campaign"
fi

cat > "$B/env.tmp" <<ENV
CAMPAIGN_TEST_DATABASE_URL=postgresql://campaign@127.0.0.1:$PORT/campaign
PGPASSFILE=$B/pgpass
CAMPAIGN_PG_BIN=$PG
ENV
mv "$B/env.tmp" "$B/env"
echo "postgres up in $(( $(date +%s) - t0 )) s: 127.0.0.1:$PORT ($("$PG/postgres" --version)); env: $B/env"
