#!/usr/bin/env bash
# loadtest/repoll_instructions.sh — user-space instructions per frontend re-poll (issue 34):
# GET /api/frontend with an unchanged context and its If-None-Match, answered 304 before
# anything is evaluated. Counted by valgrind's callgrind, so binaries compare on a shared
# machine where req/s cannot. For each binary it:
#   1. loads N toggles of loadtest/frontend.py's mix into a new embedded data directory
#      (without valgrind), open access;
#   2. starts the binary on it under callgrind with counting off, asks once for the re-poll
#      context's ETag (the wrk context of frontend.lua's repoll mode, ctx-0), sends 50 re-polls
#      to warm up, turns counting on, sends --requests re-polls on one keep-alive connection
#      (each must be a 304), turns counting off and dumps;
#   3. prints instructions per re-poll (callgrind's total over the requests).
# The kernel's share (sockets, syscalls) is left out: the same for every binary.
#
# usage: loadtest/repoll_instructions.sh [--toggles N] [--requests K] [--out DIR] BINARY...
#   --toggles N    toggles (default 1000)
#   --requests K   counted re-polls (default 200)
#   --out DIR      keep the callgrind files there (default: a new /tmp dir), for
#                  callgrind_annotate
# Needs valgrind, curl, python3.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults
STORE=embedded
N=1000
REQUESTS=200
BINARIES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --toggles) N=$2; shift 2;;
    --requests) REQUESTS=$2; shift 2;;
    --out|-h|--help) common_opt "$@"; shift "$OPT_SHIFT";;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2;;
    *) BINARIES+=("$1"); shift;;
  esac
done
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "--toggles must be a positive integer" >&2; exit 2; }
[[ $REQUESTS =~ ^[1-9][0-9]*$ ]] || { echo "--requests must be a positive integer" >&2; exit 2; }
[ ${#BINARIES[@]} -gt 0 ] || { echo "name at least one binary (see --help)" >&2; exit 2; }
need_tools "valgrind curl python3" valgrind callgrind_control curl python3
make_out flagpole-repoll-instructions

SERVER_PID=""; FP_PID=""
cleanup_server() { [ -z "$SERVER_PID" ] || { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true; }; SERVER_PID=""; }
trap 'rc=$?; trap - EXIT INT TERM; stop "$FP_PID"; cleanup_server; echo "# callgrind files in $OUT" >&2; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 "$HERE/frontend.py" document "$N" > "$OUT/toggles.json"
CONTEXT_PATH="/api/frontend?appName=web&userId=ctx-0&properties%5Bplan%5D=pro"

# repolls URL ETAG COUNT: COUNT re-polls on one keep-alive connection, each a 304
repolls() {
  python3 - "$@" "$CONTEXT_PATH" <<'EOF'
import http.client, sys, urllib.parse
url, etag, count, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
host = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(host.hostname, host.port, timeout=60)
for _ in range(count):
    conn.request("GET", path, headers={"If-None-Match": etag})
    resp = conn.getresponse()
    resp.read()
    if resp.status != 304:
        sys.exit(f"answered {resp.status}, not 304")
EOF
}

printf '%-40s %8s %9s %14s\n' binary toggles requests instr/request >&2
i=0
for BIN in "${BINARIES[@]}"; do
  i=$((i + 1))
  [ -x "$BIN" ] || { echo "$BIN is not an executable" >&2; exit 2; }
  read -r FP_PORT <<<"$(free_ports 1)"
  DATA_DIR="$OUT/data-$i"; rm -rf "$DATA_DIR"
  REV=$(basename "$BIN")
  start_flagpole --data-dir "$DATA_DIR" --auth none --shutdown-drain-ms 0
  curl -sf -o /dev/null -X POST -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
    --data-binary @"$OUT/toggles.json" "$URL/api/admin/state/import?environment=default&drop=true"
  stop "$FP_PID"; FP_PID=""
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/repoll-$i.callgrind" \
    "$BIN" --listen "127.0.0.1:$FP_PORT" --data-dir "$DATA_DIR" --auth none \
    > "$OUT/repoll-$i.log" 2>&1 &
  SERVER_PID=$!
  etag=""
  for _ in $(seq 600); do  # up to ~120 s: valgrind starts slowly, the engine builds first
    etag=$(curl -s -m 5 -D - -o /dev/null "$URL$CONTEXT_PATH" \
      | awk -F': ' 'tolower($1) == "etag" { print $2 }' | tr -d '\r' || true)
    [ -n "$etag" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "$BIN under valgrind exited; see $OUT" >&2; exit 1; }
    sleep 0.2
  done
  [ -n "$etag" ] || { echo "$BIN under valgrind sent no ETag" >&2; exit 1; }
  repolls "$URL" "$etag" 50
  callgrind_control -i on "$SERVER_PID" > "$OUT/repoll-$i.control" 2>&1 \
    || { echo "callgrind_control failed; see $OUT/repoll-$i.control" >&2; exit 1; }
  repolls "$URL" "$etag" "$REQUESTS"
  callgrind_control -i off "$SERVER_PID" > /dev/null 2>&1
  callgrind_control -d "$SERVER_PID" > /dev/null 2>&1
  cleanup_server
  # The dump taken while counting was on is the file with the suffix .1.
  total=$(awk '/^totals:/ { print $2 }' "$OUT/repoll-$i.callgrind.1")
  printf '%-40s %8s %9s %14s\n' "$BIN" "$N" "$REQUESTS" \
    "$(awk -v t="$total" -v r="$REQUESTS" 'BEGIN { printf "%d", t / r }')" >&2
done
