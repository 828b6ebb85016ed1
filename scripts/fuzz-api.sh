#!/usr/bin/env bash
# Fuzzes the HTTP API with schemathesis: the real binary (embedded store, then Redis), the
# OpenAPI document it serves, a bounded number of generated requests per operation (valid and
# invalid), and these checks on every response: no 5xx, the status is documented, the body and
# headers match the documented schema and content type. The binary must stay up throughout
# and log no panic. Warnings count too (tests/fuzz/schemathesis.toml says which): above all
# "mostly rejected generated data", a schema looser than the handlers' validation. Run by
# scripts/test.sh; a failure fails it.
#
#   FLAGPOLE_FUZZ_EXAMPLES  examples per operation and phase (default 50): what bounds a run
#   FLAGPOLE_FUZZ_SECONDS   longest a run per store may take before it counts as failed
#                           (default 600; a safety stop, not a budget to spend)
#   FLAGPOLE_FUZZ_SEED      hypothesis seed (default fixed, so CI runs are repeatable)
#   FLAGPOLE_FUZZ_REPORTS   a directory to keep schemathesis' event log of each store's run in
#                           (<store>.ndjson: every request, response and phase), to see why
#                           an operation warned; default: none kept
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

EXAMPLES="${FLAGPOLE_FUZZ_EXAMPLES:-50}"
SECONDS_PER_STORE="${FLAGPOLE_FUZZ_SECONDS:-600}"
SEED="${FLAGPOLE_FUZZ_SEED:-20261124}"
REPORTS="${FLAGPOLE_FUZZ_REPORTS:-}"
VENV=target/fuzz-venv

# shellcheck source=python-venv.sh
. scripts/python-venv.sh
if ! ensure_venv "$VENV" tests/fuzz/requirements.txt 'import schemathesis' schemathesis; then
  echo "# WARNING: schemathesis could not be installed (no network?): API fuzzing skipped" >&2
  exit 0
fi

cargo build --quiet --bin flagpole
WORK="$(mktemp -d)"
SERVER=""
REDIS=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  [ -n "$REDIS" ] && kill "$REDIS" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

TOKEN="fuzz-admin-token-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"

# One run against a fresh replica started with the given store arguments.
fuzz() {
  local name="$1"
  shift
  local port log
  port="$(free_port)" || return 1
  log="$WORK/flagpole-$name.log"
  # Streams end after 200 ms, so schemathesis gets whole answers from /api/client/streaming.
  FLAGPOLE_SHUTDOWN_DRAIN_MS=0 FLAGPOLE_STREAMING_MAX_LIFETIME_MS=200 RUST_LOG=warn \
    ./target/debug/flagpole \
    --listen "127.0.0.1:$port" --auth token --admin-token "$TOKEN" "$@" >"$log" 2>&1 &
  SERVER=$!
  local up=""
  for _ in $(seq 150); do
    if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      up=1
      break
    fi
    sleep 0.1
  done
  if [ -z "$up" ]; then
    echo "# FAIL: flagpole ($name) did not become healthy; its log:" >&2
    tail -50 "$log" >&2
    return 1
  fi
  echo "# schemathesis against the $name store ($EXAMPLES examples per operation and phase)" >&2
  local status=0
  local report=()
  if [ -n "$REPORTS" ]; then
    mkdir -p "$REPORTS"
    report=(--report ndjson --report-ndjson-path "$REPORTS/$name.ndjson")
  fi
  # One worker: CPython 3.11's compiler has failed under schemathesis' threads here
  # ("AST constructor recursion depth mismatch"), a fault of the fuzzer, not of the service.
  # No --max-time: with it, schemathesis keeps fuzzing until the time is spent.
  timeout "$SECONDS_PER_STORE" "$VENV/bin/st" --config-file tests/fuzz/schemathesis.toml run "http://127.0.0.1:$port/api/openapi.json" \
    -H "Authorization: $TOKEN" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance \
    --phases examples,coverage,fuzzing \
    --max-examples "$EXAMPLES" --seed "$SEED" \
    --workers 1 --request-timeout 10 --no-shrink "${report[@]}" || status=$?
  if [ "$status" = 124 ]; then
    echo "# FAIL: schemathesis ($name) ran longer than ${SECONDS_PER_STORE}s" >&2
  fi
  if ! kill -0 "$SERVER" 2>/dev/null; then
    echo "# FAIL: flagpole ($name) exited during fuzzing; its log:" >&2
    tail -50 "$log" >&2
    status=1
  elif grep -q "panicked" "$log"; then
    echo "# FAIL: flagpole ($name) logged a panic:" >&2
    grep -A5 "panicked" "$log" >&2
    status=1
  fi
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  SERVER=""
  return "$status"
}

result=0
fuzz embedded --data-dir "$WORK/data" || result=1

redis_port="$(free_port)"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" >"$WORK/redis.log" 2>&1 &
REDIS=$!
for _ in $(seq 50); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
fuzz redis --redis-url "redis://127.0.0.1:$redis_port" || result=1
exit "$result"
