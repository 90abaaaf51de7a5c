#!/usr/bin/env python3
"""bench-push: a 60 s APNs outage under a fleet's statuses, with ride-push's memory.

Real processes on free loopback ports: mosquitto, the release worker, fleet-sim (`--vehicles` cars, most of
them on a ride), the APNs and FCM stand-ins and the release ride-push at its default cadence (priority 5 at
least 15 s apart, a refresh every 60 s). Every ride gets one iPhone registered with its share token. Then APNs
answers 503 for `--outage` seconds, and comes back.

Reported, each against what a naive pusher would do in the same run (one queued push per status of a
registered ride: what the statuses during the outage would have left waiting) and against the ideal after an
outage (one push per live activity, its newest state):
  - ride-push's resident memory (VmRSS) before, at the outage's peak, and after;
  - `ridepush_pending` (activities with a newer state waiting) at its peak, against the devices registered;
  - tries during the outage (backoff and jitter), against the statuses that arrived;
  - after the outage: seconds until every live activity got a push newer than the outage's start, and how many
    pushes that took against the ideal.

Usage: bench_push.py --bin-dir .build/release [--vehicles 300] [--outage 60]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from stack import Stack, free_port, metric, share_keys, share_link, wait_until  # noqa: E402
from test_standins import Standin  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def value(port, name, **labels):
    """A metric as a number: 0 before its first sample."""
    return metric(port, name, **labels) or 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--vehicles", type=int, default=300)
    parser.add_argument("--outage", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        private_key, key_set = share_keys(args.bin_dir, folder)
        standin = Standin(folder)
        stack = Stack(args.bin_dir, folder, vehicles=args.vehicles, worker_settings=[f"http.shareKeys={key_set}"])
        push = None
        try:
            port = free_port()
            log = open(os.path.join(folder, "ride-push.log"), "wb")
            push = subprocess.Popen([
                os.path.join(args.bin_dir, "ride-push"), "--broker", stack.broker, "--http-port", str(port),
                "--share-keys", key_set,
                "--apns-url", f"https://127.0.0.1:{standin.apns_port}", "--apns-key", standin.apns_key_path,
                "--apns-key-id", "TESTKEY123", "--team-id", "TEAM123456", "--bundle-id", "com.example.rides",
                "--apns-ca-file", standin.certificate,
            ], stdout=log, stderr=subprocess.STDOUT)
            wait_until("ride-push to listen", lambda: Stack.listening(port), 30)
            print(f"bench-push: {args.vehicles} cars, waiting for their rides ...", flush=True)
            rides = []

            def enough():
                listed = stack.get("/v1/rides?limit=1000") or {}
                rides[:] = [r["rideIdentifier"] for r in listed.get("rides", []) if r["phase"] != "completed"]
                return len(rides) >= args.vehicles * 0.6
            wait_until("most cars on a ride", enough, 120, interval=1)
            tokens = {}
            for index, ride in enumerate(rides):
                token = f"{index:064x}"
                link = share_link(args.bin_dir, private_key, ride, "http://x", expires_in="30m")
                share = re.search(r"/share/([^/?#]+)", link).group(1)
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/v1/rides/{ride}/devices", method="POST",
                    data=f'{{"service":"apns","token":"{token}"}}'.encode(),
                    headers={"content-type": "application/json", "authorization": f"Bearer {share}"})
                try:
                    urllib.request.urlopen(request, timeout=10).read()
                    tokens[ride] = token
                except urllib.error.HTTPError:
                    pass  # the ride ended meanwhile
            print(f"bench-push: {len(tokens)} devices registered; warming up 30 s", flush=True)
            time.sleep(30)

            def pushes():
                return standin.control("GET", "/control/pushes")
            rss_before = rss_kib(push.pid)
            statuses_before = value(stack.http_port, "ridestatus_statuses_published_total")
            tries_before = value(port, "ridepush_pushes_total", outcome="retry")
            standin.control("POST", "/control/fail", {"status": 503, "reason": "ServiceUnavailable", "count": -1})
            outage_start = time.time()
            peak_rss, peak_pending, registered = rss_before, 0.0, value(port, "ridepush_registrations")
            while time.time() < outage_start + args.outage:
                peak_rss = max(peak_rss, rss_kib(push.pid))
                peak_pending = max(peak_pending, value(port, "ridepush_pending"))
                time.sleep(1)
            statuses = value(stack.http_port, "ridestatus_statuses_published_total") - statuses_before
            tries = value(port, "ridepush_pushes_total", outcome="retry") - tries_before
            seen_before = len(pushes())
            listed = stack.get("/v1/rides?limit=1000") or {}
            newest = {r["rideIdentifier"]: r["sequence"] for r in listed.get("rides", [])}
            standin.control("POST", "/control/fail", {"count": 0})
            back = time.time()

            def caught_up():
                after = pushes()[seen_before:]
                fresh = {p["token"] for p in after}
                live = set(tokens.values())
                ended = {p["token"] for p in pushes() if p["payload"]["aps"]["event"] == "end"}
                return fresh >= (live - ended)
            wait_until("every live activity pushed after the outage", caught_up, 120, interval=0.5)
            recovery = time.time() - back
            recovery_pushes = len(pushes()) - seen_before
            ended = {p["token"] for p in pushes() if p["payload"]["aps"]["event"] == "end"}
            live = len(set(tokens.values()) - ended)
            ride_of = {token: ride for ride, token in tokens.items()}
            first = {}
            for p in pushes()[seen_before:]:
                first.setdefault(p["token"], p)
            delays = sorted(p["at"] - back for p in first.values())
            current = sum(1 for token, p in first.items()
                          if p["payload"]["aps"]["content-state"]["sequence"] >= newest.get(ride_of[token], 0))
            time.sleep(5)
            rss_after = rss_kib(push.pid)
            devices = len(tokens)
            share = statuses * devices / max(1.0, value(stack.http_port, "ridestatus_active_rides") or devices)
            print()
            print(f"bench-push: {devices} activities, a {args.outage} s APNs outage (503), release ride-push")
            print(f"  memory (VmRSS): before {rss_before / 1024:.1f} MiB, outage peak {peak_rss / 1024:.1f} MiB, "
                  f"after {rss_after / 1024:.1f} MiB")
            print(f"  waiting at the peak: {peak_pending:.0f} activities (of {registered:.0f} registered); naive "
                  f"queue: {statuses:.0f} statuses published meanwhile, about {share:.0f} of them for these rides")
            print(f"  tries during the outage: {tries:.0f} ({tries / max(1, devices):.1f} per activity)")
            print(f"  after the outage: every live activity pushed within {recovery:.1f} s (first push per activity: "
                  f"p50 {delays[len(delays) // 2]:.1f} s, p90 {delays[int(len(delays) * 0.9)]:.1f} s); "
                  f"{current} of {len(first)} first pushes carried the state that was newest when APNs came back or "
                  f"a later one; {recovery_pushes} pushes in all until then (ideal: one per live activity, {live}; "
                  f"ended meanwhile: {devices - live})")
        finally:
            try:
                if push:
                    push.terminate()
                    try:
                        push.wait(10)
                    except subprocess.TimeoutExpired:
                        push.kill()
            finally:
                try:
                    stack.stop()
                finally:
                    standin.stop()


if __name__ == "__main__":
    main()
