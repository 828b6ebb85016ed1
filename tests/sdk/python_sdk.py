"""Drives the real Python Unleash SDK (UnleashClient, pinned in requirements.txt) against a
running Flagpole, for tests/it/sdks.rs.

Usage: python_sdk.py BASE_URL APP_NAME

Expects the toggles `sdk.on` (enabled, default strategy), `sdk.off` (disabled) and
`sdk.variants` (enabled, variants `blue` and `green`). Connects to BASE_URL/api with 1 s refresh
and metrics intervals, waits for the toggles, evaluates them, checks the answers, waits until
the server has acknowledged (202) metrics covering every evaluation, stops the client (which
flushes what is left) and prints one JSON line:

  {"sdk": "python", "appName", "instanceId", "sdkVersion", "strategies": [registered names],
   "registered": true, "metricsSent": n, "sentToggles": {name: {yes, no, variants}},
   "toggles": {"sdk.on": {"yes", "no"}, "sdk.off": {...}, "sdk.variants": {"yes", "no", "variants": {}}}}

Exits 1 (with the reason on stderr) when an answer is wrong or the server does not take the
registration or the metrics within the deadline.
"""

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time

from UnleashClient import UnleashClient

ON, OFF, VARIANTS = "sdk.on", "sdk.off", "sdk.variants"
N_ON, N_OFF, N_VARIANTS = 7, 5, 9
VARIANT_NAMES = {"blue", "green"}
DEADLINE_S = 30.0


class AlwaysOn:
    """A custom strategy, so that the registration lists a strategy name (the Python SDK
    registers the names of its custom strategies only)."""

    def apply(self, parameters, context):  # pylint: disable=unused-argument
        return True


class Wire:
    """Records what the SDK sent and what the server answered, through the `requests`
    response hook that the SDK passes on with `custom_options`."""

    def __init__(self):
        self.lock = threading.Lock()
        self.register_bodies = []
        self.register_statuses = []
        self.metrics_sent = 0
        self.metrics_failed = []
        self.sent = {}

    def hook(self, resp, *args, **kwargs):  # pylint: disable=unused-argument
        request = resp.request
        if request.method != "POST":
            return resp
        body = request.body
        if isinstance(body, bytes):
            body = body.decode("utf-8")
        payload = json.loads(body) if body else {}
        with self.lock:
            if request.url.endswith("/client/register"):
                self.register_statuses.append(resp.status_code)
                self.register_bodies.append(payload)
            elif request.url.endswith("/client/metrics"):
                if resp.status_code == 202:
                    self.metrics_sent += 1
                    toggles = ((payload.get("bucket") or {}).get("toggles")) or {}
                    for name, counts in toggles.items():
                        total = self.sent.setdefault(name, {"yes": 0, "no": 0, "variants": {}})
                        total["yes"] += counts.get("yes", 0)
                        total["no"] += counts.get("no", 0)
                        for variant, n in (counts.get("variants") or {}).items():
                            total["variants"][variant] = total["variants"].get(variant, 0) + n
                else:
                    self.metrics_failed.append(resp.status_code)
        return resp

    def snapshot(self):
        with self.lock:
            return json.loads(json.dumps(self.sent))


def fail(message):
    print(f"python_sdk: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def wait_for(what, check, deadline):
    while not check():
        if time.monotonic() > deadline:
            fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def main():
    if len(sys.argv) != 3:
        fail("usage: python_sdk.py BASE_URL APP_NAME")
    base, app = sys.argv[1].rstrip("/"), sys.argv[2]
    deadline = time.monotonic() + DEADLINE_S
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    wire = Wire()
    cache_dir = tempfile.mkdtemp(prefix="flagpole-python-sdk-")
    instance_id = f"{app}-python-{os.getpid()}"
    client = UnleashClient(
        url=f"{base}/api",
        app_name=app,
        instance_id=instance_id,
        refresh_interval=1,
        metrics_interval=1,
        request_timeout=5,
        request_retries=0,
        cache_directory=cache_dir,
        custom_strategies={"flagpoleSdkTest": AlwaysOn()},
        custom_options={"hooks": {"response": [wire.hook]}},
    )
    try:
        client.initialize_client()
        wait_for(
            "the toggles",
            lambda: {ON, OFF, VARIANTS} <= set(client.feature_definitions()),
            deadline,
        )

        expected = {
            ON: {"yes": N_ON, "no": 0},
            OFF: {"yes": 0, "no": N_OFF},
            VARIANTS: {"yes": N_VARIANTS, "no": 0, "variants": {}},
        }
        for _ in range(N_ON):
            if client.is_enabled(ON) is not True:
                fail(f"{ON} evaluated to off")
        for _ in range(N_OFF):
            if client.is_enabled(OFF) is not False:
                fail(f"{OFF} evaluated to on")
        for i in range(N_VARIANTS):
            variant = client.get_variant(VARIANTS, {"userId": f"user-{i}"})
            if not variant.get("enabled") or variant.get("name") not in VARIANT_NAMES:
                fail(f"{VARIANTS} gave the variant {variant}")
            if variant.get("feature_enabled") is False:
                fail(f"{VARIANTS} gave a variant of a disabled toggle: {variant}")
            counts = expected[VARIANTS]["variants"]
            counts[variant["name"]] = counts.get(variant["name"], 0) + 1

        def all_sent():
            sent = wire.snapshot()
            return all(
                sent.get(name, {}).get("yes", 0) >= want["yes"]
                and sent.get(name, {}).get("no", 0) >= want["no"]
                for name, want in expected.items()
            )

        wait_for("metrics covering every evaluation to be accepted", all_sent, deadline)
    finally:
        client.destroy()
        shutil.rmtree(cache_dir, ignore_errors=True)

    sent = wire.snapshot()
    for name, want in expected.items():
        got = sent.get(name, {})
        if got.get("yes") != want["yes"] or got.get("no") != want["no"]:
            fail(f"sent {got} for {name}, evaluated {want}")
    if not wire.register_statuses or any(s not in (200, 202) for s in wire.register_statuses):
        fail(f"registration answered {wire.register_statuses}")
    if wire.metrics_failed:
        fail(f"metrics answered {wire.metrics_failed}")
    registration = wire.register_bodies[0]
    print(
        json.dumps(
            {
                "sdk": "python",
                "appName": app,
                "instanceId": instance_id,
                "sdkVersion": registration.get("sdkVersion"),
                "strategies": registration.get("strategies"),
                "registered": True,
                "metricsSent": wire.metrics_sent,
                "sentToggles": sent,
                "toggles": expected,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
