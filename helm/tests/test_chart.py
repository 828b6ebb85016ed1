"""The Helm chart: lint, renders of every ci value set, Kubernetes schemas, invariants, and
the rendered Deployments started as real flagpole processes against a real redis-server."""

from __future__ import annotations

import base64
import os
import re
import time
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHART, CI_VALUES, ROOT, RedisNode, free_port, require_venv
from conftest import request as http_request

require_venv()

import helm_python as helm  # noqa: E402
import yaml  # noqa: E402

KUBE_VERSION = "1.33"
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}
# Settings that are secrets: only ever from a Secret.
SECRET_ENV = {
    "FLAGPOLE_REDIS_URL",
    "FLAGPOLE_ADMIN_TOKEN",
    "FLAGPOLE_CLIENT_TOKEN",
    "FLAGPOLE_SESSION_SECRET",
}
PROMETHEUS_PATH = "/internal-backstage/prometheus"
REDIS_TLS_DIR = "/etc/flagpole/redis-tls"
ADMIN_TOKEN = "test-admin-token-0123456789"
CLIENT_TOKEN = "test-client-token-0123456789"
IMAGE = {"image": {"repository": "registry.example.com/flagpole"}}


def ci_values(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def manifests(rendered: dict[str, str]) -> list[dict]:
    docs = []
    for name, text in rendered.items():
        if name.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def render(chart, values: dict) -> list[dict]:
    return manifests(chart.render(values, name="fp", namespace="flags"))


def of_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def container(deployment: dict) -> dict:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


def env_of(deployment: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container(deployment).get("env", [])}


def merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


VALUE_SETS = pytest.mark.parametrize("values_file", CI_VALUES, ids=lambda p: p.stem)


def test_every_ci_value_set_is_here():
    assert {p.stem for p in CI_VALUES} >= {
        "default-values", "ha-values", "import-seed-values", "worker-split-values",
        "sentinel-values", "cluster-values", "tls-values",
    }


def test_versions_follow_the_crate():
    crate = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == crate.group(1)
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert f"ARG VERSION={crate.group(1)}\n" in dockerfile


@VALUE_SETS
def test_lint_finds_no_errors(values_file):
    report = helm.lint(str(CHART), ci_values(values_file))
    errors = [m for m in report["messages"] if m["severity"] >= 3] + report.get("errors", [])
    assert not errors, errors
    warnings = [m for m in report["messages"] if m["severity"] == 2]
    assert not warnings, warnings


@VALUE_SETS
def test_manifests_pass_the_kubernetes_schemas(chart, values_file, tmp_path):
    docs = render(chart, ci_values(values_file))
    plain = [d for d in docs if d["kind"] not in CRD_KINDS]
    assert plain
    target = tmp_path / "rendered.yaml"
    target.write_text(yaml.safe_dump_all(plain))
    validator = Path(sys.executable).with_name("kubernetes-validate")
    result = subprocess.run(
        [str(validator), "-k", KUBE_VERSION, "--strict", str(target)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@VALUE_SETS
def test_invariants(chart, values_file):
    values = ci_values(values_file)
    docs = render(chart, values)
    deployments = of_kind(docs, "Deployment")
    assert deployments
    by_name = {d["metadata"]["name"]: d for d in deployments}
    for deployment in deployments:
        pod = deployment["spec"]["template"]
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items()
        assert set(selector) == {
            "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"
        }
        spec = pod["spec"]
        for spread in spec.get("topologySpreadConstraints", []):
            assert spread["labelSelector"]["matchLabels"] == selector
        main = container(deployment)
        image = main["image"]
        assert not image.endswith(":latest") and ":" in image, image
        assert image.endswith(":" + yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])
        # Security context.
        assert spec["securityContext"]["runAsNonRoot"] is True
        context = main["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert spec["automountServiceAccountToken"] is False
        assert main["resources"]["requests"] and main["resources"]["limits"]
        # Probes: liveness never on the store's readiness endpoint.
        assert main["livenessProbe"]["httpGet"]["path"] == "/health/live"
        assert main["readinessProbe"]["httpGet"]["path"] == "/health/ready"
        assert main["startupProbe"]["httpGet"]["port"] == "http"
        # Stopping: the kubelet waits longer than the preStop sleep plus the drain.
        env = env_of(deployment)
        drain_s = int(env["FLAGPOLE_SHUTDOWN_DRAIN_MS"]["value"]) / 1000
        pre_stop = main.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        assert spec["terminationGracePeriodSeconds"] > drain_s + pre_stop
        # Secrets by reference only, never as literals anywhere in the Deployment.
        for name in SECRET_ENV & env.keys():
            assert "value" not in env[name], name
            assert env[name]["valueFrom"]["secretKeyRef"]["name"]
        text = yaml.safe_dump(deployment)
        for secret in ("redis://", "rediss://", values.get("auth", {}).get("adminToken"),
                       values.get("auth", {}).get("clientToken")):
            if secret:
                assert secret not in text, f"{secret} appears in the Deployment"
        # The data dir only where the embedded store is used.
        mounts = {m["mountPath"]: m for m in main.get("volumeMounts", [])}
        assert "/data" not in mounts
        import_mount = mounts.get("/etc/flagpole/import")
        if "FLAGPOLE_IMPORT_FILE" in env:
            assert import_mount and import_mount["readOnly"] is True
            assert env["FLAGPOLE_IMPORT_FILE"]["value"].startswith("/etc/flagpole/import/")
        # TLS files for Redis: read-only, from the Secret named in the values, by reference.
        tls = values.get("redis", {}).get("tls", {})
        tls_mount = mounts.get(REDIS_TLS_DIR)
        assert bool(tls_mount) == tls.get("enabled", False)
        if tls_mount:
            assert tls_mount["readOnly"] is True
            (volume,) = [v for v in spec["volumes"] if v["name"] == tls_mount["name"]]
            assert volume["secret"]["secretName"] == tls["existingSecret"]
        for name in ("FLAGPOLE_REDIS_TLS_CA", "FLAGPOLE_REDIS_TLS_CERT", "FLAGPOLE_REDIS_TLS_KEY"):
            if name in env:
                assert tls_mount and env[name]["value"].startswith(REDIS_TLS_DIR + "/"), name

    # Services select exactly the pods of one Deployment.
    for service in of_kind(docs, "Service"):
        matching = [
            d for d in deployments
            if service["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(matching) == 1, service["metadata"]["name"]
        assert service["spec"]["ports"][0]["targetPort"] == "http"

    # Autoscaling and disruption budgets.
    api = by_name["fp-flagpole"]
    autoscaling = values.get("autoscaling", {}).get("enabled", False)
    replicas = values.get("replicaCount", 2)
    hpas = of_kind(docs, "HorizontalPodAutoscaler")
    assert bool(hpas) == autoscaling
    if autoscaling:
        assert "replicas" not in api["spec"]
        assert hpas[0]["spec"]["scaleTargetRef"]["name"] == "fp-flagpole"
        assert hpas[0]["spec"]["minReplicas"] >= 2
    pdbs = {p["metadata"]["name"]: p for p in of_kind(docs, "PodDisruptionBudget")}
    assert ("fp-flagpole" in pdbs) == (autoscaling or replicas > 1)
    for pdb in pdbs.values():
        (target,) = [d for d in deployments
                     if pdb["spec"]["selector"]["matchLabels"] == d["spec"]["selector"]["matchLabels"]]
        scaled = autoscaling and target is api
        assert scaled or target["spec"]["replicas"] > 1, pdb["metadata"]["name"]

    # Delivery: one place or the other.
    delivery = values.get("delivery", {})
    split = delivery.get("separateDeployment", False)
    on_api = delivery.get("enabled", True) and not split
    assert env_of(api)["FLAGPOLE_DELIVERY"]["value"] == ("true" if on_api else "false")
    assert ("fp-flagpole-delivery" in pdbs) == (split and delivery.get("replicaCount", 1) > 1)
    if split:
        worker = by_name["fp-flagpole-delivery"]
        assert env_of(worker)["FLAGPOLE_DELIVERY"]["value"] == "true"
        assert worker["spec"]["replicas"] == delivery.get("replicaCount", 1)
    else:
        assert "fp-flagpole-delivery" not in by_name

    # Monitoring, opt-in.
    monitors = of_kind(docs, "ServiceMonitor")
    assert bool(monitors) == values.get("serviceMonitor", {}).get("enabled", False)
    for monitor in monitors:
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["path"] == PROMETHEUS_PATH and endpoint["port"] == "http"
        selector = monitor["spec"]["selector"]["matchLabels"]
        for service in of_kind(docs, "Service"):
            assert selector.items() <= service["metadata"]["labels"].items()
        for key, value in values["serviceMonitor"].get("extraLabels", {}).items():
            assert monitor["metadata"]["labels"][key] == value
    rules = of_kind(docs, "PrometheusRule")
    assert bool(rules) == values.get("prometheusRule", {}).get("enabled", False)
    for rule in rules:
        # The very groups of deploy/prometheus/rules.yaml: the two cannot drift.
        shipped = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules.yaml").read_text())
        assert rule["spec"]["groups"] == shipped["groups"]

    # The ingress never exposes the probes or the metrics.
    for ingress in of_kind(docs, "Ingress"):
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert not path["path"].startswith(("/internal-backstage", "/health"))


def test_rendered_settings_are_flags_the_binary_has(chart, flagpole_bin):
    help_text = subprocess.run(
        [str(flagpole_bin), "--help"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    known = set(re.findall(r"\bFLAGPOLE_[A-Z0-9_]+", help_text))
    assert "FLAGPOLE_SHUTDOWN_DRAIN_MS" in known
    for values_file in CI_VALUES:
        for deployment in of_kind(render(chart, ci_values(values_file)), "Deployment"):
            names = set(env_of(deployment))
            assert names <= known, (values_file.stem, names - known)
            assert not container(deployment).get("args")


@pytest.mark.parametrize(
    "values, message",
    [
        ({"embedded": {"enabled": True}, "replicaCount": 2}, "one replica"),
        ({"embedded": {"enabled": True}, "replicaCount": 1,
          "delivery": {"separateDeployment": True}}, "separateDeployment"),
        ({"auth": {"adminToken": ADMIN_TOKEN}}, "redis.url"),
        ({"redis": {"url": "redis://r:6379"}}, "admin token"),
        ({"redis": {"url": "redis://r:6379"}, "auth": {"adminToken": ADMIN_TOKEN},
          "shutdown": {"drainMs": 30000, "terminationGracePeriodSeconds": 20}}, "terminationGracePeriodSeconds"),
        ({"redis": {"url": "redis://r:6379"}, "auth": {"adminToken": ADMIN_TOKEN},
          "image": {"tag": "latest"}}, "image/tag"),
        ({"redis": {"url": "redis://r:6379"}, "auth": {"adminToken": ADMIN_TOKEN},
          "importSeed": {"enabled": True}}, "importSeed"),
        ({"redis": {"url": "redis://r:6379"}, "auth": {"adminToken": ADMIN_TOKEN},
          "image": {"repository": ""}}, "image.repository"),
        ({"redis": {"url": "http://r:6379"}, "auth": {"adminToken": ADMIN_TOKEN}}, "/redis/url"),
        ({"redis": {"url": "redis://s:26379", "mode": "sentinel"},
          "auth": {"adminToken": ADMIN_TOKEN}}, "redis.sentinelService"),
        ({"redis": {"url": "redis://r:6379", "mode": "replicated"},
          "auth": {"adminToken": ADMIN_TOKEN}}, "/redis/mode"),
        ({"redis": {"url": "rediss://r:6380", "tls": {"enabled": True}},
          "auth": {"adminToken": ADMIN_TOKEN}}, "redis.tls.existingSecret"),
        ({"redis": {"url": "redis://r:6379", "tls": {"enabled": True, "existingSecret": "tls"}},
          "auth": {"adminToken": ADMIN_TOKEN}}, "needs a rediss:// redis.url"),
        ({"redis": {"url": "rediss://r:6380",
                    "tls": {"enabled": True, "existingSecret": "tls", "caKey": ""}},
          "auth": {"adminToken": ADMIN_TOKEN}}, "mounts nothing"),
        ({"embedded": {"enabled": True}, "replicaCount": 1, "auth": {"adminToken": ADMIN_TOKEN},
          "redis": {"tls": {"enabled": True, "existingSecret": "tls"}}}, "uses no Redis"),
        ({"redis": {"url": "rediss://r:6380", "tls": {"enabled": True, "existingSecret": "tls",
                                                     "certKey": "../tls.crt"}},
          "auth": {"adminToken": ADMIN_TOKEN}}, "/redis/tls/certKey"),
    ],
    ids=["embedded-replicas", "embedded-split", "no-redis", "no-admin-token", "short-grace",
         "latest", "seed-without-document", "no-repository", "not-a-redis-url",
         "sentinel-without-service", "unknown-redis-mode", "tls-without-secret",
         "tls-with-plain-url", "tls-mounting-nothing", "tls-with-embedded", "tls-key-a-path"],
)
def test_unworkable_values_are_refused(chart, values, message):
    with pytest.raises(helm.HelmError) as refused:
        chart.render(merge(IMAGE, values), name="fp", namespace="flags")
    assert message in str(refused.value)


@pytest.mark.parametrize(
    "values_file, expected",
    [
        ("sentinel-values", {"FLAGPOLE_REDIS_MODE": "sentinel",
                             "FLAGPOLE_REDIS_SENTINEL_SERVICE": "flagpole-master"}),
        ("cluster-values", {"FLAGPOLE_REDIS_MODE": "cluster",
                            "FLAGPOLE_REDIS_WAIT_REPLICAS": "1"}),
        ("default-values", {"FLAGPOLE_REDIS_MODE": "standalone"}),
    ],
)
def test_redis_modes_reach_the_binary(chart, values_file, expected):
    docs = render(chart, ci_values(CHART / "ci" / f"{values_file}.yaml"))
    for deployment in of_kind(docs, "Deployment"):
        env = env_of(deployment)
        for name, value in expected.items():
            assert env[name].get("value") == value, (name, env.get(name))
        # The URL (a list of sentinels or seed nodes) still comes from the Secret only.
        assert "secretKeyRef" in env["FLAGPOLE_REDIS_URL"]["valueFrom"]
        if "FLAGPOLE_REDIS_SENTINEL_SERVICE" not in expected:
            assert "FLAGPOLE_REDIS_SENTINEL_SERVICE" not in env


@pytest.mark.parametrize(
    "tls, files",
    [
        ({"clientCertificate": True}, {"FLAGPOLE_REDIS_TLS_CA": "ca.crt",
                                       "FLAGPOLE_REDIS_TLS_CERT": "tls.crt",
                                       "FLAGPOLE_REDIS_TLS_KEY": "tls.key"}),
        ({}, {"FLAGPOLE_REDIS_TLS_CA": "ca.crt"}),
        ({"caKey": "", "clientCertificate": True, "certKey": "client.pem", "keyKey": "client-key.pem"},
         {"FLAGPOLE_REDIS_TLS_CERT": "client.pem", "FLAGPOLE_REDIS_TLS_KEY": "client-key.pem"}),
    ],
    ids=["ca-and-client-certificate", "ca-only", "client-certificate-only"],
)
def test_redis_tls_files_are_mounted_from_the_secret(chart, tls, files):
    values = merge(IMAGE, {
        "redis": {"url": "rediss://r:6380/0",
                  "tls": {"enabled": True, "existingSecret": "redis-tls", **tls}},
        "auth": {"adminToken": ADMIN_TOKEN},
        "delivery": {"separateDeployment": True},
    })
    deployments = of_kind(render(chart, values), "Deployment")
    assert len(deployments) == 2
    for deployment in deployments:
        env = env_of(deployment)
        tls_env = {k: v["value"] for k, v in env.items() if k.startswith("FLAGPOLE_REDIS_TLS_")}
        assert tls_env == {k: f"{REDIS_TLS_DIR}/{f}" for k, f in files.items()}
        (mount,) = [m for m in container(deployment)["volumeMounts"] if m["name"] == "redis-tls"]
        assert mount == {"name": "redis-tls", "mountPath": REDIS_TLS_DIR, "readOnly": True}
        (volume,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"]
                     if v["name"] == "redis-tls"]
        assert volume["secret"]["secretName"] == "redis-tls"
        # Only the files named, group-readable only (the pod's fsGroup).
        assert volume["secret"]["defaultMode"] == 0o440
        assert sorted(i["path"] for i in volume["secret"]["items"]) == sorted(files.values())


def test_rediss_url_without_tls_files_trusts_the_system_roots(chart):
    docs = render(chart, merge(IMAGE, {"redis": {"url": "rediss://r:6380/0"},
                                       "auth": {"adminToken": ADMIN_TOKEN}}))
    for deployment in of_kind(docs, "Deployment"):
        assert not [k for k in env_of(deployment) if k.startswith("FLAGPOLE_REDIS_TLS_")]
        assert "volumes" not in deployment["spec"]["template"]["spec"]
    (secret,) = of_kind(docs, "Secret")
    assert base64.b64decode(secret["data"]["redis-url"]).decode() == "rediss://r:6380/0"


def test_pdb_only_with_more_than_one_replica(chart):
    base = merge(IMAGE, {"redis": {"url": "redis://r:6379"}, "auth": {"adminToken": ADMIN_TOKEN}})
    single = render(chart, merge(base, {"replicaCount": 1}))
    assert not of_kind(single, "PodDisruptionBudget")
    scaled = render(chart, merge(base, {"replicaCount": 1, "autoscaling": {"enabled": True}}))
    assert of_kind(scaled, "PodDisruptionBudget") and of_kind(scaled, "HorizontalPodAutoscaler")


def test_embedded_store_gets_a_data_volume_and_one_replica(chart):
    docs = render(chart, merge(IMAGE, {"embedded": {"enabled": True}, "replicaCount": 1,
                                       "auth": {"adminToken": ADMIN_TOKEN}}))
    (deployment,) = of_kind(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    mounts = {m["mountPath"] for m in container(deployment)["volumeMounts"]}
    assert "/data" in mounts
    env = env_of(deployment)
    assert env["FLAGPOLE_DATA_DIR"]["value"] == "/data"
    assert "FLAGPOLE_REDIS_URL" not in env
    assert of_kind(docs, "PersistentVolumeClaim")
    assert not of_kind(docs, "PodDisruptionBudget")


# --- the rendered Deployments, run -------------------------------------------------------

def resolve_env(env: list[dict], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """What the kubelet would hand the container: literal values, and secretKeyRef looked up
    (a missing optional key leaves the variable unset; a missing required one is an error)."""
    resolved = {}
    for item in env:
        if "value" in item:
            resolved[item["name"]] = str(item["value"])
            continue
        ref = item["valueFrom"]["secretKeyRef"]
        data = secrets.get(ref["name"])
        assert data is not None, f"no Secret {ref['name']} for {item['name']}"
        if ref["key"] in data:
            resolved[item["name"]] = data[ref["key"]]
        else:
            assert ref.get("optional"), f"Secret {ref['name']} lacks the key {ref['key']}"
    return resolved


def mount_volumes(deployment: dict, docs: list[dict], secrets: dict[str, dict[str, str]],
                  root: Path) -> dict[str, str]:
    """Writes the files of the ConfigMaps and Secrets the pod mounts under `root`, as the
    kubelet would (only the listed `items` when there are some, with the Secret's
    defaultMode); returns mount path → directory."""
    pod = deployment["spec"]["template"]["spec"]
    config_maps = {d["metadata"]["name"]: d["data"] for d in of_kind(docs, "ConfigMap")}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mapped = {}
    for mount in container(deployment).get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            source, data = volume["configMap"], config_maps[volume["configMap"]["name"]]
        elif "secret" in volume:
            source = volume["secret"]
            data = secrets.get(source["secretName"])
            assert data is not None, f"no Secret {source['secretName']} for {mount['name']}"
        else:
            continue
        assert mount.get("readOnly") is True
        files = {i["path"]: data[i["key"]] for i in source["items"]} if "items" in source else data
        directory = root / mount["name"]
        directory.mkdir()
        for file_name, content in files.items():
            (directory / file_name).write_text(content)
            os.chmod(directory / file_name, source.get("defaultMode", 0o644))
        mapped[mount["mountPath"]] = str(directory)
    return mapped


class StandaloneDatabase:
    """One database of the shared redis-server: a set-up like those of conftest.py."""

    def __init__(self, server, db: int):
        self.url = server.url(db)
        self.node = RedisNode([], ["-n", str(db)])
        self.node.port = server.port

    def data_nodes(self) -> list[RedisNode]:
        return [self.node]


RUN_CASES = {
    # values file → (the Redis set-up it runs against, extra values)
    "default-values": ("redis_server", {}),
    "ha-values": ("redis_server", {}),
    "import-seed-values": ("redis_server", {"auth": {"clientToken": CLIENT_TOKEN}}),
    "worker-split-values": ("redis_server", {}),
    "sentinel-values": ("redis_sentinel", {}),
    "cluster-values": ("redis_cluster", {}),
    "tls-values": ("redis_tls", {}),
}


def test_every_ci_value_set_is_run():
    assert set(RUN_CASES) == {p.stem for p in CI_VALUES}


def wait_for_feature(process, name: str, headers: dict[str, str], seconds: float = 10) -> None:
    """Waits (bounded) until the client API lists the toggle `name`."""
    deadline = time.monotonic() + seconds
    features = set()
    while time.monotonic() < deadline:
        status, body = process.get("/api/client/features", headers)
        assert status == 200, body
        features = {f["name"] for f in yaml.safe_load(body)["features"]}
        if name in features:
            return
        time.sleep(0.05)
    raise AssertionError(f"{name} never reached the client API: {sorted(features)}")


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_rendered_deployments_run(chart, case, redis_server, start_flagpole, tmp_path, request):
    """Each Deployment of the value set, as a process with the environment the kubelet would
    give it, against a real Redis of the value set's mode: ready, and a write reaches Redis
    (its master and replica where there is one) and comes back through the client API."""
    setup_fixture, extra = RUN_CASES[case]
    if setup_fixture == "redis_server":
        setup = StandaloneDatabase(redis_server, sorted(RUN_CASES).index(case) + 1)
    else:
        setup = request.getfixturevalue(setup_fixture)
    url = setup.url
    values = merge(ci_values(CHART / "ci" / f"{case}.yaml"), extra)
    if not values.get("existingSecret"):
        values = merge(values, {"redis": {"url": url}, "auth": {"adminToken": ADMIN_TOKEN}})
    docs = render(chart, values)

    secrets = {}
    for secret in of_kind(docs, "Secret"):
        secrets[secret["metadata"]["name"]] = {
            k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()
        }
    # The Secrets the chart only names, as their owners would have made them.
    if values.get("existingSecret"):
        assert values["existingSecret"] not in secrets, "the chart made the existing Secret"
        secrets[values["existingSecret"]] = {"redis-url": url, "admin-token": ADMIN_TOKEN}
    tls = values.get("redis", {}).get("tls", {})
    if tls.get("enabled"):
        assert tls["existingSecret"] not in secrets, "the chart made the TLS Secret"
        secrets[tls["existingSecret"]] = setup.secret_files

    running = []
    for index, deployment in enumerate(of_kind(docs, "Deployment")):
        root = tmp_path / f"pod-{index}"
        root.mkdir()
        mounts = mount_volumes(deployment, docs, secrets, root)
        main = container(deployment)
        env = resolve_env(main["env"], secrets)
        for key, value in env.items():
            for mount_path, directory in mounts.items():
                if value.startswith(mount_path + "/"):
                    env[key] = directory + value[len(mount_path):]
        # The pod's port, on loopback here.
        port = free_port()
        assert env["FLAGPOLE_LISTEN"] == "0.0.0.0:4242"
        env["FLAGPOLE_LISTEN"] = f"127.0.0.1:{port}"
        assert env["FLAGPOLE_REDIS_URL"] == url
        process = start_flagpole(env, main.get("args", []), port=port)

        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            process.wait_for(main[probe]["httpGet"]["path"], 200)
        ready = process.get("/health/ready")
        assert ready[0] == 200, ready

        admin = {"Authorization": ADMIN_TOKEN}
        assert process.get("/api/admin/features")[0] == 401, "the chart runs --auth token"
        status, body = process.get("/api/client/features", admin)
        assert status == 200, body
        if case == "import-seed-values":
            assert "seeded.checkout" in {f["name"] for f in yaml.safe_load(body)["features"]}
            client = {"Authorization": CLIENT_TOKEN}
            assert process.get("/api/client/features", client)[0] == 200
        # A write: committed to this set-up's Redis, then served back.
        name = f"chart.{case}.{index}"
        status, body, _ = http_request(process.base + "/api/admin/features", "POST",
                                       {"name": name, "strategies": [{"name": "default"}]}, admin)
        assert status == 200, (status, body, process.log.read_text()[-4000:])
        wait_for_feature(process, name, admin)
        features_key = "{%s}:features" % env["FLAGPOLE_KEY_PREFIX"]
        for node in setup.data_nodes():
            assert node.cli("HEXISTS", features_key, name) == "1", (node.address, name)
        status, metrics = process.get(PROMETHEUS_PATH)
        assert status == 200 and b"flagpole_build_info" in metrics
        running.append(process)
    # SIGTERM to all at once: each drains as its Deployment configured, then exits cleanly.
    for process in running:
        process.terminate()
    for process in running:
        assert process.stop() == 0, process.log.read_text()[-4000:]
