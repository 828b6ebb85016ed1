#!/usr/bin/env bash
# loadtest/run.sh — benchmark flagpole's GET /api/client/features against the shared
# "ceiling" server, with one command. It:
#   1. builds flagpole in release mode (CARGO_TARGET_DIR, default /tmp/fp-release);
#   2. starts its own redis-server and flagpole on free loopback ports (or flagpole alone
#      on a fresh embedded store with --store embedded);
#   3. runs the shared bench kit (bench.sh): loads N toggles through the admin API, then
#      alternates bounded wrk runs against flagpole and the ceiling and prints ratios,
#      p50/p99 and peak RSS;
#   4. stops everything it started when it exits (normally, on error or on Ctrl-C).
#
# usage: loadtest/run.sh [options] [-- extra bench.sh options]
#   --toggles N        toggles to load (default 1000; use 10000 for the memory check)
#   --duration S       seconds per wrk run (default 10)
#   --rounds R         server/ceiling alternations per mode (default 2)
#   --warmup S         unrecorded warm-up seconds per target and mode (default 3)
#   --modes "..."      request kinds, any of "200 gzip 304" (default all three)
#   --store redis|embedded   store backend of flagpole (default redis)
#   --ceiling-body W   what the ceiling serves: generated (default) | server | FILE
#   --out DIR          keep flagpole/redis logs, raw wrk outputs and results.csv there
#                      (default: a new /tmp/flagpole-loadtest.XXXXXX)
#   --no-build         use the existing binary in $CARGO_TARGET_DIR/release
#   --time-limit S     hard limit for the whole bench.sh run (default 1800)
#   --tokens           run flagpole with --auth token: the admin API with an admin token, the
#                      client requests with a client token (Authorization header)
#   --environment E    serve environment E's document (issue 32): the toggles are also imported
#                      client-shaped into E and into the other environments listed in
#                      --also-environments (default "development production" minus E), and the
#                      client requests carry an Unleash-shaped client token of E (implies --tokens)
#   --also-environments "E ..."  the other environments configured besides `default` and E
#   --rate-limit R     also limit each caller of the client features path to R requests/s
#                      (--rate-limit-client; set it above the load so that nothing is refused)
#   --writes-per-second R   measure twice in one run: first without writes, then with the
#                      bench kit's steady_writer.py changing a random toggle R times a second
#                      (the configuration keeps changing while the fleet polls)
# Environment overrides: TOGGLES, DURATION, ROUNDS, WARMUP, STORE, CARGO_TARGET_DIR,
#   BENCH_DIR (default: $(git rev-parse --show-toplevel)/../shared/bench),
#   REDIS_SERVER (redis-server binary), FLAGPOLE_BIN (skip the build, use this binary).
# Examples:
#   loadtest/run.sh                                  # 1,000 toggles, Redis, 2 x 10 s per mode
#   loadtest/run.sh --toggles 10000 --duration 5     # memory check at 10,000 toggles
#   loadtest/run.sh --store embedded
#   loadtest/run.sh --ceiling-body server            # ceiling serves flagpole's exact bytes
#   loadtest/run.sh --toggles 10000 --modes "gzip 304" --writes-per-second 20
# Only loopback traffic; every step is bounded in time. Needs cargo, wrk, curl, python3,
# redis-server (Redis mode): apt-get install -y wrk redis-server
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults   # REPO, DURATION, ROUNDS, STORE, BENCH_DIR, REDIS_SERVER, CARGO_TARGET_DIR, ...
TOGGLES=${TOGGLES:-1000}
WARMUP=${WARMUP:-3}
MODES=${MODES:-"200 gzip 304"}
CEILING_BODY=${CEILING_BODY:-generated}
TIME_LIMIT=1800
KILL_AFTER=15     # run_bg: SIGKILL this long after --time-limit
EXTRA=()
WRITE_RATE=""
TOKENS=0
RATE_LIMIT=""
ENVIRONMENT=""
ALSO_ENVIRONMENTS=""
FP_ARGS=()
CLIENT_ARGS=()

while [ $# -gt 0 ]; do
  case "$1" in
    --toggles) TOGGLES=$2; shift 2;;
    --modes) MODES=$2; shift 2;;
    --ceiling-body) CEILING_BODY=$2; shift 2;;
    --writes-per-second) WRITE_RATE=$2; shift 2;;
    --tokens) TOKENS=1; shift;;
    --environment) ENVIRONMENT=$2; TOKENS=1; shift 2;;
    --also-environments) ALSO_ENVIRONMENTS=$2; shift 2;;
    --rate-limit) RATE_LIMIT=$2; shift 2;;
    --) shift; EXTRA=("$@"); break;;
    *) common_opt "$@"; shift "$OPT_SHIFT";;   # --duration --rounds --warmup --store --out --no-build --time-limit -h
  esac
done
check_store
[ -x "$BENCH_DIR/bench.sh" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
need_tools "wrk curl python3" wrk curl python3

make_out flagpole-loadtest

# ---- cleanup: stop exactly the processes this script started -------------------------------
stop_on_exit CHILD_PID WRITER_PID FP_PID REDIS_PID   # timeout (CHILD_PID) forwards the signal to bench.sh, wrk and the ceiling

# ---- 1. build --------------------------------------------------------------------------------
build_flagpole

# ---- 2. start redis-server and flagpole --------------------------------------------------
read -r REDIS_PORT FP_PORT CEILING_PORT <<<"$(free_ports 3)"
machine_info

if [ "$STORE" = redis ]; then
  command -v "$REDIS_SERVER" >/dev/null || { echo "redis-server not found (apt-get install -y redis-server)" >&2; exit 2; }
fi
start_store redis_ping_py flagpole-loadtest

if [ "$TOKENS" = 1 ]; then
  ADMIN_TOKEN="loadtest-admin-token-$RANDOM$RANDOM"
  CLIENT_TOKEN="loadtest-client-token-$RANDOM$RANDOM"
  FP_ARGS+=(--auth token --admin-token "$ADMIN_TOKEN" --client-token "$CLIENT_TOKEN")
  ADMIN_HEADER="Authorization: $ADMIN_TOKEN"
  [ -n "$ENVIRONMENT" ] || CLIENT_ARGS+=(--client-header "Authorization: $CLIENT_TOKEN")
fi
if [ -n "$RATE_LIMIT" ]; then
  [[ $RATE_LIMIT =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "--rate-limit must be a number" >&2; exit 2; }
  FP_ARGS+=(--rate-limit-client "$RATE_LIMIT")
fi
start_flagpole "${STORE_ARGS[@]}" "${FP_ARGS[@]+"${FP_ARGS[@]}"}"

# ---- 3. bench ------------------------------------------------------------------------------
# bench.sh stops its own ceiling on exit; timeout bounds the whole run (loading included).
# It runs in the background so that Ctrl-C / SIGTERM reach the traps above at once.
# bench ARGS...: one bench.sh run against this flagpole
bench() {
  run_bg "$TIME_LIMIT" '' "$BENCH_DIR/bench.sh" \
    --url "$URL" \
    --toggles "$TOGGLES" \
    --admin-header "$ADMIN_HEADER" \
    --server-pid "$FP_PID" \
    --ceiling-port "$CEILING_PORT" \
    --ceiling-body "$CEILING_BODY" \
    --modes "$MODES" \
    --duration "$DURATION" \
    --rounds "$ROUNDS" \
    --warmup "$WARMUP" \
    "${CLIENT_ARGS[@]+"${CLIENT_ARGS[@]}"}" \
    "$@" \
    "${EXTRA[@]+"${EXTRA[@]}"}"
}

# The toggles are loaded here, not by bench.sh: the client API serves a write after its next
# background build, and bench.sh reads the ETag for its 304 runs right after loading.
[ -z "$WRITE_RATE" ] || [[ $WRITE_RATE =~ ^[0-9]+([.][0-9]+)?$ ]] \
  || { echo "--writes-per-second must be a number" >&2; exit 2; }
echo "# loading $TOGGLES toggles" >&2
run_bg "$TIME_LIMIT" "$OUT/load.txt" python3 "$BENCH_DIR/gen_features.py" "$TOGGLES" \
  --load "$URL" --admin-header "$ADMIN_HEADER"
if [ -n "$ENVIRONMENT" ]; then
  [[ $ENVIRONMENT =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "--environment must be an environment name" >&2; exit 2; }
  [ -n "$ALSO_ENVIRONMENTS" ] || ALSO_ENVIRONMENTS=$(echo development production | tr ' ' '\n' | grep -vx "$ENVIRONMENT" | tr '\n' ' ')
  python3 "$BENCH_DIR/gen_features.py" "$TOGGLES" -o "$OUT/features.json"
  for env in $ENVIRONMENT $ALSO_ENVIRONMENTS; do
    curl -sf -m 600 -o /dev/null -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
      -X POST -d "{\"name\":\"$env\",\"type\":\"production\"}" "$URL/api/admin/environments" || true
    echo "# importing $TOGGLES toggles into $env" >&2
    curl -sf -m 600 -o /dev/null -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
      --data-binary "@$OUT/features.json" "$URL/api/admin/state/import?environment=$env" \
      || { echo "importing into $env failed" >&2; exit 1; }
  done
  ENV_TOKEN=$(curl -sf -m 30 -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
    -d "{\"tokenName\":\"loadtest\",\"type\":\"client\",\"environment\":\"$ENVIRONMENT\",\"projects\":[\"*\"]}" \
    "$URL/api/admin/api-tokens" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])') \
    || { echo "creating a client token of $ENVIRONMENT failed" >&2; exit 1; }
  echo "# client requests with a token of $ENVIRONMENT (${ENV_TOKEN%%.*}.…)" >&2
  CLIENT_ARGS+=(--client-header "Authorization: $ENV_TOKEN")
fi
settled=0
for _ in $(seq 100); do
  curl -s "$URL/health" | python3 -c 'import json,sys; h=json.load(sys.stdin); sys.exit(h["version"] != h["clientVersion"])' \
    && { settled=1; break; }
  sleep 0.1
done
[ "$settled" = 1 ] || { echo "the client API did not catch up with the configuration in 10 s" >&2; exit 1; }

if [ -z "$WRITE_RATE" ]; then
  bench --no-load --label flagpole --out "$OUT"
  exit 0
fi

# Side by side: the same flagpole, without and then with a steady write rate. (A 304 run under
# writes measures little: the ETag it sends goes stale at the first write.)
echo "# ---- without writes" >&2
bench --no-load --label flagpole --out "$OUT/quiet"
echo "# ---- with $WRITE_RATE writes/s" >&2
# The writer outlives the bench run at most by its own bound; cleanup stops it.
python3 "$BENCH_DIR/steady_writer.py" "$URL" "$TOGGLES" "$WRITE_RATE" "$TIME_LIMIT" \
  > "$OUT/steady-writer.txt" 2>&1 &
WRITER_PID=$!
bench --no-load --label "flagpole+writes" --out "$OUT/writes"
stop "$WRITER_PID"
echo "# version now $(curl -s "$URL/health")" >&2
