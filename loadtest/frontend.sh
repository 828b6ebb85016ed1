#!/usr/bin/env bash
# loadtest/frontend.sh — server-side evaluation under load (issue 34): the frontend API and OFREP
# bulk at each toggle count, with wrk (2 threads, --connections keep-alive connections):
#   random        GET /api/frontend, a random userId per request (nothing cacheable)
#   repoll        GET /api/frontend, 1,000 fixed contexts re-polled with If-None-Match (304s)
#   bulk          POST /ofrep/v1/evaluate/flags, a random targetingKey per request
#   bulk-repoll   POST /ofrep/v1/evaluate/flags, 1,000 fixed contexts with If-None-Match
#   client304     GET /api/client/features with If-None-Match (the client API's 304, for the
#                 "re-polls at >= 0.9 of the client API's 304 rate" goal)
# then req/s, p99 and the peak RSS (VmHWM) of the whole run, the engine's build times (from its
# log) and how a write reaches the answers (frontend.py propagation).
#
# Usage: loadtest/frontend.sh [--toggles "100 1000"] [--duration S] [--connections C]
#          [--store redis|embedded] [--modes "random repoll bulk bulk-repoll client304"]
#          [--build-toggles N] [--out DIR] [--no-build] [--time-limit S]
# Builds flagpole in release mode into CARGO_TARGET_DIR (default /tmp/fp-release) unless
# FLAGPOLE_BIN names a binary. Unleash Edge and Unleash 7.5.1 are not run here (see
# docs/performance.md). Loopback only; every process it starts is stopped when it exits.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
common_defaults

TOGGLE_COUNTS=${TOGGLE_COUNTS:-"100 1000"}
CONNECTIONS=${CONNECTIONS:-64}
MODES=${MODES:-"random repoll bulk bulk-repoll client304"}
BUILD_TOGGLES=${BUILD_TOGGLES:-10000}
TIME_LIMIT=${TIME_LIMIT:-1800}
KILL_AFTER=5
while [ $# -gt 0 ]; do
  case "$1" in
    --toggles) TOGGLE_COUNTS=$2; shift 2;;
    --connections) CONNECTIONS=$2; shift 2;;
    --modes) MODES=$2; shift 2;;
    --build-toggles) BUILD_TOGGLES=$2; shift 2;;
    *) common_opt "$@"; shift "$OPT_SHIFT";;
  esac
done
check_store
need_tools "wrk curl python3" wrk curl python3
need_redis_tools
make_out frontend-bench
stop_on_exit FP_PID REDIS_PID CHILD_PID
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

# wrk_mode MODE N: one wrk run; appends "N MODE req/s p99" to $OUT/results.txt
wrk_mode() {
  local mode=$1 n=$2 out="$OUT/wrk-$2-$1.txt"
  if [ "$mode" = client304 ]; then
    local etag
    etag=$(curl -s -D - -o /dev/null "$URL/api/client/features" | awk -F': ' 'tolower($1)=="etag"{print $2}' | tr -d '\r')
    run_bg $((DURATION + 30)) "$out" wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency \
      -H "If-None-Match: $etag" "$URL/api/client/features"
  else
    FRONTEND_MODE=$mode FRONTEND_ETAGS="$OUT/etags-$n.lua" run_bg $((DURATION + 30)) "$out" \
      wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$HERE/frontend.lua" "$URL"
  fi
  local rps p99 non2xx
  rps=$(awk '/Requests\/sec/{print $2}' "$out")
  p99=$(awk '$1=="99%"{print $2}' "$out")
  non2xx=$(awk '/Non-2xx/{print $NF}' "$out")
  echo "$n $mode $rps $p99 ${non2xx:-0}" >> "$OUT/results.txt"
  echo "# $n toggles, $mode: $rps req/s, p99 $p99 (non-2xx/3xx: ${non2xx:-0})" >&2
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

# What one engine build costs at BUILD_TOGGLES toggles (first build, then one after a change).
one_replica "$BUILD_TOGGLES"
curl -s -o /dev/null "$URL/api/frontend?userId=x"
curl -sf -o /dev/null -X POST -H "$ADMIN_HEADER" "$URL/api/admin/features/bench.00009/toggle/on"
curl -s -o /dev/null "$URL/api/frontend?userId=x"
grep 'evaluation engine built' "$OUT/flagpole.log" | sed "s/^/$BUILD_TOGGLES toggles: /" >> "$OUT/builds.txt" || true
echo "$BUILD_TOGGLES peak_rss_kib $(awk '/VmHWM/{print $2}' "/proc/$FP_PID/status")" >> "$OUT/results.txt"

echo "toggles mode req/s p99 non-2xx" >&2
cat "$OUT/results.txt" >&2
sed -E 's/\x1b\[[0-9;]*m//g' "$OUT/builds.txt" >&2 || true
