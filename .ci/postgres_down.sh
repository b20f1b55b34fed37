#!/usr/bin/env bash
# Stop what .ci/postgres_up.sh started and remove its env file (PostgreSQL tests then skip
# again).  Idempotent; keeps the cluster's files for a fast restart (rm -rf $B to drop them).
set -uo pipefail
B=${CAMPAIGN_PG_DIR:-/tmp/campaign-pg}
rm -f "$B/env"
PG=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -n "$PG" ] && [ -s "$B/data/PG_VERSION" ]; then
  runuser -u postgres -- "$PG/pg_ctl" -D "$B/data" -m fast -w stop >/dev/null 2>&1 || true
fi
echo "postgres down"
exit 0
