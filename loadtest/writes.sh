#!/usr/bin/env bash
# loadtest/writes.sh — admin write throughput as the configuration grows, both stores, side by
# side in one run. For every store and size it:
#   1. starts a fresh store (its own redis-server, or a new embedded data directory) and
#      --replicas flagpole replicas on it (several replicas need the Redis store);
#   2. loads N toggles of the bench kit's gen_features.py through the admin API, timed;
#   3. runs the bench kit's writebench.sh (--connections concurrent writers, each PUT a real
#      change of a random toggle) --rounds times, the writers spread over the replicas;
#   4. reads each replica's Prometheus metrics (conflicts, writes given up, client document
#      builds), peak RSS and the CPU time the replicas and Redis spent per write during the
#      rounds (what scaling out costs, whatever the cores), and stops what it started.
# It prints one line per (store, size) and, per store, writes/s at the largest size over
# writes/s at the smallest.
#
# usage: loadtest/writes.sh [options]
#   --toggles "100 1000 10000"   configuration sizes (default those three)
#   --stores "redis embedded"    store backends (default both)
#   --replicas K                 replicas on one Redis (default 1; K > 1 skips the embedded store)
#   --environments "E ..."       also configure every toggle in these environments (the same
#                                document, imported client-shaped into each: e.g.
#                                "development production"), so that writes to `default` run
#                                with other environments present (default: none)
#   --restart-after-load         stop the replicas once the toggles are loaded (and imported)
#                                and start them again on the filled store before writing: the
#                                rounds and the peak RSS are then those of replicas that read the
#                                configuration at start, without what the load left in their heap
#   --frontend                   ask each replica for `default`'s frontend answer once before the
#                                rounds, so that it builds the evaluation engine and every write
#                                waits for it too (read-your-writes on the frontend API and OFREP)
#   --connections C              concurrent writers in all (default 16)
#   --cpus-per-replica Q         give each replica its own CPU budget of Q cores (e.g. 0.4; at
#                                least 0.1), as if each ran in a pod with that CPU limit (a cgroup
#                                per replica, CPU quota in 10 ms periods; needs root and a writable
#                                cgroup cpu controller); Redis and the writers are not limited
#   --duration S                 seconds per writebench run (default 10)
#   --rounds R                   runs per size; the median is reported, for an even R the
#                                lower middle run (default 2)
#   --out DIR                    keep logs and results.csv there (default: a new /tmp dir)
#   --no-build                   use the existing binary in $CARGO_TARGET_DIR/release
# Environment overrides: CARGO_TARGET_DIR (default /tmp/fp-release), FLAGPOLE_BIN, BENCH_DIR,
#   REDIS_SERVER; FLAGPOLE_* settings reach the replicas (e.g. FLAGPOLE_FORWARD_WRITES=true).
#   Only loopback traffic; every run is bounded by --duration.
# Needs cargo, wrk, curl, python3, redis-server: apt-get install -y wrk redis-server
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults
SIZES="100 1000 10000"
STORES="redis embedded"
REPLICAS=1
CONN=16
CPUS=""
KILL_AFTER=15
ENVIRONMENTS=""
RESTART_AFTER_LOAD=0
FRONTEND=0

while [ $# -gt 0 ]; do
  case "$1" in
    --toggles) SIZES=$2; shift 2;;
    --stores) STORES=$2; shift 2;;
    --replicas) REPLICAS=$2; shift 2;;
    --connections) CONN=$2; shift 2;;
    --cpus-per-replica) CPUS=$2; shift 2;;
    --environments) ENVIRONMENTS=$2; shift 2;;
    --restart-after-load) RESTART_AFTER_LOAD=1; shift;;
    --frontend) FRONTEND=1; shift;;
    *) common_opt "$@"; shift "$OPT_SHIFT";;
  esac
done
[[ $REPLICAS =~ ^[1-9][0-9]*$ ]] || { echo "--replicas must be a positive integer" >&2; exit 2; }
if [ -n "$CPUS" ] && ! { [[ $CPUS =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v q="$CPUS" 'BEGIN { exit !(q >= 0.1) }'; }; then
  echo "--cpus-per-replica must be a number of cores, at least 0.1" >&2; exit 2
fi
[ -x "$BENCH_DIR/writebench.sh" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
need_tools "wrk curl python3" wrk curl python3
make_out flagpole-writes

PIDS=()
CGROUPS=()
stopped_what() { echo "flagpole replicas and redis-server"; }
# cleanup stops the replicas of the current size (PIDS), removes their CPU cgroups and stops
# the store.
stop_all() {
  local pid dir
  for pid in "${PIDS[@]+"${PIDS[@]}"}"; do stop "$pid"; done
  PIDS=()
  for dir in "${CGROUPS[@]+"${CGROUPS[@]}"}"; do
    rmdir "$dir" 2>/dev/null || echo "# WARNING: could not remove the cgroup $dir" >&2
  done
  CGROUPS=()
  stop "$REDIS_PID"; REDIS_PID=""
  [ -n "$DATA_DIR" ] && rm -rf "$DATA_DIR"; DATA_DIR=""
}
trap 'rc=$?; trap - EXIT INT TERM; stop_all; echo "# stopped $(stopped_what); logs and results in $OUT" >&2; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
REDIS_PID=""; DATA_DIR=""

# cpu_cgroup_root: the directory new CPU cgroups go under (cgroup v1 `cpu`, or the v2 root
# when it offers the cpu controller); exits 2 when there is none this user may write.
cpu_cgroup_root() {
  if [ -w /sys/fs/cgroup/cpu ] && [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    echo /sys/fs/cgroup/cpu
  elif [ -w /sys/fs/cgroup ] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    echo /sys/fs/cgroup
  else
    echo "--cpus-per-replica needs a writable cgroup cpu controller (run as root)" >&2
    exit 2
  fi
}

# start_limited NAME ARGS...: start_flagpole ARGS... inside a new cgroup NAME of $CPUS cores,
# from its first instruction (so its runtime sizes itself to the quota, as in a pod)
start_limited() {
  local name=$1 dir quota real_bin=$BIN
  dir="$CGROUP_ROOT/$name"; shift
  quota=$(awk -v q="$CPUS" 'BEGIN { printf "%d", q * 10000 }')
  mkdir -p "$dir"
  [[ " ${CGROUPS[*]-} " == *" $dir "* ]] || CGROUPS+=("$dir")
  if [ -e "$dir/cpu.cfs_quota_us" ]; then
    echo 10000 > "$dir/cpu.cfs_period_us"
    echo "$quota" > "$dir/cpu.cfs_quota_us"
  else
    echo "$quota 10000" > "$dir/cpu.max"
  fi
  printf '#!/bin/sh\necho $$ > "%s/cgroup.procs" && exec "%s" "$@"\n' "$dir" "$real_bin" > "$OUT/$name.sh"
  chmod +x "$OUT/$name.sh"
  BIN="$OUT/$name.sh"
  start_flagpole "$@"
  BIN=$real_bin
}

[ -z "$CPUS" ] || CGROUP_ROOT=$(cpu_cgroup_root)
build_flagpole
machine_info

# metric URL NAME: the sum of a Prometheus sample (0 when absent)
metric() {
  curl -s -m 5 "$1/internal-backstage/prometheus" \
    | awk -v name="$2" '$1 == name { sum += $2 } END { printf "%d", sum }'
}

# cpu_ticks PID...: user + system CPU time of the processes, in clock ticks
cpu_ticks() {
  local pid total=0
  for pid in "$@"; do
    [ -n "$pid" ] || continue
    # Fields 14 and 15 of /proc/PID/stat, counted after the command name's closing paren.
    total=$((total + $(sed 's/.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }')))
  done
  echo "$total"
}

# peak_rss PID: VmHWM of PID in MiB
peak_rss() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "?"; }

echo "store,replicas,cpus_per_replica,toggles,load_s,writes_per_s,p50_ms,p99_ms,errors,conflicts,gave_up,builds,cpu_ms_per_write,peak_rss_mib" > "$OUT/results.csv"
printf '%-9s %8s %5s %7s %9s %11s %8s %8s %7s %10s %8s %7s %7s %9s\n' store replicas cpus toggles load_s writes/s p50_ms p99_ms errors conflicts gave_up builds cpu_ms rss_MiB >&2

for STORE in $STORES; do
  check_store
  if [ "$STORE" = embedded ] && [ "$REPLICAS" -gt 1 ]; then
    echo "# skipping the embedded store: it serves one replica" >&2
    continue
  fi
  need_redis_tools
  for N in $SIZES; do
    read -r REDIS_PORT <<<"$(free_ports 1)"
    start_store redis_ping_py flagpole-writes
    URLS=()
    for i in $(seq "$REPLICAS"); do
      read -r FP_PORT <<<"$(free_ports 1)"
      if [ -n "$CPUS" ]; then
        start_limited "flagpole-writes-$$-$i" "${STORE_ARGS[@]}"
      else
        start_flagpole "${STORE_ARGS[@]}"
      fi
      mv "$OUT/flagpole.log" "$OUT/flagpole-$STORE-$N-$i.log"
      PIDS+=("$FP_PID")
      URLS+=("$URL")
    done
    started=$(date +%s.%N)
    run_bg 900 "$OUT/load-$STORE-$N.txt" python3 "$BENCH_DIR/gen_features.py" "$N" \
      --load "${URLS[0]}" --admin-header "$ADMIN_HEADER"
    if [ -n "$ENVIRONMENTS" ]; then
      python3 "$BENCH_DIR/gen_features.py" "$N" -o "$OUT/features-$N.json"
      for env in $ENVIRONMENTS; do
        curl -sf -m 300 -o /dev/null -H "$ADMIN_HEADER" -H 'Content-Type: application/json' \
          --data-binary "@$OUT/features-$N.json" \
          "${URLS[0]}/api/admin/state/import?environment=$env" \
          || { echo "# importing into $env failed" >&2; exit 1; }
      done
    fi
    load_s=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$started" "$(date +%s.%N)")
    if [ "$RESTART_AFTER_LOAD" = 1 ]; then
      for i in "${!PIDS[@]}"; do
        stop "${PIDS[$i]}"
        read -r FP_PORT <<<"$(free_ports 1)"
        if [ -n "$CPUS" ]; then
          start_limited "flagpole-writes-$$-$i" "${STORE_ARGS[@]}"
        else
          start_flagpole "${STORE_ARGS[@]}"
        fi
        mv "$OUT/flagpole.log" "$OUT/flagpole-$STORE-$N-$((i + 1))-restarted.log"
        PIDS[i]=$FP_PID
        URLS[i]=$URL
      done
    fi
    if [ "$FRONTEND" = 1 ]; then
      for u in "${URLS[@]}"; do
        curl -sf -m 60 -o /dev/null "$u/api/frontend?userId=writes" \
          || { echo "# the frontend API of $u did not answer" >&2; exit 1; }
      done
    fi
    before_conflicts=0; before_gave_up=0; before_builds=0
    for u in "${URLS[@]}"; do
      before_conflicts=$((before_conflicts + $(metric "$u" flagpole_write_conflicts_total)))
      before_gave_up=$((before_gave_up + $(metric "$u" flagpole_write_contention_failures_total)))
      before_builds=$((before_builds + $(metric "$u" flagpole_client_document_builds_total)))
    done
    : > "$OUT/rounds-$STORE-$N.txt"
    ticks_before=$(cpu_ticks "${PIDS[@]}" "$REDIS_PID")
    for round in $(seq "$ROUNDS"); do
      # The writers, spread over the replicas; each writebench prints one summary line.
      pids=()
      for i in "${!URLS[@]}"; do
        share=$(( CONN / REPLICAS + (i < CONN % REPLICAS ? 1 : 0) ))
        timeout --kill-after="$KILL_AFTER" $((DURATION + 60)) \
          "$BENCH_DIR/writebench.sh" "${URLS[$i]}" "$N" "$DURATION" "$share" \
          > "$OUT/wb-$STORE-$N-$round-$i.txt" 2>&1 &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p"; done
      # One round: writes/s summed over the replicas, the worst p50 and p99, errors summed.
      cat "$OUT"/wb-"$STORE"-"$N"-"$round"-*.txt | awk '
        /^writes\/s/ { w += $2; if ($4 > m) m = $4; if ($6 > p) p = $6; e += $10 }
        END { printf "%.1f %.2f %d %.2f\n", w, p, e, m }' >> "$OUT/rounds-$STORE-$N.txt"
    done
    ticks=$(( $(cpu_ticks "${PIDS[@]}" "$REDIS_PID") - ticks_before ))
    conflicts=0; gave_up=0; builds=0; rss=""
    for i in "${!URLS[@]}"; do
      u=${URLS[$i]}
      conflicts=$((conflicts + $(metric "$u" flagpole_write_conflicts_total)))
      gave_up=$((gave_up + $(metric "$u" flagpole_write_contention_failures_total)))
      builds=$((builds + $(metric "$u" flagpole_client_document_builds_total)))
      rss="$rss${rss:+/}$(peak_rss "${PIDS[$i]}")"
    done
    conflicts=$((conflicts - before_conflicts)); gave_up=$((gave_up - before_gave_up)); builds=$((builds - before_builds))
    read -r writes p99 errors p50 <<<"$(sort -n -k1,1 "$OUT/rounds-$STORE-$N.txt" | awk '
      { w[NR] = $1; p[NR] = $2; e += $3; h[NR] = $4 }
      END { m = int((NR + 1) / 2); printf "%s %s %d %s\n", w[m], p[m], e, h[m] }')"
    # CPU per write over all rounds: ticks are 1/CLK_TCK s, writes are writes/s × duration.
    writes_all=$(awk '{ all += $1 } END { printf "%.1f", all }' "$OUT/rounds-$STORE-$N.txt")
    cpu_ms=$(python3 -c "import os, sys; t, w, d = map(float, sys.argv[1:]); print(f'{t * 1000 / os.sysconf(\"SC_CLK_TCK\") / max(w * d, 1):.3f}')" "$ticks" "$writes_all" "$DURATION")
    echo "$STORE,$REPLICAS,${CPUS:-all},$N,$load_s,$writes,$p50,$p99,$errors,$conflicts,$gave_up,$builds,$cpu_ms,$rss" >> "$OUT/results.csv"
    printf '%-9s %8s %5s %7s %9s %11s %8s %8s %7s %10s %8s %7s %7s %9s\n' \
      "$STORE" "$REPLICAS" "${CPUS:-all}" "$N" "$load_s" "$writes" "$p50" "$p99" "$errors" "$conflicts" "$gave_up" "$builds" "$cpu_ms" "$rss" >&2
    stop_all
  done
done

# Per store: writes/s at the largest size over writes/s at the smallest.
awk -F, 'NR > 1 { if (!($1 in first)) first[$1] = $6; last[$1] = $6; size[$1] = size[$1] " " $4 }
  END { for (s in first) if (first[s] > 0) printf "# %s: writes/s at the largest size / at the smallest = %.2f\n", s, last[s] / first[s] }' \
  "$OUT/results.csv" >&2
echo "# results in $OUT/results.csv" >&2
