#!/usr/bin/env python3
"""The push stand-ins against independent clients, so that ride-push and the stand-ins do not share
one misunderstanding of Apple's and Google's APIs:
  - APNs: aioapns (PyPI), a client written from Apple's documentation by others, sends Live Activity pushes
    with a provider token of its own making; the stand-in accepts what Apple accepts and refuses the rest with
    Apple's status codes and reasons (wrong push type, wrong topic, bad priority, a payload over 4 KB, an
    unregistered token, an expired provider token on the stand-in's clock), and records timestamps that do
    not grow;
  - FCM: the OAuth 2.0 JWT bearer grant signed with the standard library's view of RFC 7523 (cryptography),
    then a data message, over HTTP/1.1 as Google's endpoints also allow.

Usage: Tests/Python/push/test_standins.py
"""
import asyncio
import base64
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.join(os.path.dirname(HERE), "standins", "push_standins.py")
BUNDLE = "com.example.rides"
TOKEN = "ab" * 32


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Standin:
    def __init__(self, directory):
        self.directory = directory
        apns_key = ec.generate_private_key(ec.SECP256R1())
        self.apns_key_path = os.path.join(directory, "AuthKey_TESTKEY123.p8")
        with open(self.apns_key_path, "wb") as f:
            f.write(apns_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        self.fcm_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.account = {
            "type": "service_account", "project_id": "rides-1", "client_email": "push@rides-1.iam.gserviceaccount.com",
            "private_key": self.fcm_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()).decode(),
        }
        self.account_path = account_path = os.path.join(directory, "account.json")
        with open(account_path, "w") as f:
            json.dump(self.account, f)
        self.process = subprocess.Popen(
            [sys.executable, STANDINS, "--cert-dir", directory, "--apns-key", self.apns_key_path,
             "--apns-key-id", "TESTKEY123", "--team-id", "TEAM123456", "--bundle", BUNDLE,
             "--fcm-account", account_path, "--project", "rides-1"],
            stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.process.stdout.readline())
        self.port = ready["port"]
        self.apns_port = ready["apns_port"]
        # The account's token endpoint is the stand-in's, as Google's key files name Google's.
        self.account["token_uri"] = f"https://127.0.0.1:{self.port}/token"
        with open(account_path, "w") as f:
            json.dump(self.account, f)
        self.context = ssl.create_default_context(cafile=ready["certificate"])
        self.certificate = ready["certificate"]
        deadline = time.time() + 20
        while True:
            try:
                self.control("GET", "/control/pushes")
                break
            except OSError:
                assert time.time() < deadline, "the stand-in never listened"
                time.sleep(0.1)

    def request(self, method, path, body=None, headers=None):
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers=headers or {})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def control(self, method, path, body=None):
        status, answer = self.request(method, path, body)
        assert status == 200, (path, status, answer)
        return answer

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


async def apns_cross_check(standin):
    import aioapns
    from aioapns import APNs, NotificationRequest, PushType
    from aioapns.connection import APNsProductionClientProtocol

    # aioapns connects to Apple's host; here, to the stand-in, trusting its certificate.
    APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
    APNsProductionClientProtocol.APNS_PORT = standin.apns_port
    os.environ["SSL_CERT_FILE"] = standin.certificate
    with open(standin.apns_key_path) as f:
        key = f.read()

    def client(topic=BUNDLE + ".push-type.liveactivity"):
        return APNs(key=key, key_id="TESTKEY123", team_id="TEAM123456", topic=topic, use_sandbox=False)

    def live(timestamp, event="update", **extra):
        aps = {"timestamp": timestamp, "event": event, "content-state": {"phase": "ongoing", "progress": 0.5}}
        aps.update(extra)
        return {"aps": aps}

    apns = client()
    now = int(time.time())
    result = await apns.send_notification(NotificationRequest(
        device_token=TOKEN, message=live(now, **{"stale-date": now + 120, "relevance-score": 60}),
        push_type=PushType.LIVEACTIVITY, priority=10))
    assert result.is_successful, (result.status, result.description)
    result = await apns.send_notification(NotificationRequest(
        device_token=TOKEN, message=live(now + 1, event="end", **{"dismissal-date": now + 900}),
        push_type=PushType.LIVEACTIVITY, priority=5))
    assert result.is_successful, (result.status, result.description)
    pushes = standin.control("GET", "/control/pushes")
    assert [p["priority"] for p in pushes] == [10, 5], pushes
    assert pushes[1]["payload"]["aps"]["event"] == "end"

    # A timestamp that does not grow is accepted by APNs but dropped by the device: recorded.
    result = await apns.send_notification(NotificationRequest(
        device_token=TOKEN, message=live(now), push_type=PushType.LIVEACTIVITY, priority=5))
    assert result.is_successful
    assert len(standin.control("GET", "/control/violations")) == 1

    async def refused(request, status, reason, apns=apns):
        result = await apns.send_notification(request)
        assert not result.is_successful and str(result.status) == status and result.description == reason, (
            status, reason, result.status, result.description)

    await refused(NotificationRequest(device_token=TOKEN, message=live(now + 5), push_type=PushType.ALERT),
                  "400", "InvalidPushType")
    await refused(NotificationRequest(device_token=TOKEN, message=live(now + 5), push_type=PushType.LIVEACTIVITY,
                                      priority=7), "400", "BadPriority")
    await refused(NotificationRequest(device_token=TOKEN, message=live(now + 5, event="update",
                                                                       **{"dismissal-date": now}),
                                      push_type=PushType.LIVEACTIVITY), "400", "BadPayload")
    big = live(now + 5)
    big["aps"]["content-state"]["driverName"] = "x" * 5000
    await refused(NotificationRequest(device_token=TOKEN, message=big, push_type=PushType.LIVEACTIVITY),
                  "413", "PayloadTooLarge")
    await refused(NotificationRequest(device_token="zz" * 32, message=live(now + 5), push_type=PushType.LIVEACTIVITY),
                  "400", "BadDeviceToken")
    standin.control("POST", "/control/unregister", {"token": "cd" * 32})
    await refused(NotificationRequest(device_token="cd" * 32, message=live(now + 5), push_type=PushType.LIVEACTIVITY),
                  "410", "Unregistered")
    await refused(NotificationRequest(device_token=TOKEN, message=live(now + 5), push_type=PushType.LIVEACTIVITY),
                  "400", "BadTopic", apns=client(topic=BUNDLE))
    standin.control("POST", "/control/fail", {"status": 503, "reason": "ServiceUnavailable", "count": 1})
    await refused(NotificationRequest(device_token=TOKEN, message=live(now + 5), push_type=PushType.LIVEACTIVITY),
                  "503", "ServiceUnavailable")
    # An hour later on the stand-in's clock, aioapns's token (made at its first request) has expired.
    standin.control("POST", "/control/clock", {"advance": 3700})
    await refused(NotificationRequest(device_token=TOKEN, message=live(now + 6), push_type=PushType.LIVEACTIVITY),
                  "403", "ExpiredProviderToken")


def fcm_cross_check(standin):
    account = standin.account
    now = int(time.time()) + 3700  # the stand-in's clock was moved on by the APNs check
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    claims = b64url(json.dumps({"iss": account["client_email"], "scope": "https://www.googleapis.com/auth/firebase.messaging",
                                "aud": account["token_uri"], "iat": now, "exp": now + 3600}).encode())
    signature = standin.fcm_key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
    form = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                   "assertion": f"{header}.{claims}.{b64url(signature)}"}).encode()
    status, grant = standin.request("POST", "/token", form, {"content-type": "application/x-www-form-urlencoded"})
    assert status == 200 and grant["token_type"] == "Bearer", (status, grant)
    forged = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                     "assertion": f"{header}.{claims}.{b64url(b'x' * 256)}"}).encode()
    assert standin.request("POST", "/token", forged)[0] == 400

    auth = {"authorization": f"Bearer {grant['access_token']}", "content-type": "application/json"}
    message = {"message": {"token": "fcm-1", "data": {"ride": "r1", "sequence": "3"},
                           "android": {"collapse_key": "r1", "priority": "HIGH", "ttl": "120s"}}}
    status, answer = standin.request("POST", "/v1/projects/rides-1/messages:send", message, auth)
    assert status == 200 and answer["name"].startswith("projects/rides-1/messages/"), (status, answer)
    bad = json.loads(json.dumps(message))
    bad["message"]["data"]["sequence"] = 3
    status, answer = standin.request("POST", "/v1/projects/rides-1/messages:send", bad, auth)
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT", answer
    status, _ = standin.request("POST", "/v1/projects/rides-1/messages:send", message, {"authorization": "Bearer x"})
    assert status == 401
    standin.control("POST", "/control/unregister", {"token": "fcm-1"})
    status, answer = standin.request("POST", "/v1/projects/rides-1/messages:send", message, auth)
    assert status == 404 and answer["error"]["details"][0]["errorCode"] == "UNREGISTERED", answer


def main():
    with tempfile.TemporaryDirectory() as directory:
        standin = Standin(directory)
        try:
            asyncio.run(apns_cross_check(standin))
            print("ok: APNs stand-in against aioapns")
            fcm_cross_check(standin)
            print("ok: FCM stand-in against an RFC 7523 grant and HTTP/1.1 sends")
        finally:
            standin.stop()


if __name__ == "__main__":
    main()
