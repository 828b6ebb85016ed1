#!/usr/bin/env bash
# loadtest/import.sh — a state import of a large configuration as one commit, while SDK-like
# readers keep polling the client API. For every store it:
#   1. starts a fresh store (its own redis-server, or a new embedded data directory) and one
#      flagpole replica on it;
#   2. writes the bench kit's gen_features.py document of N toggles (it is a state document);
#   3. runs loadtest/import.py: R readers poll GET /api/client/features (gzip) for a baseline,
#      then a dry run, the import and the same import again are timed while they keep polling;
#      every response must be the old document or the whole new one;
#   4. stops what it started and prints one line per store (results.csv in --out).
#
# usage: loadtest/import.sh [options]
#   --toggles N            toggles in the document (default 10000)
#   --stores "redis embedded"
#   --readers R            concurrent readers (default 8)
#   --out DIR              keep logs and results there (default: a new /tmp dir)
#   --no-build             use the existing binary in $CARGO_TARGET_DIR/release
# Environment overrides: CARGO_TARGET_DIR (default /tmp/fp-release), FLAGPOLE_BIN, BENCH_DIR,
#   REDIS_SERVER. Only loopback traffic; bounded (each import must finish within 120 s).
# Needs cargo, curl, python3, redis-server: apt-get install -y redis-server
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults
N=10000
STORES="redis embedded"
READERS=8

while [ $# -gt 0 ]; do
  case "$1" in
    --toggles) N=$2; shift 2;;
    --stores) STORES=$2; shift 2;;
    --readers) READERS=$2; shift 2;;
    *) common_opt "$@"; shift "$OPT_SHIFT";;
  esac
done
[ -f "$BENCH_DIR/gen_features.py" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
need_tools "curl python3" curl python3
make_out flagpole-import
stop_on_exit FP_PID REDIS_PID

build_flagpole
machine_info
python3 "$BENCH_DIR/gen_features.py" "$N" -o "$OUT/document.json"

echo "store,toggles,document_mib,dry_run_s,import_s,served_after_s,noop_import_s,reads_per_s_before,p99_before_ms,reads_per_s_during,p99_during_ms,max_during_ms,read_errors,partial_documents,peak_rss_mib" > "$OUT/results.csv"
for STORE in $STORES; do
  check_store
  need_redis_tools
  read -r REDIS_PORT FP_PORT <<<"$(free_ports 2)"
  start_store redis_ping_py flagpole-import
  start_flagpole "${STORE_ARGS[@]}"
  timeout 300 python3 "$HERE/import.py" "$URL" "$OUT/document.json" --toggles "$N" \
    --readers "$READERS" --admin-header "$ADMIN_HEADER" > "$OUT/import-$STORE.json"
  rss=$(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$FP_PID/status")
  python3 - "$STORE" "$rss" "$OUT/import-$STORE.json" >> "$OUT/results.csv" <<'PY'
import json, sys
store, rss, path = sys.argv[1], sys.argv[2], sys.argv[3]
r = json.load(open(path))
b, d = r["reads_baseline"], r["reads_during_import"]
print(",".join(str(x) for x in [store, r["toggles"], r["document_mib"], r["dry_run_s"], r["import_s"],
    r["served_after_s"], r["noop_import_s"], b["per_s"], b["p99_ms"], d["per_s"], d["p99_ms"],
    d["max_ms"], d["errors"], r["partial_documents_seen"], rss]))
PY
  tail -1 "$OUT/results.csv" >&2
  stop "$FP_PID"; FP_PID=""
  stop "$REDIS_PID"; REDIS_PID=""
  [ -n "$DATA_DIR" ] && rm -rf "$DATA_DIR"; DATA_DIR=""
done
column -s, -t "$OUT/results.csv" >&2
echo "# results in $OUT/results.csv" >&2
