#!/usr/bin/env bash
# loadtest/metrics.sh — benchmark flagpole's metrics ingestion (POST /api/client/metrics, or
# POST /api/client/register) from a simulated fleet against the shared parse-and-drop
# "ceiling", with one command. It:
#   1. builds flagpole in release mode (CARGO_TARGET_DIR, default /tmp/fp-release);
#   2. starts its own redis-server and flagpole on free loopback ports (or flagpole alone
#      on a fresh embedded store with --store embedded);
#   3. runs the shared bench kit's metricsbench.sh: loads the toggle pool through the admin
#      API, then alternates bounded wrk runs of SDK-shaped reports against flagpole and the
#      ceiling (which only parses each body and drops it) and prints the ratio, p50/p99,
#      non-2xx counts, peak RSS and, with Redis, Redis commands per report;
#   4. prints flagpole's peak RSS over the whole run and stops everything it started when it
#      exits (normally, on error or on Ctrl-C).
#
# usage: loadtest/metrics.sh [options] [-- extra metricsbench.sh options]
#   --instances N          distinct instanceIds (default 10000); instance k is in app k % A
#   --apps A               distinct appNames (default 20)
#   --toggles-per-report T toggles in each report (default 50)
#   --toggle-pool P        toggles loaded and named by the reports (default 1000)
#   --endpoint E           metrics (default) or register
#   --duration S           seconds per wrk run (default 10)
#   --rounds R             flagpole/ceiling alternations (default 2)
#   --warmup S             unrecorded warm-up seconds per target (default 3)
#   --connections C        wrk connections (default 64)
#   --store redis|embedded store backend of flagpole (default redis)
#   --flush-interval-ms MS flagpole --metrics-flush-interval-ms (only if the binary has it)
#   --redis-settle S       wait after each run before the Redis "after" snapshot, so that
#                          buffered flushes are counted (default: flush interval + 1 s, i.e. 6)
#   --out DIR              keep flagpole/redis logs, raw wrk outputs and results.csv there
#                          (default: a new /tmp/flagpole-metrics.XXXXXX)
#   --no-build             use the existing binary in $CARGO_TARGET_DIR/release
#   --time-limit S         hard limit for the whole metricsbench.sh run (default 900)
# Environment overrides: INSTANCES, APPS, DURATION, ROUNDS, STORE, CARGO_TARGET_DIR,
#   BENCH_DIR (default: $(git rev-parse --show-toplevel)/../shared/bench),
#   REDIS_SERVER (redis-server binary), FLAGPOLE_BIN (skip the build, use this binary),
#   CEILING_BIN (skip metricsbench's build of the ceiling).
# Examples:
#   loadtest/metrics.sh                               # 10,000 instances, Redis, 2 x 10 s
#   loadtest/metrics.sh --duration 3 --rounds 1       # quick check
#   loadtest/metrics.sh --endpoint register
#   loadtest/metrics.sh --store embedded
# Only loopback traffic; every step is bounded in time. Needs cargo, wrk, curl, python3,
# redis-server + redis-cli (Redis mode): apt-get install -y wrk redis-server
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults   # REPO, DURATION, ROUNDS, STORE, BENCH_DIR, REDIS_SERVER, CARGO_TARGET_DIR, ...
INSTANCES=${INSTANCES:-10000}
APPS=${APPS:-20}
TPR=50
POOL=1000
ENDPOINT=metrics
WARMUP=3
CONN=64
FLUSH_MS=""
REDIS_SETTLE=""
TIME_LIMIT=900
KILL_AFTER=15     # run_bg: SIGKILL this long after --time-limit
EXTRA=()

while [ $# -gt 0 ]; do
  case "$1" in
    --instances) INSTANCES=$2; shift 2;;
    --apps) APPS=$2; shift 2;;
    --toggles-per-report) TPR=$2; shift 2;;
    --toggle-pool) POOL=$2; shift 2;;
    --endpoint) ENDPOINT=$2; shift 2;;
    --connections) CONN=$2; shift 2;;
    --flush-interval-ms) FLUSH_MS=$2; shift 2;;
    --redis-settle) REDIS_SETTLE=$2; shift 2;;
    --) shift; EXTRA=("$@"); break;;
    *) common_opt "$@"; shift "$OPT_SHIFT";;   # --duration --rounds --warmup --store --out --no-build --time-limit -h
  esac
done
check_store
case "$ENDPOINT" in metrics|register) ;; *) echo "--endpoint must be metrics or register" >&2; exit 2;; esac
check_flush_ms
[[ $TIME_LIMIT =~ ^[0-9]+$ ]] || { echo "--time-limit must be an integer" >&2; exit 2; }
[ -x "$BENCH_DIR/metricsbench.sh" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
need_tools "wrk curl python3" wrk curl python3 timeout
need_redis_tools

make_out flagpole-metrics

# ---- cleanup: stop exactly the processes this script started -------------------------------
stop_on_exit CHILD_PID FP_PID REDIS_PID   # timeout (CHILD_PID) forwards the signal to metricsbench.sh, wrk and the ceiling

# ---- 1. build --------------------------------------------------------------------------------
build_flagpole

# ---- 2. start redis-server and flagpole --------------------------------------------------
read -r REDIS_PORT FP_PORT CEILING_PORT <<<"$(free_ports 3)"
machine_info

# with Redis, a TCP port (not a unix socket): metricsbench.sh reads INFO through redis-cli -p
start_store redis_ping_cli flagpole-metrics

# the metrics flush interval: pass it only to a binary that knows the setting
flush_settings
REDIS_ARGS=()
if [ "$STORE" = redis ]; then
  REDIS_ARGS=(--redis-port "$REDIS_PORT" --redis-settle "$REDIS_SETTLE")
fi

start_flagpole "${STORE_ARGS[@]}" "${FLUSH_ARGS[@]+"${FLUSH_ARGS[@]}"}"

# ---- 3. bench ------------------------------------------------------------------------------
# metricsbench.sh stops its own ceiling on exit; timeout bounds the whole run (loading
# included). It runs in the background so that Ctrl-C / SIGTERM reach the traps above at once.
rc=0
run_bg "$TIME_LIMIT" '' "$BENCH_DIR/metricsbench.sh" \
  --url "$URL" \
  --endpoint "$ENDPOINT" \
  --instances "$INSTANCES" \
  --apps "$APPS" \
  --toggles-per-report "$TPR" \
  --toggle-pool "$POOL" \
  --admin-header "$ADMIN_HEADER" \
  --server-pid "$FP_PID" \
  --ceiling-port "$CEILING_PORT" \
  --duration "$DURATION" \
  --rounds "$ROUNDS" \
  --warmup "$WARMUP" \
  --connections "$CONN" \
  --label flagpole \
  --out "$OUT" \
  "${REDIS_ARGS[@]+"${REDIS_ARGS[@]}"}" \
  "${EXTRA[@]+"${EXTRA[@]}"}" || rc=$?
[ "$rc" = 124 ] && echo "# --time-limit $TIME_LIMIT s reached; metricsbench.sh stopped" >&2
[ "$rc" = 0 ] || exit "$rc"

# peak RSS of flagpole over the whole run (loading included), while it still runs
echo "flagpole peak RSS (VmHWM, whole run): $(awk '/^VmHWM/{printf "%.1f MiB", $2/1024}' "/proc/$FP_PID/status" 2>/dev/null || echo '?'); now $(awk '/^VmRSS/{printf "%.1f MiB", $2/1024}' "/proc/$FP_PID/status" 2>/dev/null || echo '?')"
