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
# Environment overrides: TOGGLES, DURATION, ROUNDS, WARMUP, STORE, CARGO_TARGET_DIR,
#   BENCH_DIR (default: $(git rev-parse --show-toplevel)/../shared/bench),
#   REDIS_SERVER (redis-server binary), FLAGPOLE_BIN (skip the build, use this binary).
# Examples:
#   loadtest/run.sh                                  # 1,000 toggles, Redis, 2 x 10 s per mode
#   loadtest/run.sh --toggles 10000 --duration 5     # memory check at 10,000 toggles
#   loadtest/run.sh --store embedded
#   loadtest/run.sh --ceiling-body server            # ceiling serves flagpole's exact bytes
# Only loopback traffic; every step is bounded in time. Needs cargo, wrk, curl, python3,
# redis-server (Redis mode): apt-get install -y wrk redis-server
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd))

TOGGLES=${TOGGLES:-1000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-3}
STORE=${STORE:-redis}
MODES=${MODES:-"200 gzip 304"}
CEILING_BODY=${CEILING_BODY:-generated}
BENCH_DIR=${BENCH_DIR:-$REPO/../shared/bench}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/fp-release}
BUILD=1
OUT=""
TIME_LIMIT=1800
ADMIN_HEADER='Authorization: Basic YWRtaW46'   # basic auth "admin:" (any username works)
EXTRA=()

while [ $# -gt 0 ]; do
  case "$1" in
    --toggles) TOGGLES=$2; shift 2;;
    --duration) DURATION=$2; shift 2;;
    --rounds) ROUNDS=$2; shift 2;;
    --warmup) WARMUP=$2; shift 2;;
    --modes) MODES=$2; shift 2;;
    --store) STORE=$2; shift 2;;
    --ceiling-body) CEILING_BODY=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --no-build) BUILD=0; shift;;
    --time-limit) TIME_LIMIT=$2; shift 2;;
    --) shift; EXTRA=("$@"); break;;
    -h|--help) sed -n '2,33p' "$0"; exit 0;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
case "$STORE" in redis|embedded) ;; *) echo "--store must be redis or embedded" >&2; exit 2;; esac
[ -x "$BENCH_DIR/bench.sh" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
for tool in wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install -y wrk curl python3)" >&2; exit 2; }
done

OUT=${OUT:-$(mktemp -d /tmp/flagpole-loadtest.XXXXXX)}
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
  stop "$BENCH_PID"   # timeout forwards the signal to bench.sh, wrk and the ceiling
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

if [ "$STORE" = redis ]; then
  command -v "$REDIS_SERVER" >/dev/null || { echo "redis-server not found (apt-get install -y redis-server)" >&2; exit 2; }
  "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --protected-mode yes > "$OUT/redis.log" 2>&1 &
  REDIS_PID=$!
  for _ in $(seq 100); do
    if python3 -c "import socket,sys; s=socket.create_connection(('127.0.0.1',int(sys.argv[1])),0.2); s.sendall(b'PING\r\n'); sys.exit(0 if s.recv(16).startswith(b'+PONG') else 1)" "$REDIS_PORT" 2>/dev/null; then
      break
    fi
    kill -0 "$REDIS_PID" 2>/dev/null || { echo "redis-server exited; see $OUT/redis.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "# redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (no persistence)" >&2
  STORE_ARGS=(--redis-url "redis://127.0.0.1:$REDIS_PORT" --key-prefix bench)
else
  DATA_DIR=$(mktemp -d /tmp/flagpole-loadtest-data.XXXXXX)
  STORE_ARGS=(--data-dir "$DATA_DIR")
fi

URL="http://127.0.0.1:$FP_PORT"
"$BIN" --listen "127.0.0.1:$FP_PORT" "${STORE_ARGS[@]}" > "$OUT/flagpole.log" 2>&1 &
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
# bench.sh stops its own ceiling on exit; timeout bounds the whole run (loading included).
# It runs in the background so that Ctrl-C / SIGTERM reach the traps above at once.
timeout --kill-after=15 "$TIME_LIMIT" "$BENCH_DIR/bench.sh" \
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
  --label flagpole \
  --out "$OUT" \
  "${EXTRA[@]+"${EXTRA[@]}"}" &
BENCH_PID=$!
wait "$BENCH_PID"
BENCH_PID=""
