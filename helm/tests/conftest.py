"""Fixtures of the chart and monitoring tests: the chart, its renders, a private redis-server,
a real Sentinel set-up, a real Redis Cluster and a TLS-only redis-server (from Debian's
redis-server, as tests/it/common/topology.rs starts them), and real `flagpole` processes (the
binary cargo built, named by FLAGPOLE_BIN).

Run by scripts/test.sh from target/chart-venv (helm/tests/requirements.txt)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "flagpole"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))


def require_venv():
    """The venv's modules, or a skip naming what is missing (scripts/test.sh could not
    install helm/tests/requirements.txt: no network)."""
    for module in ("helm_python", "yaml", "kubernetes_validate"):
        pytest.importorskip(
            module,
            reason=f"{module} is not installed: build the venv from helm/tests/requirements.txt",
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url: str, method: str = "GET", body=None,
            headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    """Status, body and headers of a request (a JSON body when given); (0, b"", {}) while
    nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    all_headers = {**({"Content-Type": "application/json"} if data else {}), **(headers or {})}
    req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b"", {}


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """Status and body of a GET; (0, b"") while nothing answers."""
    status, body, _ = request(url, headers=headers)
    return status, body


def wait_for(url: str, status: int, seconds: float = 30, headers=None) -> bytes:
    """Waits (bounded) until `url` answers `status`; returns the body."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        last = http_get(url, headers)
        if last[0] == status:
            return last[1]
        time.sleep(0.05)
    raise AssertionError(f"{url} never answered {status}; last: {last}")


@pytest.fixture(scope="session")
def chart():
    import helm_python

    return helm_python.Chart.load(str(CHART))


@pytest.fixture(scope="session")
def flagpole_bin() -> Path:
    value = os.environ.get("FLAGPOLE_BIN")
    assert value, "set FLAGPOLE_BIN to the flagpole binary cargo built (scripts/test.sh does)"
    path = Path(value)
    assert path.is_file() and os.access(path, os.X_OK), f"FLAGPOLE_BIN={value} is not a binary"
    return path


class RedisServer:
    """A redis-server of these tests on a free loopback port, without persistence."""

    def __init__(self, tmp: Path, port: int | None = None):
        tmp.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        binary = shutil.which("redis-server")
        assert binary, "redis-server must be installed (scripts/test.sh installs it)"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(tmp)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not come up")

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


# --- Redis set-ups for the rendered Redis modes ----------------------------------------------
# Each holds its processes and a temporary directory; `stop` kills the ones started so far and
# removes the directory, so a fixture registers it before starting anything.

def poll(what: str, seconds: float, check) -> None:
    """Polls `check` every 50 ms until it holds; fails naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting: {what}")
        time.sleep(0.05)


class RedisNode:
    """One redis-server (or sentinel) on a free loopback port, reached with redis-cli and
    `cli_args` (TLS options)."""

    def __init__(self, args: list[str], cli_args: list[str] | None = None):
        self.args = args
        self.cli_args = cli_args or []
        self.process: subprocess.Popen | None = None
        self.port = 0

    def start(self, command) -> "RedisNode":
        """Runs `command(port)` (a full argv); tries other ports when one was taken between
        choosing and binding it."""
        for _ in range(3):
            self.port = free_port()
            self.process = subprocess.Popen(
                command(self.port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                if self.try_cli("PING") == "PONG":
                    return self
                time.sleep(0.05)
            self.kill()
        raise AssertionError(f"redis-server {self.args} did not come up")

    def try_cli(self, *args: str) -> str | None:
        """What redis-cli printed (stripped); None when it could not connect or failed."""
        result = subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), *self.cli_args, *args],
            capture_output=True, text=True, timeout=10,
        )
        out = result.stdout.strip()
        if result.returncode != 0 or out.startswith("Could not connect"):
            return None
        return out

    def cli(self, *args: str) -> str:
        out = self.try_cli(*args)
        assert out is not None, f"redis-cli {args} on port {self.port} failed"
        return out

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


class RedisSetup:
    """Processes and a temporary directory, removed by `stop` whatever was started."""

    def __init__(self, name: str):
        assert shutil.which("redis-server") and shutil.which("redis-cli"), \
            "redis-server and redis-cli must be installed (scripts/test.sh installs them)"
        self.dir = Path(tempfile.mkdtemp(prefix=f"flagpole-chart-{name}-"))
        self.nodes: list[RedisNode] = []

    def server(self, args: list[str], cli_args: list[str] | None = None) -> RedisNode:
        """A redis-server with `args` (the port comes first; `--port 0 --tls-port` for TLS)."""
        node = RedisNode(args, cli_args)
        self.nodes.append(node)
        tls = "--tls-cert-file" in args
        work = self.dir / f"node-{len(self.nodes)}"
        work.mkdir()
        # A cluster node's bus port is chosen on each attempt too: the default (port + 10000)
        # may be taken or out of range, and a taken one fails the start like a taken port.
        bus = (lambda: ["--cluster-port", str(free_port())]) if "--cluster-enabled" in args \
            else list
        return node.start(lambda port: [
            "redis-server", *(["--port", "0", "--tls-port"] if tls else ["--port"]), str(port),
            "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(work), *args,
            *bus(),
        ])

    def sentinel(self, config: list[str]) -> RedisNode:
        node = RedisNode(["--sentinel"])
        self.nodes.append(node)
        work = self.dir / f"sentinel-{len(self.nodes)}"
        work.mkdir()

        def command(port):
            # The sentinel rewrites its file: one per process, in its own directory.
            conf = work / "sentinel.conf"
            conf.write_text("\n".join([f"port {port}", "bind 127.0.0.1", f"dir {work}",
                                       *config]) + "\n")
            return ["redis-server", str(conf), "--sentinel"]

        return node.start(command)

    def stop(self):
        for node in self.nodes:
            node.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


SENTINEL_SERVICE = "flagpole-master"  # redis.sentinelService of ci/sentinel-values.yaml


class SentinelSetup(RedisSetup):
    """A master with one replica in sync, watched by three sentinels as SENTINEL_SERVICE."""

    def __init__(self):
        super().__init__("sentinel")

    def start(self):
        self.master = self.server(["--repl-diskless-sync-delay", "0"])
        self.replica = self.server(["--replicaof", "127.0.0.1", str(self.master.port)])
        # In sync, so the mode's default WAIT for one replica is met.
        poll("the replica is in sync", 15,
             lambda: "master_link_status:up" in self.replica.cli("INFO", "replication"))
        config = [f"sentinel monitor {SENTINEL_SERVICE} 127.0.0.1 {self.master.port} 2",
                  f"sentinel down-after-milliseconds {SENTINEL_SERVICE} 5000"]
        self.sentinels = [self.sentinel(config) for _ in range(3)]
        for sentinel in self.sentinels:
            poll("the sentinels name the master", 10, lambda: str(self.master.port) in (
                sentinel.try_cli("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_SERVICE) or ""))
        # The list of sentinels, as the Secret's redis-url holds it.
        self.url = "redis://" + ",".join(s.address for s in self.sentinels)

    def data_nodes(self) -> list[RedisNode]:
        """Where a committed write must be: the master and, after WAIT, its replica."""
        return [self.master, self.replica]


class ClusterSetup(RedisSetup):
    """A Redis Cluster of three masters with one replica each, every replica in sync."""

    def __init__(self):
        super().__init__("cluster")

    def start(self):
        for _ in range(6):
            self.server(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000",
                         "--repl-diskless-sync-delay", "0"])
        create = subprocess.run(
            ["redis-cli", "--cluster", "create", *(n.address for n in self.nodes),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=30,
        )
        assert create.returncode == 0, f"cluster create failed: {create.stdout}{create.stderr}"
        poll("cluster_state:ok on every node, a replica in sync on every master", 30, lambda: all(
            "cluster_state:ok" in (n.try_cli("CLUSTER", "INFO") or "") for n in self.nodes
        ) and self.masters_with_replica() == 3)
        # Seed nodes, as the Secret's redis-url holds them.
        self.url = "redis://" + ",".join(n.address for n in self.nodes)

    def masters_with_replica(self) -> int:
        infos = [n.try_cli("INFO", "replication") or "" for n in self.nodes]
        return sum("role:master" in i and "connected_slaves:1" in i and "state=online" in i
                   for i in infos)

    def data_nodes(self) -> list[RedisNode]:
        """A cluster client (-c, following redirections) through the first node."""
        node = RedisNode([], ["-c"])
        node.port = self.nodes[0].port
        return [node]


class TlsSetup(RedisSetup):
    """A redis-server speaking only TLS that requires a client certificate; the CA, the
    server's and the client's certificates made here with openssl. `secret_files` are the
    files of the Secret ci/tls-values.yaml names (cert-manager's key names)."""

    def __init__(self):
        super().__init__("tls")

    def start(self):
        pki = self.dir / "pki"
        pki.mkdir()

        def openssl(*args: str):
            result = subprocess.run(["openssl", *args], cwd=pki, capture_output=True,
                                    text=True, timeout=60)
            assert result.returncode == 0, f"openssl {args}: {result.stderr}"

        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=flagpole chart test CA", "-keyout", "ca.key", "-out", "ca.crt")
        # rustls wants the server's address in subjectAltName; Redis checks the client's
        # certificate is for client authentication.
        for name, subject, usage in (("server", "/CN=127.0.0.1", "serverAuth"),
                                     ("client", "/CN=flagpole", "clientAuth")):
            openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                    "-keyout", f"{name}.key", "-out", f"{name}.csr")
            (pki / f"{name}.ext").write_text(
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                f"extendedKeyUsage={usage}\n")
            openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                    "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext",
                    "-out", f"{name}.crt")
        self.server_node = self.server(
            ["--tls-cert-file", str(pki / "server.crt"), "--tls-key-file", str(pki / "server.key"),
             "--tls-ca-cert-file", str(pki / "ca.crt"), "--tls-auth-clients", "yes"],
            ["--tls", "--cacert", str(pki / "ca.crt"), "--cert", str(pki / "client.crt"),
             "--key", str(pki / "client.key")],
        )
        self.url = f"rediss://127.0.0.1:{self.server_node.port}/0"
        self.secret_files = {
            "ca.crt": (pki / "ca.crt").read_text(),
            "tls.crt": (pki / "client.crt").read_text(),
            "tls.key": (pki / "client.key").read_text(),
        }

    def data_nodes(self) -> list[RedisNode]:
        return [self.server_node]


def started(request, setup: RedisSetup) -> RedisSetup:
    """`setup` started, its `stop` registered first so a half-made set-up is cleaned too."""
    request.addfinalizer(setup.stop)
    setup.start()
    return setup


@pytest.fixture(scope="session")
def redis_sentinel(request) -> SentinelSetup:
    return started(request, SentinelSetup())


@pytest.fixture(scope="session")
def redis_cluster(request) -> ClusterSetup:
    return started(request, ClusterSetup())


@pytest.fixture(scope="session")
def redis_tls(request) -> TlsSetup:
    return started(request, TlsSetup())


class Flagpole:
    """A running `flagpole` process; `env` is its whole environment."""

    def __init__(self, binary: Path, env: dict[str, str], args: list[str], port: int, log: Path):
        self.base = f"http://127.0.0.1:{port}"
        self.log = log
        self._log_file = open(log, "wb")
        self.process = subprocess.Popen(
            [str(binary), *args], env=env, stdout=self._log_file, stderr=subprocess.STDOUT
        )

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        return http_get(self.base + path, headers)

    def wait_for(self, path: str, status: int, headers=None) -> bytes:
        try:
            return wait_for(self.base + path, status, headers=headers)
        except AssertionError as e:
            raise AssertionError(f"{e}\nflagpole log:\n{self.log.read_text()[-4000:]}") from None

    def terminate(self):
        """SIGTERM, as the kubelet sends it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then the exit code (bounded wait)."""
        self.terminate()
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log_file.close()


@pytest.fixture
def start_flagpole(flagpole_bin, tmp_path):
    """Starts flagpole processes; kills whatever is left at the end of the test."""
    started: list[Flagpole] = []

    def start(env: dict[str, str], args: list[str] | None = None, port: int | None = None):
        port = port or free_port()
        env = {"PATH": os.environ.get("PATH", ""), **env}
        env.setdefault("FLAGPOLE_LISTEN", f"127.0.0.1:{port}")
        process = Flagpole(
            flagpole_bin, env, args or [], port, tmp_path / f"flagpole-{len(started)}.log"
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
