#!/usr/bin/env bash
# loadtest/polling_beside_streams.sh — the polling client path with and without 15,000 SSE
# streams open on the same replica (issue 35: "the polling client path's figures unchanged while
# 15,000 streams are open"). One replica (embedded store, open access) holding N toggles; wrk
# (2 threads, 64 connections) on GET /api/client/features as a 304 (If-None-Match) and gzip,
# alternately without streams and with loadtest/fanout holding STREAMS of them, ROUNDS times.
#
# Usage: loadtest/polling_beside_streams.sh FLAGPOLE_BINARY [N=1000] [STREAMS=15000] [ROUNDS=2]
# Needs wrk, curl, python3 and cargo (for loadtest/fanout). Loopback only; every process it
# starts is stopped when it exits.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=$1 N=${2:-1000} STREAMS=${3:-15000} ROUNDS=${4:-2} DURATION=${DURATION:-8}
WORK=$(mktemp -d /tmp/fp-polling-streams.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
ulimit -n 20000
FANOUT_TARGET=${FANOUT_TARGET:-$WORK/fanout-target}
CARGO_TARGET_DIR=$FANOUT_TARGET cargo build --release -q --manifest-path "$HERE/fanout/Cargo.toml"
FANOUT=$FANOUT_TARGET/release/flagpole-fanout
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
"$BIN" --listen "127.0.0.1:$PORT" --auth none --data-dir "$WORK/data" \
  --streaming-max-connections $((STREAMS + 1000)) > "$WORK/flagpole.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf -o /dev/null "$URL/health" && break; sleep 0.2; done
python3 "$HERE/frontend.py" document "$N" > "$WORK/toggles.json"
curl -sf -o /dev/null -X POST -H 'Authorization: Basic YWRtaW46' -H 'Content-Type: application/json' \
  --data-binary @"$WORK/toggles.json" "$URL/api/admin/state/import?environment=default&drop=true"
sleep 1

# poll LABEL: one wrk run per mode (the 304s with the document's current ETag: the streams'
# writes change it); prints "LABEL MODE req/s p99"
poll() {
  local out etag
  etag=$(curl -s -D - -o /dev/null "$URL/api/client/features" | awk -F': ' 'tolower($1)=="etag"{print $2}' | tr -d '\r')
  out=$(wrk -t2 -c64 -d"${DURATION}s" --latency -H "If-None-Match: $etag" "$URL/api/client/features")
  echo "$1 304 $(awk '/Requests\/sec/{print $2}' <<< "$out") $(awk '$1=="99%"{print $2}' <<< "$out")"
  out=$(wrk -t2 -c64 -d"${DURATION}s" --latency -H 'Accept-Encoding: gzip' "$URL/api/client/features")
  echo "$1 gzip $(awk '/Requests\/sec/{print $2}' <<< "$out") $(awk '$1=="99%"{print $2}' <<< "$out")"
}

for round in $(seq "$ROUNDS"); do
  poll "round-$round without-streams"
  "$FANOUT" --server "127.0.0.1:$PORT" --connections "$STREAMS" --sources 4 --writes 1 \
    --hold-seconds $((DURATION * 2 + 15)) > "$WORK/fanout-$round.txt" 2>&1 &
  FANOUT_PID=$!
  PIDS+=("$FANOUT_PID")
  for _ in $(seq 300); do grep -q holding "$WORK/fanout-$round.txt" && break; sleep 0.2; done
  grep -q holding "$WORK/fanout-$round.txt" || { cat "$WORK/fanout-$round.txt" >&2; exit 1; }
  sleep 2
  poll "round-$round with-$STREAMS-streams"
  wait "$FANOUT_PID" || true
  grep -h 'held-after' "$WORK/fanout-$round.txt" | sed "s/^/round-$round /"
  sleep 2
done
