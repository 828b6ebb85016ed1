#!/usr/bin/env python3
"""Measure how fast a write through one replica reaches another replica's client API.

Starts its own redis-server and two flagpole replicas (Redis mode) on free loopback ports,
optionally loads --toggles N toggles of the bench kit's gen_features.py, then N times: switches
a toggle through replica A's admin API and polls A's and replica B's GET /api/client/features
(gzip, If-None-Match: a 304 until the document changes) until each serves a new ETag. Prints
p50/p90/p99/max of the delay from the write's response to A (the writer) and to B serving the
new document, and of the write itself.

usage: loadtest/propagation.py [--writes 200] [--toggles N] [--bin PATH] [--redis-server PATH]
Needs a release build (default $CARGO_TARGET_DIR or /tmp/fp-release, release/flagpole) and
redis-server. Loopback only; bounded by --writes and a 5 s limit per write.
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

AUTH = "Basic " + base64.b64encode(b"bench:").decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_health(port, limit=20.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit(f"replica on port {port} did not become healthy")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR", "/tmp/fp-release")
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--bin", default=os.path.join(target, "release", "flagpole"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--toggles", type=int, default=0, help="load this many toggles first")
    ap.add_argument("--bench-dir", default=os.environ.get("BENCH_DIR", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench")))
    args = ap.parse_args()
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} not found: build with cargo build --release (CARGO_TARGET_DIR={target})")

    tmp = tempfile.mkdtemp(prefix="flagpole-propagation.")
    procs = []
    try:
        rport = free_port()
        procs.append(subprocess.Popen(
            [args.redis_server, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL))
        time.sleep(0.3)
        ports = [free_port(), free_port()]
        for p in ports:
            procs.append(subprocess.Popen(
                [args.bin, "--listen", f"127.0.0.1:{p}", "--redis-url", f"redis://127.0.0.1:{rport}",
                 "--key-prefix", "propagation"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in ports:
            wait_health(p)
        a = http.client.HTTPConnection("127.0.0.1", ports[0], timeout=5)
        b = http.client.HTTPConnection("127.0.0.1", ports[1], timeout=5)

        def call(conn, method, path, body=None, headers=None):
            h = dict(headers or {})
            if body is not None:
                h["Content-Type"] = "application/json"
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
            r = conn.getresponse()
            r.read()
            return r

        if args.toggles:
            subprocess.run([sys.executable, os.path.join(args.bench_dir, "gen_features.py"), str(args.toggles),
                            "--load", f"http://127.0.0.1:{ports[0]}", "--admin-header", f"Authorization: {AUTH}"],
                           check=True, stdout=subprocess.DEVNULL, timeout=900)
        call(a, "POST", "/api/admin/features", {"name": "propagation", "strategies": [{"name": "default"}]},
             {"Authorization": AUTH})

        def etag_of(conn):
            return call(conn, "GET", "/api/client/features", headers={"Accept-Encoding": "gzip"}).getheader("ETag")

        def changed(conn, etag):
            r = call(conn, "GET", "/api/client/features",
                     headers={"Accept-Encoding": "gzip", "If-None-Match": etag})
            return r.status == 200 and r.getheader("ETag") != etag

        # Both replicas serve the same document before each write.
        deadline = time.perf_counter() + 10
        while etag_of(a) != etag_of(b):
            if time.perf_counter() > deadline:
                sys.exit("the replicas never served the same document")
            time.sleep(0.01)
        on_a, on_b, writes = [], [], []
        for i in range(args.writes):
            etag = etag_of(b)
            state = "on" if i % 2 == 0 else "off"
            t0 = time.perf_counter()
            r = call(a, "POST", f"/api/admin/features/propagation/toggle/{state}", headers={"Authorization": AUTH})
            t1 = time.perf_counter()
            if r.status != 200:
                sys.exit(f"write failed: {r.status}")
            seen = {}
            while len(seen) < 2:
                for label, conn in (("a", a), ("b", b)):
                    if label not in seen and changed(conn, etag):
                        seen[label] = (time.perf_counter() - t1) * 1000
                if time.perf_counter() - t1 > 5:
                    sys.exit("a replica did not serve a write within 5 s")
            on_a.append(seen["a"])
            on_b.append(seen["b"])
            writes.append((t1 - t0) * 1000)

        def summary(xs):
            xs = sorted(xs)
            q = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]
            return f"p50 {statistics.median(xs):.2f} ms, p90 {q(0.9):.2f} ms, p99 {q(0.99):.2f} ms, max {xs[-1]:.2f} ms"

        print(f"{args.writes} writes through replica A (toggle on/off), Redis mode, "
              f"{args.toggles + 1} toggles")
        print(f"write latency on A:                {summary(writes)}")
        print(f"until replica A serves the write:  {summary(on_a)}")
        print(f"until replica B serves the write:  {summary(on_b)}")
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
