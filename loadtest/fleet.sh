#!/usr/bin/env bash
# loadtest/fleet.sh — a fleet of SDK instances against flagpole and, alternating in the same
# run, against the shared "ceiling" server, compressed in time. Each of N instances (over A
# applications) polls GET /api/client/features every 15 s (UNLEASH-APPNAME,
# UNLEASH-INSTANCEID, If-None-Match with the ETag it last got, Accept-Encoding: gzip) and
# posts POST /api/client/metrics every 60 s (SDK-shaped reports, 50 toggles of the loaded
# pool, ~20% with variants): 4 polls per post, interleaved per instance (loadtest/fleet.lua).
# wrk sends as fast as it can; the mix and each instance's order are what is real. It:
#   1. builds flagpole in release mode (CARGO_TARGET_DIR, default /tmp/fp-release);
#   2. starts its own redis-server and flagpole on free loopback ports (or flagpole alone
#      on a fresh embedded store with --store embedded), loads the toggles
#      (gen_features.py N --load) and starts the ceiling (serving flagpole's client document
#      with ETag/304, parse-and-drop for the metrics posts);
#   3. alternates bounded wrk runs flagpole, ceiling, flagpole, ceiling… and prints, per
#      target, requests/s, polls/s, posts/s, p50/p99, non-2xx (304 is a success), the
#      flagpole/ceiling ratio, peak RSS and Redis commands per report;
#   4. stops everything it started when it exits (normally, on error or on Ctrl-C).
#
# usage: loadtest/fleet.sh [options]
#   --instances N      SDK instances (default 100000); instance k belongs to app k % A
#   --apps A           applications (default 20)
#   --toggles T        toggles to load = the pool the reports name (default 1000)
#   --toggles-per-report R   toggles per metrics report (default 50)
#   --poll-interval S  SDK poll interval (default 15); --metrics-interval S (default 60):
#                      only their quotient matters (polls per post, must be a whole number)
#   --start warm|cold  warm (default): every instance already holds the current ETag, the
#                      steady state; cold: no instance holds one, its first poll gets a 200
#   --no-gzip          polls without Accept-Encoding (default: gzip, deflate, as SDKs send)
#   --duration S       seconds per wrk run (default 10)
#   --rounds R         flagpole/ceiling alternations (default 2)
#   --warmup S         unrecorded warm-up seconds per target (default 3; 0 = none)
#   --connections C    wrk connections (default 64); --threads T wrk threads (default 2)
#   --store redis|embedded   store backend of flagpole (default redis)
#   --ceiling-body W   what the ceiling serves: server (default: flagpole's exact bytes) |
#                      generated (gen_features.py T) | FILE
#   --flush-interval-ms MS  flagpole --metrics-flush-interval-ms (only if the binary has it)
#   --redis-settle S   wait after each run before the Redis "after" snapshot, so buffered
#                      flushes are counted (default: flush interval + 1 s, i.e. 6)
#   --out DIR          keep logs, raw wrk outputs, sample requests and results.csv there
#                      (default: a new /tmp/flagpole-fleet.XXXXXX)
#   --no-build         use the existing binary in $CARGO_TARGET_DIR/release
#   --time-limit S     hard limit for everything after the build (default 900)
# Environment overrides: INSTANCES, APPS, TOGGLES, DURATION, ROUNDS, STORE, CARGO_TARGET_DIR,
#   BENCH_DIR (default: $(git rev-parse --show-toplevel)/../shared/bench), REDIS_SERVER,
#   FLAGPOLE_BIN (skip the build, use this binary), CEILING_BIN (skip building the ceiling).
# Examples:
#   loadtest/fleet.sh                                  # 100,000 instances, 2 x 10 s per target
#   loadtest/fleet.sh --duration 3 --rounds 1          # quick check
#   loadtest/fleet.sh --start cold --instances 20000   # fleet (re)start: first polls are 200s
#   loadtest/fleet.sh --store embedded
# Only loopback traffic; every step is bounded in time. Needs cargo, wrk, curl, python3,
# redis-server + redis-cli (Redis mode): apt-get install -y wrk redis-server
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$HERE/lib.sh"

common_defaults   # REPO, DURATION, ROUNDS, STORE, BENCH_DIR, REDIS_SERVER, CARGO_TARGET_DIR, ...
INSTANCES=${INSTANCES:-100000}
APPS=${APPS:-20}
TOGGLES=${TOGGLES:-1000}
TPR=50
POLL_S=15
METRICS_S=60
START=warm
GZIP=1
WARMUP=3
CONN=64
THREADS=2
CEILING_BODY=server
FLUSH_MS=""
REDIS_SETTLE=""
TIME_LIMIT=900
KILL_AFTER=5      # run_bg: SIGKILL this long after a step's time limit
PREFIX=fleet                                  # app and instance names: fleet-app-007, fleet-inst-000123
SEED=1

while [ $# -gt 0 ]; do
  case "$1" in
    --instances) INSTANCES=$2; shift 2;;
    --apps) APPS=$2; shift 2;;
    --toggles) TOGGLES=$2; shift 2;;
    --toggles-per-report) TPR=$2; shift 2;;
    --poll-interval) POLL_S=$2; shift 2;;
    --metrics-interval) METRICS_S=$2; shift 2;;
    --start) START=$2; shift 2;;
    --no-gzip) GZIP=0; shift;;
    --connections) CONN=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    --ceiling-body) CEILING_BODY=$2; shift 2;;
    --flush-interval-ms) FLUSH_MS=$2; shift 2;;
    --redis-settle) REDIS_SETTLE=$2; shift 2;;
    *) common_opt "$@"; shift "$OPT_SHIFT";;   # --duration --rounds --warmup --store --out --no-build --time-limit -h
  esac
done
for v in INSTANCES APPS TOGGLES TPR POLL_S METRICS_S DURATION ROUNDS WARMUP CONN THREADS TIME_LIMIT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "$v must be a non-negative integer (got '${!v}')" >&2; exit 2; }
done
[ "$INSTANCES" -ge "$THREADS" ] && [ "$APPS" -ge 1 ] && [ "$THREADS" -ge 1 ] && [ "$ROUNDS" -ge 1 ] && [ "$DURATION" -ge 1 ] \
  || { echo "need instances >= threads >= 1, apps, rounds, duration >= 1" >&2; exit 2; }
[ "$TPR" -ge 1 ] && [ "$TPR" -le "$TOGGLES" ] || { echo "--toggles-per-report must be 1..--toggles" >&2; exit 2; }
[ "$POLL_S" -ge 1 ] && [ $((METRICS_S % POLL_S)) = 0 ] && [ "$METRICS_S" -ge "$POLL_S" ] \
  || { echo "--metrics-interval must be a whole multiple of --poll-interval" >&2; exit 2; }
PPP=$((METRICS_S / POLL_S))   # polls per post
check_store
case "$START" in warm|cold) ;; *) echo "--start must be warm or cold" >&2; exit 2;; esac
check_flush_ms
[ -x "$BENCH_DIR/gen_features.py" ] && [ -d "$BENCH_DIR/ceiling" ] || { echo "bench kit not found at $BENCH_DIR (set BENCH_DIR)" >&2; exit 2; }
[ -r "$HERE/fleet.lua" ] || { echo "$HERE/fleet.lua not found" >&2; exit 2; }
need_tools "wrk curl python3" wrk curl python3 timeout
need_redis_tools

make_out flagpole-fleet

# ---- cleanup: stop exactly the processes this script started -------------------------------
# CHILD_PID: a running wrk / loader (under timeout, which forwards the signal), started by run_bg
stop_on_exit CHILD_PID CEILING_PID FP_PID REDIS_PID WATCHDOG_PID
trap 'echo "# interrupted (SIGTERM or --time-limit reached)" >&2; exit 143' TERM
stopped_what() { echo "flagpole${REDIS_PID:+, redis-server}${CEILING_PID:+ and the ceiling}"; }   # for cleanup's last line

nap() { sleep "$1" & CHILD_PID=$!; wait "$CHILD_PID" || true; CHILD_PID=""; }   # an interruptible sleep

# ---- 1. build --------------------------------------------------------------------------------
build_flagpole
CEILING_TARGET=${CEILING_TARGET:-/tmp/ceiling/target}
if [ -z "${CEILING_BIN:-}" ]; then
  CEILING_BIN=$CEILING_TARGET/release/ceiling
  # always let cargo check it is current: older builds lack the POST routes
  (cd "$BENCH_DIR/ceiling" && CARGO_TARGET_DIR=$CEILING_TARGET cargo build --release -q) \
    || { echo "building the ceiling failed" >&2; exit 1; }
fi

# hard limit for everything from here on: the watchdog sends SIGTERM to this script
( trap 'kill "$s" 2>/dev/null; exit 0' TERM; sleep "$TIME_LIMIT" & s=$!; wait "$s"; kill -TERM $$ 2>/dev/null ) &
# shellcheck disable=SC2034  # WATCHDOG_PID is read by cleanup (lib.sh): stop_on_exit names it
WATCHDOG_PID=$!

# ---- 2. start redis-server, flagpole, load the toggles, start the ceiling -----------------
read -r REDIS_PORT FP_PORT CEILING_PORT <<<"$(free_ports 3)"
machine_info

start_store redis_ping_cli flagpole-fleet

# the metrics flush interval: pass it only to a binary that knows the setting
flush_settings

start_flagpole "${STORE_ARGS[@]}" "${FLUSH_ARGS[@]+"${FLUSH_ARGS[@]}"}"

echo "# loading $TOGGLES toggles into $URL via POST /api/admin/features (gen_features.py $TOGGLES --load)" >&2
run_bg 600 - python3 "$BENCH_DIR/gen_features.py" "$TOGGLES" --load "$URL" --admin-header "$ADMIN_HEADER" \
  || echo "# WARNING: some admin requests failed; measuring anyway" >&2
python3 "$BENCH_DIR/gen_features.py" "$TOGGLES" -o "$OUT/pool_$TOGGLES.json"
python3 -c 'import json,sys; [print(f["name"]) for f in json.load(open(sys.argv[1]))["features"]]' \
  "$OUT/pool_$TOGGLES.json" > "$OUT/pool_names.txt"

hdr() { { grep -i "^$2:" "$1" || true; } | head -1 | cut -d' ' -f2- | tr -d '\r'; }
probe() {  # probe BASE NAME [curl args] -> status; headers and body in $OUT/NAME.{hdr,body}
  local base=$1 name=$2; shift 2
  curl -s -m 60 -o "$OUT/$name.body" -D "$OUT/$name.hdr" -w '%{http_code}' \
    -H "UNLEASH-APPNAME: $PREFIX-app-probe" -H "UNLEASH-INSTANCEID: $PREFIX-inst-probe" "$@" || echo 000
}
probe_post() {  # probe_post BASE NAME -> status of one SDK-shaped metrics report
  local first; first=$(head -1 "$OUT/pool_names.txt")
  local now; now=$(date -u +%Y-%m-%dT%H:%M:%S.000Z)
  probe "$1" "$2" -X POST -H 'Content-Type: application/json' "$1/api/client/metrics" --data-binary \
    "{\"appName\":\"$PREFIX-app-probe\",\"instanceId\":\"$PREFIX-inst-probe\",\"bucket\":{\"start\":\"$now\",\"stop\":\"$now\",\"toggles\":{\"$first\":{\"yes\":1,\"no\":0,\"variants\":{}}}}}"
}
accept=(); [ "$GZIP" = 1 ] && accept=(-H 'Accept-Encoding: gzip, deflate')

st=$(probe "$URL" server_plain "$URL/api/client/features")
[ "$st" = 200 ] || { echo "flagpole answered $st to GET /api/client/features" >&2; exit 1; }
S_ETAG=$(hdr "$OUT/server_plain.hdr" etag)
[ -n "$S_ETAG" ] || { echo "flagpole sent no ETag" >&2; exit 1; }
probe "$URL" server_poll "${accept[@]+"${accept[@]}"}" "$URL/api/client/features" >/dev/null
S_304=$(probe "$URL" server_304 -H "If-None-Match: $S_ETAG" "$URL/api/client/features")
S_POST=$(probe_post "$URL" server_post)
echo "# flagpole: $(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['features']))" "$OUT/server_plain.body" 2>/dev/null || echo '?') toggles, $(stat -c %s "$OUT/server_plain.body") B plain, $(stat -c %s "$OUT/server_poll.body") B as polled (content-encoding: $(hdr "$OUT/server_poll.hdr" content-encoding | sed 's/^$/none/')), ETag $S_ETAG; conditional GET -> $S_304; POST /api/client/metrics -> $S_POST" >&2
[ "$S_304" = 304 ] || echo "# WARNING: flagpole did not answer 304 to its own ETag" >&2
case "$S_POST" in 2*) ;; *) echo "# WARNING: flagpole did not answer 2xx to a metrics report; its non-2xx are counted below" >&2;; esac

case "$CEILING_BODY" in
  server) CFILE="$OUT/server_plain.body";;
  generated) CFILE="$OUT/pool_$TOGGLES.json";;
  *) CFILE=$CEILING_BODY; [ -r "$CFILE" ] || { echo "--ceiling-body: $CFILE not readable" >&2; exit 2; };;
esac
CEILING_URL="http://127.0.0.1:$CEILING_PORT"
"$CEILING_BIN" --file "$CFILE" --port "$CEILING_PORT" --bind 127.0.0.1 > "$OUT/ceiling.log" 2>&1 &
CEILING_PID=$!
for _ in $(seq 100); do
  curl -s -m 1 -o /dev/null "$CEILING_URL/health" && break
  kill -0 "$CEILING_PID" 2>/dev/null || { echo "the ceiling exited; see $OUT/ceiling.log" >&2; exit 1; }
  sleep 0.1
done
probe "$CEILING_URL" ceiling_plain "$CEILING_URL/api/client/features" >/dev/null
C_ETAG=$(hdr "$OUT/ceiling_plain.hdr" etag)
probe "$CEILING_URL" ceiling_poll "${accept[@]+"${accept[@]}"}" "$CEILING_URL/api/client/features" >/dev/null
C_304=$(probe "$CEILING_URL" ceiling_304 -H "If-None-Match: $C_ETAG" "$CEILING_URL/api/client/features")
C_POST=$(probe_post "$CEILING_URL" ceiling_post)
[ "$C_304" = 304 ] && [ "$C_POST" = 202 ] || { echo "the ceiling answered $C_304 to a conditional GET and $C_POST to POST /api/client/metrics (stale build? rebuild it)" >&2; exit 1; }
echo "# ceiling pid $CEILING_PID on $CEILING_URL: $(stat -c %s "$OUT/ceiling_plain.body") B plain, $(stat -c %s "$OUT/ceiling_poll.body") B as polled, ETag $C_ETAG; conditional GET -> $C_304; POST /api/client/metrics -> $C_POST (parse and drop)" >&2

# ---- 3. wrk runs ---------------------------------------------------------------------------
redis_snap() {  # redis_snap FILE: time, total commands and per-command calls
  [ "$STORE" = redis ] || return 0
  { echo "time:$(date +%s.%N)"
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" INFO stats | grep '^total_commands_processed:'
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" INFO commandstats | grep '^cmdstat_'
  } | tr -d '\r' > "$1" 2>/dev/null || true
}
run_wrk() {  # run_wrk TARGET ROUND SECONDS
  local target=$1 round=$2 secs=$3 base etag
  if [ "$target" = flagpole ]; then base=$URL; etag=$S_ETAG; else base=$CEILING_URL; etag=$C_ETAG; fi
  local f="$OUT/wrk_${target}_r${round}.txt" sample=-
  [ "$round" = 1 ] && sample="$OUT/sample_requests_$target.txt"
  redis_snap "$OUT/redis_${target}_r${round}.before"
  run_bg $((secs + 120)) "$f" wrk -t"$THREADS" -c"$CONN" -d"${secs}s" --timeout 30s --latency -s "$HERE/fleet.lua" \
    "$base/api/client/features" -- "$INSTANCES" "$APPS" "$OUT/pool_names.txt" "$TPR" "$THREADS" "$PREFIX" \
    "$SEED" "${etag:--}" "$START" "$GZIP" "$PPP" "$sample" || true
  [ "$STORE" = redis ] && nap "$REDIS_SETTLE"
  redis_snap "$OUT/redis_${target}_r${round}.after"
  if [ "$round" != warm ]; then
    local line; line=$(grep '^RESULT' "$f" || echo "RESULT requests=0")
    echo "$target $round $line" >> "$OUT/results.raw"
    echo "$line" | awk -v t="$target" -v r="$round" -v ppp="$PPP" '{
      for (i=2;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}
      rps = v["duration_us"] ? v["requests"]/(v["duration_us"]/1e6) : 0
      sent = v["sent_poll"] + v["sent_post"]
      printf "#   round %s  %-8s %9.0f req/s (%.0f polls/s, %.0f posts/s)  p50 %7.3f ms  p99 %7.3f ms  statuses %s\n", r, t, rps,
        sent ? rps*v["sent_poll"]/sent : 0, sent ? rps*v["sent_post"]/sent : 0, v["p50_us"]/1000, v["p99_us"]/1000, v["statuses"]
    }' >&2
  fi
}

: > "$OUT/results.raw"
echo "# fleet: $INSTANCES instances over $APPS apps; per instance a poll every ${POLL_S}s and a report every ${METRICS_S}s ($PPP polls per post), $TPR of $TOGGLES toggles per report; start $START, gzip $([ "$GZIP" = 1 ] && echo on || echo off); wrk -t$THREADS -c$CONN -d${DURATION}s, $ROUNDS rounds (warm-up ${WARMUP}s each)${REDIS_PID:+, Redis settle ${REDIS_SETTLE}s after each run}" >&2
if [ "$WARMUP" != 0 ]; then run_wrk flagpole warm "$WARMUP"; run_wrk ceiling warm "$WARMUP"; fi
for r in $(seq "$ROUNDS"); do
  run_wrk flagpole "$r" "$DURATION"; nap 1
  run_wrk ceiling "$r" "$DURATION"; nap 1
done

rss() { [ -n "$1" ] && [ -r "/proc/$1/status" ] && awk '/^VmHWM/{printf "%.1f", $2/1024}' "/proc/$1/status" || echo "?"; }
S_RSS=$(rss "$FP_PID"); C_RSS=$(rss "$CEILING_PID")

# ---- 4. summary -----------------------------------------------------------------------------
python3 - "$OUT" "$INSTANCES" "$APPS" "$TOGGLES" "$TPR" "$PPP" "$START" "$S_RSS" "$C_RSS" "$([ "$STORE" = redis ] && echo "$REDIS_PORT")" "$ROUNDS" "$STORE" <<'EOF'
import sys, os, statistics, collections
out, instances, apps, toggles, tpr, ppp, start, s_rss, c_rss, redis_port, rounds, store = sys.argv[1:]
med = lambda xs: statistics.median(xs) if xs else float("nan")
runs = collections.defaultdict(list)
for line in open(os.path.join(out, "results.raw")):
    t, r, _, *kv = line.split()
    v = dict(x.split("=", 1) for x in kv)
    g = lambda k: float(v.get(k, 0))
    req, dur = g("requests"), g("duration_us") / 1e6
    sent = g("sent_poll") + g("sent_post")
    sts = collections.Counter()
    if v.get("statuses", "-") != "-":
        for kv2 in v["statuses"].split(","):
            code, n = kv2.split(":"); sts[int(code)] += int(n)
    bad = sum(n for code, n in sts.items() if not (200 <= code <= 299 or code == 304))
    rps = req / dur if dur else 0
    runs[t].append(dict(round=r, req=req, rps=rps, polls=rps * g("sent_poll") / sent if sent else 0,
                        posts=rps * g("sent_post") / sent if sent else 0, post_share=g("sent_post") / sent if sent else 0,
                        p50=g("p50_us") / 1000, p99=g("p99_us") / 1000, bad=bad, sts=sts, first_bad=int(g("first_bad")),
                        bpr=g("bytes") / req if req else 0, body=g("post_body_avg"),
                        err=sum(g(k) for k in ("connect_err", "read_err", "write_err", "timeout_err"))))
s, c = runs.get("flagpole", []), runs.get("ceiling", [])

def snap(path):
    d = {}
    try:
        for ln in open(path):
            k, _, val = ln.strip().partition(":")
            if k == "time": d["time"] = float(val)
            elif k == "total_commands_processed": d["total"] = int(val)
            elif k.startswith("cmdstat_"): d[k[8:]] = int(dict(p.split("=") for p in val.split(","))["calls"])
    except OSError:
        return None
    return d if "total" in d else None

red = {}
if redis_port:
    for t, lst in (("flagpole", s), ("ceiling", c)):
        red[t] = []
        for x in lst:
            a, b = snap(os.path.join(out, f"redis_{t}_r{x['round']}.before")), snap(os.path.join(out, f"redis_{t}_r{x['round']}.after"))
            if not a or not b: continue
            cmds = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b) if k not in ("time", "total")}
            info = cmds.pop("info", 0)   # our own snapshots
            red[t].append(dict(total=b["total"] - a["total"] - info, secs=b["time"] - a["time"], req=x["req"],
                               posts=x["req"] * x["post_share"], cmds=cmds))

print(f"\nfleet: {int(instances):,} instances over {apps} apps, {ppp} polls per metrics post, {tpr} of {toggles} toggles per report "
      f"(~{med([x['body'] for x in s + c]):.0f} B), start {start}, {store} store; peak RSS flagpole {s_rss} MiB, ceiling {c_rss} MiB")
print(f"{'target':9} | {'req/s':>8} {'polls/s':>8} {'posts/s':>8} | {'p50 ms':>7} {'p99 ms':>7} | {'B/resp':>7} | {'non-2xx':>8} {'sock err':>8} | statuses (all rounds)")
rows = {}
for t, lst in (("flagpole", s), ("ceiling", c)):
    if not lst: continue
    sts = sum((x["sts"] for x in lst), collections.Counter())
    row = dict(rps=med([x["rps"] for x in lst]), polls=med([x["polls"] for x in lst]), posts=med([x["posts"] for x in lst]),
               p50=med([x["p50"] for x in lst]), p99=med([x["p99"] for x in lst]), bpr=med([x["bpr"] for x in lst]),
               bad=sum(x["bad"] for x in lst), err=int(sum(x["err"] for x in lst)), req=sum(x["req"] for x in lst))
    rows[t] = row
    print(f"{t:9} | {row['rps']:8.0f} {row['polls']:8.0f} {row['posts']:8.0f} | {row['p50']:7.3f} {row['p99']:7.3f} | {row['bpr']:7.0f} | "
          f"{row['bad']:8d} {row['err']:8d} | " + " ".join(f"{k}:{n}" for k, n in sorted(sts.items())))
ratio = rmin = rmax = float("nan")
if "flagpole" in rows and "ceiling" in rows and rows["ceiling"]["rps"]:
    ratio = rows["flagpole"]["rps"] / rows["ceiling"]["rps"]
    pr = [a["rps"] / b["rps"] for a, b in zip(s, c) if b["rps"]]
    rmin, rmax = (min(pr), max(pr)) if pr else (float("nan"),) * 2
    print(f"ratio flagpole/ceiling: {ratio:.3f} of the requests/s (per-round {rmin:.3f}-{rmax:.3f}); "
          f"p50 {rows['flagpole']['p50'] / rows['ceiling']['p50'] if rows['ceiling']['p50'] else float('nan'):.2f}x, "
          f"p99 {rows['flagpole']['p99'] / rows['ceiling']['p99'] if rows['ceiling']['p99'] else float('nan'):.2f}x the ceiling's")
if "flagpole" in rows and rows["flagpole"]["bad"]:
    fb = next((x["first_bad"] for x in s if x["first_bad"]), 0)
    print(f"WARNING: {rows['flagpole']['bad']} of {rows['flagpole']['req']:.0f} flagpole responses were neither 2xx nor 304 (first seen: {fb}); its rates count them")
print("req/s, polls/s, posts/s, p50, p99: medians of the rounds; polls/s and posts/s split req/s by the requests sent; "
      "non-2xx counts statuses other than 2xx and 304")
r_ps = r_pr = r_rq = idle = float("nan"); top = ""
if redis_port and red.get("flagpole"):
    sv = red["flagpole"]
    r_ps = med([x["total"] / x["secs"] for x in sv if x["secs"] > 0])
    r_pr = med([x["total"] / x["posts"] for x in sv if x["posts"]])
    r_rq = med([x["total"] / x["req"] for x in sv if x["req"]])
    agg = collections.Counter()
    for x in sv: agg.update(x["cmds"])
    posts = sum(x["posts"] for x in sv)
    top = ", ".join(f"{k.upper()} {n / posts:.3g}" for k, n in agg.most_common(8) if n > 0) if posts else ""
    if red.get("ceiling"):
        idle = med([x["total"] / x["secs"] for x in red["ceiling"] if x["secs"] > 0])
    print(f"Redis (127.0.0.1:{redis_port}): {r_ps:.0f} commands/s over each flagpole run + settle, {r_pr:.2f} commands per report, "
          f"{r_rq:.3f} per request (median of rounds); idle {idle:.1f} commands/s while the ceiling ran")
    if top: print(f"Redis commands per report by command: {top}")
fmt = lambda x, p="%.3f": "" if x != x else p % x
with open(os.path.join(out, "results.csv"), "w") as fh:
    fh.write("target,instances,apps,toggles,toggles_per_report,polls_per_post,start,store,rounds,req_s,polls_s,posts_s,p50_ms,p99_ms,bytes_per_resp,non2xx,socket_errors,"
             "ratio,ratio_min,ratio_max,peak_rss_mib,redis_cmds_per_s,redis_cmds_per_report,redis_cmds_per_request,redis_idle_cmds_per_s\n")
    for t, row in rows.items():
        f = t == "flagpole"
        fh.write(f"{t},{instances},{apps},{toggles},{tpr},{ppp},{start},{store},{rounds},{row['rps']:.0f},{row['polls']:.0f},{row['posts']:.0f},"
                 f"{row['p50']:.3f},{row['p99']:.3f},{row['bpr']:.0f},{row['bad']},{row['err']},"
                 f"{fmt(ratio, '%.4f') if f else ''},{fmt(rmin, '%.4f') if f else ''},{fmt(rmax, '%.4f') if f else ''},{s_rss if f else c_rss},"
                 f"{fmt(r_ps, '%.1f') if f else ''},{fmt(r_pr) if f else ''},{fmt(r_rq, '%.4f') if f else ''},{fmt(idle, '%.2f') if f else ''}\n")
EOF
echo "# raw wrk outputs, sample requests and results.csv in $OUT" >&2
