"""Drives the real Python Unleash SDK (UnleashClient, pinned in requirements.txt) in streaming
mode against a running Flagpole, for tests/it/streaming/sdks.rs.

Usage: python python_streaming.py BASE_URL TOGGLE

Connects to BASE_URL/api with experimental_mode={"type": "streaming"} and polling set to an
hour (so only the stream can bring changes), waits until TOGGLE is enabled, prints `ready`,
then waits until the stream turns it off and prints one JSON line:
{"sdk": "python", "disabledAfterMs": n}. Exits 1 (reason on stderr) when either does not happen
within 20 s.
"""

import json
import sys
import time

from UnleashClient import UnleashClient

DEADLINE_S = 20.0


def fail(message):
    sys.stderr.write(f"python_streaming: {message}\n")
    sys.exit(1)


def wait_for(what, check, deadline):
    while not check():
        if time.monotonic() > deadline:
            fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def main():
    if len(sys.argv) != 3:
        fail("usage: python python_streaming.py BASE_URL TOGGLE")
    base = sys.argv[1].rstrip("/")
    toggle = sys.argv[2]
    client = UnleashClient(
        url=f"{base}/api",
        app_name="flagpole-streaming-test",
        refresh_interval=3600,
        disable_metrics=True,
        disable_registration=True,
        experimental_mode={"type": "streaming"},
    )
    client.initialize_client()
    try:
        wait_for(f"{toggle} enabled", lambda: client.is_enabled(toggle), time.monotonic() + DEADLINE_S)
        print("ready", flush=True)
        started = time.monotonic()
        wait_for(f"{toggle} turned off", lambda: not client.is_enabled(toggle), started + DEADLINE_S)
        elapsed_ms = int((time.monotonic() - started) * 1000)
    finally:
        client.destroy()
    print(json.dumps({"sdk": "python", "disabledAfterMs": elapsed_ms}), flush=True)


if __name__ == "__main__":
    main()
