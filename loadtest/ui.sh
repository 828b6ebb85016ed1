#!/usr/bin/env bash
# loadtest/ui.sh — the admin UI's toggle list at scale: starts BINARY on a fresh embedded
# store, imports N toggles (three tags each, descriptions, two projects), signs in to the UI,
# then requests the first page of /ui/toggles and a search R times each (and bulk actions on 50
# and 200 selected toggles up to 10 times each), and prints the
# server's own time to build the page (the `Server-Timing: render;dur=` header) and the time
# curl saw, as median and 95th percentile. Only loopback traffic; bounded by R.
#
# usage: loadtest/ui.sh BINARY [N=10000] [R=50]
set -euo pipefail
BIN=${1:?usage: loadtest/ui.sh BINARY [N] [R]}
N=${2:-10000}
R=${3:-50}
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
"$BIN" --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" --auth insecure \
  --shutdown-drain-ms 0 >"$WORK/flagpole.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 1 300); do
  curl -fs "$URL/health/ready" >/dev/null 2>&1 && break
  sleep 0.1
done

python3 - "$N" >"$WORK/state.json" <<'PY'
import json, sys
n = int(sys.argv[1])
words = ["checkout", "search", "billing", "profile", "onboarding", "payments", "cart", "promo"]
features = []
for i in range(n):
    w = words[i % len(words)]
    features.append({
        "name": f"{w}-{i:05d}", "type": "release", "project": "default",
        "description": f"The {w} flow, variant {i % 97}", "enabled": i % 3 == 0,
        "strategies": [{"name": "default"}]})
print(json.dumps({"version": 1, "features": features}))
PY
curl -fs -u loadtest: -H 'Content-Type: application/json' --data-binary "@$WORK/state.json" \
  "$URL/api/admin/state/import" >/dev/null
curl -fs -c "$WORK/cookies" -d 'name=loadtest' "$URL/ui/sign-in" >/dev/null

measure() {
  local label=$1 path=$2 out="$WORK/$1.txt"
  : >"$out"
  for _ in $(seq 1 "$R"); do
    curl -fs -b "$WORK/cookies" -D - -o /dev/null -w 'curl=%{time_total}\n' "$URL$path" |
      tr -d '\r' | sed -n 's/^server-timing: render;dur=//Ip; s/^curl=//p' | paste -sd' ' >>"$out"
  done
  python3 - "$label" "$out" <<'PY'
import statistics, sys
label, path = sys.argv[1], sys.argv[2]
rows = [l.split() for l in open(path) if l.strip()]
server = sorted(float(r[0]) for r in rows)
total = sorted(float(r[1]) * 1000 for r in rows)
p95 = lambda xs: xs[min(len(xs) - 1, int(len(xs) * 0.95))]
print(f"{label:<28} server median {statistics.median(server):7.2f} ms  p95 {p95(server):7.2f} ms"
      f"   curl median {statistics.median(total):7.2f} ms  p95 {p95(total):7.2f} ms  (n={len(rows)})")
PY
}

echo "# $N toggles, $R requests each, binary $BIN"
measure "first page (50 rows)" "/ui/toggles"
measure "search 'payments flow 7'" "/ui/toggles?q=payments+flow+7"
measure "search, 200 rows" "/ui/toggles?q=checkout&size=200"
measure "filter on + sort newest" "/ui/toggles?enabled=on&environment=default&sort=-created"

# Bulk actions on selected rows (one write per toggle, each answered once the client documents
# hold it): a page of 50 and of 200 toggles marked stale and back, and exported; curl's time.
CSRF=$(curl -fs -b "$WORK/cookies" "$URL/ui/toggles" |
  python3 -c 'import re, sys; print(re.search(r"name=\"_csrf\" value=\"([^\"]+)\"", sys.stdin.read()).group(1))')
bulk() {
  local label=$1 count=$2 out="$WORK/bulk-$2.txt" rounds=$(( R < 10 ? R : 10 ))
  : >"$out"
  for round in $(seq 1 "$rounds"); do
    for action in "${@:3}"; do
      python3 - "$N" "$count" "$action" "$CSRF" >"$WORK/bulk.body" <<'PY'
import sys, urllib.parse
n, count, action, csrf = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
words = ["checkout", "search", "billing", "profile", "onboarding", "payments", "cart", "promo"]
names = [f"{words[i % len(words)]}-{i:05d}" for i in range(min(count, n))]
fields = [("names", name) for name in names]
fields += [("action", action), ("environment", "default"), ("back", "/ui/toggles"), ("_csrf", csrf)]
sys.stdout.write(urllib.parse.urlencode(fields))
PY
      read -r took location < <(curl -fs -b "$WORK/cookies" -o /dev/null \
        -w '%{time_total} %{redirect_url}\n' \
        -H 'Content-Type: application/x-www-form-urlencoded' --data-binary "@$WORK/bulk.body" \
        "$URL/ui/toggles/bulk")
      # A write action redirects with its notice: every selected toggle must have been done.
      if [ "$action" != export ] && ! python3 -c 'import sys, urllib.parse as u
notice = u.parse_qs(u.urlsplit(sys.argv[1]).query).get("notice", [""])[0]
sys.exit(f"applied to {sys.argv[2]} of {sys.argv[2]}" not in notice)' "$location" "$count"; then
        echo "bulk $action of $count was not applied in full: $location" >&2
        exit 1
      fi
      echo "$took" >>"$out"
    done
  done
  python3 - "$label" "$out" <<'PY'
import statistics, sys
label, path = sys.argv[1], sys.argv[2]
total = sorted(float(l) * 1000 for l in open(path) if l.strip())
p95 = lambda xs: xs[min(len(xs) - 1, int(len(xs) * 0.95))]
print(f"{label:<28} curl median {statistics.median(total):7.2f} ms  p95 {p95(total):7.2f} ms  (n={len(total)})")
PY
}
bulk "bulk stale, 50 selected" 50 stale unstale
bulk "bulk stale, 200 selected" 200 stale unstale
bulk "bulk export, 200 selected" 200 export
