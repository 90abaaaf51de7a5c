"""Test support for the Python suites (the map in a browser, the read API): mosquitto, the worker and fleet-sim
started on free loopback ports, and a few waiting and time helpers."""
import datetime
import json
import math
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # Tests/Python/stack.py


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, check, timeout, interval=0.1):
    """Polls `check` until it returns a truthy value; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def offset(origin, north_m, east_m):
    lat = origin[0] + north_m / 111_195.0
    lon = origin[1] + east_m / (111_195.0 * math.cos(math.radians(origin[0])))
    return (lat, lon)


def iso(seconds_ago):
    t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds_ago)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def metric(port, name, **labels):
    """The sum of a Prometheus metric family's samples at http://127.0.0.1:{port}/metrics whose labels include
    `labels`; None when it has none."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    total, found = 0.0, False
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+)(\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(3) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(4))
            found = True
    return total if found else None


class Stack:
    """mosquitto, the worker and fleet-sim on free loopback ports; stopped in reverse order."""

    def __init__(self, bin_dir, folder, vehicles=12, bad_input_rate=0.0, worker_settings=(), fleet_arguments=()):
        self.folder = folder
        self.processes = []
        self.broker_port = free_port()
        self.http_port = free_port()
        conf = os.path.join(folder, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write(f"listener {self.broker_port} 127.0.0.1\nallow_anonymous true\n")
        self.start("mosquitto", ["mosquitto", "-c", conf])
        wait_until("mosquitto to listen", lambda: self.listening(self.broker_port), 10)
        broker = f"mqtt://127.0.0.1:{self.broker_port}"
        self.start("worker", [
            os.path.join(bin_dir, "ride-status-worker"), "--config", os.path.join(ROOT, "config/worker.yaml"),
            "--broker", broker, "--metrics-port", str(self.http_port), "--state-dir", os.path.join(folder, "state"),
            "--update-interval", "1", "--set", "http.tileURL=",
        ] + [argument for setting in worker_settings for argument in ("--set", setting)])
        wait_until("the worker to be ready", lambda: self.get("/readyz", raw=True) == b"ready\n", 30)
        self.start("fleet-sim", [
            os.path.join(bin_dir, "fleet-sim"), "--broker", broker, "--vehicles", str(vehicles), "--cancel-rate", "0",
            "--ride-prefix", "sim", "--bad-input-rate", str(bad_input_rate),
        ] + list(fleet_arguments))
        self.broker = broker

    def start(self, name, command):
        log = open(os.path.join(self.folder, f"{name}.log"), "wb")
        self.processes.append((name, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)))

    @staticmethod
    def listening(port):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    def get(self, path, raw=False, token=None):
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                body = response.read()
                return body if raw else json.loads(body)
        except (urllib.error.URLError, ConnectionError):
            return None

    def publish(self, topic, payload, retain=False):
        command = ["mosquitto_pub", "-p", str(self.broker_port), "-q", "1", "-t", topic, "-m", json.dumps(payload)]
        subprocess.run(command + (["-r"] if retain else []), check=True)

    def stop(self):
        """Stops everything, the worker with SIGTERM: it must say goodbye and exit 0 within 10 s (L8), even with a
        live map's event stream open."""
        problems = []
        for name, process in reversed(self.processes):
            started = time.monotonic()
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
                if name == "worker":
                    problems.append(f"the worker did not stop within 10 s of SIGTERM: see {self.folder}/worker.log")
            if name == "worker" and process.returncode != 0 and not problems:
                problems.append(f"the worker exited with {process.returncode}: see {self.folder}/worker.log")
            if name == "worker":
                self.worker_stop_seconds = time.monotonic() - started
        if problems:
            raise AssertionError("; ".join(problems))


def share_keys(bin_dir, folder):
    """A share-link key made with the worker's own command: (private key file, key set file)."""
    private_key, key_set = os.path.join(folder, "share-k1.jwk"), os.path.join(folder, "share-keys.json")
    subprocess.run([os.path.join(bin_dir, "ride-status-worker"), "share-key", "--id", "k1", "--private-key",
                    private_key, "--key-set", key_set], check=True, stdout=subprocess.DEVNULL)
    return private_key, key_set


def share_link(bin_dir, private_key, ride, base, expires_in="10m"):
    """A share link for `ride`, as `ride-status-worker share-link` prints it."""
    result = subprocess.run([os.path.join(bin_dir, "ride-status-worker"), "share-link", "--ride", ride,
                             "--private-key", private_key, "--expires-in", expires_in, "--base-url", base],
                            check=True, capture_output=True, text=True)
    return result.stdout.strip()
