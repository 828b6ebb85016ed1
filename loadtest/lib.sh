# shellcheck shell=bash disable=SC2034  # (the variables set here are read by the sourcing scripts)
# loadtest/lib.sh — the shell code that run.sh, metrics.sh and fleet.sh share. Sourced, not run:
#   HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#   . "$HERE/lib.sh"
# The functions work on the scripts' global variables (HERE, REPO, OUT, STORE, BIN, REV, URL,
# REDIS_PORT, FP_PORT, REDIS_PID, FP_PID, CHILD_PID, DATA_DIR, …) and run under the scripts'
# `set -euo pipefail`; those that fail a check print why and exit the script.

# common_defaults: the settings (and environment overrides) that all three scripts share
common_defaults() {
  REPO=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd))
  DURATION=${DURATION:-10}
  ROUNDS=${ROUNDS:-2}
  STORE=${STORE:-redis}
  BENCH_DIR=${BENCH_DIR:-$REPO/../shared/bench}
  REDIS_SERVER=${REDIS_SERVER:-redis-server}
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/fp-release}
  BUILD=1
  OUT=""
  ADMIN_HEADER='Authorization: Basic YWRtaW46'   # basic auth "admin:" (any username works)
}

# usage: print the script's header comment (from line 2 to the first line that is not a comment)
usage() { awk 'NR > 1 { if (!/^#/) exit; print }' "$0"; }

# common_opt ARGS...: parse an option all three scripts take (or -h, or fail); sets OPT_SHIFT
common_opt() {
  case "$1" in
    --duration) DURATION=$2; OPT_SHIFT=2;;
    --rounds) ROUNDS=$2; OPT_SHIFT=2;;
    --warmup) WARMUP=$2; OPT_SHIFT=2;;
    --store) STORE=$2; OPT_SHIFT=2;;
    --out) OUT=$2; OPT_SHIFT=2;;
    --no-build) BUILD=0; OPT_SHIFT=1;;
    --time-limit) TIME_LIMIT=$2; OPT_SHIFT=2;;
    -h|--help) usage; exit 0;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2;;
  esac
}

# check_store: exit 2 unless --store is redis or embedded
check_store() {
  case "$STORE" in redis|embedded) ;; *) echo "--store must be redis or embedded" >&2; exit 2;; esac
}

# check_flush_ms: exit 2 unless --flush-interval-ms is empty or an integer
check_flush_ms() {
  [ -z "$FLUSH_MS" ] || [[ $FLUSH_MS =~ ^[0-9]+$ ]] || { echo "--flush-interval-ms must be an integer" >&2; exit 2; }
}

# need_tools PACKAGES TOOL...: exit 2 unless every TOOL is on PATH (the message names PACKAGES)
need_tools() {
  local pkgs=$1 tool; shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install -y $pkgs)" >&2; exit 2; }
  done
}

# need_redis_tools: with --store redis, exit 2 unless redis-server and redis-cli are on PATH
need_redis_tools() {
  [ "$STORE" != redis ] || need_tools redis-server "$REDIS_SERVER" redis-cli
}

# make_out NAME: create --out DIR (default: a new /tmp/NAME.XXXXXX) and make OUT absolute
make_out() {
  OUT=${OUT:-$(mktemp -d "/tmp/$1.XXXXXX")}
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
}

# ---- cleanup: stop exactly the processes this script started -------------------------------
# stop PID: SIGTERM, wait up to 5 s, then SIGKILL
stop() {
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# stop_on_exit VAR...: empty the PID variables VAR… and DATA_DIR; on exit, Ctrl-C or SIGTERM run cleanup
stop_on_exit() {
  local var
  STOP_VARS=("$@")
  for var in "$@"; do printf -v "$var" '%s' ""; done
  DATA_DIR=""
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# stopped_what: what cleanup's last line says it stopped (a script may redefine it)
stopped_what() { echo "flagpole${REDIS_PID:+ and redis-server}"; }

# cleanup: the EXIT trap: stop the STOP_VARS processes in order, remove DATA_DIR, keep the exit status
cleanup() {
  local rc=$? var
  trap - EXIT INT TERM
  for var in "${STOP_VARS[@]}"; do stop "${!var}"; done
  [ -n "$DATA_DIR" ] && rm -rf "$DATA_DIR"
  echo "# stopped $(stopped_what); logs and results in $OUT" >&2
  exit "$rc"
}

# run_bg LIMIT OUTFILE CMD...: run CMD under timeout LIMIT (then SIGKILL after KILL_AFTER s) in the
# background, its output to OUTFILE (- = stderr, "" = the script's), and wait for it, so that
# Ctrl-C, SIGTERM and a watchdog reach the traps at once (the redirection is not on the
# function: cleanup messages stay on stderr); returns CMD's status (124: LIMIT reached)
run_bg() {
  local limit=$1 out=$2; shift 2
  case "$out" in
    -) timeout --kill-after="$KILL_AFTER" "$limit" "$@" >&2 & ;;
    '') timeout --kill-after="$KILL_AFTER" "$limit" "$@" & ;;
    *) timeout --kill-after="$KILL_AFTER" "$limit" "$@" > "$out" 2>&1 & ;;
  esac
  CHILD_PID=$!
  local rc=0
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=""
  return "$rc"
}

# ---- build -----------------------------------------------------------------------------------
# build_flagpole: set BIN (FLAGPOLE_BIN, else a release build in CARGO_TARGET_DIR) and REV (its origin)
build_flagpole() {
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
}

# ---- start redis-server and flagpole ---------------------------------------------------------
# free_ports K: K distinct free loopback TCP ports, space-separated
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# machine_info: print the date, machine, load and tool versions to stderr and $OUT/machine.txt
machine_info() {
  {
    echo "# $(date '+%F %T %Z'); machine: $(nproc) cores ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), load average $(cut -d' ' -f1-3 /proc/loadavg), $(awk '/MemAvailable/{printf "%.0f MiB", $2/1024}' /proc/meminfo) available"
    echo "# wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}'), $("$REDIS_SERVER" --version 2>/dev/null | awk '{print $3}' || echo 'no redis-server'), $(uname -sr)"
  } | tee "$OUT/machine.txt" >&2
}

# redis_ping_py PORT: true once the redis-server on 127.0.0.1:PORT answers PING (needs no redis-cli)
redis_ping_py() {
  python3 -c "import socket,sys; s=socket.create_connection(('127.0.0.1',int(sys.argv[1])),0.2); s.sendall(b'PING\r\n'); sys.exit(0 if s.recv(16).startswith(b'+PONG') else 1)" "$1" 2>/dev/null
}

# redis_ping_cli PORT: true once the redis-server on 127.0.0.1:PORT answers PING (through redis-cli)
redis_ping_cli() { redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; }

# start_store PING NAME: start redis-server on REDIS_PORT and wait for PING (--store redis), or make a fresh /tmp/NAME-data.XXXXXX; sets STORE_ARGS
start_store() {
  if [ "$STORE" = redis ]; then
    "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize no --protected-mode yes > "$OUT/redis.log" 2>&1 &
    REDIS_PID=$!
    for _ in $(seq 100); do
      "$1" "$REDIS_PORT" && break
      kill -0 "$REDIS_PID" 2>/dev/null || { echo "redis-server exited; see $OUT/redis.log" >&2; exit 1; }
      sleep 0.1
    done
    echo "# redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (no persistence)" >&2
    STORE_ARGS=(--redis-url "redis://127.0.0.1:$REDIS_PORT" --key-prefix bench)
  else
    DATA_DIR=$(mktemp -d "/tmp/$2-data.XXXXXX")
    STORE_ARGS=(--data-dir "$DATA_DIR")
  fi
}

# flush_settings: FLUSH_ARGS passes --flush-interval-ms on if the binary knows it; REDIS_SETTLE defaults to the interval + 1 s
flush_settings() {
  FLUSH_ARGS=()
  if [ -n "$FLUSH_MS" ]; then
    if "$BIN" --help 2>/dev/null | grep -q -- '--metrics-flush-interval-ms'; then
      FLUSH_ARGS=(--metrics-flush-interval-ms "$FLUSH_MS")
    else
      echo "# WARNING: this flagpole has no --metrics-flush-interval-ms; ignoring --flush-interval-ms" >&2
    fi
  fi
  REDIS_SETTLE=${REDIS_SETTLE:-$(( (${FLUSH_MS:-5000} + 999) / 1000 + 1 ))}
}

# start_flagpole ARGS...: start flagpole on FP_PORT with ARGS and wait up to ~30 s for /health; sets URL, FP_PID
start_flagpole() {
  URL="http://127.0.0.1:$FP_PORT"
  "$BIN" --listen "127.0.0.1:$FP_PORT" "$@" > "$OUT/flagpole.log" 2>&1 &
  FP_PID=$!
  local ready=0
  for _ in $(seq 300); do  # up to ~30 s
    if [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "$URL/health" || true)" = 200 ]; then ready=1; break; fi
    kill -0 "$FP_PID" 2>/dev/null || { echo "flagpole exited; see $OUT/flagpole.log" >&2; exit 1; }
    sleep 0.1
  done
  [ "$ready" = 1 ] || { echo "flagpole not healthy after 30 s; see $OUT/flagpole.log" >&2; exit 1; }
  echo "# flagpole pid $FP_PID on $URL ($STORE store; $REV)" >&2
}
