#!/usr/bin/env python3
"""ride-push end to end: mosquitto, the worker, fleet-sim, ride-push and the APNs and FCM stand-ins,
each a real process on free loopback ports.
  - Registration: a device proves its ride with the ride's share token; another ride's token, none,
    or a push token that is not one is refused, and nothing is registered.
  - A ride through its phases: the APNs device gets its pushes in order, timestamps growing (the stand-in
    records any that do not), priority 10 exactly for the first push, a phase change, or an arrival moving more
    than 60 s (within the budget), then an `end` at priority 10 with a dismissal-date; the Android device gets
    the same states as FCM data messages, sequences growing. After the end the registrations are gone.
  - An APNs outage (503): the pending gauge stays at most one per activity; when APNs is back, the next push is
    the newest state, not a backlog.
  - 410 Unregistered removes the registration.
  - Two ride-push processes share the rides (their registration records are retained in the broker): devices
    registered through either are served by the ride's owner only; one is killed (SIGKILL), the other takes its
    rides at once; a third joins and takes its share. No device gets a timestamp that does not grow, nor a state
    older than one it had.

Usage: Tests/Python/push/test_push.py --bin-dir .build/debug
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from stack import Stack, free_port, iso, metric, offset, share_keys, share_link, wait_until  # noqa: E402
from test_standins import Standin  # noqa: E402

APNS_TOKENS = ["a1" * 32, "b2" * 32, "c3" * 32]
FCM_TOKEN = "fcm-device-1:APA91b-test"


class RidePush:
    """A ride-push process. `configured` starts it the way a deployment would: a configuration file with paths
    relative to its folder, environment variables for the rest, a working directory elsewhere; otherwise flags."""

    def __init__(self, bin_dir, folder, stack, standin, key_set, name="ride-push", configured=False):
        self.port = free_port()
        self.name = name
        log = open(os.path.join(folder, f"{name}.log"), "wb")
        level = os.environ.get("PUSH_LOG_LEVEL", "debug")
        if configured:
            config = os.path.join(folder, f"{name}.yaml")
            relative = lambda path: os.path.relpath(path, folder)
            with open(config, "w") as f:
                f.write(f"""
push: {{minimumInterval: 2, refreshInterval: 6, logLevel: {level}}}
http: {{shareKeys: {relative(key_set)}}}
apns:
  url: https://127.0.0.1:{standin.apns_port}
  keyFile: {relative(standin.apns_key_path)}
  keyId: TESTKEY123
  teamId: TEAM123456
  bundleId: com.example.rides
  caFile: {relative(standin.certificate)}
fcm: {{url: "https://127.0.0.1:{standin.port}", accountFile: {relative(standin.account_path)}, caFile: {relative(standin.certificate)}}}
""")
            environment = dict(os.environ, RIDEPUSH_BROKER_URL=stack.broker, RIDEPUSH_HTTP_PORT=str(self.port))
            # An absolute path: the working directory is elsewhere.
            self.process = subprocess.Popen([os.path.abspath(os.path.join(bin_dir, "ride-push")), "--config", config],
                                            stdout=log, stderr=subprocess.STDOUT, env=environment, cwd="/")
        else:
            self.process = subprocess.Popen([
                os.path.join(bin_dir, "ride-push"), "--broker", stack.broker, "--http-port", str(self.port),
                "--share-keys", key_set,
                "--apns-url", f"https://127.0.0.1:{standin.apns_port}", "--apns-key", standin.apns_key_path,
                "--apns-key-id", "TESTKEY123", "--team-id", "TEAM123456", "--bundle-id", "com.example.rides",
                "--apns-ca-file", standin.certificate,
                "--fcm-url", f"https://127.0.0.1:{standin.port}", "--fcm-account", standin.account_path,
                "--fcm-ca-file", standin.certificate,
                # Short intervals, so that a ride of a minute or two shows routine pushes and refreshes.
                "--minimum-interval", "2", "--refresh-interval", "6", "--log-level", level,
            ], stdout=log, stderr=subprocess.STDOUT)
        wait_until(f"{name} to listen", lambda: Stack.listening(self.port), 30)

    def call(self, method, path, body=None, token=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        request.add_header("content-type", "application/json")
        if token:
            request.add_header("authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            text = error.read()
            return error.code, json.loads(text) if text else None

    def metric(self, name, **labels):
        """The sum of a metric family's samples whose labels include `labels`; None when it has none."""
        return metric(self.port, name, **labels)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("ride-push did not stop within 10 s of SIGTERM")
        assert self.process.returncode == 0, f"ride-push exited with {self.process.returncode}"


    def kill(self):
        self.process.kill()
        self.process.wait(10)


def token_of(link):
    return re.search(r"/share/([^/?#]+)", link).group(1)


def early_ride(stack, exclude=()):
    """A ride of fleet-sim that has not yet reached its pickup."""
    found = {}

    def check():
        rides = stack.get("/v1/rides?limit=1000") or {}
        for ride in rides.get("rides", []):
            if ride["rideIdentifier"] not in exclude and ride["phase"] in ("received", "confirmed", "approachingPickup"):
                found["ride"] = ride["rideIdentifier"]
                return True
        return False

    wait_until("a ride before its pickup", check, 60)
    return found["ride"]


def early_rides(stack, count, exclude=()):
    """`count` rides of fleet-sim that have not yet reached their pickup."""
    found = []

    def check():
        rides = stack.get("/v1/rides?limit=1000") or {}
        found[:] = [r["rideIdentifier"] for r in rides.get("rides", [])
                    if r["rideIdentifier"] not in exclude and r["phase"] in ("received", "confirmed", "approachingPickup")]
        return len(found) >= count

    wait_until(f"{count} rides before their pickup", check, 90)
    return found[:count]


def apns_pushes(standin, token):
    return [p for p in standin.control("GET", "/control/pushes") if p["service"] == "apns" and p["token"] == token]


def fcm_pushes(standin, token):
    return [p for p in standin.control("GET", "/control/pushes")
            if p["service"] == "fcm" and p["payload"]["message"]["token"] == token]


PHASES = ["received", "confirmed", "approachingPickup", "pickup", "ongoing", "completed"]


def check_lifetime(standin, ride, token):
    pushes = apns_pushes(standin, token)
    assert pushes, "no APNs push"
    states = [p["payload"]["aps"] for p in pushes]
    assert states[-1]["event"] == "end" and pushes[-1]["priority"] == 10, states[-1]
    assert isinstance(states[-1].get("dismissal-date"), int)
    assert all(s["event"] == "update" for s in states[:-1]), "only the last push ends the activity"
    phases = [PHASES.index(s["content-state"]["phase"]) for s in states]
    assert phases == sorted(phases), f"phases went back: {phases}"
    assert pushes[0]["priority"] == 10, "the first push is urgent"
    for previous, push in zip(pushes, pushes[1:]):
        a, b = previous["payload"]["aps"], push["payload"]["aps"]
        changed = a["content-state"]["phase"] != b["content-state"]["phase"] or \
            a["content-state"].get("ending") != b["content-state"].get("ending")
        if changed:
            assert push["priority"] == 10, f"a phase change at priority {push['priority']}"
        assert b["timestamp"] > a["timestamp"]
        if b["event"] == "update":
            assert b["stale-date"] > push["at"], "a healthy ride's state arrives before it is stale"
    urgent = sum(1 for p in pushes if p["priority"] == 10 and p["payload"]["aps"]["event"] == "update")
    assert urgent <= 12, f"{urgent} priority-10 updates in one ride"
    assert sorted(set(phases)) == list(range(6)), f"every phase on the lock screen: {sorted(set(phases))}"
    assert states[-1]["content-state"]["ending"] == "completed"
    print(f"ok: {ride}: {len(pushes)} APNs pushes, {urgent} urgent, phases "
          f"{[PHASES[i] for i in sorted(set(phases))]}, then end")


PICKUP = (52.5219, 13.4132)
DROP_OFF = (52.5096, 13.3759)


def drive(stack, ride, vehicle):
    """A ride through every phase in about 40 s, as dispatch and a car would send it: booked without a car
    (received), assigned (confirmed), fixes closing in on the pickup (approachingPickup, the ETA moving), the
    driver's arrival (pickup), the rider on board (ongoing), fixes toward the drop-off, the arrival there
    (completed), and the stop (L2)."""
    def fix(point, speed):
        stack.publish(f"fleet/vehicles/{vehicle}/position", {
            "vehicleId": vehicle, "timestamp": iso(0), "latitude": point[0], "longitude": point[1], "speed": speed,
            "horizontalAccuracy": 5})

    stack.publish(f"rides/{ride}/assign", {"vehicleId": vehicle, "vehicle": {
        "registrationPlate": "B-RP 32", "manufacturer": "Tesla", "model": "Model 3"}, "driver": {"displayName": "Ana"}})
    time.sleep(2)
    for step in range(12):
        fix(offset(PICKUP, 900 - 70 * step, 0), 12)
        time.sleep(1)
    stack.publish(f"rides/{ride}/event", {"type": "arrivedAtPickup"})
    time.sleep(3)
    stack.publish(f"rides/{ride}/event", {"type": "passengerOnBoard"})
    for step in range(10):
        share = step / 12
        fix((PICKUP[0] + (DROP_OFF[0] - PICKUP[0]) * share, PICKUP[1] + (DROP_OFF[1] - PICKUP[1]) * share), 11)
        time.sleep(1)
    stack.publish(f"rides/{ride}/event", {"type": "arrivedAtDropOff"})
    time.sleep(3)
    stack.publish(f"rides/{ride}/stop", {"reason": "done"})


def check_record(stack, ride, service, token):
    """The registration's retained record: on the topic of its key (a digest, not the token), valid against
    docs/schema/push-registration.schema.json."""
    key = hashlib.sha256(f"{service}:{token}".encode()).hexdigest()[:32]
    topic = f"ridestatus/push/devices/{ride}/{key}"
    read = subprocess.run(["mosquitto_sub", "-p", str(stack.broker_port), "-t", topic, "-C", "1", "-W", "5"],
                          capture_output=True, check=True, text=True)
    record = json.loads(read.stdout)
    with open(os.path.join(HERE, "..", "..", "..", "docs", "schema", "push-registration.schema.json")) as handle:
        schema = json.load(handle)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(record)
    assert record["service"] == service and record["token"] == token, record
    # And the schema can fail.
    assert not jsonschema.Draft202012Validator(schema).is_valid(dict(record, service="sms"))


def check_order(standin, tokens):
    """C5 on the lock screen: per device, timestamps grow (the stand-in's violations) and no state is older than
    one the device already had."""
    violations = standin.control("GET", "/control/violations")
    if violations:
        token = next(t for t in tokens if t.startswith(violations[0]["token"]))
        pushes = [(p["payload"]["aps"]["timestamp"], round(p["at"], 2), p["payload"]["aps"]["content-state"]["sequence"],
                   p["priority"]) for p in apns_pushes(standin, token)]
        raise AssertionError(f"a timestamp that did not grow: {violations}; pushes of {token[:8]}: {pushes}")
    for token in tokens:
        sequences = [p["payload"]["aps"]["content-state"]["sequence"] for p in apns_pushes(standin, token)]
        assert sequences == sorted(sequences), f"an older state after a newer one: {sequences}"


def group(args, folder, stack, standin, key_set, private_key, first, exclude):
    """Two ride-push processes, then one killed, then a third: every ride served by exactly one, in order."""
    # The second reads a configuration file and the environment (the first is all flags): both ways of setting
    # ride-push up serve the same group.
    second = RidePush(args.bin_dir, folder, stack, standin, key_set, name="ride-push-2", configured=True)
    started = [second]
    processes = [first, second]
    try:
        wait_until("two members", lambda: all(p.metric("ridepush_members") == 2 for p in processes), 30)
        rides = early_rides(stack, 12, exclude)
        tokens = {}
        for index, ride in enumerate(rides):
            token = f"{index + 16:02x}" * 32
            tokens[ride] = token
            share = token_of(share_link(args.bin_dir, private_key, ride, "http://x"))
            # Through either process: the record reaches the ride's owner through the broker.
            status, _ = processes[index % 2].call("POST", f"/v1/rides/{ride}/devices",
                                                  {"service": "apns", "token": token}, share)
            assert status == 201, (ride, status)
        # A ride may stop between the pick and its registration: then it has nothing to show (at most one here).
        def unpushed():
            return [ride for ride, token in tokens.items() if not apns_pushes(standin, token)]

        deadline = time.time() + 30
        while len(unpushed()) > 1:
            assert time.time() < deadline, f"no push in 30 s for {unpushed()}; " + "; ".join(
                f"{p.name}: " + ", ".join(f"{m} {p.metric(m)}" for m in (
                    "ridepush_members", "ridepush_serving", "ridepush_records", "ridepush_subscribed_rides",
                    "ridepush_registrations")) for p in processes)
            time.sleep(0.2)
        served = [p.metric("ridepush_subscribed_rides") for p in processes]
        # Every ride by exactly one (one may have stopped since it was picked), and both take a share.
        assert len(rides) - 1 <= sum(served) <= len(rides) and all(n > 0 for n in served), \
            f"rides served per process: {served}"
        print(f"ok: two ride-push processes serve {served[0]:.0f} and {served[1]:.0f} of {len(rides)} rides")

        # SIGKILL: its will says offline, the other takes its rides at once.
        second.kill()
        killed_at = time.time()
        print(f"killed {second.name} at {killed_at:.2f}")
        wait_until("the survivor alone", lambda: first.metric("ridepush_members") == 1, 30)

        def all_pushed_since(moment):
            for token in tokens.values():
                pushes = apns_pushes(standin, token)
                ended = any(p["payload"]["aps"]["event"] == "end" for p in pushes)
                if pushes and not ended and not any(p["at"] > moment for p in pushes):
                    return False
            return True

        wait_until("every live ride pushed by the survivor", lambda: all_pushed_since(killed_at), 30)
        took = time.time() - killed_at
        check_order(standin, tokens.values())
        print(f"ok: one of two killed: the other pushed every live ride within {took:.1f} s, nothing out of order")

        # A newcomer reads the retained records and takes its share once its start delay is over.
        third = RidePush(args.bin_dir, folder, stack, standin, key_set, name="ride-push-3")
        started.append(third)
        processes = [first, third]
        wait_until("the newcomer serving", lambda: (third.metric("ridepush_subscribed_rides") or 0) > 0, 30)
        joined_at = time.time()
        wait_until("every live ride pushed after the join", lambda: all_pushed_since(joined_at), 30)
        check_order(standin, tokens.values())
        served = [p.metric("ridepush_subscribed_rides") for p in processes]
        print(f"ok: a newcomer took {served[1]:.0f} rides from the registrations in the broker, nothing out of order")
        third.stop()
    finally:
        for process in started:
            if process.process.poll() is None:
                process.process.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        private_key, key_set = share_keys(args.bin_dir, folder)
        standin = Standin(folder)
        stack = Stack(args.bin_dir, folder, vehicles=30, worker_settings=[f"http.shareKeys={key_set}"],
                      fleet_arguments=["--radius", "500"])
        push = None
        try:
            push = RidePush(args.bin_dir, folder, stack, standin, key_set)
            ride = "push-ride-1"
            stack.publish(f"rides/{ride}/start", {
                "rideIdentifier": ride, "rideOption": {"name": "Compact", "estimatedPickupDate": iso(-300)},
                "pickupLocation": {"latitude": PICKUP[0], "longitude": PICKUP[1], "name": "Alexanderplatz"},
                "dropOffLocation": {"latitude": DROP_OFF[0], "longitude": DROP_OFF[1], "name": "Potsdamer Platz"}})
            other = early_ride(stack, exclude={ride})
            token = token_of(share_link(args.bin_dir, private_key, ride, "http://x"))
            other_token = token_of(share_link(args.bin_dir, private_key, other, "http://x"))
            path = f"/v1/rides/{ride}/devices"

            # Refused: no token, another ride's, a forged one, a push token that is not one.
            assert push.call("POST", path, {"service": "apns", "token": APNS_TOKENS[0]})[0] == 401
            status, problem = push.call("POST", path, {"service": "apns", "token": APNS_TOKENS[0]}, other_token)
            assert status == 403 and problem["reason"] == "otherRide", (status, problem)
            assert push.call("POST", path, {"service": "apns", "token": APNS_TOKENS[0]}, token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"))[0] == 401
            status, problem = push.call("POST", path, {"service": "apns", "token": "not-hex"}, token)
            assert status == 400 and problem["reason"] == "malformedToken", (status, problem)
            assert (push.metric("ridepush_registrations") or 0) == 0
            # Registered: an iPhone and an Android phone.
            assert push.call("POST", path, {"service": "apns", "token": APNS_TOKENS[0]}, token)[0] == 201
            assert push.call("POST", path, {"service": "apns", "token": APNS_TOKENS[0]}, token)[0] == 200
            assert push.call("POST", path, {"service": "fcm", "token": FCM_TOKEN}, token)[0] == 201
            wait_until("a first push", lambda: apns_pushes(standin, APNS_TOKENS[0]), 20)
            check_record(stack, ride, "apns", APNS_TOKENS[0])
            print(f"ok: registration for {ride} needs its share token; its record in the broker follows the schema")

            # A second ride's iPhone: APNs goes down for 12 s, then comes back.
            other_path = f"/v1/rides/{other}/devices"
            assert push.call("POST", other_path, {"service": "apns", "token": APNS_TOKENS[1]}, other_token)[0] == 201
            wait_until("the other ride's first push", lambda: apns_pushes(standin, APNS_TOKENS[1]), 20)
            standin.control("POST", "/control/fail", {"status": 503, "reason": "ServiceUnavailable", "count": -1})
            outage_end = time.time() + 12
            pending = []
            while time.time() < outage_end:
                pending.append(push.metric("ridepush_pending") or 0)
                time.sleep(0.5)
            attempts = push.metric("ridepush_pushes_total", service="apns", outcome="retry") or 0
            # Held back, not lost: a newer state waits; backoff (1, 2, 4, 8 s with jitter) keeps the tries few.
            assert max(pending) >= 1 and max(pending) <= push.metric("ridepush_registrations"), pending
            # Two APNs devices, each trying at about 0, 1, 3, 7 s (jittered): not one try per status.
            assert 2 <= attempts <= 14, f"{attempts} tries in a 12 s outage"
            newest_before = stack.get(f"/v1/rides/{other}")["sequence"]
            before = len(apns_pushes(standin, APNS_TOKENS[1]))
            standin.control("POST", "/control/fail", {"count": 0})
            wait_until("a push after the outage", lambda: len(apns_pushes(standin, APNS_TOKENS[1])) > before, 90)
            after = apns_pushes(standin, APNS_TOKENS[1])[before]
            sequence = after["payload"]["aps"]["content-state"]["sequence"]
            assert sequence >= newest_before, f"a backlog went: {sequence} after the worker had sent {newest_before}"
            print(f"ok: a 12 s APNs outage: {attempts:.0f} tries, at most {max(pending):.0f} pending; then the newest state")

            # 410: the other ride's device is gone.
            standin.control("POST", "/control/unregister", {"token": APNS_TOKENS[1]})
            wait_until("the unregistered device removed",
                       lambda: (push.metric('ridepush_registrations_removed_total', reason='unregistered') or 0) >= 1, 60)
            assert push.call("DELETE", other_path, {"service": "apns", "token": APNS_TOKENS[1]}, other_token)[0] == 404
            print("ok: 410 Unregistered removed the registration")

            # The first ride through its phases to its end.
            drive(stack, ride, "car-push-1")
            wait_until(f"{ride} to end on the lock screen",
                       lambda: any(p["payload"]["aps"]["event"] == "end" for p in apns_pushes(standin, APNS_TOKENS[0])),
                       30)
            check_lifetime(standin, ride, APNS_TOKENS[0])
            wait_until("the Android end", lambda: any(p["payload"]["message"]["data"]["event"] == "end"
                                                     for p in fcm_pushes(standin, FCM_TOKEN)), 30)
            data = [p["payload"]["message"]["data"] for p in fcm_pushes(standin, FCM_TOKEN)]
            sequences = [int(d["sequence"]) for d in data]
            assert sequences == sorted(sequences), sequences
            assert data[-1]["event"] == "end" and data[-1]["phase"] == "completed" and data[-1]["ending"] == "completed"
            wait_until("the ended ride's registrations gone",
                       lambda: push.call("DELETE", path, {"service": "fcm", "token": FCM_TOKEN}, token)[0] == 404, 30)
            assert standin.control("GET", "/control/violations") == [], "a timestamp that did not grow"
            print(f"ok: Android got {len(data)} data messages, sequences growing, then end")

            group(args, folder, stack, standin, key_set, private_key, push, exclude={ride, other})
        except BaseException:
            kept = os.path.join(tempfile.gettempdir(), "ride-push-test-logs")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(folder, kept, ignore=shutil.ignore_patterns("*.sock"))
            print(f"test_push: failed; the processes' logs are kept in {kept}", file=sys.stderr)
            raise
        finally:
            # Every process ends, whatever the first stop says: one left running would hold the test's output open.
            stops = ([push.stop] if push else []) + [stack.stop, standin.stop]
            failures = []
            for stop in stops:
                try:
                    stop()
                except BaseException as error:  # noqa: BLE001 - reported below, after the rest stopped
                    failures.append(error)
            if failures:
                raise failures[0]


if __name__ == "__main__":
    main()
