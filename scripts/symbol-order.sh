#!/usr/bin/env bash
# scripts/symbol-order.sh — regenerates build/symbol-order.txt, the order the linker lays out
# the release binary's functions in (build.rs hands it to lld as --symbol-ordering-file).
#
# Why: the kernel maps a binary's code in 64 KiB windows around every page a process touches
# (fault-around), so code that runs is resident together with whatever the linker put next to
# it. With the functions in the compiler's order, the 6 MiB that a replica executes is spread
# over nearly all of the 14 MiB of code, and nearly all of it is resident. Listing the functions
# that run first packs them together; the rest stays on disk until something calls it.
#
# How: runs a release binary under callgrind through start-up, a bulk load, concurrent writes,
# client polls (plain, gzip, 304, filtered), client registration and metrics, the admin reads
# and writes people use most, a state export, and shutdown; on both stores. Functions are
# listed hottest first (instructions executed in them), so the hot paths share pages too.
# A function missing from the list (new code, a renamed one) only lands after the listed
# ones: the list going stale costs memory, never correctness. Names carry a hash of the
# compiler and of every dependency's version, so the list's first line records both, and
# release builds warn when they differ: rerun this after a toolchain or Cargo.lock change.
#
# usage: scripts/symbol-order.sh [BINARY]   (default: builds target/release/flagpole)
# Needs valgrind, redis-server, curl, wrk, python3 (the bench kit's generator and writer).
# Takes a few minutes (everything runs under callgrind). Only loopback traffic.
set -euo pipefail
BIN=${1:+$(realpath "$1")}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
BENCH_DIR=${BENCH_DIR:-$REPO/../shared/bench}
OUT=build/symbol-order.txt
ADMIN='Authorization: Basic YWRtaW46'
for tool in valgrind callgrind_annotate redis-server curl wrk python3 nm; do
  command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 2; }
done

if [ -z "$BIN" ]; then
  cargo build --release --locked --bin flagpole
  BIN=$(realpath "${CARGO_TARGET_DIR:-target}/release/flagpole")
fi
WORK=$(mktemp -d /tmp/flagpole-symbol-order.XXXXXX)
REDIS_PID=""; FP_PID=""
cleanup() {
  [ -n "$FP_PID" ] && kill "$FP_PID" 2>/dev/null
  [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# exercise STORE ARGS...: one replica under callgrind through the scenario.
exercise() {
  local store=$1; shift
  local port url etag
  port=$(free_port); url="http://127.0.0.1:$port"
  valgrind --tool=callgrind --demangle=no --callgrind-out-file="$WORK/callgrind-$store.out" \
    "$BIN" --listen "127.0.0.1:$port" "$@" > "$WORK/flagpole-$store.log" 2>&1 &
  FP_PID=$!
  for _ in $(seq 600); do curl -sf -o /dev/null "$url/health" && break; sleep 0.5; done
  python3 "$BENCH_DIR/gen_features.py" 300 --load "$url" --admin-header "$ADMIN"
  "$BENCH_DIR/writebench.sh" "$url" 300 4 4 | tail -1
  curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' "$url/api/client/register" \
    -d '{"appName":"order","instanceId":"i-1","strategies":["default"],"started":"2026-01-01T00:00:00Z","interval":10000}'
  curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' "$url/api/client/metrics" \
    -d '{"appName":"order","instanceId":"i-1","bucket":{"start":"2026-01-01T00:00:00Z","stop":"2026-01-01T00:01:00Z","toggles":{"a":{"yes":1,"no":2}}}}'
  for q in "" "?tag[]=simple:team-core" "?project=default" "?namePrefix=core"; do
    curl -sf -o /dev/null "$url/api/client/features$q"
    curl -sf -o /dev/null -H 'Accept-Encoding: gzip' "$url/api/client/features$q"
  done
  etag=$(curl -sf -D - -o /dev/null "$url/api/client/features" | awk -F': ' 'tolower($1) == "etag" { print $2 }' | tr -d '\r')
  curl -s -o /dev/null -H "If-None-Match: $etag" "$url/api/client/features"
  curl -s -o /dev/null -I "$url/api/client/features"
  for path in features features/order-1 strategies feature-types tags events archive/features \
    metrics/feature-toggles metrics/applications state/export "state/export?format=yaml"; do
    curl -s -o /dev/null -H "$ADMIN" "$url/api/admin/$path"
  done
  curl -s -o /dev/null -H "$ADMIN" -H 'Content-Type: application/json' -X POST "$url/api/admin/features" \
    -d '{"name":"order-1","strategies":[{"name":"default"}]}'
  curl -s -o /dev/null -H "$ADMIN" -X DELETE "$url/api/admin/features/order-1"
  curl -s -o /dev/null -H "$ADMIN" -H 'Content-Type: application/json' -X POST "$url/api/admin/archive/revive" \
    -d '{"name":"order-1"}'
  curl -s -o /dev/null -H "$ADMIN" -X POST "$url/api/admin/features/order-1/toggle/off"
  curl -s -o /dev/null "$url/internal-backstage/prometheus"
  curl -s -o /dev/null "$url/api/admin/nonexistent"
  # Weight: the request paths a fleet runs all day.
  wrk -t1 -c4 -d3s -H 'Accept-Encoding: gzip' "$url/api/client/features" | grep -F Requests/sec
  wrk -t1 -c4 -d3s -H "If-None-Match: $etag" "$url/api/client/features" | grep -F Requests/sec
  kill -TERM "$FP_PID"; wait "$FP_PID" || true; FP_PID=""
}

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no > "$WORK/redis.log" 2>&1 &
REDIS_PID=$!
sleep 0.5
exercise redis --redis-url "redis://127.0.0.1:$redis_port"
exercise embedded --data-dir "$WORK/data"

# Self instructions per function over both runs, hottest first; only the binary's own symbols.
nm --defined-only "$BIN" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u > "$WORK/symbols"
for f in "$WORK"/callgrind-*.out; do
  callgrind_annotate --auto=no --threshold=100 --show-percs=no "$f" > "$f.txt"
done
cat "$WORK"/callgrind-*.out.txt | python3 -c '
import re, sys
symbols = set(open(sys.argv[1]).read().split())
row = re.compile(r"^\s*([\d,]+)\s+\S*?:(\S+) \[" + re.escape(sys.argv[2]) + r"\]$")
cost = {}
for line in sys.stdin:
    m = row.match(line)
    if m and m.group(2) in symbols:
        cost[m.group(2)] = cost.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
if len(cost) < 1000:
    sys.exit(f"only {len(cost)} functions of the binary ran: the scenario failed?")
lock = open("Cargo.lock", "rb").read()
fnv = 0xcbf29ce484222325
for b in lock:
    fnv = ((fnv ^ b) * 0x100000001b3) % 2**64
print(f"# {sys.argv[3]}; Cargo.lock {fnv:016x}")
for name, _ in sorted(cost.items(), key=lambda kv: -kv[1]):
    print(name)
' "$WORK/symbols" "$BIN" "$(${RUSTC:-rustc} -V)" > "$WORK/order"
mkdir -p build
mv "$WORK/order" "$OUT"
echo "# $(($(wc -l < "$OUT") - 1)) functions listed in $OUT" >&2
