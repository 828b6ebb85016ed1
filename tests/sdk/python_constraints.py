"""Evaluates strategy-constraint cases with the real Python Unleash SDK (UnleashClient, pinned
in requirements.txt) against a running Flagpole, for tests/it/constraint_sdks.rs.

Usage: python_constraints.py BASE_URL [CASES_FILE | -]

CASES_FILE (or standard input when it is `-` or missing) holds a JSON list of cases:

  [{"toggle": NAME, "context": {"userId", "environment", "currentTime", "properties": {}},
    "expected": true|false (optional)}, ...]

Connects to BASE_URL/api (no registration, no metrics), waits until the SDK has fetched every
toggle the cases name, evaluates each case with `is_enabled(toggle, context)` and prints one
JSON line:

  {"sdk": "python", "answers": [bool per case, in order],
   "mismatches": [toggle names whose answer differs from "expected"]}

It only reports: comparing is the caller's job ("mismatches" is there for runs by hand). Exits 1
with the reason on stderr on bad input, when the toggles do not arrive, or after 30 s in all.
"""

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time

DEADLINE_S = 30.0
# Waiting for the toggles ends first, so that its failure names the missing ones.
FETCH_DEADLINE_S = 25.0


def fail(message):
    print(f"python_constraints: {message}", file=sys.stderr, flush=True)
    # os._exit: the SDK's scheduler threads must not keep a failed run alive.
    os._exit(1)


def read_cases(source):
    try:
        if source in (None, "-"):
            cases = json.load(sys.stdin)
        else:
            with open(source, encoding="utf-8") as file:
                cases = json.load(file)
    except (OSError, ValueError) as err:
        fail(f"cannot read the cases: {err}")
    if not isinstance(cases, list) or not cases:
        fail("the cases must be a non-empty JSON list")
    for i, case in enumerate(cases):
        if not isinstance(case, dict) or not isinstance(case.get("toggle"), str):
            fail(f"case {i} has no toggle name: {case!r}")
        if not isinstance(case.get("context", {}), dict):
            fail(f"case {i} has a context that is not an object: {case!r}")
        if "expected" in case and not isinstance(case["expected"], bool):
            fail(f"case {i} has an expected answer that is not a boolean: {case!r}")
    return cases


def main():
    if len(sys.argv) not in (2, 3):
        fail("usage: python_constraints.py BASE_URL [CASES_FILE | -]")
    base = sys.argv[1].rstrip("/")
    cases = read_cases(sys.argv[2] if len(sys.argv) == 3 else None)
    fetch_deadline = time.monotonic() + FETCH_DEADLINE_S
    # Whatever hangs (the SDK's threads included), the run ends after DEADLINE_S.
    watchdog = threading.Timer(DEADLINE_S, fail, [f"gave up after {DEADLINE_S:.0f} s"])
    watchdog.daemon = True
    watchdog.start()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    from UnleashClient import UnleashClient  # pylint: disable=import-outside-toplevel

    cache_dir = tempfile.mkdtemp(prefix="flagpole-python-constraints-")
    client = UnleashClient(
        url=f"{base}/api",
        app_name="flagpole-constraint-cases",
        instance_id=f"python-constraints-{os.getpid()}",
        refresh_interval=1,
        request_timeout=5,
        request_retries=0,
        disable_metrics=True,
        disable_registration=True,
        cache_directory=cache_dir,
    )
    try:
        client.initialize_client()
        wanted = {case["toggle"] for case in cases}
        while not wanted <= set(client.feature_definitions()):
            if time.monotonic() > fetch_deadline:
                missing = sorted(wanted - set(client.feature_definitions()))
                fail(f"timed out waiting for the toggles; missing {missing}")
            time.sleep(0.05)

        answers = []
        for case in cases:
            # The fallback only answers for a toggle the SDK does not know, which must not happen.
            def unknown(name, _context):
                fail(f"the SDK does not know the toggle {name}")

            answer = client.is_enabled(case["toggle"], case.get("context") or {}, unknown)
            if not isinstance(answer, bool):
                fail(f"{case['toggle']} evaluated to {answer!r}")
            answers.append(answer)
    finally:
        client.destroy()
        shutil.rmtree(cache_dir, ignore_errors=True)

    mismatches = [
        case["toggle"]
        for case, answer in zip(cases, answers)
        if "expected" in case and case["expected"] != answer
    ]
    print(
        json.dumps({"sdk": "python", "answers": answers, "mismatches": mismatches}),
        flush=True,
    )
    watchdog.cancel()


if __name__ == "__main__":
    main()
