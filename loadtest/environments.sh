#!/usr/bin/env bash
# loadtest/environments.sh — what other environments cost in memory: for each given binary (side
# by side in one run, e.g. a baseline build and this one) it
#   1. starts a fresh store and the binary on it;
#   2. loads N toggles of the bench kit's gen_features.py into `default` through the admin API;
#   3. imports the same document client-shaped into each of --environments, one after another
#      (`POST /api/admin/state/import?environment=E`), timed;
#   4. after each step prints the replica's resident memory and its peak so far (VmRSS, VmHWM);
#   5. with --restart, stops it and starts it again on the same store: the resident memory of
#      the same configuration loaded at once, without what the imports left behind.
# One line per (binary, step); results.csv in --out.
#
# usage: loadtest/environments.sh [options] BINARY...
#   --toggles N                  toggles per environment (default 10000)
#   --environments "E ..."       environments to import into (default "development production")
#   --store redis|embedded       store backend (default redis)
#   --restart                    also measure a restart on the filled store
#   --out DIR                    keep logs and results.csv there (default: a new /tmp dir)
# Environment overrides: BENCH_DIR, REDIS_SERVER; FLAGPOLE_* settings and _RJEM_MALLOC_CONF
#   (jemalloc's run-time settings, e.g. dirty_decay_ms:0,muzzy_decay_ms:0 to see memory that
#   is in use rather than cached) reach the binaries. Only loopback traffic.
# Needs curl, python3 (and redis-server for the Redis store).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults
N=10000
ENVIRONMENTS="development production"
RESTART=0
BINARIES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --toggles) N=$2; shift 2;;
    --environments) ENVIRONMENTS=$2; shift 2;;
    --restart) RESTART=1; shift;;
    -*) common_opt "$@"; shift "$OPT_SHIFT";;
    *) BINARIES+=("$1"); shift;;
  esac
done
[ "${#BINARIES[@]}" -gt 0 ] || { echo "name at least one flagpole binary (see --help)" >&2; exit 2; }
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "--toggles must be a positive integer" >&2; exit 2; }
check_store
[ -f "$BENCH_DIR/gen_features.py" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
need_tools "curl python3" curl python3
[ "$STORE" = embedded ] || need_redis_tools
make_out flagpole-environments
KILL_AFTER=15
stop_on_exit FP_PID REDIS_PID CHILD_PID
machine_info

# memory PID: "VmRSS VmHWM" in MiB
memory() { awk '/VmRSS|VmHWM/ { v[$1] = $2 / 1024 } END { printf "%.1f %.1f", v["VmRSS:"], v["VmHWM:"] }' "/proc/$1/status"; }

python3 "$BENCH_DIR/gen_features.py" "$N" -o "$OUT/features.json"
echo "binary,step,seconds,rss_mib,peak_mib" > "$OUT/results.csv"
printf '%-40s %-22s %8s %9s %9s\n' binary step seconds rss_MiB peak_MiB >&2
for BIN in "${BINARIES[@]}"; do
  [ -x "$BIN" ] || { echo "$BIN is not an executable" >&2; exit 2; }
  REV="$BIN"
  name=$(basename "$BIN")
  read -r REDIS_PORT FP_PORT <<<"$(free_ports 2)"
  start_store redis_ping_py flagpole-environments
  start_flagpole "${STORE_ARGS[@]}"
  row() {
    read -r rss peak <<<"$(memory "$FP_PID")"
    echo "$name,$1,$2,$rss,$peak" >> "$OUT/results.csv"
    printf '%-40s %-22s %8s %9s %9s\n' "$name" "$1" "$2" "$rss" "$peak" >&2
  }
  row started ""
  started=$(date +%s.%N)
  run_bg 900 "$OUT/load-$name.txt" python3 "$BENCH_DIR/gen_features.py" "$N" \
    --load "$URL" --admin-header "$ADMIN_HEADER"
  row "loaded default" "$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$started" "$(date +%s.%N)")"
  for env in $ENVIRONMENTS; do
    started=$(date +%s.%N)
    curl -sf -m 300 -o "$OUT/import-$name-$env.json" -H "$ADMIN_HEADER" \
      -H 'Content-Type: application/json' --data-binary "@$OUT/features.json" \
      "$URL/api/admin/state/import?environment=$env" \
      || { echo "# importing into $env failed; see $OUT/flagpole.log" >&2; exit 1; }
    row "imported $env" "$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$started" "$(date +%s.%N)")"
  done
  sleep 2
  row settled ""
  mv "$OUT/flagpole.log" "$OUT/flagpole-$name.log"
  if [ "$RESTART" = 1 ]; then
    stop "$FP_PID"
    start_flagpole "${STORE_ARGS[@]}"
    sleep 1
    curl -sf -m 30 -o /dev/null "$URL/api/client/features"
    row "restarted and polled" ""
    mv "$OUT/flagpole.log" "$OUT/flagpole-$name-restarted.log"
  fi
  stop "$FP_PID"
  FP_PID=""
  if [ "$STORE" = redis ]; then stop "$REDIS_PID"; REDIS_PID=""; else rm -rf "$DATA_DIR"; DATA_DIR=""; fi
done
echo "# results in $OUT/results.csv" >&2
