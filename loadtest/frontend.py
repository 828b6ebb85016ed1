#!/usr/bin/env python3
"""Helpers of loadtest/frontend.sh (standard library only).

  frontend.py document N          print a client-format document of N toggles (a realistic mix:
                                  rollouts, constraints, user lists, variants with payloads,
                                  some off) for POST /api/admin/state/import?environment=default
  frontend.py etags URL N OUT     ask URL's frontend API and OFREP bulk for N fixed contexts and
                                  write their ETags as a Lua table file OUT (for the re-poll modes)
  frontend.py propagation URL N   N times: switch a toggle on or off through the admin API, then
                                  poll the client API and the frontend API until they hold it;
                                  print how long the write and each took
  frontend.py unleash-load URL ADMIN_TOKEN N [FROM]
                                  load the same N toggles (those from index FROM on: the ones
                                  before are already there) into a real Unleash (6.x/7.x) as
                                  its `development` environment (its admin API), then create a
                                  frontend token for it and print the token's secret
With FRONTEND_TOKEN set, `etags` sends it as the Authorization header (for a peer server); the
OFREP and client-API ETags are then left out when the peer does not answer them.
"""
import os
import concurrent.futures
import json
import sys
import time
import urllib.error
import urllib.request

ADMIN = {"Authorization": "Basic YWRtaW46", "Content-Type": "application/json"}


def document(n):
    features = []
    for i in range(n):
        name = f"bench.{i:05d}"
        kind = i % 5
        if kind == 0:
            strategies = [{"name": "flexibleRollout", "parameters": {
                "rollout": "50", "stickiness": "default", "groupId": name}}]
        elif kind == 1:
            strategies = [{"name": "default", "constraints": [
                {"contextName": "plan", "operator": "IN", "values": ["pro", "team"]}]}]
        elif kind == 2:
            strategies = [{"name": "userWithId", "parameters": {
                "userIds": ",".join(f"user-{j}" for j in range(i, i + 20))}}]
        elif kind == 3:
            strategies = [{"name": "flexibleRollout", "parameters": {
                "rollout": "100", "stickiness": "default", "groupId": name},
                "constraints": [{"contextName": "appName", "operator": "STR_STARTS_WITH",
                                 "values": ["web"]}]}]
        else:
            strategies = [{"name": "default"}]
        feature = {"name": name, "type": "release", "enabled": i % 10 != 9,
                   "stale": False, "strategies": strategies}
        if i % 4 == 0:
            feature["variants"] = [
                {"name": "blue", "weight": 500, "stickiness": "default",
                 "payload": {"type": "string", "value": "b"}},
                {"name": "green", "weight": 500, "stickiness": "default"}]
        features.append(feature)
    return {"version": 2, "features": features}


def request(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        if e.code == 304:
            raise
        sys.exit(f"{method} {url}: {e.code} {e.read()[:2000].decode(errors='replace')}")


def etags(url, n, out):
    token = os.environ.get("FRONTEND_TOKEN")
    auth = {"Authorization": token} if token else {}
    frontend, bulk = [], []
    for i in range(n):
        _, headers, _ = request(
            f"{url}/api/frontend?appName=web&userId=ctx-{i}&properties%5Bplan%5D=pro", headers=auth)
        frontend.append(headers["ETag"])
        if token:
            continue
        body = json.dumps({"context": {"targetingKey": f"ctx-{i}", "appName": "web"}}).encode()
        _, headers, _ = request(f"{url}/ofrep/v1/evaluate/flags", "POST", body,
                                {"Content-Type": "application/json"})
        bulk.append(headers["ETag"])
    with open(out, "w") as f:
        f.write("frontend_etags = {" + ",".join(json.dumps(e) for e in frontend) + "}\n")
        f.write("bulk_etags = {" + ",".join(json.dumps(e) for e in bulk) + "}\n")
        if not token:
            _, headers, _ = request(f"{url}/api/client/features")
            f.write(f"client_etag = {json.dumps(headers['ETag'])}\n")


def unleash_load(url, admin_token, n, start=0):
    """The toggles of document(n) into Unleash's `development` through its admin API (8 at a
    time; an admin token may not use the features-batch import), and a frontend token for it."""
    headers = {"Authorization": admin_token, "Content-Type": "application/json"}
    base = f"{url}/api/admin/projects/default/features"

    def call(method, path, body):
        request(f"{base}{path}", method, json.dumps(body).encode(), headers)

    def load(feature):
        name = feature["name"]
        environment = f"/{name}/environments/development"
        call("POST", "", {"name": name, "type": "release"})
        # Unleash 7 refuses toggle variants where strategies exist: strategy variants instead.
        variants = [dict(v, weightType="variable") for v in feature.get("variants", [])]
        for strategy in feature["strategies"]:
            if strategy["name"] == "userWithId":  # not in Unleash 7: the same as a constraint
                strategy = {"name": "default", "constraints": [
                    {"contextName": "userId", "operator": "IN",
                     "values": strategy["parameters"]["userIds"].split(",")}]}
            call("POST", f"{environment}/strategies", {
                "name": strategy["name"], "parameters": strategy.get("parameters", {}),
                "constraints": strategy.get("constraints", []), "variants": variants})
        if feature["enabled"]:
            call("POST", f"{environment}/on", {})

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(load, document(n)["features"][start:]))
    body = json.dumps({"tokenName": f"frontend-bench-{n}", "type": "frontend",
                       "environment": "development", "projects": ["*"]}).encode()
    _, _, reply = request(f"{url}/api/admin/api-tokens", "POST", body, headers)
    print(json.loads(reply)["secret"])


def wait_until(check, limit=10.0):
    """Seconds until check() is true (polling as fast as it answers); None past limit."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        if check():
            return time.perf_counter() - started
    return None


def propagation(url, n):
    writes, frontend, client = [], [], []
    for i in range(n):
        on = i % 2 == 0
        started = time.perf_counter()
        request(f"{url}/api/admin/features/bench.00009/toggle/{'on' if on else 'off'}",
                "POST", b"", ADMIN)
        writes.append((time.perf_counter() - started) * 1000)

        def frontend_holds():
            _, _, body = request(f"{url}/api/frontend?userId=x")
            return any(t["name"] == "bench.00009" for t in json.loads(body)["toggles"]) == on

        def client_holds():
            _, _, body = request(f"{url}/api/client/features/bench.00009")
            return json.loads(body)["enabled"] == on

        client.append(wait_until(client_holds))
        frontend.append(wait_until(frontend_holds))

    def summary(seconds):
        missed = sum(1 for s in seconds if s is None)
        ms = sorted(s * 1000 for s in seconds if s is not None)
        if not ms:
            return f"never ({missed} missed)"
        return f"median {ms[len(ms) // 2]:.1f} ms, max {ms[-1]:.1f} ms" + (
            f", {missed} missed" if missed else "")

    writes.sort()
    print(f"write answered: median {writes[len(writes) // 2]:.1f} ms; then visible in the "
          f"client API after {summary(client)}, in the frontend API after {summary(frontend)}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "document":
        json.dump(document(int(sys.argv[2])), sys.stdout)
    elif cmd == "etags":
        etags(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "propagation":
        propagation(sys.argv[2], int(sys.argv[3]))
    elif cmd == "unleash-load":
        unleash_load(sys.argv[2], sys.argv[3], int(sys.argv[4]),
                     int(sys.argv[5]) if len(sys.argv) > 5 else 0)
    else:
        sys.exit(__doc__)
