"""The alert rules (deploy/prometheus/rules.yaml) and the Grafana dashboard
(deploy/grafana/flagpole.json): their structure, promtool, and every metric and label they
name present in a real flagpole's /internal-backstage/prometheus after some traffic."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import time

import pytest

from conftest import ROOT, RedisServer, request, require_venv, wait_for

require_venv()

import yaml  # noqa: E402

RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "rules.test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "flagpole.json"
# Labels Prometheus adds when it scrapes (not in the exposition).
TARGET_LABELS = {"namespace", "job", "instance", "pod", "le"}
DURATION = re.compile(r"^\d+[smhd]$")


def rule_expressions() -> list[str]:
    return [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_expressions() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def selectors(expression: str):
    """(metric, {label: (operator, value)}) for every flagpole series an expression selects."""
    for match in re.finditer(r"\b(flagpole_[a-z0-9_]+)\b(\{([^}]*)\})?", expression):
        matchers = {}
        for label, operator, value in re.findall(
            r'([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"', match.group(3) or ""
        ):
            matchers[label] = (operator, value)
        yield match.group(1), matchers


def test_rules_are_well_formed():
    document = yaml.safe_load(RULES.read_text())
    names = set()
    for group in document["groups"]:
        assert group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert rule["alert"].startswith("Flagpole") and rule["alert"] not in names
            names.add(rule["alert"])
            assert rule["labels"]["severity"] in {"critical", "warning"}
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
            assert DURATION.match(rule.get("for", "0m")), rule.get("for")
            assert rule["expr"].count("(") == rule["expr"].count(")")
            assert any(True for _ in selectors(rule["expr"])), rule["alert"]
    # What issue 11 asks the alerts to cover.
    assert {"FlagpoleStoreUnreachable", "FlagpoleConfigurationVersionsDiverge",
            "FlagpoleHighErrorRatio", "FlagpoleDeliveryBacklogGrowing",
            "FlagpoleDeadLettersIncreasing"} <= names


def promtool() -> str:
    found = os.environ.get("FLAGPOLE_PROMTOOL") or shutil.which("promtool")
    if not found:
        pytest.skip("promtool not found (scripts/test.sh extracts it from Debian's prometheus "
                    "package into target/promtool; no network?)")
    return found


def test_promtool_checks_the_rules():
    result = subprocess.run([promtool(), "check", "rules", str(RULES)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_of_the_alerts():
    result = subprocess.run([promtool(), "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_is_well_formed():
    board = dashboard()
    assert board["uid"] == "flagpole" and board["title"]
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "namespace", "job"} <= variables
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    titles = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["title"] not in titles
        titles.add(panel["title"])
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            assert expr.count("(") == expr.count(")"), expr
            for variable in re.findall(r"\$(\w+)", expr):
                assert variable in variables or variable.startswith("__"), variable
            # Every selector of the board's series is scoped to the chosen installation.
            for metric, matchers in selectors(expr):
                assert {"namespace", "job"} <= matchers.keys(), (panel["title"], metric)


class Receiver(http.server.BaseHTTPRequestHandler):
    """A webhook receiver answering 200, counting what it got."""

    received = 0

    def do_POST(self):  # noqa: N802 (the http.server interface)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def exposition(text: str) -> dict[str, dict[str, set[str]]]:
    """metric sample name → label → values seen."""
    series: dict[str, dict[str, set[str]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
        assert match, line
        labels = series.setdefault(match.group(1), {})
        for label, value in re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""):
            labels.setdefault(label, set()).add(value)
    return series


def test_every_metric_the_rules_and_dashboard_use_is_exported(tmp_path, start_flagpole):
    redis = RedisServer(tmp_path / "redis-a")
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        app = start_flagpole({}, [
            "--redis-url", redis.url(0), "--metrics-flush-interval-ms", "100",
            "--refresh-interval-ms", "100", "--shutdown-drain-ms", "0",
            "--readiness-grace-ms", "0",
        ])
        base = app.base
        wait_for(base + "/health/ready", 200)
        # A store outage first (the new server starts empty): store errors are counted, readiness fails and comes back.
        port = redis.port
        redis.stop()
        wait_for(base + "/health/ready", 503)
        redis = RedisServer(tmp_path / "redis-b", port=port)
        wait_for(base + "/health/ready", 200)

        admin = {"Authorization": "Basic b3BzOg=="}  # ops: (insecure mode)
        hook = {"provider": "webhook", "events": ["feature-created"],
                "parameters": {"url": f"http://127.0.0.1:{receiver.server_port}/hook"}}
        assert request(base + "/api/admin/addons", "POST", hook, admin)[0] == 201
        toggle = {"name": "metrics.check", "strategies": [{"name": "default"}]}
        assert request(base + "/api/admin/features", "POST", toggle, admin)[0] == 200
        assert request(base + "/api/admin/features/nope", "GET", None, admin)[0] == 404

        sdk = {"UNLEASH-APPNAME": "dash-app", "UNLEASH-INSTANCEID": "i-1"}
        deadline = time.monotonic() + 20
        while True:
            status, body, headers = request(base + "/api/client/features", "GET", None, sdk)
            assert status == 200
            if b"metrics.check" in body:
                break
            assert time.monotonic() < deadline, "the client document never had the toggle"
            time.sleep(0.05)
        etag = headers.get("ETag") or headers.get("etag")
        assert request(base + "/api/client/features", "GET", None,
                       {**sdk, "If-None-Match": etag})[0] == 304
        register = {"appName": "dash-app", "instanceId": "i-1", "strategies": ["default"],
                    "started": "2026-01-01T00:00:00Z", "interval": 10000}
        assert request(base + "/api/client/register", "POST", register, sdk)[0] == 202
        report = {"appName": "dash-app", "instanceId": "i-1", "bucket": {
            "start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z",
            "toggles": {"metrics.check": {"yes": 3, "no": 1}}}}
        assert request(base + "/api/client/metrics", "POST", report, sdk)[0] == 202

        deadline = time.monotonic() + 20
        while Receiver.received == 0 or b"dash-app" not in request(
                base + "/api/admin/metrics/config-versions", "GET", None, admin)[1]:
            assert time.monotonic() < deadline, "no delivery, or the poll was never recorded"
            time.sleep(0.1)

        status, text, _ = request(base + "/internal-backstage/prometheus", "GET")
        assert status == 200
        exported = exposition(text.decode())
    finally:
        receiver.shutdown()
        redis.stop()

    used = rule_expressions() + dashboard_expressions()
    missing = []
    for expression in used:
        for metric, matchers in selectors(expression):
            if metric not in exported:
                missing.append(metric)
                continue
            for label, (operator, value) in matchers.items():
                if label in TARGET_LABELS:
                    continue
                if label not in exported[metric]:
                    missing.append(f"{metric}{{{label}}}")
                elif operator == "=" and value not in exported[metric][label]:
                    missing.append(f'{metric}{{{label}="{value}"}}')
        for label in re.findall(r"by \(([^)]*)\)", expression):
            for name in (n.strip() for n in label.split(",")):
                if name in TARGET_LABELS:
                    continue
                if not any(name in exported.get(m, {}) for m, _ in selectors(expression)):
                    missing.append(f"label {name} in {expression}")
    assert not missing, sorted(set(missing))
