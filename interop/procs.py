"""Our Go programs as real processes on loopback: fake-upstream and the
stand-in relay. The binaries come from interop/run.sh (see conftest.py)."""

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path


def http(method, url, body=b"", headers=None, timeout=10):
    """(status, headers, body) of one request; HTTP errors are answers too."""
    req = urllib.request.Request(url, data=body if method != "GET" else None, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def free_port():
    """A loopback port free right now (the stand-in takes its port from config.yml)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Upstream:
    """fake-upstream on a free loopback port; its first stdout line is the address."""

    def __init__(self, binary, *args, projects=12, seed=5):
        self.proc = subprocess.Popen(
            [str(binary), "--listen", "127.0.0.1:0", "--projects", str(projects), "--seed", str(seed), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline().strip()
        if not line.startswith("127.0.0.1:"):
            self.proc.kill()
            raise AssertionError(f"first stdout line {line!r}; stderr {self.proc.stderr.read()}")
        self.addr = line
        self.url = "http://" + line

    def request(self, method, path, body=b"", headers=None):
        return http(method, self.url + path, body, headers)

    def get_json(self, path):
        status, _, body = self.request("GET", path)
        assert status == 200, body
        return json.loads(body)

    def stop(self):
        """SIGTERM; asserts exit 0 and returns stderr (the final stats, the capture's summary)."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=10)
        err = self.proc.stderr.read()
        assert rc == 0, err
        return err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class StandinRelay:
    """internal/cmd/standin-relay in managed mode against an upstream,
    with fresh sentry_relay credentials, ready (registered) on return."""

    def __init__(self, binary, upstream_url, workdir, ready_within=20.0):
        from sentry_relay import generate_key_pair  # only the relay needs it

        sk, pk = generate_key_pair()
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (workdir / "config.yml").write_text(
            "relay: {mode: managed, upstream: \"%s/\", host: 127.0.0.1, port: %d}\n"
            "limits: {shutdown_timeout: 1}\n" % (upstream_url, self.port)
        )
        (workdir / "credentials.json").write_text(
            json.dumps({"secret_key": str(sk), "public_key": str(pk), "id": str(uuid.uuid4())})
        )
        self.log_path = workdir / "relay.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([str(binary), "-c", str(workdir), "run"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + ready_within
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"standin-relay exited {self.proc.returncode}:\n{self.log_tail()}")
            try:
                status, _, _ = http("GET", self.url + "/api/relay/healthcheck/ready/", timeout=2)
            except OSError:
                status = None
            if status == 200:
                return
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"standin-relay not ready within {ready_within}s:\n{self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, n=30):
        self.log.flush()
        return "\n".join(self.log_path.read_text().splitlines()[-n:])

    def stop(self):
        """SIGINT: the stand-in exits at once, as Relay does."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
