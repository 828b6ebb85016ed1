#!/usr/bin/env bash
# loadtest/migration.sh — `flagpole import-unleash` of a large instance: a real unleash-server
# (tests/unleash, installed by scripts/test.sh) on a private PostgreSQL 15 cluster, filled with
# N toggles × 3 environments through its API (loadtest/unleash_fill.js), then moved into a new
# embedded store twice: the first run commits and verifies, the second must say "No changes".
# Prints the command's own line "Read Unleash … in S s" (Unleash's side) and each run's wall
# time and peak memory (/usr/bin/time).
#
# usage: loadtest/migration.sh [N]        (default 2000)
# Environment: FLAGPOLE_BIN (default: target/release/flagpole, built when missing), PG_BIN
#   (default /usr/lib/postgresql/15/bin). Only loopback traffic; everything it starts is
#   stopped when it exits.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
N=${1:-2000}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
FLAGPOLE_BIN=${FLAGPOLE_BIN:-$ROOT/target/release/flagpole}
ADMIN='*:*.loadtest-admin-token-0123456789'
WORK=$(mktemp -d /tmp/fp-migration.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -d "$ROOT/tests/unleash/node_modules/unleash-server" ] ||
  (cd "$ROOT/tests/unleash" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
[ -x "$FLAGPOLE_BIN" ] || (cd "$ROOT" && cargo build --release --bin flagpole)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PGPORT=$(port)
UNLEASH_PORT=$(port)
mkdir "$WORK/pg"
as_pg=()
if [ "$(id -u)" = 0 ]; then chown postgres "$WORK" "$WORK/pg"; as_pg=(runuser -u postgres --); fi
"${as_pg[@]}" "$PG_BIN/initdb" -A trust -U postgres -D "$WORK/pg" >/dev/null
"${as_pg[@]}" "$PG_BIN/postgres" -D "$WORK/pg" -p "$PGPORT" -k "$WORK/pg" \
  -c listen_addresses=127.0.0.1 >"$WORK/pg.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
  psql -h 127.0.0.1 -p "$PGPORT" -U postgres -qc 'CREATE DATABASE unleash' 2>/dev/null && break
  sleep 0.2
done
(cd "$ROOT/tests/unleash" && PGPORT=$PGPORT UNLEASH_PORT=$UNLEASH_PORT CHECK_VERSION=false \
  SEND_TELEMETRY=false INIT_ADMIN_API_TOKENS="$ADMIN" exec node server.js >"$WORK/unleash.log" 2>&1) &
PIDS+=($!)
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$UNLEASH_PORT/health" >/dev/null && break; sleep 1; done
(cd "$ROOT/tests/unleash" && PGPORT=$PGPORT UNLEASH_URL="http://127.0.0.1:$UNLEASH_PORT" \
  ADMIN_TOKEN="$ADMIN" node "$HERE/unleash_fill.js" "$N")
for run in first second; do
  echo "# $run run"
  /usr/bin/time -f "wall %e s, peak RSS %M KB" "$FLAGPOLE_BIN" import-unleash --quiet \
    --url "http://127.0.0.1:$UNLEASH_PORT" --token "$ADMIN" --data-dir "$WORK/store" 2>&1 |
    grep -E '^(Read Unleash|Committed|No changes|Verified|Verification|wall|  \(worked)' || true
done
