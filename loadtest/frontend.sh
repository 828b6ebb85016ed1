#!/usr/bin/env bash
# loadtest/frontend.sh — server-side evaluation under load (issue 34): the frontend API and OFREP
# bulk at each toggle count, with wrk (2 threads, --connections keep-alive connections):
#   random        GET /api/frontend, a random userId per request (nothing cacheable)
#   repoll        GET /api/frontend, 1,000 fixed contexts re-polled with If-None-Match (304s)
#   bulk          POST /ofrep/v1/evaluate/flags, a random targetingKey per request
#   bulk-repoll   POST /ofrep/v1/evaluate/flags, 1,000 fixed contexts with If-None-Match
#   client304     GET /api/client/features with If-None-Match (the client API's 304, for the
#                 "re-polls at >= 0.9 of the client API's 304 rate" goal), through the same Lua
#                 request function as the others (the same client-side cost)
# then req/s, p99, the server's CPU per request (user and system, from /proc/PID/stat) and the
# peak RSS (VmHWM) of the whole run, the engine's build times (from its
# log) and how a write reaches the answers (frontend.py propagation).
#
# With --peers, the same toggles and the frontend modes (random, repoll) against the peers, in
# the same run, each with a frontend token of its own:
#   edge          Unleash Edge in offline mode, the toggles as its bootstrap file (EDGE_BIN, or
#                 unleash-edge on PATH: `cargo install unleash-edge --locked`, once)
#   unleash       Unleash 7.5.1's own frontend API (tests/unleash, installed by scripts/test.sh,
#                 on a private PostgreSQL 15 cluster under PG_BIN), the toggles loaded as its
#                 `development` environment (frontend.py unleash-load)
# A peer that is not installed is skipped with a message.
#
# Usage: loadtest/frontend.sh [--toggles "100 1000"] [--duration S] [--connections C]
#          [--store redis|embedded] [--modes "random repoll bulk bulk-repoll client304"]
#          [--peers "edge unleash"] [--build-toggles N] [--out DIR] [--no-build]
#          [--time-limit S]
# Builds flagpole in release mode into CARGO_TARGET_DIR (default /tmp/fp-release) unless
# FLAGPOLE_BIN names a binary. Loopback only; every process it starts is stopped when it exits.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
common_defaults

TOGGLE_COUNTS=${TOGGLE_COUNTS:-"100 1000"}
CONNECTIONS=${CONNECTIONS:-64}
MODES=${MODES:-"random repoll bulk bulk-repoll client304"}
BUILD_TOGGLES=${BUILD_TOGGLES:-10000}
PEERS=${PEERS:-}
PEER_MODES="random repoll"
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
TIME_LIMIT=${TIME_LIMIT:-1800}
KILL_AFTER=5
while [ $# -gt 0 ]; do
  case "$1" in
    --toggles) TOGGLE_COUNTS=$2; shift 2;;
    --connections) CONNECTIONS=$2; shift 2;;
    --modes) MODES=$2; shift 2;;
    --build-toggles) BUILD_TOGGLES=$2; shift 2;;
    --peers) PEERS=$2; shift 2;;
    *) common_opt "$@"; shift "$OPT_SHIFT";;
  esac
done
check_store
for peer in $PEERS; do
  case "$peer" in edge|unleash) ;; *) echo "--peers takes edge and unleash, not $peer" >&2; exit 2;; esac
done
need_tools "wrk curl python3" wrk curl python3
need_redis_tools
make_out frontend-bench
stop_on_exit FP_PID REDIS_PID CHILD_PID PEER_PID UNLEASH_PID PG_PID
stopped_what() { echo "flagpole, its store and the peers"; }
build_flagpole
machine_info

# one_replica N: a fresh store and flagpole (open access, info logs) holding N toggles
one_replica() {
  stop "$FP_PID"; stop "$REDIS_PID"; FP_PID=""; REDIS_PID=""
  [ -n "$DATA_DIR" ] && rm -rf "$DATA_DIR"
  read -r REDIS_PORT FP_PORT <<< "$(free_ports 2)"
  start_store redis_ping_py frontend-bench
  RUST_LOG=info start_flagpole "${STORE_ARGS[@]}" --auth none
  python3 "$HERE/frontend.py" document "$1" > "$OUT/toggles-$1.json"
  curl -sf -o /dev/null -X POST -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
    --data-binary @"$OUT/toggles-$1.json" "$URL/api/admin/state/import?environment=default&drop=true"
}

# cpu_ticks PID: user and system CPU of PID so far, in clock ticks (fields 14 and 15 of
# /proc/PID/stat, counted after the command name's closing paren)
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12, $13 }'; }

# wrk_mode MODE N: one wrk run (every mode through frontend.lua, so that each pays the same
# client-side cost); appends "N MODE req/s p99 non-2xx user-us sys-us" to $OUT/results.txt,
# the last two the server's CPU per request (from /proc/PID/stat around the run)
wrk_mode() {
  peer_mode "$1" "$2" "" "$FP_PID" "$URL" ""
}

# peer_mode MODE N LABEL PID URL TOKEN: wrk_mode against the server PID at URL, the rows named
# LABEL-MODE (MODE alone without LABEL), with TOKEN as the Authorization header
peer_mode() {
  local mode=$1 n=$2 pid=$4 url=$5 name=${3:+$3-}$1 before after
  local out="$OUT/wrk-$n-$name.txt"
  before=$(cpu_ticks "$pid")
  FRONTEND_MODE=$mode FRONTEND_TOKEN=$6 FRONTEND_ETAGS="$OUT/etags-$n${3:+-$3}.lua" \
    run_bg $((DURATION + 30)) "$out" \
    wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$HERE/frontend.lua" "$url"
  after=$(cpu_ticks "$pid")
  local rps p99 non2xx requests cpu
  rps=$(awk '/Requests\/sec/{print $2}' "$out")
  p99=$(awk '$1=="99%"{print $2}' "$out")
  non2xx=$(awk '/Non-2xx/{print $NF}' "$out")
  requests=$(awk '/requests in/{print $1}' "$out")
  cpu=$(echo "$before $after $requests $(getconf CLK_TCK)" | awk '{
    printf "%.1f %.1f", ($3 - $1) * 1e6 / $6 / $5, ($4 - $2) * 1e6 / $6 / $5 }')
  echo "$n $name $rps $p99 ${non2xx:-0} $cpu" >> "$OUT/results.txt"
  echo "# $n toggles, $name: $rps req/s, p99 $p99 (non-2xx/3xx: ${non2xx:-0}), server CPU per request (user, system µs): $cpu" >&2
}

# wait_http URL PID WHAT: wait up to 5 min for URL to answer 2xx while PID lives
wait_http() {
  for _ in $(seq 600); do
    curl -sf -o /dev/null -m 2 "$1" && return 0
    kill -0 "$2" 2>/dev/null || { echo "$3 exited; see $OUT" >&2; exit 1; }
    sleep 0.5
  done
  echo "$3 did not answer $1 within 5 min" >&2; exit 1
}

# edge_round N: Unleash Edge (offline, the toggles as its bootstrap file) under the frontend modes
edge_round() {
  local n=$1 port token='*:development.edgebench0123456789abcdef' bin=${EDGE_BIN:-}
  [ -n "$bin" ] || bin=$(command -v unleash-edge || true)
  if [ -z "$bin" ]; then
    echo "# edge: unleash-edge not found (EDGE_BIN, or cargo install unleash-edge --locked): skipped" >&2
    return 0
  fi
  read -r port <<< "$(free_ports 1)"
  "$bin" --port "$port" --interface 127.0.0.1 offline --bootstrap-file "$OUT/toggles-$n.json" \
    --frontend-tokens "$token" --client-tokens "$token" > "$OUT/edge-$n.log" 2>&1 &
  PEER_PID=$!
  wait_http "http://127.0.0.1:$port/internal-backstage/health" "$PEER_PID" "unleash-edge"
  echo "# edge: $bin, pid $PEER_PID" >&2
  FRONTEND_TOKEN=$token python3 "$HERE/frontend.py" etags "http://127.0.0.1:$port" 1000 "$OUT/etags-$n-edge.lua"
  for mode in $PEER_MODES; do peer_mode "$mode" "$n" edge "$PEER_PID" "http://127.0.0.1:$port" "$token"; done
  echo "$n edge-peak_rss_kib $(awk '/VmHWM/{print $2}' "/proc/$PEER_PID/status")" >> "$OUT/results.txt"
  stop "$PEER_PID"; PEER_PID=""
}

# start_unleash: a private PostgreSQL cluster and Unleash 7.5.1 (tests/unleash); sets UNLEASH_URL
start_unleash() {
  local pg_port unleash_port as_pg=()
  read -r pg_port unleash_port <<< "$(free_ports 2)"
  UNLEASH_ADMIN='*:*.frontendbench-admin-0123456789'
  mkdir -p "$OUT/pg"
  if [ "$(id -u)" = 0 ]; then chown postgres "$OUT" "$OUT/pg"; as_pg=(runuser -u postgres --); fi
  "${as_pg[@]}" "$PG_BIN/initdb" -A trust -U postgres -D "$OUT/pg" > "$OUT/initdb.log"
  "${as_pg[@]}" "$PG_BIN/postgres" -D "$OUT/pg" -p "$pg_port" -k "$OUT/pg" \
    -c listen_addresses=127.0.0.1 > "$OUT/pg.log" 2>&1 &
  PG_PID=$!
  for _ in $(seq 100); do
    psql -h 127.0.0.1 -p "$pg_port" -U postgres -qc 'CREATE DATABASE unleash' 2>/dev/null && break
    sleep 0.2
  done
  (cd "$REPO/tests/unleash" && PGPORT=$pg_port UNLEASH_PORT=$unleash_port CHECK_VERSION=false \
    SEND_TELEMETRY=false INIT_ADMIN_API_TOKENS="$UNLEASH_ADMIN" exec node server.js) \
    > "$OUT/unleash.log" 2>&1 &
  UNLEASH_PID=$!
  UNLEASH_URL="http://127.0.0.1:$unleash_port"
  wait_http "$UNLEASH_URL/health" "$UNLEASH_PID" "unleash-server"
  echo "# unleash: $(curl -s "$UNLEASH_URL/api/admin/ui-config" -H "Authorization: $UNLEASH_ADMIN" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("version"))'), pid $UNLEASH_PID" >&2
}

# unleash_round N: Unleash 7.5.1's frontend API holding the N toggles under the frontend modes
unleash_round() {
  local n=$1 token
  if [ ! -d "$REPO/tests/unleash/node_modules/unleash-server" ] || [ ! -x "$PG_BIN/initdb" ]; then
    echo "# unleash: tests/unleash not installed (scripts/test.sh does) or no $PG_BIN/initdb: skipped" >&2
    return 0
  fi
  [ -n "${UNLEASH_URL:-}" ] || { start_unleash; UNLEASH_LOADED=0; }
  if [ "$n" -lt "$UNLEASH_LOADED" ]; then
    echo "# unleash: already holds $UNLEASH_LOADED toggles; give --toggles in ascending order" >&2
    return 0
  fi
  # The first UNLEASH_LOADED toggles are the same at every count: only the rest are added.
  token=$(python3 "$HERE/frontend.py" unleash-load "$UNLEASH_URL" "$UNLEASH_ADMIN" "$n" "$UNLEASH_LOADED")
  UNLEASH_LOADED=$n
  # Unleash refreshes its frontend API's toggles from the database every few seconds.
  sleep 15
  FRONTEND_TOKEN=$token python3 "$HERE/frontend.py" etags "$UNLEASH_URL" 1000 "$OUT/etags-$n-unleash.lua"
  for mode in $PEER_MODES; do peer_mode "$mode" "$n" unleash "$UNLEASH_PID" "$UNLEASH_URL" "$token"; done
  echo "$n unleash-peak_rss_kib $(awk '/VmHWM/{print $2}' "/proc/$UNLEASH_PID/status")" >> "$OUT/results.txt"
}

: > "$OUT/results.txt"
for n in $TOGGLE_COUNTS; do
  one_replica "$n"
  python3 "$HERE/frontend.py" etags "$URL" 1000 "$OUT/etags-$n.lua"
  for mode in $MODES; do wrk_mode "$mode" "$n"; done
  echo "$n peak_rss_kib $(awk '/VmHWM/{print $2}' "/proc/$FP_PID/status")" >> "$OUT/results.txt"
  python3 "$HERE/frontend.py" propagation "$URL" 20 | sed "s/^/$n toggles: /" | tee -a "$OUT/propagation.txt" >&2
  grep 'evaluation engine built' "$OUT/flagpole.log" | tail -1 | sed "s/^/$n toggles: /" >> "$OUT/builds.txt" || true
done
# The peers after every flagpole round, so that none runs beside flagpole's (Unleash and its
# PostgreSQL stay up from one size to the next, and their timers take CPU while idle).
stop "$FP_PID"; FP_PID=""
for n in $TOGGLE_COUNTS; do
  for peer in $PEERS; do "${peer}_round" "$n"; done
done
stop "$UNLEASH_PID"; UNLEASH_PID=""; stop "$PG_PID"; PG_PID=""

# What one engine build costs at BUILD_TOGGLES toggles (first build, then one after a change).
one_replica "$BUILD_TOGGLES"
curl -s -o /dev/null "$URL/api/frontend?userId=x"
curl -sf -o /dev/null -X POST -H "$ADMIN_HEADER" "$URL/api/admin/features/bench.00009/toggle/on"
curl -s -o /dev/null "$URL/api/frontend?userId=x"
grep 'evaluation engine built' "$OUT/flagpole.log" | sed "s/^/$BUILD_TOGGLES toggles: /" >> "$OUT/builds.txt" || true
echo "$BUILD_TOGGLES peak_rss_kib $(awk '/VmHWM/{print $2}' "/proc/$FP_PID/status")" >> "$OUT/results.txt"

echo "toggles mode req/s p99 non-2xx server-user-us server-sys-us" >&2
cat "$OUT/results.txt" >&2
sed -E 's/\x1b\[[0-9;]*m//g' "$OUT/builds.txt" >&2 || true
