#!/usr/bin/env python3
"""E2 end to end: mosquitto, the worker and fleet-sim on free loopback ports, fleet-sim sending a route with most
assignments (its cars' planned paths, with an engine's duration) and a new route for each ride's second leg.
A recording subscriber checks that
  - statuses name their ETAs' source (`estimateSource`): `route` for routed rides, before the pickup and after it
    (the reroute on `rides/{ride}/route`), and `estimate` (E1) for the others;
  - no input is dead-lettered: every route fleet-sim sends passes the worker's checks (E2, I2);
  - a routed status before the pickup has a pickup ETA, never in the past (E1).

Usage: Tests/Python/routes/test_routes.py [--bin-dir .build/debug] [--seconds 90]
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import queue
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from stack import Stack  # noqa: E402


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=".build/debug")
    parser.add_argument("--seconds", type=float, default=90, help="the longest the suite waits for each source")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="routes-")
    # A small city: cars reach their pickups within a minute.
    stack = Stack(args.bin_dir, folder, vehicles=60, fleet_arguments=("--radius", "600"))
    subscriber = subprocess.Popen(
        ["mosquitto_sub", "-p", str(stack.broker_port), "-v", "-t", "rides/+/status", "-t", "ridestatus/deadletter"],
        stdout=subprocess.PIPE, text=True)
    sources = {}
    letters = []
    late = []
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in subscriber.stdout], daemon=True).start()
    try:
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            if ("route", "before") in sources and ("route", "after") in sources and ("estimate", "before") in sources:
                break
            try:
                line = lines.get(timeout=0.5).rstrip("\n")
            except queue.Empty:
                continue
            topic, _, payload = line.partition(" ")
            if topic == "ridestatus/deadletter":
                letters.append(payload)
                continue
            if not payload:
                continue  # a stopped ride's empty retained status
            status = json.loads(payload)
            phase = status["phase"]
            if phase == "completed":
                continue
            leg = "before" if phase in ("received", "confirmed", "approachingPickup") else "after"
            source = status.get("estimateSource")
            sources[(source, leg)] = sources.get((source, leg), 0) + 1
            if source == "route" and leg == "before":
                eta = status["estimatedPickupDate"]
                issued = parse_time(status["issuedAt"])
                if eta is None or parse_time(eta) < issued - 0.001:
                    late.append((status["rideIdentifier"], eta, status["issuedAt"]))
    finally:
        subscriber.terminate()
        subscriber.wait(5)
        stack.stop()
    print("statuses by source and leg: " + ", ".join(f"{s} {leg}: {n}" for (s, leg), n in sorted(
        sources.items(), key=lambda item: (str(item[0][0]), item[0][1]))))
    problems = []
    for wanted in [("route", "before"), ("route", "after"), ("estimate", "before")]:
        if wanted not in sources:
            problems.append(f"no status with estimateSource {wanted[0]} {wanted[1]} the pickup within {args.seconds} s")
    if letters:
        problems.append(f"{len(letters)} dead letters, the first: {letters[0]}")
    if late:
        problems.append(f"routed pickup ETAs missing or in the past: {late[:3]}")
    if problems:
        print("FAILED: " + "; ".join(problems) + f" (logs in {folder})")
        sys.exit(1)
    shutil.rmtree(folder, ignore_errors=True)
    print("E2 end to end: routed rides say route before and after the pickup, the rest estimate; no dead letter")


if __name__ == "__main__":
    main()
