#!/usr/bin/env python3
"""Stand-ins for Apple's and Google's push services, for tests and `make run`.

APNs and FCM cannot be reached from a test machine, so this serves their documented HTTP APIs on a loopback
port, over HTTP/2 and TLS (a certificate it makes itself), and checks every request as the real service would:

APNs (`POST /3/device/<token>` on a port of its own, Apple's "Sending notification requests to APNs" and "Starting and updating
Live Activities with ActivityKit push notifications"):
  - the provider token: an ES256 JWT with `kid` and `iss`, signed by the key given, younger than an hour on
    the stand-in's clock (403 ExpiredProviderToken), and not renewed on one connection within 20 minutes of the
    last (429 TooManyProviderTokenUpdates);
  - headers: `apns-push-type: liveactivity`, `apns-topic: <bundle>.push-type.liveactivity`, `apns-priority`
    5 or 10;
  - the payload: at most 4096 bytes, an `aps` with an integer `timestamp`, `event` `update` or `end`, a
    `content-state` object, integer `stale-date` and `dismissal-date` (the latter with `end` only), a numeric
    `relevance-score`; timestamps growing per activity (a push that does not grow is recorded as a
    violation: the device would drop it).

FCM HTTP v1 (`POST /token`, the OAuth 2.0 JWT bearer grant of a service account; `POST
/v1/projects/<project>/messages:send`): an RS256 assertion signed by the account's key, an access token that
expires, a message to a token with string data values, an `android` block with `collapse_key`, `priority` and
`ttl`.

Control, on FCM's port (HTTP/2 or HTTP/1.1): `GET /control/pushes` (every accepted push, in order), `GET
/control/violations`, `POST /control/fail` (`{"status": 503, "reason": "ServiceUnavailable", "count": 5}`;
count -1 until cleared, 0 clears), `POST /control/unregister` (`{"token": "..."}`: 410 for it from now on),
`POST /control/clock` (`{"advance": 3600}`: the stand-in's clock moves on, so tests need not wait an hour).

Run: push_standins.py --port 0 --apns-key apns.p8 --apns-key-id KEY --team-id TEAM --bundle com.example.rides
      --fcm-account account.json --project rides-1 --cert-dir DIR
It prints one JSON line when it listens: {"port": ..., "apns_port": ..., "certificate": "..."}: APNs on
`apns_port` (HTTP/2 only, framed as Apple frames it), FCM and the control endpoints on `port`.
"""

import argparse
import asyncio
import base64
import json
import os
import socket
import sys
import time
import uuid

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
from cryptography.x509.oid import NameOID

MAX_PAYLOAD = 4096


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_encode(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def split_jwt(token):
    """Header, claims, signing input and signature of a compact JWS, or None."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except (ValueError, json.JSONDecodeError):
        return None
    return header, claims, f"{parts[0]}.{parts[1]}".encode(), signature


class Clock:
    """Real time plus an offset the tests move."""

    def __init__(self):
        self.offset = 0.0

    def now(self):
        return time.time() + self.offset


class APNs:
    def __init__(self, public_key, key_id, team_id, bundle, clock):
        self.public_key = public_key
        self.key_id = key_id
        self.team_id = team_id
        self.topic = f"{bundle}.push-type.liveactivity"
        self.clock = clock
        # The issue time of the provider token in use, per HTTP/2 connection: APNs limits token updates on one
        # connection ("Establishing a token-based connection to APNs": one token per connection, refreshed no more
        # than once every 20 minutes), so several provider servers with one key each keep a token of their own.
        self.token_iat = {}
        self.timestamps = {}  # device token -> last accepted aps.timestamp
        self.unregistered = set()

    def check_provider_token(self, authorization, connection=None):
        if not authorization.startswith("bearer "):
            return 403, "MissingProviderToken"
        parts = split_jwt(authorization[len("bearer "):])
        if parts is None:
            return 403, "InvalidProviderToken"
        header, claims, signing_input, signature = parts
        if header.get("alg") != "ES256" or header.get("kid") != self.key_id or claims.get("iss") != self.team_id:
            return 403, "InvalidProviderToken"
        if len(signature) != 64:
            return 403, "InvalidProviderToken"
        der = utils.encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        try:
            self.public_key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
        except Exception:
            return 403, "InvalidProviderToken"
        iat = claims.get("iat")
        if not isinstance(iat, int):
            return 403, "InvalidProviderToken"
        now = self.clock.now()
        if now - iat > 3600:
            return 403, "ExpiredProviderToken"
        last = self.token_iat.get(connection)
        if last is not None and iat != last:
            if iat < last:
                return 403, "InvalidProviderToken"
            if iat - last < 20 * 60:
                return 429, "TooManyProviderTokenUpdates"
        self.token_iat[connection] = iat
        return None

    def check(self, token, headers, body, violations, connection=None):
        """(status, reason) for an error, None when the push is accepted."""
        problem = self.check_provider_token(headers.get("authorization", ""), connection)
        if problem:
            return problem
        if headers.get("apns-push-type") != "liveactivity":
            return 400, "InvalidPushType"
        if headers.get("apns-topic") != self.topic:
            return 400, "BadTopic" if "apns-topic" in headers else "MissingTopic"
        if headers.get("apns-priority", "10") not in ("5", "10"):  # optional; APNs takes 10 when absent
            return 400, "BadPriority"
        if len(token) < 64 or len(token) % 2 or any(c not in "0123456789abcdefABCDEF" for c in token):
            return 400, "BadDeviceToken"
        if token in self.unregistered:
            return 410, "Unregistered"
        if len(body) > MAX_PAYLOAD:
            return 413, "PayloadTooLarge"
        try:
            payload = json.loads(body)
        except json.JSONDecodeError:
            return 400, "BadPayload"
        aps = payload.get("aps") if isinstance(payload, dict) else None
        if not isinstance(aps, dict):
            return 400, "BadPayload"
        event = aps.get("event")
        if event not in ("update", "end") or not isinstance(aps.get("content-state"), dict):
            return 400, "BadPayload"
        if not isinstance(aps.get("timestamp"), int):
            return 400, "BadPayload"
        for key in ("stale-date", "dismissal-date"):
            if key in aps and not isinstance(aps[key], int):
                return 400, "BadPayload"
        if "dismissal-date" in aps and event != "end":
            return 400, "BadPayload"
        if "relevance-score" in aps and not isinstance(aps["relevance-score"], (int, float)):
            return 400, "BadPayload"
        last = self.timestamps.get(token)
        if last is not None and aps["timestamp"] <= last:
            violations.append({"token": token[:8], "timestamp": aps["timestamp"], "after": last})
        else:
            self.timestamps[token] = aps["timestamp"]
        return None


class FCM:
    def __init__(self, account, project, clock, token_uri):
        self.token_uri = token_uri
        self.client_email = account["client_email"]
        self.public_key = serialization.load_pem_private_key(account["private_key"].encode(), None).public_key()
        self.project = project
        self.clock = clock
        self.access_tokens = {}  # access token -> expiry
        self.unregistered = set()

    def grant(self, form):
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type"}
        parts = split_jwt(form.get("assertion", ""))
        if parts is None:
            return 400, {"error": "invalid_grant", "error_description": "malformed assertion"}
        header, claims, signing_input, signature = parts
        try:
            self.public_key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
        except Exception:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        now = self.clock.now()
        if header.get("alg") != "RS256" or claims.get("iss") != self.client_email:
            return 400, {"error": "invalid_grant", "error_description": "bad issuer"}
        audience = claims.get("aud")
        if not (audience == self.token_uri or (isinstance(audience, list) and self.token_uri in audience)):
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT audience"}
        if "firebase.messaging" not in claims.get("scope", ""):
            return 400, {"error": "invalid_scope"}
        if not (claims.get("iat", 0) - 300 <= now <= claims.get("exp", 0)) or claims["exp"] - claims["iat"] > 3600:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT: Token must be a short-lived token"}
        token = b64url_encode(os.urandom(24))
        self.access_tokens[token] = now + 3600
        return 200, {"access_token": token, "expires_in": 3600, "token_type": "Bearer"}

    @staticmethod
    def error(status, code, message):
        details = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}]
        names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                 500: "INTERNAL", 503: "UNAVAILABLE"}
        return status, {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN"),
                                  "details": details}}

    def send(self, project, headers, body):
        authorization = headers.get("authorization", "")
        expiry = self.access_tokens.get(authorization[len("Bearer "):]) if authorization.startswith("Bearer ") else None
        if expiry is None or expiry < self.clock.now():
            return self.error(401, "THIRD_PARTY_AUTH_ERROR", "Request had invalid authentication credentials.")
        if project != self.project:
            return self.error(403, "SENDER_ID_MISMATCH", "wrong project")
        try:
            message = json.loads(body)["message"]
        except (json.JSONDecodeError, KeyError, TypeError):
            return self.error(400, "INVALID_ARGUMENT", "no message")
        data = message.get("data", {})
        if not isinstance(data, dict) or any(not isinstance(v, str) for v in data.values()):
            return self.error(400, "INVALID_ARGUMENT", "data values must be strings")
        android = message.get("android", {})
        if android.get("priority") not in ("HIGH", "NORMAL") or not android.get("collapse_key"):
            return self.error(400, "INVALID_ARGUMENT", "android.priority and collapse_key")
        ttl = android.get("ttl", "")
        if not (ttl.endswith("s") and ttl[:-1].isdigit()):
            return self.error(400, "INVALID_ARGUMENT", "ttl is a duration in seconds")
        if len(body) > MAX_PAYLOAD:
            return self.error(400, "INVALID_ARGUMENT", "message too big")
        if message.get("token") in self.unregistered:
            return self.error(404, "UNREGISTERED", "Requested entity was not found.")
        return 200, {"name": f"projects/{project}/messages/{b64url_encode(os.urandom(9))}"}


class Standins:
    def __init__(self, apns, fcm, clock):
        self.apns = apns
        self.fcm = fcm
        self.clock = clock
        self.pushes = []
        self.violations = []
        self.failure = None  # {"status", "reason", "count"}

    def injected_failure(self):
        if not self.failure or self.failure["count"] == 0:
            return None
        if self.failure["count"] > 0:
            self.failure["count"] -= 1
        return self.failure["status"], self.failure["reason"]

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        status, answer, extra = self.route(scope["method"], scope["path"], scope.get("http_version"), headers, body)
        data = json.dumps(answer).encode() if answer is not None else b""
        response_headers = [(b"content-type", b"application/json")] + extra
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": data})

    def route(self, method, path, version, headers, body):
        if path.startswith("/control/"):
            return self.control(method, path, body)
        if method == "POST" and path == "/token" and self.fcm:
            form = dict(pair.split("=", 1) for pair in body.decode().split("&") if "=" in pair)
            from urllib.parse import unquote_plus
            form = {k: unquote_plus(v) for k, v in form.items()}
            status, answer = self.fcm.grant(form)
            return status, answer, []
        if method == "POST" and path.startswith("/v1/projects/") and path.endswith("/messages:send") and self.fcm:
            project = path[len("/v1/projects/"):-len("/messages:send")]
            failure = self.injected_failure()
            if failure:
                status, answer = FCM.error(failure[0], failure[1], "injected")
                return status, answer, []
            status, answer = self.fcm.send(project, headers, body)
            if status == 200:
                self.pushes.append({"service": "fcm", "payload": json.loads(body), "at": self.clock.now()})
            return status, answer, []
        return 404, {"reason": "NotFound"}, []

    def apns_request(self, method, path, headers, body, connection=None):
        """(status, JSON answer or None, extra headers) for a request on the APNs port."""
        if method != "POST":
            return 405, {"reason": "MethodNotAllowed"}, []
        if not path.startswith("/3/device/") or not self.apns:
            return 404, {"reason": "BadPath"}, []
        token = path[len("/3/device/"):]
        failure = self.injected_failure()
        if failure:
            extra = [(b"retry-after", b"1")] if failure[0] == 429 else []
            return failure[0], {"reason": failure[1]}, extra
        problem = self.apns.check(token, headers, body, self.violations, connection)
        if problem:
            return problem[0], {"reason": problem[1]}, []
        self.pushes.append({"service": "apns", "token": token, "priority": int(headers.get("apns-priority", "10")),
                            "topic": headers["apns-topic"], "payload": json.loads(body), "at": self.clock.now()})
        return 200, None, []

    def control(self, method, path, body):
        request = json.loads(body) if body else {}
        if path == "/control/pushes" and method == "GET":
            return 200, self.pushes, []
        if path == "/control/violations" and method == "GET":
            return 200, self.violations, []
        if path == "/control/fail" and method == "POST":
            self.failure = {"status": int(request.get("status", 503)), "reason": request.get("reason", "ServiceUnavailable"),
                            "count": int(request.get("count", -1))}
            return 200, self.failure, []
        if path == "/control/unregister" and method == "POST":
            if self.apns:
                self.apns.unregistered.add(request["token"])
            if self.fcm:
                self.fcm.unregistered.add(request["token"])
            return 200, {}, []
        if path == "/control/clock" and method == "POST":
            self.clock.offset += float(request.get("advance", 0))
            return 200, {"now": self.clock.now()}, []
        return 404, {"reason": "NotFound"}, []


class APNsProtocol(asyncio.Protocol):
    """APNs's side of HTTP/2, framed as Apple frames it: a success is a HEADERS frame that ends the stream (no
    DATA frame), an error carries a JSON body. (An ASGI server sends an empty DATA frame after a body-less
    response, which a strict client such as aioapns reads as JSON and fails on.)"""

    def __init__(self, standins):
        import h2.config
        import h2.connection
        self.standins = standins
        self.connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                                               header_encoding="utf-8"))
        self.transport = None
        self.streams = {}

    def connection_made(self, transport):
        self.transport = transport
        self.connection.initiate_connection()
        self.transport.write(self.connection.data_to_send())

    def data_received(self, data):
        import h2.events
        import h2.exceptions
        try:
            events = self.connection.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.transport.write(self.connection.data_to_send())
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.streams[event.stream_id] = (dict(event.headers), bytearray())
            elif isinstance(event, h2.events.DataReceived):
                self.streams[event.stream_id][1].extend(event.data)
                self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                headers, body = self.streams.pop(event.stream_id)
                self.respond(event.stream_id, headers, bytes(body))
        self.transport.write(self.connection.data_to_send())

    def respond(self, stream_id, headers, body):
        method, path = headers.get(":method"), headers.get(":path", "")
        plain = {k.lower(): v for k, v in headers.items() if not k.startswith(":")}
        status, answer, extra = self.standins.apns_request(method, path, plain, body, connection=id(self))
        apns_id = plain.get("apns-id") or str(uuid.uuid4())
        response = [(":status", str(status)), ("apns-id", apns_id)] + [(k.decode(), v.decode()) for k, v in extra]
        if answer is None:
            self.connection.send_headers(stream_id, response, end_stream=True)
        else:
            data = json.dumps(answer).encode()
            self.connection.send_headers(stream_id, response + [("content-type", "application/json"),
                                                                ("content-length", str(len(data)))])
            self.connection.send_data(stream_id, data, end_stream=True)


def make_certificate(directory):
    """A self-signed certificate for 127.0.0.1 and localhost; returns (certificate, key) paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "push stand-in")])
    import datetime
    import ipaddress
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256()))
    cert_path = os.path.join(directory, "standin.pem")
    key_path = os.path.join(directory, "standin-key.pem")
    with open(cert_path, "wb") as f:
        f.write(certificate.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert-dir", required=True)
    parser.add_argument("--apns-key", help="the APNs signing key (.p8, PEM); its public half checks tokens")
    parser.add_argument("--apns-key-id")
    parser.add_argument("--team-id")
    parser.add_argument("--bundle")
    parser.add_argument("--fcm-account", help="a service account's JSON key file")
    parser.add_argument("--project")
    args = parser.parse_args()

    clock = Clock()
    apns = None
    if args.apns_key:
        with open(args.apns_key, "rb") as f:
            public_key = serialization.load_pem_private_key(f.read(), None).public_key()
        apns = APNs(public_key, args.apns_key_id, args.team_id, args.bundle, clock)
    fcm = None
    if args.fcm_account:
        with open(args.fcm_account) as f:
            fcm = FCM(json.load(f), args.project, clock, token_uri=None)

    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    cert_path, key_path = make_certificate(args.cert_dir)
    port = args.port or free_port()
    if fcm:
        fcm.token_uri = f"https://127.0.0.1:{port}/token"
    standins = Standins(apns, fcm, clock)
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.certfile = cert_path
    config.keyfile = key_path
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"

    async def run():
        import ssl
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_path, key_path)
        context.set_alpn_protocols(["h2"])
        apns_server = await asyncio.get_running_loop().create_server(
            lambda: APNsProtocol(standins), "127.0.0.1", 0, ssl=context)
        apns_port = apns_server.sockets[0].getsockname()[1]
        print(json.dumps({"port": port, "apns_port": apns_port, "certificate": cert_path}), flush=True)
        async with apns_server:
            await serve(standins, config)

    asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
