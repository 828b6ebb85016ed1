#!/usr/bin/env bash
# loadtest/delivery.sh — addon delivery: write → delivery latency, burst throughput and
# correctness with several replicas on one Redis. It:
#   1. starts its own redis-server (appendonly yes) and --replicas flagpole replicas on it, on
#      free loopback ports, every replica running the delivery worker (one consumer group);
#   2. starts the receiver (loadtest/delivery.py receive: asyncio, answers 200 at once, records
#      arrival time, X-Flagpole-Delivery and the body) and measures its capacity;
#   3. creates a pool of toggles, then a webhook addon (feature-created, feature-updated) that
#      posts to the receiver;
#   4. steady: --rate PUTs/s for --seconds, spread over the replicas, each with a unique
#      description; latency = arrival at the receiver - the writer's 200 (one clock);
#   5. burst: --burst PUTs from --burst-writers concurrent writers: first write → last delivery;
#   6. counts per phase: written, committed (events in the store), delivered, duplicates (one
#      X-Flagpole-Delivery seen twice), missing; prints a table, writes CSVs into --out.
# With --kill, one replica is SIGKILLed halfway through the steady phase (--restart: started
# again --restart-after s later) and the visibility timeout is 5 s unless --visibility-ms says
# otherwise: missing must stay 0; duplicates are allowed for jobs in flight at the kill.
#
# usage: loadtest/delivery.sh [options]
#   --rate R               steady writes per second (default 20)
#   --seconds S            length of the steady phase (default 30)
#   --writers W            writer threads of the steady phase (default 8)
#   --burst N              writes of the burst phase; 0 skips it (default 1000)
#   --burst-writers C      concurrent writers of the burst (default 16)
#   --replicas K           flagpole replicas on one Redis (default 3)
#   --toggles T            toggles the writes go round (default 64)
#   --kill                 SIGKILL the last replica halfway through the steady phase
#   --restart              ... and start it again (same port) --restart-after S later (default 2)
#   --visibility-ms MS     --delivery-visibility-timeout-ms of the replicas (default: the
#                          service's, 60000; 5000 with --kill)
#   --delivery-concurrency N   passed to the replicas when given
#   --receiver-delay-ms D  the receiver answers D ms after a request arrived (default 0: at
#                          once); with --kill, deliveries are then in flight when it strikes
#   --drain-timeout S      longest wait for a phase's deliveries after its last write (default 60;
#                          with --kill at least the visibility timeout + 30 s)
#   --out DIR              keep logs and CSVs there (default: a new /tmp dir)
#   --no-build             use the existing binary in $CARGO_TARGET_DIR/release
#   --time-limit S         hard limit of the measurement (default 600)
#   -- ARGS...             anything after -- is added to every replica's command line (for
#                          example -- --delivery-concurrency-per-addon 8)
# Environment overrides: CARGO_TARGET_DIR (default /tmp/fp-release), FLAGPOLE_BIN, REDIS_SERVER.
# Only loopback traffic; everything started is stopped on exit, Ctrl-C or SIGTERM.
# Needs cargo, curl, python3 (stdlib only), redis-server: apt-get install -y redis-server
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults
RATE=20
SECONDS_STEADY=30
WRITERS=8
BURST=1000
BURST_WRITERS=16
REPLICAS=3
TOGGLES=64
KILL=0
RESTART=0
RESTART_AFTER=2
VISIBILITY_MS=""
DELIVERY_CONCURRENCY=""
DRAIN_TIMEOUT=""
RECEIVER_DELAY_MS=0
TIME_LIMIT=600
KILL_AFTER=15
EXTRA_ARGS=()

while [ $# -gt 0 ]; do
  case "$1" in
    --rate) RATE=$2; shift 2;;
    --seconds) SECONDS_STEADY=$2; shift 2;;
    --writers) WRITERS=$2; shift 2;;
    --burst) BURST=$2; shift 2;;
    --burst-writers) BURST_WRITERS=$2; shift 2;;
    --replicas) REPLICAS=$2; shift 2;;
    --toggles) TOGGLES=$2; shift 2;;
    --kill) KILL=1; shift;;
    --restart) KILL=1; RESTART=1; shift;;
    --restart-after) RESTART_AFTER=$2; shift 2;;
    --visibility-ms) VISIBILITY_MS=$2; shift 2;;
    --delivery-concurrency) DELIVERY_CONCURRENCY=$2; shift 2;;
    --drain-timeout) DRAIN_TIMEOUT=$2; shift 2;;
    --receiver-delay-ms) RECEIVER_DELAY_MS=$2; shift 2;;
    --) shift; EXTRA_ARGS=("$@"); break;;
    --duration|--rounds|--warmup|--store) echo "unknown option $1 (see --help)" >&2; exit 2;;
    *) common_opt "$@"; shift "$OPT_SHIFT";;
  esac
done
# check_number OPTION VALUE [int]: exit 2 unless VALUE is a number (a whole number with "int")
check_number() {
  local re='^[0-9]+(\.[0-9]+)?$'
  [ "${3:-}" != int ] || re='^[0-9]+$'
  [[ $2 =~ $re ]] || { echo "$1 must be a ${3:+whole }number" >&2; exit 2; }
}
check_number --rate "$RATE"; check_number --seconds "$SECONDS_STEADY"
check_number --restart-after "$RESTART_AFTER"; check_number --drain-timeout "${DRAIN_TIMEOUT:-60}"
check_number --receiver-delay-ms "$RECEIVER_DELAY_MS"
check_number --writers "$WRITERS" int; check_number --burst "$BURST" int
check_number --burst-writers "$BURST_WRITERS" int; check_number --replicas "$REPLICAS" int
check_number --toggles "$TOGGLES" int; check_number --time-limit "$TIME_LIMIT" int
[ "$REPLICAS" -ge 1 ] || { echo "--replicas must be at least 1" >&2; exit 2; }
[ "$KILL" = 0 ] || [ "$REPLICAS" -ge 2 ] || { echo "--kill needs at least 2 replicas" >&2; exit 2; }
[ -z "$VISIBILITY_MS" ] || [[ $VISIBILITY_MS =~ ^[0-9]+$ ]] || { echo "--visibility-ms must be a whole number" >&2; exit 2; }
[ "$KILL" = 0 ] || VISIBILITY_MS=${VISIBILITY_MS:-5000}
# A job the killed replica held is claimed again only after the visibility timeout.
if [ -z "$DRAIN_TIMEOUT" ]; then
  DRAIN_TIMEOUT=60
  [ "$KILL" = 0 ] || [ $((VISIBILITY_MS / 1000 + 30)) -le 60 ] || DRAIN_TIMEOUT=$((VISIBILITY_MS / 1000 + 30))
fi
need_tools "curl python3" curl python3
need_tools redis-server "$REDIS_SERVER"
make_out flagpole-delivery

# ---- cleanup: the replicas (also one the driver restarted), the receiver, redis-server --------
PIDS=()
RECEIVER_PID=""; REDIS_PID=""; DATA_DIR=""; CHILD_PID=""
# shellcheck disable=SC2317  # (called from the EXIT trap)
stop_all() {
  local pid
  [ -n "$CHILD_PID" ] && stop "$CHILD_PID"
  for pid in "${PIDS[@]+"${PIDS[@]}"}"; do stop "$pid"; done
  if [ -s "$OUT/restarted.pid" ]; then stop "$(cat "$OUT/restarted.pid")"; fi
  stop "$RECEIVER_PID"
  stop "$REDIS_PID"
  [ -n "$DATA_DIR" ] && rm -rf "$DATA_DIR"
  return 0
}
trap 'rc=$?; trap - EXIT INT TERM; stop_all; echo "# stopped flagpole replicas, receiver and redis-server; logs and results in $OUT" >&2; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build_flagpole
{
  echo "# $(date '+%F %T %Z'); machine: $(nproc) cores ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), load average $(cut -d' ' -f1-3 /proc/loadavg), $(awk '/MemAvailable/{printf "%.0f MiB", $2/1024}' /proc/meminfo) available"
  echo "# $("$REDIS_SERVER" --version | awk '{print $1, $2, $3}'), $(python3 --version), $(uname -sr); flagpole: $REV"
} | tee "$OUT/machine.txt" >&2

# ---- redis-server with persistence (AOF, fsync every second: the default) ---------------------
read -r REDIS_PORT RECEIVER_PORT <<<"$(free_ports 2)"
DATA_DIR=$(mktemp -d /tmp/flagpole-delivery-redis.XXXXXX)
"$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly yes --dir "$DATA_DIR" \
  --daemonize no --protected-mode yes > "$OUT/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 100); do
  redis_ping_py "$REDIS_PORT" && break
  kill -0 "$REDIS_PID" 2>/dev/null || { echo "redis-server exited; see $OUT/redis.log" >&2; exit 1; }
  sleep 0.1
done
redis_ping_py "$REDIS_PORT" || { echo "redis-server does not answer after 10 s" >&2; exit 1; }
echo "# redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (appendonly yes, appendfsync everysec)" >&2

# ---- the receiver ------------------------------------------------------------------------------
python3 "$HERE/delivery.py" receive --port "$RECEIVER_PORT" --delay-ms "$RECEIVER_DELAY_MS" \
  > "$OUT/receiver.log" 2>&1 &
RECEIVER_PID=$!
for _ in $(seq 100); do
  grep -q ready "$OUT/receiver.log" 2>/dev/null && break
  kill -0 "$RECEIVER_PID" 2>/dev/null || { echo "the receiver exited; see $OUT/receiver.log" >&2; exit 1; }
  sleep 0.1
done
grep -q ready "$OUT/receiver.log" || { echo "the receiver is not ready after 10 s" >&2; exit 1; }
RECEIVER_URL="http://127.0.0.1:$RECEIVER_PORT"
echo "# receiver pid $RECEIVER_PID on $RECEIVER_URL (answers ${RECEIVER_DELAY_MS} ms after a request arrived)" >&2

# ---- the replicas --------------------------------------------------------------------------------
# replica_cmd PORT: the command line of a replica on PORT (into REPLICA_CMD)
replica_cmd() {
  REPLICA_CMD=("$BIN" --listen "127.0.0.1:$1" --redis-url "redis://127.0.0.1:$REDIS_PORT"
    --key-prefix delivery --auth insecure --delivery true)
  [ -z "$VISIBILITY_MS" ] || REPLICA_CMD+=(--delivery-visibility-timeout-ms "$VISIBILITY_MS")
  [ -z "$DELIVERY_CONCURRENCY" ] || REPLICA_CMD+=(--delivery-concurrency "$DELIVERY_CONCURRENCY")
  REPLICA_CMD+=("${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}")
}
URLS=()
PID_ARGS="receiver=$RECEIVER_PID,redis=$REDIS_PID"
for i in $(seq "$REPLICAS"); do
  read -r port <<<"$(free_ports 1)"
  replica_cmd "$port"
  "${REPLICA_CMD[@]}" > "$OUT/flagpole-$i.log" 2>&1 &
  PIDS+=($!)
  disown "$!"  # (no "Killed" notice from bash when --kill strikes; cleanup stops it by pid)
  URLS+=("http://127.0.0.1:$port")
  PID_ARGS="$PID_ARGS,replica-$i=$!"
done
for i in "${!URLS[@]}"; do
  ready=0
  for _ in $(seq 300); do  # up to ~30 s
    if [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "${URLS[$i]}/health" || true)" = 200 ]; then ready=1; break; fi
    kill -0 "${PIDS[$i]}" 2>/dev/null || { echo "replica $((i + 1)) exited; see $OUT/flagpole-$((i + 1)).log" >&2; exit 1; }
    sleep 0.1
  done
  [ "$ready" = 1 ] || { echo "replica $((i + 1)) not healthy after 30 s" >&2; exit 1; }
  echo "# flagpole replica $((i + 1)) pid ${PIDS[$i]} on ${URLS[$i]}" >&2
done
echo "# replicas: --key-prefix delivery --delivery true${VISIBILITY_MS:+ --delivery-visibility-timeout-ms $VISIBILITY_MS}${DELIVERY_CONCURRENCY:+ --delivery-concurrency $DELIVERY_CONCURRENCY}${EXTRA_ARGS[*]+ ${EXTRA_ARGS[*]}}" >&2

# ---- the measurement (bounded by --time-limit) -----------------------------------------------------
DRIVER=(python3 "$HERE/delivery.py" run --replicas "$(IFS=,; echo "${URLS[*]}")"
  --receiver "$RECEIVER_URL" --redis-port "$REDIS_PORT" --key-prefix delivery --out "$OUT"
  --rate "$RATE" --seconds "$SECONDS_STEADY" --writers "$WRITERS" --burst "$BURST"
  --burst-writers "$BURST_WRITERS" --toggles "$TOGGLES" --drain-timeout "$DRAIN_TIMEOUT"
  --pids "$PID_ARGS")
# A slow receiver's capacity is not worth measuring.
[[ $RECEIVER_DELAY_MS =~ ^0*(\.0*)?$ ]] || DRIVER+=(--check-seconds 0)
if [ "$KILL" = 1 ]; then
  last=$((REPLICAS - 1))
  DRIVER+=(--kill-pid "${PIDS[$last]}" --kill-index "$last")
  if [ "$RESTART" = 1 ]; then
    replica_cmd "${URLS[$last]##*:}"
    DRIVER+=(--restart-after "$RESTART_AFTER" --restart-log "$OUT/flagpole-$REPLICAS-restarted.log"
      --pid-file "$OUT/restarted.pid" -- "${REPLICA_CMD[@]}")
  fi
fi
rc=0
run_bg "$TIME_LIMIT" - "${DRIVER[@]}" || rc=$?
[ "$rc" != 124 ] || echo "# the measurement did not finish within --time-limit $TIME_LIMIT s" >&2
echo "# results: $OUT/results.csv (one row per phase); writes.csv, deliveries.csv, duplicates.csv" >&2
exit "$rc"
