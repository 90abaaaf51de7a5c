#!/usr/bin/env python3
"""make test-security: attacks on `make run`'s deployment as shipped, from an account on the same host (A1, A3, A4).

It sets up what `make run` sets up, on free loopback ports: `scripts/deploy-setup.sh` (a private CA, the broker's and
the workers' certificates, the dynamic security plugin's accounts), mosquitto with `config/mosquitto.conf` (TLS only,
passwords on one listener, client certificates on the other), the worker by its certificate with share links on,
fleet-sim driving rides as its account, and ride-push with its stand-ins of APNs and FCM (`scripts/push-demo.py`).
Then it tries every attack below. Each names the refusal it expects, and after each the victims must have kept
working: the worker made no second connection, mosquitto closed no client's connection for another's, and every ride
kept its cadence (C1).

    python3 Tests/Python/security/test_security.py --bin-dir .build/debug [--seconds 20]

Prints one line per attack, then `N passed, N failed`; exits non-zero when any attack was not refused.
"""
import argparse
import base64
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from stack import ROOT, free_port, metric, wait_until  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402
from paho.mqtt.reasoncodes import ReasonCode  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402

NOT_AUTHORIZED = 0x87
INTERVAL = 1.0


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Deployment:
    """make run's deployment in a temporary folder: broker, worker, fleet-sim, ride-push; stopped in reverse order."""

    def __init__(self, bin_dir, folder):
        self.bin_dir, self.folder = bin_dir, folder
        self.processes = []
        self.security = os.path.join(folder, "security")
        run = subprocess.run(["bash", os.path.join(ROOT, "scripts/deploy-setup.sh"), self.security],
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise AssertionError(f"deploy-setup.sh failed: {run.stdout}{run.stderr}")
        self.ca = os.path.join(self.security, "tls/ca.crt")
        self.port, self.worker_port, self.http_port = free_port(), free_port(), free_port()
        plugin = next(p for p in ("/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so",
                                  "/usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so",
                                  "/usr/lib/mosquitto_dynamic_security.so") if os.path.exists(p))
        with open(os.path.join(ROOT, "config/mosquitto.conf")) as handle:
            conf = handle.read()
        data = os.path.join(folder, "data")
        os.makedirs(data)
        self.broker_log = os.path.join(folder, "mosquitto.log")
        conf = (conf.replace("listener 8883", f"listener {self.port} 127.0.0.1")
                .replace("listener 8884", f"listener {self.worker_port} 127.0.0.1")
                .replace("/secrets/", self.security + "/").replace("/accounts/", self.security + "/")
                .replace("plugin /usr/lib/mosquitto_dynamic_security.so", f"plugin {plugin}")
                .replace("/mosquitto/data/", data + "/")
                .replace("log_dest stdout", f"log_dest file {self.broker_log}"))
        # Connections and their closing, to see a session taken over ("already connected, closing old connection").
        conf += "log_type information\n" + ("user root\n" if os.getuid() == 0 else "")
        path = os.path.join(folder, "mosquitto.conf")
        with open(path, "w") as handle:
            handle.write(conf)
        self.start("mosquitto", ["mosquitto", "-c", path])
        wait_until("mosquitto to listen", lambda: listening(self.port), 10)

        share = os.path.join(self.security, "share")
        os.makedirs(share, mode=0o700)
        self.private_key, self.key_set = os.path.join(share, "signing.jwk"), os.path.join(share, "keys.json")
        subprocess.run([self.binary("ride-status-worker"), "share-key", "--id", "k1", "--private-key",
                        self.private_key, "--key-set", self.key_set], check=True, stdout=subprocess.DEVNULL)
        self.worker_id = "w-sec"
        self.start("worker", [
            self.binary("ride-status-worker"), "--config", os.path.join(ROOT, "config/worker.yaml"),
            "--broker", f"mqtts://localhost:{self.worker_port}", "--worker-id", self.worker_id,
            "--state-dir", os.path.join(folder, "state"), "--metrics-port", str(self.http_port),
            "--update-interval", str(INTERVAL),
            "--set", f"broker.caFile={self.ca}", "--set", f"broker.certificateFile={self.security}/tls/worker.crt",
            "--set", f"broker.keyFile={self.security}/tls/worker.key", "--set", f"http.shareKeys={self.key_set}",
            "--set", "http.tileURL="])
        wait_until("the worker to be ready", lambda: self.http("/readyz")[0] == 200, 60)
        self.start("fleet-sim", [
            self.binary("fleet-sim"), "--broker", f"mqtts://localhost:{self.port}", "--ca-file", self.ca,
            "--username", "fleet-sim", "--password-file", self.secret("fleet-sim"), "--vehicles", "6",
            "--cancel-rate", "0", "--ride-prefix", "sec"])

    def binary(self, name):
        return os.path.abspath(os.path.join(self.bin_dir, name))

    def secret(self, account):
        for folder in ("secrets", "accounts"):
            path = os.path.join(self.security, folder, account)
            if os.path.exists(path):
                return path
        raise AssertionError(f"no password for {account}")

    def password(self, account):
        with open(self.secret(account)) as handle:
            return handle.readline().strip()

    def start(self, name, command, **options):
        log = open(os.path.join(self.folder, f"{name}.log"), "ab")
        process = subprocess.Popen(command, stdout=options.pop("stdout", log), stderr=subprocess.STDOUT, **options)
        self.processes.append((name, process))
        return process

    def accounts(self, *arguments):
        """scripts/broker-accounts.py as dispatch runs it: (exit code, output)."""
        run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/broker-accounts.py"), *arguments,
                              "--secrets", os.path.join(self.security, "accounts"), "--static-secrets",
                              os.path.join(self.security, "secrets"), "--port", str(self.port), "--cafile", self.ca,
                              "--host", "localhost"], capture_output=True, text=True)
        return run.returncode, run.stdout + run.stderr

    def http(self, path, host=None, port=None, method="GET", body=None, headers=None):
        """(status, body) of one request on loopback, with `Host` set as given."""
        port = port or self.http_port
        try:
            connection = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            return None, ""
        payload = json.dumps(body).encode() if body is not None else b""
        fields = {"Host": host or f"127.0.0.1:{port}", "Connection": "close", **(headers or {})}
        if body is not None:
            fields.update({"Content-Type": "application/json", "Content-Length": str(len(payload))})
        request = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
        try:
            connection.sendall(request.encode() + payload)
            response = b""
            while True:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                response += chunk
        except OSError:
            return None, ""
        finally:
            connection.close()
        match = re.match(rb"HTTP/1\.1 (\d{3})", response)
        return (int(match.group(1)) if match else None), response.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")

    def stop(self):
        for _, process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def connect(deployment, user, client_id, password=None, port=None, clean_start=True, certificate=None):
    """An MQTT 5 client over TLS: (client, the CONNACK's reason code, session present), the client connected or not."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    if user is not None:
        client.username_pw_set(user, password if password is not None else deployment.password(user))
    client.tls_set(ca_certs=deployment.ca, certfile=certificate and certificate[0], keyfile=certificate and certificate[1])
    answered, outcome = threading.Event(), {}

    def on_connect(_client, _userdata, flags, reason_code, _properties):
        outcome.update(code=reason_code, present=flags.session_present)
        answered.set()

    client.on_connect = on_connect
    client.messages = []
    client.on_message = lambda _c, _u, message: client.messages.append(message)
    try:
        properties = mqtt.Properties(mqtt.PacketTypes.CONNECT)
        properties.SessionExpiryInterval = 0 if clean_start else 3600
        client.connect("localhost", port or deployment.port, clean_start=clean_start, properties=properties)
    except (OSError, ssl.SSLError) as error:
        return client, f"no connection ({type(error).__name__})", False
    client.loop_start()
    if not answered.wait(5):
        client.loop_stop()
        return client, "no CONNACK", False
    return client, outcome["code"], outcome["present"]


def value(code):
    return code.value if isinstance(code, ReasonCode) else code


def acknowledged(client, action):
    """The reason code of the SUBACK or PUBACK (MQTT 5) of the packet `action` sends, matched by its message id."""
    answered, outcome, wanted = threading.Event(), {}, {}

    def note(mid, code):
        with lock:
            if wanted.get("mid") == mid:
                outcome["code"] = code
                answered.set()
            else:
                early[mid] = code

    lock, early = threading.Lock(), {}
    client.on_subscribe = lambda _c, _u, mid, codes, _p: note(mid, codes[0])
    client.on_publish = lambda _c, _u, mid, code, _p: note(mid, code)
    result = action()
    mid = result[1] if isinstance(result, tuple) else result.mid
    with lock:
        wanted["mid"] = mid
        if mid in early:
            outcome["code"] = early[mid]
            answered.set()
    answered.wait(5)
    return value(outcome.get("code"))


class Observer:
    """Dispatch's view of every ride's status: the longest gap between two statuses of a ride while it lasts."""

    def __init__(self, deployment):
        self.client, code, _ = connect(deployment, "dispatch", "dispatch")
        assert value(code) == 0, f"dispatch could not sign in: {code}"
        self.lock = threading.Lock()
        self.last, self.gaps = {}, {}
        self.client.on_message = self.received
        acknowledged(self.client, lambda: self.client.subscribe("rides/+/status", qos=1))

    def received(self, _client, _userdata, message):
        ride = message.topic.split("/")[1]
        now = time.monotonic()
        with self.lock:
            if not message.payload or b'"completed"' in message.payload or b'"canceled"' in message.payload:
                self.last.pop(ride, None)  # ended: no cadence owed
                return
            if ride in self.last and not message.retain:
                self.gaps[ride] = max(self.gaps.get(ride, 0), now - self.last[ride])
            self.last[ride] = now

    def window(self):
        with self.lock:
            self.gaps.clear()

    def longest_gap(self):
        with self.lock:
            open_gaps = [time.monotonic() - seen for seen in self.last.values()]
            return max(list(self.gaps.values()) + open_gaps + [0]), len(self.last)


class Suite:
    def __init__(self, deployment):
        self.deployment = deployment
        self.passed, self.failed = 0, 0

    def check(self, name, expected, got, ok):
        line = f"{'ok  ' if ok else 'FAIL'} {name}: expected {expected}, got {got}"
        print(line, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def takeovers(deployment):
    with open(deployment.broker_log, errors="replace") as handle:
        return [line.strip() for line in handle if "already connected, closing old connection" in line]


def token_parts(token):
    header, claims, signature = token.split(".")
    return json.loads(unb64(header)), json.loads(unb64(claims)), signature


def signed(header, claims, key):
    head = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    return head + "." + b64(key.sign(head.encode()))


def run(args, folder):
    deployment = Deployment(args.bin_dir, folder)
    try:
        suite = Suite(deployment)
        observer = Observer(deployment)
        wait_until("rides with statuses", lambda: observer.longest_gap()[1] >= 2, 60)
        ride = sorted(observer.last)[0]
        other = sorted(observer.last)[-1]
        link = subprocess.run([deployment.binary("ride-status-worker"), "share-link", "--ride", ride, "--private-key",
                               deployment.private_key, "--expires-in", "10m", "--base-url", "http://x"],
                              check=True, capture_output=True, text=True).stdout.strip()
        token = link.rsplit("/", 1)[-1]
        token_file = os.path.join(deployment.security, "share", "demo-token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            handle.write(token + "\n")
        push_out = open(os.path.join(folder, "push-demo.log"), "w+")
        deployment.start("push-demo", [
            sys.executable, os.path.join(ROOT, "scripts/push-demo.py"), "--bin-dir", deployment.bin_dir, "--ride", ride,
            "--share-token-file", token_file, "--share-keys", deployment.key_set, "--folder",
            os.path.join(folder, "push"), "--broker", f"mqtts://localhost:{deployment.port}", "--ca-file",
            deployment.ca, "--username", "ride-push", "--password-file", deployment.secret("ride-push")],
            stdout=push_out)

        def push_port():
            with open(push_out.name) as handle:
                text = handle.read()
            found = re.search(r"ride-push on http://127\.0\.0\.1:(\d+)", text)
            return found and "registered" in text and int(found.group(1))

        push = wait_until("ride-push with two devices registered", push_port, 90)
        # The rider account dispatch issues for the ride, and a second rider and a vehicle for the attacks.
        code, output = deployment.accounts("add-rider", ride, "--devices", "2")
        assert code == 0, output
        code, output = deployment.accounts("add-rider", other)
        assert code == 0, output
        connects_before = metric(deployment.http_port, "ridestatus_connects_total")
        observer.window()
        started = time.monotonic()

        # --- A4: nobody wears another's client id --------------------------------------------------------------
        for attacker, victim in [
            (ride, f"ride-status-worker-{deployment.worker_id}"),  # the worker's session, named in every status
            (ride, f"ride-status-worker-{deployment.worker_id}-share"),  # its share-link connection
            (ride, "ride-push"), (ride, "dispatch"), (ride, other), (ride, "fleet-sim"),
            ("v-0042", "v-0043"), ("v-0042", f"ride-status-worker-{deployment.worker_id}"),
            ("dispatch", "ride-push"), ("monitor", f"ride-status-worker-{deployment.worker_id}"),
        ]:
            client, code, present = connect(deployment, attacker, victim, clean_start=False)
            client.loop_stop()
            suite.check(f"A4: {attacker} connects as client id {victim} (clean start off)",
                        "CONNACK 0x87 Not authorized, no session", f"{code}, session present {present}",
                        value(code) == NOT_AUTHORIZED and not present)
        client, code, _ = connect(deployment, f"{ride}~2", f"{ride}~2")
        suite.check(f"A4: the rider's second device under its own account {ride}~2", "CONNACK 0", code, value(code) == 0)
        client.disconnect()
        client, code, _ = connect(deployment, "worker", f"ride-status-worker-{deployment.worker_id}",
                                  password=deployment.password("worker"))
        suite.check("A4: the worker's password on the password listener", "CONNACK 0x87 (no such account there)",
                    code, value(code) == NOT_AUTHORIZED)
        client, code, _ = connect(deployment, None, "anonymous")
        suite.check("anonymous on the password listener", "CONNACK 0x87", code, value(code) == NOT_AUTHORIZED)
        client, code, _ = connect(deployment, None, "no-certificate", port=deployment.worker_port)
        suite.check("the certificate listener without a certificate", "no connection", code, value(code) != 0)
        access = acknowledged_default_access(deployment)
        suite.check("A4: the plugin's default access", "publishClientReceive denied", access, access is False)

        # --- Each role its part (A1, A3, the ACL) -------------------------------------------------------------
        rider, code, _ = connect(deployment, ride, ride)
        for topic in [f"rides/{other}/status", "fleet/vehicles/+/position", "#", "replies/dispatch/#",
                      "ridestatus/push/devices/+/+", "ridestatus/state/#", f"replies/{other}/#"]:
            got = acknowledged(rider, lambda t=topic: rider.subscribe(t, qos=1))
            suite.check(f"A1: rider {ride} subscribes to {topic}", "SUBACK 0x87", got, got == NOT_AUTHORIZED)
        vehicle, _, _ = connect(deployment, "v-0042", "v-0042")
        forgeries = [
            (vehicle, "v-0042", "fleet/vehicles/v-0043/position", "a spoofed vehicle's position"),
            (vehicle, "v-0042", "fleet/vehicles/v-0043/event", "a spoofed driver event (A3)"),
            (vehicle, "v-0042", f"ridestatus/state/0000/{ride}", "a forged ride state (A2)"),
            (rider, ride, "ridestatus/priors/forged", "forged priors (E1)"),
            (rider, ride, f"rides/{ride}/status", "a forged status"),
            (rider, ride, f"rides/{ride}/stop", "a stop from a rider"),
            (rider, ride, "ridestatus/workers/w-forged", "a forged worker presence (G1)"),
        ]
        for client, who, topic, what in forgeries:
            got = acknowledged(client, lambda c=client, t=topic: c.publish(t, b'{"forged": true}', qos=1))
            suite.check(f"{what}: {who} publishes {topic}", "PUBACK 0x87", got, got == NOT_AUTHORIZED)
        for client in (rider, vehicle):
            client.disconnect()
            client.loop_stop()
        code, output = deployment.accounts("add-vehicle", "v-0100", "--devices", "2")
        assert code == 0, output
        code, output = deployment.accounts("add-rider", "v-0100")
        suite.check("A4: add-rider for a vehicle's name (one name space)", "refused", f"exit {code}",
                    code != 0 and "never both" in output)
        code, output = deployment.accounts("remove-rider", "v-0100")
        suite.check("A4: remove-rider for a vehicle's name", "refused", f"exit {code}",
                    code != 0 and "never both" in output)
        code, output = deployment.accounts("add-rider", "v-0042")
        suite.check("A4: add-rider for a vehicle of accounts.yaml", "refused", f"exit {code}",
                    code != 0 and "accounts.yaml" in output)
        code, output = deployment.accounts("add-vehicle", other)
        suite.check("A4: add-vehicle for a rider's name", "refused", f"exit {code}", code != 0 and "never both" in output)
        for name in (f"ride-status-worker-{deployment.worker_id}", "ride-push-2"):
            code, output = deployment.accounts("add-rider", name)
            suite.check(f"A4: add-rider {name} (a worker's client id, a service's name)", "refused",
                        f"exit {code}", code != 0 and "reserved" in output)
        for name in ("v-0042", "v-0100", "v-0100~2"):
            client, code, _ = connect(deployment, name, name)
            suite.check(f"the vehicle's account {name} still signs in after the refusals", "CONNACK 0", code,
                        value(code) == 0)
            client.disconnect()

        # --- A4: the HTTP surface answers only its own names ----------------------------------------------------
        rebound = f"attacker.example:{deployment.http_port}"
        for path in ["/v1/vehicles", "/v1/rides", "/", "/v1/live", f"/share/{token}", f"/share/{token}/status",
                     "/metrics"]:
            status, body = deployment.http(path, host=rebound)
            suite.check(f"A4: DNS rebinding, GET {path} with Host {rebound}", "421", status,
                        status == 421 and "misdirectedHost" in body)
        status, _ = deployment.http("/healthz", host=rebound)
        suite.check("A4: /healthz for any host (a probe by address)", "200", status, status == 200)
        status, _ = deployment.http(f"/v1/rides/{ride}/devices", host=f"attacker.example:{push}", port=push,
                                    method="POST", body={"service": "apns", "token": "ab" * 32},
                                    headers={"Authorization": f"Bearer {token}"})
        suite.check("A4: DNS rebinding on ride-push's registration server", "421", status, status == 421)

        # --- Share tokens, paths and sizes ---------------------------------------------------------------------
        header, claims, signature = token_parts(token)
        altered = token[:-4] + ("AAAA" if token[-4:] != "AAAA" else "BBBB")
        stranger = Ed25519PrivateKey.generate()
        public = stranger.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        embedded = signed(dict(header, jwk={"kty": "OKP", "crv": "Ed25519", "x": b64(public)}), claims, stranger)
        none = b64(json.dumps({"alg": "none", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode()) + "."
        expired_link = subprocess.run([deployment.binary("ride-status-worker"), "share-link", "--ride", ride,
                                       "--private-key", deployment.private_key, "--expires-in", "1s", "--base-url",
                                       "http://x"], check=True, capture_output=True, text=True).stdout.strip()
        time.sleep(2.5)
        for name, candidate, path, expected in [
            ("an altered signature", altered, "/share/{t}/status", {401}),
            ("an embedded key (jwk) of the attacker's", embedded, "/share/{t}/status", {401}),
            ("alg none", none, "/share/{t}/status", {401}),
            ("an expired link", expired_link.rsplit("/", 1)[-1], "/share/{t}/status", {401}),
            ("another ride's token as a bearer", token, f"/v1/rides/{other}", {403}),
            ("a share token for the fleet", token, "/v1/vehicles", {403}),
        ]:
            headers = {"Authorization": f"Bearer {candidate}"} if "{t}" not in path else {}
            status, _ = deployment.http(path.replace("{t}", candidate), headers=headers)
            suite.check(f"share links: {name}", " or ".join(map(str, sorted(expected))), status, status in expected)
        for path in ["/leaflet/../../../../etc/passwd", "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                     "/leaflet/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2f..%2fetc%2fpasswd"]:
            status, body = deployment.http(path)
            suite.check(f"path traversal: GET {path}", "no file (4xx)", status,
                        status is not None and 400 <= status < 500 and "root:" not in body)
        status, _ = deployment.http("/v1/rides/" + "r" * 200_000)
        suite.check("a 200 kB URL", "refused (4xx) or the connection closed, the worker alive", status,
                    (status is None or 400 <= status < 500) and deployment.http("/healthz")[0] == 200)
        statuses = []
        for index in range(6):
            status, _ = deployment.http(f"/v1/rides/{ride}/devices", port=push, method="POST",
                                        body={"service": "fcm", "token": f"attack-{index}-" + "x" * 40},
                                        headers={"Authorization": f"Bearer {token}"})
            statuses.append(status)
        suite.check("ride-push registrations beyond the cap (5 a ride)", "409 tooManyDevices at the cap",
                    statuses, 409 in statuses and all(s in (200, 201, 409) for s in statuses))

        # --- The victims kept working ---------------------------------------------------------------------------
        remaining = args.seconds - (time.monotonic() - started)
        if remaining > 0:
            time.sleep(remaining)
        connects_after = metric(deployment.http_port, "ridestatus_connects_total")
        suite.check("the worker kept its one connection through every attack", f"{connects_before:.0f} connects",
                    f"{connects_after:.0f}", connects_after == connects_before)
        taken = takeovers(deployment)
        suite.check("mosquitto closed no client's connection for another's (no session taken over)", "none",
                    taken[:3] or "none", not taken)
        gap, rides = observer.longest_gap()
        suite.check(f"C1: the rides kept their cadence ({INTERVAL:.0f} s) through the attacks",
                    f"no gap over {2 * INTERVAL + 1.5:.1f} s", f"{gap:.2f} s over {rides} rides",
                    rides > 0 and gap <= 2 * INTERVAL + 1.5)
        with open(os.path.join(folder, "push", "ride-push.log"), errors="replace") as handle:
            kicked = [line for line in handle if "lost the broker" in line]
        suite.check("ride-push kept its connection", "no connection lost", kicked[:2] or "none", not kicked)
        upgrade(deployment, suite)
        return suite
    finally:
        deployment.stop()


def upgrade(deployment, suite):
    """A4's migration: a broker as an earlier release left it (receiving allowed by default, a worker account with a
    password, accounts bound to no client id, a name both a rider's and a vehicle's) brought to A4 by one command."""
    module = accounts_module()
    request = admin(deployment)
    old = [
        {"command": "setDefaultACLAccess", "acls": [{"acltype": "publishClientReceive", "allow": True}]},
        {"command": "createRole", "rolename": "worker-worker", "acls": []},
        {"command": "createClient", "username": "worker", "password": "old-worker-password"},
        {"command": "addClientRole", "username": "worker", "rolename": "worker-worker"},
        {"command": "createRole", "rolename": "rider-r-old", "acls": []},
        {"command": "createClient", "username": "r-old", "password": "old-rider-password"},
        {"command": "addClientRole", "username": "r-old", "rolename": "rider-r-old"},
        {"command": "createRole", "rolename": "vehicles-v-both", "acls": []},
        {"command": "createRole", "rolename": "rider-v-both", "acls": []},
        {"command": "createClient", "username": "v-both", "password": "old-vehicle-password"},
        {"command": "addClientRole", "username": "v-both", "rolename": "vehicles-v-both"},
        {"command": "addClientRole", "username": "v-both", "rolename": "rider-v-both"},
    ]
    module.check(old, module.request(request, old))
    # An admin of the earlier release, bound to no client id: changing it ends the admin's own connection.
    module.send_only(request, [{"command": "setClientId", "username": module.ADMIN}])
    answer = module.request(request, [{"command": "getClient", "username": module.ADMIN}])[0]
    suite.check("before the upgrade: the accounts admin bound to no client id", "no clientid",
                answer["data"]["client"].get("clientid"), not answer["data"]["client"].get("clientid"))
    # The hole itself, so that the takeover check above is known to see one: an unbound account takes fleet-sim's
    # session, and mosquitto closes fleet-sim's connection for it.
    before = len(takeovers(deployment))
    client, code, _ = connect(deployment, "r-old", "fleet-sim", password="old-rider-password")
    time.sleep(0.5)
    taken = takeovers(deployment)[before:]
    suite.check("before the upgrade: an unbound account takes fleet-sim's session", "CONNACK 0 and a takeover logged",
                f"{code}, {taken[:1] or 'no takeover'}", value(code) == 0 and any("fleet-sim" in t for t in taken))
    client.disconnect()
    code, output = deployment.accounts("upgrade")
    suite.check("A4: broker-accounts.py upgrade", "exit 0", f"exit {code}", code == 0 and "v-both" in output)
    for user, password, client_id, what in [
        ("worker", "old-worker-password", "ride-status-worker-w-sec", "the old worker account"),
        ("r-old", "old-rider-password", "ride-status-worker-anything", "the old rider under another's client id"),
    ]:
        client, code, _ = connect(deployment, user, client_id, password=password)
        suite.check(f"A4 after the upgrade: {what}", "CONNACK 0x87", code, value(code) == NOT_AUTHORIZED)
    client, code, _ = connect(deployment, "r-old", "r-old", password="old-rider-password")
    suite.check("A4 after the upgrade: the old rider under its own name", "CONNACK 0", code, value(code) == 0)
    client.disconnect()
    answer = module.request(request, [{"command": "getClient", "username": "v-both"}])[0]
    roles = sorted(role["rolename"] for role in answer["data"]["client"]["roles"])
    suite.check("A4 after the upgrade: a name both a rider's and a vehicle's", "the vehicle's role alone", roles,
                roles == ["vehicles-v-both"])
    client, code, _ = connect(deployment, "v-both", "v-both", password="old-vehicle-password")
    suite.check("A4 after the upgrade: that name's old password (the rider knew it)", "CONNACK 0x87", code,
                value(code) == NOT_AUTHORIZED)
    client, code, _ = connect(deployment, "v-both", "v-both")
    suite.check("A4 after the upgrade: that name's new password, for the vehicle's devices", "CONNACK 0", code,
                value(code) == 0)
    client.disconnect()
    answer = module.request(request, [{"command": "getClient", "username": module.ADMIN}])[0]
    suite.check("A4 after the upgrade: the accounts admin bound to its name", module.ADMIN,
                answer["data"]["client"].get("clientid"), answer["data"]["client"].get("clientid") == module.ADMIN)
    access = acknowledged_default_access(deployment)
    suite.check("A4 after the upgrade: the default access", "publishClientReceive denied", access, access is False)
    code, output = deployment.accounts("upgrade")
    suite.check("A4: upgrade run again changes nothing", "exit 0, 0 accounts bound", f"exit {code}",
                code == 0 and " 0 accounts bound" in output)


def accounts_module():
    """scripts/broker-accounts.py as a module: its request() speaks to the plugin as the accounts admin."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import importlib.util
    spec = importlib.util.spec_from_file_location("broker_accounts", os.path.join(ROOT, "scripts/broker-accounts.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def admin(deployment):
    return argparse.Namespace(host="localhost", port=deployment.port, cafile=deployment.ca, timeout=10,
                              secrets=os.path.join(deployment.security, "accounts"))


def acknowledged_default_access(deployment):
    """The plugin's default for publishClientReceive, as the accounts admin reads it."""
    answer = accounts_module().request(admin(deployment), [{"command": "getDefaultACLAccess"}])[0]
    return next((acl["allow"] for acl in answer.get("data", {}).get("acls", [])
                 if acl["acltype"] == "publishClientReceive"), None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--seconds", type=float, default=20, help="the attack window at least (the cadence is read over it)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="security-")
    try:
        suite = run(args, folder)
    except Exception:
        print(f"logs kept in {folder}", file=sys.stderr)
        raise
    print(f"{suite.passed} passed, {suite.failed} failed")
    if suite.failed:
        print(f"logs kept in {folder}", file=sys.stderr)
        sys.exit(1)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
