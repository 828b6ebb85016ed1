"""Fixtures of the chart and monitoring tests: the chart, its renders, a private redis-server
and real `flagpole` processes (the binary cargo built, named by FLAGPOLE_BIN).

Run by scripts/test.sh from target/chart-venv (helm/tests/requirements.txt)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
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
