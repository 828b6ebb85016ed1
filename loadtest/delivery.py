#!/usr/bin/env python3
"""Addon delivery latency, throughput and correctness, for loadtest/delivery.sh. Stdlib only.

  delivery.py receive --port P
      The webhook receiver: an asyncio HTTP/1.1 server (keep-alive, Content-Length or chunked
      bodies) that answers every POST with 200 at once and keeps (arrival time, X-Flagpole-Delivery,
      body) in memory; bodies are parsed only when asked for:
        GET  /records?since=K  the records from index K: [[t_ns, delivery id, description,
                               event id, event type], ...] (t_ns: CLOCK_MONOTONIC, the clock
                               the writers read too)
        POST /reset            forget every record (after the capacity check)
      With --delay-ms D it answers a POST D ms after it arrived (the arrival time is recorded at
      once): a slow receiver, so that deliveries are in flight long enough for a kill to catch
      some. It prints "ready" once listening; it stops on SIGTERM or SIGINT.

  delivery.py run --replicas URL,URL,... --receiver URL --redis-port P --key-prefix K [options]
      The driver: creates a pool of toggles, a webhook addon (feature-created, feature-updated)
      pointing at the receiver, measures the receiver's own capacity, then runs the phases:
        steady  --rate writes/s for --seconds (PUTs with a unique description, spread over the
                replicas in turn; a replica that refuses the connection is skipped for 1 s and
                the write goes to the next one, with a new description);
        burst   --burst PUTs as fast as --burst-writers concurrent writers can.
      After a phase's last write it waits (at most --drain-timeout s) until every acknowledged
      write was delivered and the store's delivery queue is empty (XLEN of the stream + ZCARD of
      the retries, read from Redis), then --settle s more for late duplicates. Every delivery is
      matched to its write by the description in the body. With --kill-pid it SIGKILLs that
      replica halfway through the steady phase (and restarts it after --restart-after s with
      the command after "--", its pid written to --pid-file).
      Writes results.csv, writes.csv, deliveries.csv and duplicates.csv into --out and prints a
      table to stderr.
"""
import argparse
import asyncio
import csv
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

ADMIN_AUTH = "Basic YWRtaW46"  # "admin:"
HTTP_TIMEOUT = 10  # every request the driver makes is bounded by this


def log(msg):
    print(f"# {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The receiver
# ---------------------------------------------------------------------------------------------

class Receiver:
    def __init__(self, delay_ms=0):
        self.delay = delay_ms / 1000
        self.raw = []  # (t_ns, delivery id, body bytes), in arrival order
        self.parsed = []  # the same records, parsed: [t_ns, delivery, description, event, type]

    def parse_upto(self, n):
        while len(self.parsed) < n:
            t, delivery, body = self.raw[len(self.parsed)]
            desc, event, kind = "", None, ""
            try:
                doc = json.loads(body)
                event, kind = doc.get("id"), doc.get("type", "")
                desc = (doc.get("data") or {}).get("description") or ""
            except (ValueError, AttributeError):
                desc = "<unparsable>"
            self.parsed.append([t, delivery, desc, event, kind])

    async def handle(self, reader, writer):
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.LimitOverrunError:
                    break
                lines = head.decode("latin-1").split("\r\n")
                method, target = lines[0].split(" ")[:2]
                length, chunked, close, delivery = 0, False, False, ""
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    name = name.strip().lower()
                    if name == "content-length":
                        length = int(value)
                    elif name == "x-flagpole-delivery":
                        delivery = value.strip()
                    elif name == "transfer-encoding" and "chunked" in value.lower():
                        chunked = True
                    elif name == "connection" and "close" in value.lower():
                        close = True
                if chunked:
                    parts = []
                    while True:
                        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                        if size == 0:
                            await reader.readuntil(b"\r\n")
                            break
                        parts.append(await reader.readexactly(size + 2))
                    body = b"".join(p[:-2] for p in parts)
                else:
                    body = await reader.readexactly(length) if length else b""
                now = time.monotonic_ns()
                path, _, query = target.partition("?")
                status, payload = "200 OK", b""
                if method == "POST" and path not in ("/reset",):
                    self.raw.append((now, delivery, body))
                    if self.delay:
                        await asyncio.sleep(self.delay)
                elif method == "POST" and path == "/reset":
                    self.raw.clear()
                    self.parsed.clear()
                elif method == "GET" and path == "/records":
                    since = int(urllib.parse.parse_qs(query).get("since", ["0"])[0])
                    n = len(self.raw)
                    self.parse_upto(n)
                    payload = json.dumps(self.parsed[since:n]).encode()
                elif method == "GET" and path == "/count":
                    payload = json.dumps({"requests": len(self.raw)}).encode()
                else:
                    status = "404 Not Found"
                writer.write(
                    b"HTTP/1.1 " + status.encode() + b"\r\nContent-Length: "
                    + str(len(payload)).encode() + b"\r\nContent-Type: application/json\r\n\r\n"
                    + payload)
                if writer.transport.get_write_buffer_size() > 65536:
                    await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, IndexError):
            pass
        finally:
            writer.close()


async def receive_main(port, delay_ms):
    receiver = Receiver(delay_ms)
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", port, backlog=1024)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    async with server:
        await stop.wait()


# ---------------------------------------------------------------------------------------------
# Small clients: HTTP (keep-alive, bounded), Redis (RESP), /proc, Prometheus
# ---------------------------------------------------------------------------------------------

def hostport(url):
    u = urllib.parse.urlparse(url)
    return u.hostname, u.port


def request(url, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT):
    """One request on a fresh connection: (status, body bytes); raises OSError/HTTPException."""
    host, port = hostport(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        h = {"Authorization": ADMIN_AUTH}
        if body is not None:
            h["Content-Type"] = "application/json"
            body = json.dumps(body).encode() if not isinstance(body, bytes) else body
        h.update(headers or {})
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def redis_backlog(port, prefix):
    """Jobs queued or in flight (stream entries) plus jobs waiting for a retry."""
    tag = "{" + prefix + "}"

    def cmd(sock, *args):
        out = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        sock.sendall(out.encode())
        line = b""
        while not line.endswith(b"\r\n"):
            chunk = sock.recv(1)
            if not chunk:
                raise OSError("redis closed the connection")
            line += chunk
        if not line.startswith(b":"):
            raise OSError(f"redis answered {line!r}")
        return int(line[1:-2])

    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        return cmd(sock, "XLEN", f"{tag}:deliveries") + cmd(sock, "ZCARD", f"{tag}:delivery-retries")


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def delivery_counters(url):
    """flagpole_addon_deliveries_total by outcome (one replica), or None if it does not answer."""
    try:
        status, body = request(url, "GET", "/internal-backstage/prometheus", timeout=5)
    except (OSError, http.client.HTTPException):
        return None
    if status != 200:
        return None
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("flagpole_addon_deliveries_total{") or line.startswith("addon_deliveries_total{"):
            labels, _, value = line.rpartition(" ")
            outcome = labels.split('outcome="', 1)[1].split('"', 1)[0] if 'outcome="' in labels else "?"
            out[outcome] = out.get(outcome, 0) + int(float(value))
    return out


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------

class Writers:
    """Shared state of one phase's writer threads: which write comes next, which replicas are
    skipped for a while, and every write's outcome."""

    def __init__(self, urls, toggles, phase, run_id):
        self.urls, self.toggles, self.phase, self.run_id = urls, toggles, phase, run_id
        self.lock = threading.Lock()
        self.next_index = 0
        self.down_until = [0.0] * len(urls)
        self.rows = []  # dicts, one per attempt

    def take(self, total):
        with self.lock:
            if self.next_index >= total:
                return None
            i = self.next_index
            self.next_index += 1
            return i

    def write(self, conns, i):
        """PUTs write i, trying the replicas in turn from i % K; records every attempt."""
        name = self.toggles[i % len(self.toggles)]
        k = len(self.urls)
        for attempt in range(2 * k):
            r = (i + attempt) % k
            if self.down_until[r] > time.monotonic() and attempt < k:
                continue
            desc = f"{self.phase}-{self.run_id}-{i}-{attempt}"
            body = json.dumps({"name": name, "description": desc,
                               "strategies": [{"name": "default"}]}).encode()
            row = {"phase": self.phase, "write": i, "attempt": attempt, "replica": r,
                   "toggle": name, "description": desc, "status": 0, "error": ""}
            conn = conns.get(r)
            if conn is None:
                conn = conns[r] = http.client.HTTPConnection(*hostport(self.urls[r]), timeout=HTTP_TIMEOUT)
            row["t_start_ns"] = time.monotonic_ns()
            try:
                conn.request("PUT", f"/api/admin/features/{name}", body=body, headers={
                    "Authorization": ADMIN_AUTH, "Content-Type": "application/json"})
                resp = conn.getresponse()
                answer = resp.read()
                row["t_ack_ns"] = time.monotonic_ns()
                row["status"] = resp.status
                if resp.status != 200:
                    row["error"] = answer[:160].decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as e:
                row["t_ack_ns"] = time.monotonic_ns()
                row["error"] = type(e).__name__
                conn.close()
                conns.pop(r, None)
                self.down_until[r] = time.monotonic() + 1.0
            with self.lock:
                self.rows.append(row)
            if row["status"] == 200:
                return
            if row["status"] and row["status"] != 503:
                return  # a refusal: not retried (it shows as a write error)
            time.sleep(0.05)


def run_writers(writers, total, threads, rate=None):
    """Runs `threads` writer threads over `total` writes; paced at `rate`/s when given."""
    t0 = time.monotonic() + 0.05

    def loop():
        conns = {}
        while True:
            i = writers.take(total)
            if i is None:
                break
            if rate:
                delay = t0 + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            writers.write(conns, i)
        for c in conns.values():
            c.close()

    pool = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for t in pool:
        t.start()
    limit = time.monotonic() + (total / rate if rate else 0) + 300
    for t in pool:
        t.join(max(0.1, limit - time.monotonic()))
    if any(t.is_alive() for t in pool):
        raise SystemExit("writers did not finish within 300 s of their schedule")


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------

class Deliveries:
    """The receiver's records, fetched incrementally."""

    def __init__(self, url):
        self.url = url
        self.records = []

    def fetch(self):
        status, body = request(self.url, "GET", f"/records?since={len(self.records)}")
        if status != 200:
            raise SystemExit(f"receiver /records answered {status}")
        self.records.extend(json.loads(body))
        return self.records


def receiver_capacity(url, seconds, connections):
    """POSTs a delivery-sized body over `connections` keep-alive connections for `seconds`;
    requests/s. The client runs in this process on the same cores: a lower bound."""
    host, port = hostport(url)
    body = json.dumps({"id": 1, "type": "feature-updated", "createdBy": "admin",
                       "createdAt": "2026-01-01T00:00:00.000Z",
                       "data": {"name": "capacity-check", "description": "check-x" * 10,
                                "strategies": [{"name": "default", "parameters": {}}]},
                       "tags": []}).encode()
    req = (b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"X-Flagpole-Delivery: check.1\r\nContent-Length: " + str(len(body)).encode()
           + b"\r\n\r\n" + body)
    count = 0

    async def one(deadline):
        nonlocal count
        reader, writer = await asyncio.open_connection(host, port)
        while time.monotonic() < deadline:
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            n = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            if n:
                await reader.readexactly(n)
            count += 1
        writer.close()

    async def main():
        deadline = time.monotonic() + seconds
        await asyncio.wait_for(asyncio.gather(*(one(deadline) for _ in range(connections))),
                               seconds + 10)

    started = time.monotonic()
    asyncio.run(main())
    return count / (time.monotonic() - started)


def committed_events(urls, toggles, prefix):
    """The feature-updated events in the store whose description starts with `prefix`:
    description → event id (read through the first replica that answers)."""
    out = {}
    for name in toggles:
        for url in urls:
            try:
                status, body = request(url, "GET", f"/api/admin/events/{name}?limit=1000")
            except (OSError, http.client.HTTPException):
                continue
            if status == 200:
                break
        else:
            raise SystemExit(f"no replica lists the events of {name}")
        for ev in json.loads(body)["events"]:
            desc = (ev.get("data") or {}).get("description") or ""
            if ev.get("type") == "feature-updated" and desc.startswith(prefix):
                out[desc] = ev.get("id")
    return out


def kill_and_restart(args, t_kill, state):
    """The --kill-pid timer: SIGKILL at t_kill (monotonic), then the optional restart."""
    delay = t_kill - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    state["kill_ns"] = time.monotonic_ns()
    try:
        os.kill(args.kill_pid, signal.SIGKILL)
        log(f"SIGKILLed replica pid {args.kill_pid}")
    except OSError as e:
        log(f"could not kill pid {args.kill_pid}: {e}")
        return
    if args.restart_after is None or not args.restart_cmd:
        return
    time.sleep(args.restart_after)
    with open(args.restart_log, "ab") as logf:
        proc = subprocess.Popen(args.restart_cmd, stdout=logf, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    state["restarted_pid"] = proc.pid
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write(f"{proc.pid}\n")
    state["restart_ns"] = time.monotonic_ns()
    url = args.replicas.split(",")[args.kill_index]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if request(url, "GET", "/health", timeout=1)[0] == 200:
                state["healthy_ns"] = time.monotonic_ns()
                log(f"restarted replica pid {proc.pid}, healthy after "
                    f"{(state['healthy_ns'] - state['restart_ns']) / 1e9:.2f} s")
                return
        except (OSError, http.client.HTTPException):
            pass
        if proc.poll() is not None:
            log(f"the restarted replica exited with {proc.returncode}; see {args.restart_log}")
            return
        time.sleep(0.1)
    log("the restarted replica is not healthy after 30 s")


def phase_run(args, phase, urls, toggles, deliveries, pids, run_id):
    writers = Writers(urls, toggles, phase, run_id)
    counters_before = [delivery_counters(u) for u in urls]
    cpu_before = {k: cpu_seconds(p) for k, p in pids.items()}
    driver_cpu_before = time.process_time()
    kill_state = {}
    killer = None
    if phase == "steady":
        total, threads, rate = int(args.rate * args.seconds), args.writers, args.rate
        if args.kill_pid:
            t_kill = time.monotonic() + args.seconds / 2
            killer = threading.Thread(target=kill_and_restart, args=(args, t_kill, kill_state),
                                      daemon=True)
            killer.start()
    else:
        total, threads, rate = args.burst, args.burst_writers, None
    log(f"{phase}: {total} writes, {threads} writers"
        + (f", {rate:g}/s for {args.seconds:g} s" if rate else ", as fast as they can")
        + (" (a replica is SIGKILLed halfway)" if killer else ""))
    started = time.monotonic()
    run_writers(writers, total, threads, rate)
    rows = writers.rows
    acked = {r["description"]: r for r in rows if r["status"] == 200}
    log(f"{phase}: {len(acked)} writes acknowledged in {time.monotonic() - started:.1f} s; "
        f"waiting for the deliveries")
    if killer:
        killer.join(60)

    # Drain: every acknowledged write delivered and the queue empty, then --settle s more.
    prefix = f"{phase}-{run_id}-"
    deadline = time.monotonic() + args.drain_timeout
    drained = False
    backlog = None
    while time.monotonic() < deadline:
        seen = {rec[2] for rec in deliveries.fetch() if rec[2].startswith(prefix)}
        if all(d in seen for d in acked):
            try:
                backlog = redis_backlog(args.redis_port, args.key_prefix)
            except OSError as e:
                log(f"cannot read the queue's depth: {e}")
                backlog = None
            if backlog == 0:
                drained = True
                break
        time.sleep(0.1)
    if not drained:
        log(f"{phase}: not drained after {args.drain_timeout} s (queue backlog {backlog})")
    time.sleep(args.settle)
    records = [rec for rec in deliveries.fetch() if rec[2].startswith(prefix)]
    counters_after = [delivery_counters(u) for u in urls]
    cpu_after = {k: cpu_seconds(p) for k, p in pids.items()}
    driver_cpu = time.process_time() - driver_cpu_before
    try:
        backlog_end = redis_backlog(args.redis_port, args.key_prefix)
    except OSError:
        backlog_end = None
    committed = committed_events(urls, toggles, prefix)

    # Deliveries by description (first arrival) and by delivery id (duplicates).
    first_by_desc, ids_by_desc, count_by_id, first_by_id, last_by_id = {}, {}, {}, {}, {}
    for t, did, desc, event, kind in records:
        first_by_desc.setdefault(desc, t)
        last_by_id[did] = t
        ids_by_desc.setdefault(desc, set()).add(did)
        count_by_id[did] = count_by_id.get(did, 0) + 1
        first_by_id.setdefault(did, (t, desc))
    dup_ids = {d: n for d, n in count_by_id.items() if n > 1}
    duplicates = sum(n - 1 for n in dup_ids.values())
    multi_id = sum(1 for ids in ids_by_desc.values() if len(ids) > 1)
    delivered = set(first_by_desc)
    missing = sorted(set(committed) - delivered)
    missing_acked = sorted(set(acked) - delivered)
    unknown = sorted(delivered - set(committed))
    unacked_delivered = sorted(d for d in delivered if d not in acked)

    lat = sorted((first_by_desc[d] - r["t_ack_ns"]) / 1e6 for d, r in acked.items() if d in first_by_desc)
    before_ack = sum(1 for x in lat if x < 0)
    # The same from the moment the writer sent its request: an upper bound of commit → arrival.
    lat_send = sorted((first_by_desc[d] - r["t_start_ns"]) / 1e6 for d, r in acked.items() if d in first_by_desc)
    wlat = sorted((r["t_ack_ns"] - r["t_start_ns"]) / 1e6 for r in acked.values())
    first_start = min(r["t_start_ns"] for r in rows) if rows else 0
    last_ack = max((r["t_ack_ns"] for r in acked.values()), default=first_start)
    last_delivery = max((t for t, *_ in records), default=first_start)
    span = (last_delivery - first_start) / 1e9
    arrivals = sorted(first_by_desc.values())
    span99 = (percentile(arrivals, 0.99) - first_start) / 1e9 if arrivals else None
    write_span = (last_ack - first_start) / 1e9

    outcomes = {}
    partial = False
    for i, (before, after) in enumerate(zip(counters_before, counters_after)):
        # A killed replica's counters died with it (a restarted one counts from 0).
        if before is None or after is None or (killer and i == args.kill_index % len(urls)):
            partial = True
            continue
        for k, v in after.items():
            outcomes[k] = outcomes.get(k, 0) + v - before.get(k, 0)
    wall = time.monotonic() - started

    def cpu(key):
        a, b = cpu_before.get(key), cpu_after.get(key)
        return None if a is None or b is None else round(100 * (b - a) / wall, 1)

    replica_cpu = [cpu(k) for k in pids if k.startswith("replica")]
    rnd = lambda x, n=1: None if x is None else round(x, n)
    result = {
        "phase": phase + ("+kill" if killer else ""),
        "replicas": len(urls),
        "writes_planned": total,
        "writes_acked": len(acked),
        "write_errors": sum(1 for r in rows if r["status"] != 200),
        "committed": len(committed),
        "delivered": len(delivered & set(committed)),
        "requests_received": len(records),
        "duplicates": duplicates,
        "missing": len(missing),
        "missing_acked": len(missing_acked),
        "unacked_delivered": len(unacked_delivered),
        "unknown_delivered": len(unknown),
        "events_with_two_ids": multi_id,
        "before_ack": before_ack,
        "lat_p50_ms": rnd(percentile(lat, 0.50)),
        "lat_p99_ms": rnd(percentile(lat, 0.99)),
        "lat_max_ms": rnd(lat[-1] if lat else None),
        "from_send_p50_ms": rnd(percentile(lat_send, 0.50)),
        "from_send_p99_ms": rnd(percentile(lat_send, 0.99)),
        "from_send_max_ms": rnd(lat_send[-1] if lat_send else None),
        "write_p50_ms": rnd(percentile(wlat, 0.50)),
        "write_p99_ms": rnd(percentile(wlat, 0.99)),
        "span_s": rnd(span, 2),
        "delivered_per_s": rnd(len(delivered) / span if span > 0 else None),
        "span99_s": rnd(span99, 2),
        "writes_per_s": rnd(len(acked) / write_span if write_span > 0 else None),
        "deferred": outcomes.get("deferred", 0),
        "retried": outcomes.get("retried", 0),
        "drained": drained,
        "backlog_end": backlog_end,
        "outcomes": " ".join(f"{k}={v}" for k, v in sorted(outcomes.items())) + (" (partial)" if partial else ""),
        "receiver_cpu_pct": cpu("receiver"),
        "replicas_cpu_pct": None if any(c is None for c in replica_cpu) else round(sum(replica_cpu), 1),
        "redis_cpu_pct": cpu("redis"),
        "driver_cpu_pct": round(100 * driver_cpu / wall, 1),
    }
    if "kill_ns" in kill_state:
        k = kill_state["kill_ns"]
        result["kill_at_s"] = round((k - first_start) / 1e9, 2)
        result["restart_at_s"] = rnd((kill_state["restart_ns"] - first_start) / 1e9, 2) if "restart_ns" in kill_state else None
        result["write_errors_detail"] = ", ".join(
            f"{r['error'] or r['status']}@r{r['replica']}" for r in rows if r["status"] != 200)[:500]
    extra = {
        "writes": rows,
        "records": records,
        "committed": committed,
        "dup_ids": {d: (n, (first_by_id[d][0] - (kill_state.get("kill_ns") or first_start)) / 1e9,
                        (last_by_id[d] - (kill_state.get("kill_ns") or first_start)) / 1e9,
                        first_by_id[d][1]) for d, n in dup_ids.items()},
        "missing": missing,
        "first_start": first_start,
        "acked": acked,
    }
    return result, extra


def print_table(results, capacity):
    cols = [("phase", "phase"), ("writes", "writes_acked"), ("errors", "write_errors"),
            ("committed", "committed"), ("delivered", "delivered"), ("dup", "duplicates"),
            ("missing", "missing"), ("before_ack", "before_ack"), ("p50_ms", "lat_p50_ms"),
            ("p99_ms", "lat_p99_ms"), ("max_ms", "lat_max_ms"), ("span_s", "span_s"), ("t99_s", "span99_s"),
            ("events/s", "delivered_per_s"), ("writes/s", "writes_per_s"),
            ("write_p99_ms", "write_p99_ms"), ("deferred", "deferred")]
    rows = [[h for h, _ in cols]] + [["-" if r.get(k) is None else str(r.get(k)) for _, k in cols] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    out = sys.stderr
    for row in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))), file=out)
    if capacity:
        print(f"receiver capacity (its own check, client on the same cores): {capacity:.0f} requests/s",
              file=out)
    for r in results:
        notes = [f"latency from the request sent p50/p99/max {r['from_send_p50_ms']}/{r['from_send_p99_ms']}/"
                 f"{r['from_send_max_ms']} ms",
                 f"settled {r['outcomes']}",
                 f"cpu: replicas {r['replicas_cpu_pct']}%, redis {r['redis_cpu_pct']}%, "
                 f"receiver {r['receiver_cpu_pct']}%, writers {r['driver_cpu_pct']}%"]
        if r["unacked_delivered"] or r["unknown_delivered"] or r["events_with_two_ids"] or r["missing_acked"]:
            notes.append(f"unacked but delivered {r['unacked_delivered']}, unknown {r['unknown_delivered']}, "
                         f"events with two delivery ids {r['events_with_two_ids']}, acked but missing {r['missing_acked']}")
        if "kill_at_s" in r:
            notes.append(f"kill at {r['kill_at_s']} s, restart at {r['restart_at_s']} s, write errors: "
                         f"{r['write_errors_detail'] or 'none'}")
        if not r["drained"]:
            notes.append(f"NOT DRAINED (backlog at the end {r['backlog_end']})")
        print(f"{r['phase']}: " + "; ".join(notes), file=out)


def run_main(args):
    urls = args.replicas.split(",")
    run_id = f"{int(time.time()) % 100000:05d}"
    os.makedirs(args.out, exist_ok=True)
    pids = {}
    for item in filter(None, args.pids.split(",")):
        k, _, v = item.partition("=")
        pids[k] = int(v)

    # The toggles, then the addon (so that creating the toggles queues nothing).
    pool = max(args.toggles, -(-max(args.burst, int(args.rate * args.seconds)) // 900))
    toggles = [f"dl{run_id}-{k:03d}" for k in range(pool)]
    for name in toggles:
        status, body = request(urls[0], "POST", "/api/admin/features",
                               {"name": name, "strategies": [{"name": "default"}]})
        if status != 200:
            raise SystemExit(f"creating toggle {name}: {status} {body[:200]!r}")
    capacity = None
    if args.check_seconds > 0:
        capacity = receiver_capacity(args.receiver, args.check_seconds, args.check_connections)
        log(f"receiver capacity: {capacity:.0f} requests/s ({args.check_connections} connections, "
            f"a Python client on the same cores: a lower bound)")
        request(args.receiver, "POST", "/reset", b"")
    addon = {"provider": "webhook", "enabled": True,
             "parameters": {"url": args.receiver.rstrip("/") + "/hook"},
             "events": ["feature-created", "feature-updated"]}
    status, body = request(urls[0], "POST", "/api/admin/addons", addon)
    if status not in (200, 201):
        raise SystemExit(f"creating the addon: {status} {body[:300]!r}")
    addon_id = json.loads(body).get("id")
    log(f"webhook addon {addon_id} -> {addon['parameters']['url']}; {pool} toggles; run id {run_id}")

    deliveries = Deliveries(args.receiver)
    phases = ["steady"] + (["burst"] if args.burst > 0 else [])
    results, extras = [], []
    for phase in phases:
        res, extra = phase_run(args, phase, urls, toggles, deliveries, pids, run_id)
        results.append(res)
        extras.append(extra)
        log(f"{res['phase']}: " + ", ".join(f"{k}={v}" for k, v in res.items()
                                            if k not in ("phase", "write_errors_detail")))
        if args.kill_pid and phase == "steady":
            args.kill_pid = None  # once
            pids.pop(f"replica-{args.kill_index % len(urls) + 1}", None)
            if args.pid_file and os.path.exists(args.pid_file):
                with open(args.pid_file) as f:
                    pids["replica-restarted"] = int(f.read())

    # Dead letters of the addon (should be none).
    dead = None
    for url in urls:
        try:
            status, body = request(url, "GET", f"/api/admin/addons/{addon_id}/deliveries/dead")
            if status == 200:
                doc = json.loads(body)
                dead = len(doc.get("deadLetters", doc.get("deliveries", doc if isinstance(doc, list) else [])))
                break
        except (OSError, http.client.HTTPException, ValueError):
            continue

    keys = list(results[0].keys())
    for r in results[1:]:
        keys += [k for k in r if k not in keys]
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys + ["receiver_capacity_rps", "dead_letters"])
        w.writeheader()
        for r in results:
            w.writerow({**r, "receiver_capacity_rps": round(capacity) if capacity else "",
                        "dead_letters": dead})
    with open(os.path.join(args.out, "writes.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["phase", "write", "attempt", "replica", "toggle", "description", "status",
                    "error", "start_s", "ack_s"])
        for ex in extras:
            for r in ex["writes"]:
                w.writerow([r["phase"], r["write"], r["attempt"], r["replica"], r["toggle"],
                            r["description"], r["status"], r["error"],
                            f"{(r['t_start_ns'] - ex['first_start']) / 1e9:.6f}",
                            f"{(r['t_ack_ns'] - ex['first_start']) / 1e9:.6f}"])
    with open(os.path.join(args.out, "deliveries.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["phase", "arrival_s", "delivery_id", "description", "event_id", "type",
                    "acked", "after_ack_ms", "after_send_ms"])
        for res, ex in zip(results, extras):
            for t, did, desc, event, kind in ex["records"]:
                a = ex["acked"].get(desc)
                w.writerow([res["phase"], f"{(t - ex['first_start']) / 1e9:.6f}", did, desc, event,
                            kind, int(a is not None),
                            f"{(t - a['t_ack_ns']) / 1e6:.3f}" if a else "",
                            f"{(t - a['t_start_ns']) / 1e6:.3f}" if a else ""])
    with open(os.path.join(args.out, "duplicates.csv"), "w", newline="") as f:
        w = csv.writer(f)
        # Times in s after the kill (a phase without one: after its first write).
        w.writerow(["phase", "delivery_id", "copies", "first_arrival_s", "last_arrival_s", "description"])
        for res, ex in zip(results, extras):
            for did, (n, first, last, desc) in sorted(ex["dup_ids"].items()):
                w.writerow([res["phase"], did, n, f"{first:.3f}", f"{last:.3f}", desc])
            for desc in ex["missing"]:
                w.writerow([res["phase"], "MISSING", 0, "", "", desc])
    print_table(results, capacity)
    if dead:
        log(f"dead letters of the addon: {dead}")
    bad = [r for r in results if r["missing"] or not r["drained"]
           or (r["duplicates"] and "+kill" not in r["phase"])]
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("receive")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--delay-ms", type=float, default=0)
    d = sub.add_parser("run")
    d.add_argument("--replicas", required=True, help="comma-separated base URLs")
    d.add_argument("--receiver", required=True, help="the receiver's base URL")
    d.add_argument("--redis-port", type=int, required=True)
    d.add_argument("--key-prefix", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--rate", type=float, default=20)
    d.add_argument("--seconds", type=float, default=30)
    d.add_argument("--writers", type=int, default=8, help="threads of the steady phase")
    d.add_argument("--burst", type=int, default=1000, help="writes of the burst phase (0: none)")
    d.add_argument("--burst-writers", type=int, default=16)
    d.add_argument("--toggles", type=int, default=64, help="toggles the writes go round")
    d.add_argument("--drain-timeout", type=float, default=60)
    d.add_argument("--settle", type=float, default=1.0)
    d.add_argument("--check-seconds", type=float, default=2)
    d.add_argument("--check-connections", type=int, default=16)
    d.add_argument("--pids", default="", help="name=pid,... for CPU use (receiver, redis, replica-N)")
    d.add_argument("--kill-pid", type=int)
    d.add_argument("--kill-index", type=int, default=-1, help="which replica URL the pid serves")
    d.add_argument("--restart-after", type=float)
    d.add_argument("--restart-log", default="/dev/null")
    d.add_argument("--pid-file")
    d.add_argument("restart_cmd", nargs="*", help="after --: the command that restarts the replica")
    args = p.parse_args()
    if args.cmd == "receive":
        asyncio.run(receive_main(args.port, args.delay_ms))
        return 0
    return run_main(args)


if __name__ == "__main__":
    sys.exit(main())
