#!/usr/bin/env python3
"""Times a state import of a large document while SDK-like readers keep polling the client API,
for loadtest/import.sh.

  import.py BASE_URL DOCUMENT --toggles N [--readers R] [--baseline S] [--admin-header H]

1. R readers poll GET /api/client/features (gzip, keep-alive) for S seconds: the baseline.
2. A dry run of the document is timed (nothing written).
3. The import is timed, while the readers keep polling, until /health shows that the client
   API serves the new version; the readers go on for one more second.
4. The same import again is timed (a no-op: nothing changes).
Every response is classified by its ETag: a reader must see the old document or the new one,
never a part (the new one is checked to hold N toggles). Prints one JSON line.
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse


def connect(base):
    u = urllib.parse.urlparse(base)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)


class Readers:
    def __init__(self, base, count):
        self.base, self.count = base, count
        self.lock = threading.Lock()
        self.samples = []  # (phase, seconds, etag, status)
        self.phase = "baseline"
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(count)]

    def run(self):
        conn = connect(self.base)
        while not self.stop.is_set():
            started = time.perf_counter()
            try:
                conn.request("GET", "/api/client/features", headers={"Accept-Encoding": "gzip"})
                resp = conn.getresponse()
                resp.read()
                status, etag = resp.status, resp.getheader("ETag")
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = connect(self.base)
                status, etag = 0, None
            with self.lock:
                self.samples.append((self.phase, time.perf_counter() - started, etag, status))

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()

    def stats(self, phase, seconds):
        rows = [s for s in self.samples if s[0] == phase]
        lat = sorted(s[1] * 1000 for s in rows)
        p = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 2) if lat else None
        return {
            "requests": len(rows),
            "per_s": round(len(rows) / seconds, 1) if seconds else None,
            "p50_ms": p(0.50),
            "p99_ms": p(0.99),
            "max_ms": round(lat[-1], 2) if lat else None,
            "errors": sum(1 for s in rows if s[3] != 200),
            "etags": sorted({s[2] for s in rows if s[2]}),
        }


def request(base, method, path, body=None, headers=None):
    conn = connect(base)
    started = time.perf_counter()
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    return resp.status, time.perf_counter() - started, data, resp


def health(base):
    status, _, data, _ = request(base, "GET", "/health")
    return json.loads(data) if status == 200 else {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("document")
    ap.add_argument("--toggles", type=int, required=True)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--baseline", type=float, default=5.0)
    ap.add_argument("--admin-header", default="Authorization: Basic YWRtaW46")
    args = ap.parse_args()
    name, value = (x.strip() for x in args.admin_header.split(":", 1))
    admin = {name: value, "Content-Type": "application/json"}
    with open(args.document, "rb") as f:
        body = f.read()

    readers = Readers(args.base, args.readers)
    readers.start()
    time.sleep(args.baseline)

    status, dry_s, data, _ = request(args.base, "POST", "/api/admin/state/import?dryRun=true", body, admin)
    if status != 200:
        sys.exit(f"dry run answered {status}: {data[:500]!r}")

    before = health(args.base)
    readers.phase = "import"
    import_started = time.perf_counter()
    status, import_s, data, _ = request(args.base, "POST", "/api/admin/state/import", body, admin)
    if status != 202:
        sys.exit(f"import answered {status}: {data[:500]!r}")
    committed = health(args.base)
    while True:
        h = health(args.base)
        if h.get("clientVersion", 0) >= committed.get("version", 0):
            break
        if time.perf_counter() - import_started > 120:
            sys.exit("the client API never served the imported version")
        time.sleep(0.005)
    served_s = time.perf_counter() - import_started
    time.sleep(1.0)
    readers.finish()
    during = time.perf_counter() - import_started

    status, again_s, data, _ = request(args.base, "POST", "/api/admin/state/import", body, admin)
    again = json.loads(data)
    if status != 202 or again.get("changed"):
        sys.exit(f"the second import changed something or failed ({status}): {data[:500]!r}")

    # The document the readers saw last must hold every toggle.
    status, _, data, resp = request(args.base, "GET", "/api/client/features")
    features = len(json.loads(data)["features"])
    new_etag = resp.getheader("ETag")
    seen = readers.stats("import", during)
    old = readers.stats("baseline", args.baseline)
    partial = [e for e in seen["etags"] if e not in old["etags"] and e != new_etag]
    print(json.dumps({
        "toggles": args.toggles,
        "document_mib": round(len(body) / 2**20, 2),
        "dry_run_s": round(dry_s, 3),
        "import_s": round(import_s, 3),
        "served_after_s": round(served_s, 3),
        "noop_import_s": round(again_s, 3),
        "versions": [before.get("version"), committed.get("version")],
        "served_toggles": features,
        "partial_documents_seen": len(partial),
        "reads_baseline": old,
        "reads_during_import": seen,
    }))
    if features != args.toggles or partial:
        sys.exit("a reader saw a partial document, or the import is incomplete")


if __name__ == "__main__":
    main()
