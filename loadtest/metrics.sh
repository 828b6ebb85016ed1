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
REPO=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd))

INSTANCES=${INSTANCES:-10000}
APPS=${APPS:-20}
TPR=50
POOL=1000
ENDPOINT=metrics
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
WARMUP=3
CONN=64
STORE=${STORE:-redis}
FLUSH_MS=""
REDIS_SETTLE=""
BENCH_DIR=${BENCH_DIR:-$REPO/../shared/bench}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/fp-release}
BUILD=1
OUT=""
TIME_LIMIT=900
ADMIN_HEADER='Authorization: Basic YWRtaW46'   # basic auth "admin:" (any username works)
EXTRA=()

while [ $# -gt 0 ]; do
  case "$1" in
    --instances) INSTANCES=$2; shift 2;;
    --apps) APPS=$2; shift 2;;
    --toggles-per-report) TPR=$2; shift 2;;
    --toggle-pool) POOL=$2; shift 2;;
    --endpoint) ENDPOINT=$2; shift 2;;
    --duration) DURATION=$2; shift 2;;
    --rounds) ROUNDS=$2; shift 2;;
    --warmup) WARMUP=$2; shift 2;;
    --connections) CONN=$2; shift 2;;
    --store) STORE=$2; shift 2;;
    --flush-interval-ms) FLUSH_MS=$2; shift 2;;
    --redis-settle) REDIS_SETTLE=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --no-build) BUILD=0; shift;;
    --time-limit) TIME_LIMIT=$2; shift 2;;
    --) shift; EXTRA=("$@"); break;;
    -h|--help) sed -n '2,43p' "$0"; exit 0;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
case "$STORE" in redis|embedded) ;; *) echo "--store must be redis or embedded" >&2; exit 2;; esac
case "$ENDPOINT" in metrics|register) ;; *) echo "--endpoint must be metrics or register" >&2; exit 2;; esac
[ -z "$FLUSH_MS" ] || [[ $FLUSH_MS =~ ^[0-9]+$ ]] || { echo "--flush-interval-ms must be an integer" >&2; exit 2; }
[[ $TIME_LIMIT =~ ^[0-9]+$ ]] || { echo "--time-limit must be an integer" >&2; exit 2; }
[ -x "$BENCH_DIR/metricsbench.sh" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
for tool in wrk curl python3 timeout; do
  command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install -y wrk curl python3)" >&2; exit 2; }
done
if [ "$STORE" = redis ]; then
  for tool in "$REDIS_SERVER" redis-cli; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install -y redis-server)" >&2; exit 2; }
  done
fi

OUT=${OUT:-$(mktemp -d /tmp/flagpole-metrics.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# ---- cleanup: stop exactly the processes this script started -------------------------------
BENCH_PID=""; FP_PID=""; REDIS_PID=""; DATA_DIR=""
stop() {  # stop PID: SIGTERM, wait up to 5 s, then SIGKILL
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop "$BENCH_PID"   # timeout forwards the signal to metricsbench.sh, wrk and the ceiling
  stop "$FP_PID"
  stop "$REDIS_PID"
  [ -n "$DATA_DIR" ] && rm -rf "$DATA_DIR"
  echo "# stopped flagpole${REDIS_PID:+ and redis-server}; logs and results in $OUT" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- 1. build --------------------------------------------------------------------------------
REV="prebuilt binary"
if [ -n "${FLAGPOLE_BIN:-}" ]; then
  BIN=$FLAGPOLE_BIN
else
  BIN=$CARGO_TARGET_DIR/release/flagpole
  if [ "$BUILD" = 1 ]; then
    REV="source $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
    [ -n "$(git -C "$REPO" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ] \
      && REV="$REV + uncommitted changes"
    echo "# building flagpole (release, $REV) into $CARGO_TARGET_DIR" >&2
    (cd "$REPO" && cargo build --release -q --bin flagpole)
  fi
fi
[ -x "$BIN" ] || { echo "flagpole binary $BIN not found" >&2; exit 1; }
REV="$REV, binary built $(date -r "$BIN" '+%F %T')"

# ---- 2. start redis-server and flagpole --------------------------------------------------
free_ports() {  # free_ports K: K distinct free loopback TCP ports, space-separated
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}
read -r REDIS_PORT FP_PORT CEILING_PORT <<<"$(free_ports 3)"

{
  echo "# $(date '+%F %T %Z'); machine: $(nproc) cores ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), load average $(cut -d' ' -f1-3 /proc/loadavg), $(awk '/MemAvailable/{printf "%.0f MiB", $2/1024}' /proc/meminfo) available"
  echo "# wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}'), $("$REDIS_SERVER" --version 2>/dev/null | awk '{print $3}' || echo 'no redis-server'), $(uname -sr)"
} | tee "$OUT/machine.txt" >&2

REDIS_ARGS=()
if [ "$STORE" = redis ]; then
  # a TCP port (not a unix socket): metricsbench.sh reads INFO through redis-cli -p
  "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --protected-mode yes > "$OUT/redis.log" 2>&1 &
  REDIS_PID=$!
  for _ in $(seq 100); do
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break
    kill -0 "$REDIS_PID" 2>/dev/null || { echo "redis-server exited; see $OUT/redis.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "# redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (no persistence)" >&2
  STORE_ARGS=(--redis-url "redis://127.0.0.1:$REDIS_PORT" --key-prefix bench)
  REDIS_ARGS=(--redis-port "$REDIS_PORT" --redis-settle "${REDIS_SETTLE:-$(( (${FLUSH_MS:-5000} + 999) / 1000 + 1 ))}")
else
  DATA_DIR=$(mktemp -d /tmp/flagpole-metrics-data.XXXXXX)
  STORE_ARGS=(--data-dir "$DATA_DIR")
fi

# the metrics flush interval: pass it only to a binary that knows the setting
FLUSH_ARGS=()
if [ -n "$FLUSH_MS" ]; then
  if "$BIN" --help 2>/dev/null | grep -q -- '--metrics-flush-interval-ms'; then
    FLUSH_ARGS=(--metrics-flush-interval-ms "$FLUSH_MS")
  else
    echo "# WARNING: this flagpole has no --metrics-flush-interval-ms; ignoring --flush-interval-ms" >&2
  fi
fi

URL="http://127.0.0.1:$FP_PORT"
"$BIN" --listen "127.0.0.1:$FP_PORT" "${STORE_ARGS[@]}" "${FLUSH_ARGS[@]+"${FLUSH_ARGS[@]}"}" > "$OUT/flagpole.log" 2>&1 &
FP_PID=$!
ready=0
for _ in $(seq 300); do  # up to ~30 s
  if [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "$URL/health" || true)" = 200 ]; then ready=1; break; fi
  kill -0 "$FP_PID" 2>/dev/null || { echo "flagpole exited; see $OUT/flagpole.log" >&2; exit 1; }
  sleep 0.1
done
[ "$ready" = 1 ] || { echo "flagpole not healthy after 30 s; see $OUT/flagpole.log" >&2; exit 1; }
echo "# flagpole pid $FP_PID on $URL ($STORE store; $REV)" >&2

# ---- 3. bench ------------------------------------------------------------------------------
# metricsbench.sh stops its own ceiling on exit; timeout bounds the whole run (loading
# included). It runs in the background so that Ctrl-C / SIGTERM reach the traps above at once.
timeout --kill-after=15 "$TIME_LIMIT" "$BENCH_DIR/metricsbench.sh" \
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
  "${EXTRA[@]+"${EXTRA[@]}"}" &
BENCH_PID=$!
rc=0
wait "$BENCH_PID" || rc=$?
BENCH_PID=""
[ "$rc" = 124 ] && echo "# --time-limit $TIME_LIMIT s reached; metricsbench.sh stopped" >&2
[ "$rc" = 0 ] || exit "$rc"

# peak RSS of flagpole over the whole run (loading included), while it still runs
echo "flagpole peak RSS (VmHWM, whole run): $(awk '/^VmHWM/{printf "%.1f MiB", $2/1024}' "/proc/$FP_PID/status" 2>/dev/null || echo '?'); now $(awk '/^VmRSS/{printf "%.1f MiB", $2/1024}' "/proc/$FP_PID/status" 2>/dev/null || echo '?')"
