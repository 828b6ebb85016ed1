#!/usr/bin/env python3
"""Streaming benchmark: one process holding many SSE connections to /api/client/streaming.

Usage:
  python3 loadtest/streaming.py --base http://127.0.0.1:4242 --connections 15000 \
      [--sources 4] [--pid SERVER_PID] [--writes 1] [--rate 0] [--seconds 10] [--token T]

Opens --connections streams (spread over --sources loopback addresses, 127.0.0.2 and up:
connects from one address slow down past about 15,000), waits until every stream has its
hydration, then:
- prints the server's resident memory per open stream (with --pid: VmRSS before and after,
  read from /proc), and
- with --rate 0: makes --writes single writes (toggling `bench.stream`) one after another and,
  for each, prints the time from the write's acknowledgement until 50 %, 99 % and 100 % of the
  streams have its event;
- with --rate R: makes R writes a second for --seconds and checks that every stream got every
  event, in order (ids ascending, none missing).
Prints one JSON line per measurement. Python 3.8+, standard library only.
"""

import argparse
import asyncio
import base64
import json
import time
import urllib.request

TOGGLE = "bench.stream"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Stream:
    """One SSE connection: the ids it received and when."""

    def __init__(self):
        self.ids = []
        self.arrivals = {}
        self.hydrated = asyncio.Event()

    async def run(self, host, port, source, token):
        reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
        auth = f"Authorization: {token}\r\n" if token else ""
        writer.write(
            (
                f"GET /api/client/streaming HTTP/1.1\r\nHost: {host}\r\n"
                f"Accept: text/event-stream\r\n{auth}\r\n"
            ).encode()
        )
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"stream refused: {status!r}")
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        # Chunked transfer: the chunk framing lines are skipped, SSE lines are read as they come.
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b"id: "):
                event_id = int(line[4:])
                self.ids.append(event_id)
                self.arrivals[event_id] = time.monotonic()
                self.hydrated.set()


def admin(base, method, path, body=None):
    request = urllib.request.Request(base + path, method=method)
    request.add_header("Authorization", "Basic " + base64.b64encode(b"admin:").decode())
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, data) as response:
        return response.status


def flip(base, on):
    admin(base, "POST", f"/api/admin/features/{TOGGLE}/toggle/{'on' if on else 'off'}")
    return time.monotonic()


def percentile(sorted_values, fraction):
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * len(sorted_values))) - 1))
    return sorted_values[index]


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:4242")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--sources", type=int, default=4)
    parser.add_argument("--pid", type=int)
    parser.add_argument("--writes", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--token")
    args = parser.parse_args()
    host, port = args.base.split("//")[1].split(":")
    port = int(port)
    try:
        admin(args.base, "POST", "/api/admin/features", {"name": TOGGLE, "strategies": [{"name": "default"}]})
    except Exception:
        pass  # already there
    before = rss_kib(args.pid) if args.pid else None
    streams = [Stream() for _ in range(args.connections)]
    sources = [f"127.0.0.{2 + i}" for i in range(args.sources)]
    started = time.monotonic()
    tasks = []
    for i, stream in enumerate(streams):
        tasks.append(asyncio.ensure_future(stream.run(host, port, sources[i % len(sources)], args.token)))
        if i % 500 == 499:
            await asyncio.sleep(0.05)
    await asyncio.wait_for(asyncio.gather(*(s.hydrated.wait() for s in streams)), 300)
    connected_s = time.monotonic() - started
    held = {"connections": args.connections, "connectSeconds": round(connected_s, 2)}
    if args.pid:
        await asyncio.sleep(2)
        after = rss_kib(args.pid)
        held.update(rssBeforeKiB=before, rssAfterKiB=after,
                    kibPerConnection=round((after - before) / args.connections, 2))
    print(json.dumps({"measure": "held", **held}), flush=True)

    # The toggle is created off: the first write switches it on.
    on = True
    if args.rate <= 0:
        for _ in range(args.writes):
            marks = [len(s.ids) for s in streams]
            acknowledged = flip(args.base, on)
            on = not on
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(len(s.ids) == m for s, m in zip(streams, marks)):
                await asyncio.sleep(0.01)
            delays = sorted(
                (s.arrivals[s.ids[m]] - acknowledged) * 1000 for s, m in zip(streams, marks) if len(s.ids) > m
            )
            if not delays:
                print(json.dumps({"measure": "one-write", "received": 0, "of": len(streams)}), flush=True)
                continue
            print(json.dumps({
                "measure": "one-write", "received": len(delays), "of": len(streams),
                "p50Ms": round(percentile(delays, 0.5), 1), "p99Ms": round(percentile(delays, 0.99), 1),
                "maxMs": round(delays[-1], 1),
            }), flush=True)
            await asyncio.sleep(0.5)
    else:
        marks = [len(s.ids) for s in streams]
        writes = int(args.rate * args.seconds)
        for i in range(writes):
            target = time.monotonic() + 1 / args.rate
            await asyncio.get_event_loop().run_in_executor(None, flip, args.base, on)
            on = not on
            await asyncio.sleep(max(0, target - time.monotonic()))
        await asyncio.sleep(3)
        complete = sum(1 for s, m in zip(streams, marks) if len(s.ids) - m == writes)
        ordered = all(all(a < b for a, b in zip(s.ids, s.ids[1:])) for s in streams)
        print(json.dumps({"measure": "rate", "writesPerSecond": args.rate, "writes": writes,
                          "streamsWithEveryEvent": complete, "of": len(streams),
                          "inOrder": ordered}), flush=True)
    for task in tasks:
        task.cancel()


if __name__ == "__main__":
    asyncio.run(main())
