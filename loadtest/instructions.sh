#!/usr/bin/env bash
# loadtest/instructions.sh — user-space instructions per client request, flagpole against the
# bench kit's ceiling, counted by valgrind's callgrind. Counts do not depend on what else the
# machine does, so two binaries (or flagpole and the ceiling) compare where req/s on a shared
# machine cannot; what they leave out is the kernel (sockets, syscalls), the same work for both.
# For every target it:
#   1. starts the target under callgrind with counting off (flagpole on a new embedded data
#      directory, loaded with N toggles of the kit's generator beforehand, without valgrind;
#      the ceiling on the same toggles as a file);
#   2. warms up with wrk for 3 s (the kit's SERVICE-APPNAME and SERVICE-INSTANCEID headers on
#      every request, as in run.sh), turns counting on, runs wrk for --duration seconds, turns
#      counting off and dumps;
#   3. prints instructions per request (callgrind's total over wrk's request count).
#
# usage: loadtest/instructions.sh [options]
#   --mode M          304 (default; If-None-Match with the served ETag) | gzip | 200
#   --toggles N       toggles (default 100; the 304 path does not depend on it)
#   --targets "flagpole ceiling"   what to measure (default both)
#   --duration S      seconds of counted requests (default 10; under valgrind a few thousand
#                     requests a second)
#   --out DIR         keep the callgrind files there (default: a new /tmp dir), for
#                     callgrind_annotate
#   --no-build        use the existing binary in $CARGO_TARGET_DIR/release
#   --tokens          flagpole with --auth token, the requests with its client token
#   --environment E   the toggles also imported client-shaped into E (and two other
#                     environments), the requests with an Unleash-shaped client token of E
#                     (issue 32's per-environment path; implies --tokens)
# flagpole runs on the embedded store (the client path is the same on both).
# Environment overrides: CARGO_TARGET_DIR (default /tmp/fp-release), FLAGPOLE_BIN, BENCH_DIR,
#   CEILING_BIN (default /tmp/ceiling/target/release/ceiling, built from the kit if missing).
# Needs valgrind, wrk, curl, python3: apt-get install -y valgrind wrk
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults
STORE=embedded
MODE=304
N=100
TARGETS="flagpole ceiling"
TOKENS=0
ENVIRONMENT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) MODE=$2; shift 2;;
    --toggles) N=$2; shift 2;;
    --targets) TARGETS=$2; shift 2;;
    --tokens) TOKENS=1; shift;;
    --environment) ENVIRONMENT=$2; TOKENS=1; shift 2;;
    --duration|--out|--no-build|-h|--help) common_opt "$@"; shift "$OPT_SHIFT";;
    *) echo "unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
case "$MODE" in 304|gzip|200) ;; *) echo "--mode must be 304, gzip or 200" >&2; exit 2;; esac
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "--toggles must be a positive integer" >&2; exit 2; }
[ -z "$ENVIRONMENT" ] || [[ $ENVIRONMENT =~ ^[A-Za-z0-9_.-]+$ ]] \
  || { echo "--environment must be an environment name" >&2; exit 2; }
FP_AUTH=()
CLIENT_AUTH=()
if [ "$TOKENS" = 1 ]; then
  ADMIN_TOKEN="instructions-admin-token-$RANDOM$RANDOM"
  CLIENT_TOKEN="instructions-client-token-$RANDOM$RANDOM"
  FP_AUTH=(--auth token --admin-token "$ADMIN_TOKEN" --client-token "$CLIENT_TOKEN")
  ADMIN_HEADER="Authorization: $ADMIN_TOKEN"
  CLIENT_AUTH=(-H "Authorization: $CLIENT_TOKEN")
fi
need_tools "valgrind wrk curl python3" valgrind callgrind_control wrk curl python3
[ -f "$BENCH_DIR/gen_features.py" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
make_out flagpole-instructions

SERVER_PID=""; FP_PID=""
cleanup_server() { [ -z "$SERVER_PID" ] || { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true; }; SERVER_PID=""; }
trap 'rc=$?; trap - EXIT INT TERM; stop "$FP_PID"; cleanup_server; echo "# callgrind files in $OUT" >&2; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for target in $TARGETS; do
  case "$target" in flagpole|ceiling) ;; *) echo "--targets takes flagpole and ceiling" >&2; exit 2;; esac
done
if [[ " $TARGETS " == *" flagpole "* ]]; then build_flagpole; fi
CEILING_BIN=${CEILING_BIN:-/tmp/ceiling/target/release/ceiling}
if [[ " $TARGETS " == *" ceiling "* ]] && [ ! -x "$CEILING_BIN" ]; then
  echo "# building the ceiling into /tmp/ceiling/target" >&2
  (cd "$BENCH_DIR/ceiling" && CARGO_TARGET_DIR=/tmp/ceiling/target cargo build --release -q)
fi
python3 "$BENCH_DIR/gen_features.py" "$N" -o "$OUT/features.json"

# wait_ready TARGET URL: up to ~120 s (valgrind starts slowly) for the client features to be
# served (flagpole: its client API has caught up with the loaded configuration)
wait_ready() {
  local check
  for _ in $(seq 600); do
    if [ "$1" = flagpole ]; then
      check=$(curl -s -m 2 "$2/health" | python3 -c 'import json,sys
h = json.load(sys.stdin); v = h.get("version") or 0
print("ok" if v > 0 and h.get("clientVersion") == v else "")' 2>/dev/null || true)
    else
      check=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "$2/api/client/features" | sed 's/^200$/ok/' || true)
    fi
    [ "$check" = ok ] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "the server under valgrind exited; see $OUT" >&2; exit 1; }
    sleep 0.2
  done
  echo "$1 under valgrind did not become ready" >&2; exit 1
}

# load_environments: ENVIRONMENT and two others made, each holding the toggles (imported
# client-shaped), and the requests given a client token of ENVIRONMENT
load_environments() {
  local env others
  others=$(echo development production staging | tr ' ' '\n' | grep -vx "$ENVIRONMENT" | head -2 | tr '\n' ' ')
  for env in $ENVIRONMENT $others; do
    curl -sf -m 60 -o /dev/null -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
      -X POST -d "{\"name\":\"$env\",\"type\":\"production\"}" "$URL/api/admin/environments" || true
    curl -sf -m 600 -o /dev/null -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
      --data-binary "@$OUT/features.json" "$URL/api/admin/state/import?environment=$env" \
      || { echo "importing into $env failed" >&2; exit 1; }
  done
  local secret
  secret=$(curl -sf -m 30 -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
    -d "{\"tokenName\":\"instructions\",\"type\":\"client\",\"environment\":\"$ENVIRONMENT\",\"projects\":[\"*\"]}" \
    "$URL/api/admin/api-tokens" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])') \
    || { echo "creating a client token of $ENVIRONMENT failed" >&2; exit 1; }
  CLIENT_AUTH=(-H "Authorization: $secret")
}

printf '%-9s %5s %8s %10s %14s\n' target mode toggles requests instr/request >&2
for target in $TARGETS; do
  read -r PORT <<<"$(free_ports 1)"
  URL="http://127.0.0.1:$PORT"
  if [ "$target" = flagpole ]; then
    DATA_DIR="$OUT/data"; rm -rf "$DATA_DIR"
    FP_PORT=$PORT
    # No drain on stop: the loading replica ends at once and cleanly.
    start_flagpole --data-dir "$DATA_DIR" --shutdown-drain-ms 0 "${FP_AUTH[@]}"
    mv "$OUT/flagpole.log" "$OUT/flagpole-load.log"
    python3 "$BENCH_DIR/gen_features.py" "$N" --load "$URL" --admin-header "$ADMIN_HEADER" > "$OUT/load.txt" 2>&1
    [ -z "$ENVIRONMENT" ] || load_environments
    stop "$FP_PID"; FP_PID=""
    CMD=("$BIN" --listen "127.0.0.1:$PORT" --data-dir "$DATA_DIR" "${FP_AUTH[@]}")
  else
    CMD=("$CEILING_BIN" --file "$OUT/features.json" --port "$PORT")
  fi
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/$target.callgrind" \
    "${CMD[@]}" > "$OUT/$target.log" 2>&1 &
  SERVER_PID=$!
  wait_ready "$target" "$URL"
  # The kit's client headers, as loadtest/run.sh sends them (flagpole records the instance's
  # poll).
  headers=(-H "SERVICE-APPNAME: bench-app" -H "SERVICE-INSTANCEID: bench-1")
  [ "$target" = ceiling ] || headers+=("${CLIENT_AUTH[@]}")
  case "$MODE" in
    304) etag=$(curl -s -D - -o /dev/null "${headers[@]}" "$URL/api/client/features" \
           | awk -F': ' 'tolower($1) == "etag" { print $2 }' | tr -d '\r')
         [ -n "$etag" ] || { echo "$target sent no ETag" >&2; exit 1; }
         headers+=(-H "If-None-Match: $etag")
         status=$(curl -s -o /dev/null -w '%{http_code}' "${headers[@]}" "$URL/api/client/features")
         [ "$status" = 304 ] || { echo "$target answered $status, not 304, to its own ETag" >&2; exit 1; };;
    gzip) headers+=(-H 'Accept-Encoding: gzip');;
  esac
  wrk -t2 -c64 -d3s "${headers[@]}" "$URL/api/client/features" > /dev/null
  callgrind_control -i on "$SERVER_PID" > "$OUT/$target.control" 2>&1 \
    || { echo "callgrind_control failed; see $OUT/$target.control" >&2; exit 1; }
  wrk -t2 -c64 -d"${DURATION}s" "${headers[@]}" "$URL/api/client/features" > "$OUT/$target.wrk"
  callgrind_control -i off "$SERVER_PID" > /dev/null 2>&1
  callgrind_control -d "$SERVER_PID" > /dev/null 2>&1
  cleanup_server
  requests=$(awk '/requests in/ { print $1 }' "$OUT/$target.wrk")
  [ "${requests:-0}" -gt 0 ] || { echo "no requests counted; see $OUT/$target.wrk" >&2; exit 1; }
  ! grep -q "Non-2xx or 3xx" "$OUT/$target.wrk" || { echo "$target answered errors; see $OUT/$target.wrk" >&2; exit 1; }
  # The dump taken while counting was on is the file with the suffix .1.
  total=$(awk '/^totals:/ { print $2 }' "$OUT/$target.callgrind.1")
  printf '%-9s %5s %8s %10s %14s\n' "$target" "$MODE" "$N" "$requests" \
    "$(awk -v t="$total" -v r="$requests" 'BEGIN { printf "%d", t / r }')" >&2
done
