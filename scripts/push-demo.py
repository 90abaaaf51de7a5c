#!/usr/bin/env python3
"""push-demo.py: what ride-push would send to a rider's lock screen, for `make run`.

APNs and FCM cannot be reached from a laptop without an Apple or Firebase account, so this starts the stand-ins
of both (Tests/Python/standins/push_standins.py, which check every request as the real services do), starts
ride-push against them and the broker, registers an iPhone and an Android phone for one ride with its share
token, and prints one line per push the stand-ins accept, until stopped (SIGTERM or Ctrl-C stops ride-push
and the stand-ins with it).

Usage: push-demo.py --bin-dir .build/release --ride R --share-token-file F --share-keys keys.json --folder var/push
       --broker mqtts://localhost:8883 --ca-file ca.crt --username ride-push --password-file secret

The share token comes in a file (mode 600), never on the command line, where `ps` would show it to every user (A4).
"""
import argparse
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STANDINS = os.path.join(ROOT, "Tests", "Python", "standins", "push_standins.py")
BUNDLE = "com.example.rides"
# New devices each run: the registrations of an earlier run are retained in the broker (KEEP=1 keeps its rides),
# and pushes for their rides must not read as this run's ride's.
IPHONE = secrets.token_hex(32)
ANDROID = f"demo-android-{secrets.token_hex(4)}:APA91b-demo"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def say(text):
    print(text, flush=True)


def keys(folder):
    """A throwaway APNs signing key and FCM service account, as Apple's and Google's consoles would give."""
    apns_key = os.path.join(folder, "AuthKey_DEMOKEY123.p8")
    with open(apns_key, "wb") as f:
        f.write(ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    account = {
        "type": "service_account", "project_id": "rides-demo", "client_email": "push@rides-demo.iam.gserviceaccount.com",
        "private_key": rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode(),
    }
    return apns_key, account


def ride_of(push, rides):
    """The ride a push is for: FCM's data names it; an APNs push goes to an activity's token, registered for one ride."""
    if push["service"] == "fcm":
        return push["payload"]["message"]["data"].get("ride", "?")
    return rides.get(push.get("token"), "a device of another run")


def describe(push):
    """One line a person can read: the service, priority, event and what the lock screen shows."""
    if push["service"] == "apns":
        aps = push["payload"]["aps"]
        state = aps["content-state"]
        return (f"APNs p{push['priority']:<4} {aps['event']:6} {state['phase']:17} "
                f"seq {state['sequence']:<4} progress {state.get('progress', 0):.2f}"
                + (f" ending {state['ending']}" if state.get("ending") else ""))
    data = push["payload"]["message"]["data"]
    return (f"FCM  {push['payload']['message']['android']['priority']:6} {data['event']:6} {data['phase']:17} "
            f"seq {data['sequence']:<4} progress {float(data['progress']):.2f}"
            + (f" ending {data['ending']}" if data.get("ending") else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ("--bin-dir", "--ride", "--share-token-file", "--share-keys", "--folder", "--broker"):
        parser.add_argument(name, required=True)
    parser.add_argument("--ca-file")
    parser.add_argument("--username")
    parser.add_argument("--password-file")
    args = parser.parse_args()
    with open(args.share_token_file) as handle:
        share_token = handle.readline().strip()
    os.makedirs(args.folder, exist_ok=True)
    apns_key, account = keys(args.folder)
    account_path = os.path.join(args.folder, "account.json")
    with open(account_path, "w") as f:
        json.dump(account, f)
    children = []

    def stop(*_):
        for child in reversed(children):
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    standins_log = open(os.path.join(args.folder, "standins.log"), "ab")
    standins = subprocess.Popen(
        [sys.executable, STANDINS, "--cert-dir", args.folder, "--apns-key", apns_key, "--apns-key-id", "DEMOKEY123",
         "--team-id", "TEAMDEMO12", "--bundle", BUNDLE, "--fcm-account", account_path, "--project", "rides-demo"],
        stdout=subprocess.PIPE, stderr=standins_log, text=True)
    children.append(standins)
    ready = json.loads(standins.stdout.readline())
    account["token_uri"] = f"https://127.0.0.1:{ready['port']}/token"
    with open(account_path, "w") as f:
        json.dump(account, f)
    context = ssl.create_default_context(cafile=ready["certificate"])

    http_port = free_port()
    command = [os.path.join(args.bin_dir, "ride-push"), "--broker", args.broker, "--http-port", str(http_port),
               "--share-keys", args.share_keys,
               "--apns-url", f"https://127.0.0.1:{ready['apns_port']}", "--apns-key", apns_key,
               "--apns-key-id", "DEMOKEY123", "--team-id", "TEAMDEMO12", "--bundle-id", BUNDLE,
               "--apns-ca-file", ready["certificate"],
               "--fcm-url", f"https://127.0.0.1:{ready['port']}", "--fcm-account", account_path,
               "--fcm-ca-file", ready["certificate"], "--member-id", "ride-push-demo"]
    for flag, value in (("--ca-file", args.ca_file), ("--username", args.username),
                        ("--password-file", args.password_file)):
        if value:
            command += [flag, value]
    push_log = open(os.path.join(args.folder, "ride-push.log"), "ab")
    children.append(subprocess.Popen(command, stdout=push_log, stderr=subprocess.STDOUT))
    say(f"ride-push on http://127.0.0.1:{http_port} (metrics: /metrics; log: {args.folder}/ride-push.log), "
        f"APNs and FCM stand-ins on :{ready['apns_port']} and :{ready['port']}")

    def call(body):
        request = urllib.request.Request(
            f"http://127.0.0.1:{http_port}/v1/rides/{args.ride}/devices", data=json.dumps(body).encode(),
            method="POST", headers={"content-type": "application/json",
                                    "authorization": f"Bearer {share_token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status

    deadline = time.time() + 60
    while True:
        try:
            call({"service": "apns", "token": IPHONE})
            call({"service": "fcm", "token": ANDROID})
            break
        except urllib.error.HTTPError as error:
            body = error.read().decode()
            # 503 brokerUnavailable while ride-push is still connecting: try again.
            if error.code == 503 and time.time() < deadline:
                time.sleep(0.5)
                continue
            say(f"registration for {args.ride} refused: {error.code} {body}")
            stop()
        except OSError:
            if time.time() > deadline or children[-1].poll() is not None:
                say(f"ride-push did not start; see {args.folder}/ride-push.log")
                stop()
            time.sleep(0.5)
    say(f"an iPhone and an Android phone registered for {args.ride}; each push the stand-ins accept follows")
    seen = 0
    while True:
        time.sleep(1)
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{ready['port']}/control/pushes", context=context,
                                        timeout=5) as response:
                pushes = json.loads(response.read())
        except OSError:
            continue
        for push in pushes[seen:]:
            say(f"{time.strftime('%H:%M:%S')} {ride_of(push, {IPHONE: args.ride})}: {describe(push)}")
        seen = len(pushes)


if __name__ == "__main__":
    main()
