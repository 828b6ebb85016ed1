"""Evaluates the @unleash/client-specification cases with the real Python Unleash SDK
(UnleashClient, pinned in requirements.txt), for tests/it/client_spec.

Usage: python_client_spec.py < INPUT

INPUT (JSON on standard input) lists the specification files, each served at its own URL:

  {"files": [{"id": FILE, "url": API_URL, "authorization": HEADER|null,
              "cases": [{"kind": "enabled"|"variant", "toggle": NAME, "context": {...}}]}]}

For each file in turn, a fresh client (its own empty cache directory, so nothing carries over
from one file to the next; no registration, no metrics) fetches from API_URL, and once it has
fetched, every case is evaluated with is_enabled(toggle, context) or get_variant(toggle,
context), the context passed as the file writes it. Prints one JSON line:

  {"sdk": "python", "files": [{"id": FILE, "error": WHY (only when the file failed as a whole),
    "results": [{"enabled": bool} | {"variant": {...}} | {"error": WHY}, ...]}]}

Comparing is the caller's job. Exits 1 with the reason on stderr on bad input, or after 50 s
in all; a file whose document does not arrive within 10 s is reported as failed.
"""

import json
import logging
import os
import shutil
import sys
import tempfile
import threading

DEADLINE_S = 50.0
FETCH_DEADLINE_S = 10.0


def fail(message):
    print(f"python_client_spec: {message}", file=sys.stderr, flush=True)
    # os._exit: the SDK's scheduler threads must not keep a failed run alive.
    os._exit(1)


def run_file(file):
    # pylint: disable=import-outside-toplevel
    from UnleashClient import UnleashClient
    from UnleashClient.events import UnleashEventType
    from UnleashClient.utils import InstanceAllowType

    fetched = threading.Event()

    def on_event(event):
        if event.event_type == UnleashEventType.FETCHED:
            fetched.set()

    cache_dir = tempfile.mkdtemp(prefix="flagpole-python-client-spec-")
    auth = file.get("authorization")
    client = UnleashClient(
        url=file["url"],
        app_name="flagpole-client-spec",
        instance_id=f"python-client-spec-{file['id']}",
        # One fetch is all a file needs; the client is destroyed long before a second.
        refresh_interval=60,
        request_timeout=5,
        request_retries=0,
        disable_metrics=True,
        disable_registration=True,
        custom_headers={"Authorization": auth} if auth else None,
        cache_directory=cache_dir,
        multiple_instance_mode=InstanceAllowType.SILENTLY_ALLOW,
        event_callback=on_event,
    )
    try:
        client.initialize_client()
        if not fetched.wait(FETCH_DEADLINE_S):
            return {"id": file["id"], "error": f"no fetch within {FETCH_DEADLINE_S:.0f} s"}
        results = []
        for case in file["cases"]:
            context = case.get("context") or {}
            try:
                if case["kind"] == "variant":
                    results.append({"variant": client.get_variant(case["toggle"], context)})
                else:
                    results.append({"enabled": client.is_enabled(case["toggle"], context)})
            except Exception as err:  # pylint: disable=broad-except
                results.append({"error": f"{type(err).__name__}: {err}"})
        return {"id": file["id"], "results": results}
    finally:
        client.destroy()
        shutil.rmtree(cache_dir, ignore_errors=True)


def main():
    # Whatever hangs (the SDK's threads included), the run ends after DEADLINE_S.
    watchdog = threading.Timer(DEADLINE_S, fail, [f"gave up after {DEADLINE_S:.0f} s"])
    watchdog.daemon = True
    watchdog.start()
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    try:
        files = json.load(sys.stdin)["files"]
    except (ValueError, KeyError, TypeError) as err:
        fail(f"cannot read the input: {err!r}")
    report = {"sdk": "python", "files": [run_file(file) for file in files]}
    print(json.dumps(report), flush=True)
    watchdog.cancel()
    # The SDK's scheduler threads are shut down, but a stray one must not delay the exit.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
