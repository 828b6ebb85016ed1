"""Fixtures of the admin UI's browser tests: the real `flagpole` binary on each store (the
embedded redb file, and a private redis-server), Debian's Chromium driven by Playwright, axe-core
run inside the page, and checks that every page leaves no console error.

scripts/test.sh builds the venv (tests/ui/requirements.txt) and sets FLAGPOLE_BIN and
FLAGPOLE_CHROMIUM; screenshots go to target/ui-screenshots/.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
AXE = Path(__file__).parent / "vendor" / "axe-4.14.1.min.js"
AXE_SOURCE = AXE.read_text(encoding="utf-8") + "\n;window.axe = axe; undefined;"
SHOTS = ROOT / "target" / "ui-screenshots"
ADMIN_TOKEN = "ui-test-admin-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Flagpole:
    """A flagpole process on a free port; `api` calls its admin API as `tester`."""

    def __init__(self, store: str, args: list[str], tmp: Path, redis_url: str | None = None):
        binary = os.environ.get("FLAGPOLE_BIN")
        assert binary, "set FLAGPOLE_BIN to the flagpole binary cargo built (scripts/test.sh does)"
        self.store = store
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [binary, "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(tmp / "data"),
                   "--shutdown-drain-ms", "0", "--readiness-grace-ms", "0",
                   "--refresh-interval-ms", "100", *args]
        if redis_url:
            command += ["--redis-url", redis_url]
        self.log = open(tmp / "flagpole.log", "wb")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self.token = ADMIN_TOKEN if "--auth" in args and "token" in args else None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            assert self.process.poll() is None, f"flagpole exited; see {tmp / 'flagpole.log'}"
            time.sleep(0.1)
        raise AssertionError("flagpole did not become ready")

    def api(self, method: str, path: str, body=None, expect: int | tuple[int, ...] | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json")
        if self.token:
            request.add_header("Authorization", self.token)
        else:
            request.add_header("Authorization", "Basic " + base64.b64encode(b"tester:").decode())
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        if expect is not None:
            wanted = expect if isinstance(expect, tuple) else (expect,)
            assert status in wanted, f"{method} {path}: {status} {raw[:300]!r}"
        return json.loads(raw) if raw else None

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


class Redis:
    """A private redis-server on a free loopback port, without persistence."""

    def __init__(self, tmp: Path):
        binary = shutil.which("redis-server")
        assert binary, "redis-server must be installed (scripts/test.sh installs it)"
        self.port = free_port()
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(tmp)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not come up")

    def stop(self):
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture(scope="session", params=["embedded", "redis"])
def server(request):
    """Flagpole in the insecure mode (a name signs in) on each store."""
    tmp = Path(tempfile.mkdtemp(prefix=f"flagpole-ui-{request.param}-"))
    redis = Redis(tmp) if request.param == "redis" else None
    # One attempt per delivery: a refused webhook becomes a dead letter at once.
    flagpole = Flagpole(request.param, ["--auth", "insecure", "--delivery-max-attempts", "1"], tmp,
                        redis_url=f"redis://127.0.0.1:{redis.port}/0" if redis else None)
    yield flagpole
    flagpole.stop()
    if redis:
        redis.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def token_server():
    """Flagpole in the token mode (an admin token signs in), embedded store."""
    tmp = Path(tempfile.mkdtemp(prefix="flagpole-ui-token-"))
    flagpole = Flagpole("embedded", ["--auth", "token", "--admin-token", ADMIN_TOKEN], tmp)
    yield flagpole
    flagpole.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def browser():
    chromium = os.environ.get("FLAGPOLE_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        pytest.skip(f"skipping: no Chromium at {chromium} (scripts/test.sh installs Debian's)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True)
        yield browser
        browser.close()


class Watched:
    """A page whose console errors and uncaught exceptions are collected."""

    def __init__(self, page):
        self.page = page
        self.errors: list[str] = []
        self.allowed: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("dialog", lambda d: d.accept())


@pytest.fixture
def watched(browser):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    watched = Watched(page)
    yield watched
    # A page answered with an expected status (a form re-rendered with its errors: 422) is
    # reported by Chromium as a failed load; nothing else may be.
    errors = [e for e in watched.errors
              if not any(f"status of {status}" in e for status in watched.allowed)]
    assert errors == [], f"console errors: {errors}"
    context.close()


def sign_in(page, server: Flagpole, name: str = "Ann Tester"):
    page.goto(server.url + "/ui/sign-in")
    page.get_by_label("Your name").fill(name)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Toggles", level=1).wait_for()


def audit(page, label: str):
    """axe-core (WCAG 2.0/2.1 A and AA) in the light and the dark theme, with a screenshot of
    each; fails listing the violations."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.mouse.move(0, 0)  # no hover colours
    for scheme in ("light", "dark"):
        # Reduced motion, and any transition run out: axe must see the theme's final colours.
        page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
        page.evaluate("Promise.all(document.getAnimations().map(a => a.finished))")
        # Evaluated by the driver, not as a page script: the page's policy stays in force.
        page.evaluate(AXE_SOURCE)
        result = page.evaluate(
            """async () => {
                const r = await axe.run(document, {runOnly: {type: 'tag',
                  values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
                return r.violations.map(v => ({id: v.id, help: v.help,
                  nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ' ' +
                    (n.any[0] && n.any[0].message || ''))}));
            }""")
        page.screenshot(path=str(SHOTS / f"{label}-{scheme}.png"), full_page=True)
        assert result == [], f"axe violations on {label} ({scheme}): {result}"
    page.emulate_media(color_scheme="light")
