#!/usr/bin/env python3
"""E2 end to end: mosquitto, the worker and fleet-sim on free loopback ports, fleet-sim sending a route with most
assignments (its cars' planned paths, with an engine's duration) and a new route for each ride's second leg.
A recording subscriber checks that
  - statuses name their ETAs' source (`estimateSource`): `route` for routed rides, before the pickup and after it
    (the reroute on `rides/{ride}/route`), and `estimate` (E1) for the others;
  - no input is dead-lettered: every route fleet-sim sends passes the worker's checks (E2, I2);
  - a routed status before the pickup has a pickup ETA, never in the past (E1).

With --streets, on real streets: a real routing engine (osrm-routed, scripts/roads.sh --serve) on central Helsinki's
OpenStreetMap extract, fleet-sim driving its routes (`--streets`, `--osrm`) and the worker's map serving the streets
(`http.streets`). Beyond the above it checks that
  - every route dispatch sends is the engine's: each point of its polyline lies on a street of the extract, and its
    distance is the line's length;
  - every car on its way to a pickup or a drop-off reports positions on a street (but for its GPS noise);
  - the map's configuration names the streets and their ODbL attribution, and /streets.geojson serves them.

Usage: Tests/Python/routes/test_routes.py [--bin-dir .build/debug] [--seconds 90] [--streets]
"""
import argparse
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import queue
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from stack import ROOT, Stack, free_port, wait_until  # noqa: E402


def decode_polyline(text, precision):
    """Google's encoded polyline algorithm: [(latitude, longitude)]."""
    points, index, latitude, longitude = [], 0, 0, 0
    while index < len(text):
        deltas = []
        for _ in range(2):
            shift = result = 0
            while True:
                byte = ord(text[index]) - 63
                index += 1
                result |= (byte & 0x1F) << shift
                shift += 5
                if byte < 0x20:
                    break
            deltas.append(~(result >> 1) if result & 1 else result >> 1)
        latitude += deltas[0]
        longitude += deltas[1]
        points.append((latitude / 10 ** precision, longitude / 10 ** precision))
    return points


class Streets:
    """The extract's street segments on a local flat plane (metres), for the distance from a point to the nearest."""

    def __init__(self, path):
        collection = json.load(open(path))
        self.count = len(collection["features"])
        self.origin = collection["features"][0]["geometry"]["coordinates"][0]
        self.segments = []
        for feature in collection["features"]:
            line = [self.plane(lat, lon) for lon, lat in feature["geometry"]["coordinates"]]
            self.segments += list(zip(line, line[1:]))

    def plane(self, latitude, longitude):
        scale = 6_371_008.8 * math.pi / 180
        return ((longitude - self.origin[0]) * scale * math.cos(math.radians(self.origin[1])),
                (latitude - self.origin[1]) * scale)

    def offset(self, latitude, longitude):
        px, py = self.plane(latitude, longitude)
        best = math.inf
        for (ax, ay), (bx, by) in self.segments:
            dx, dy = bx - ax, by - ay
            share = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / max(dx * dx + dy * dy, 1e-12)))
            best = min(best, math.hypot(px - ax - share * dx, py - ay - share * dy))
        return best


def length(points):
    scale = 6_371_008.8 * math.pi / 180
    total = 0.0
    for (lat1, lon1), (lat2, lon2) in zip(points, points[1:]):
        total += math.hypot((lon2 - lon1) * scale * math.cos(math.radians(lat1)), (lat2 - lat1) * scale)
    return total


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=".build/debug")
    parser.add_argument("--seconds", type=float, default=90, help="the longest the suite waits for each source")
    parser.add_argument("--streets", action="store_true", help="real streets and the real routing engine")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="routes-")
    engine = None
    streets = None
    if args.streets:
        roads = subprocess.run([os.path.join(ROOT, "scripts/roads.sh")], capture_output=True, text=True, check=True)
        city = os.path.join(ROOT, roads.stdout.strip())  # relative to the checkout, unless ROADS_DIR is absolute
        streets = Streets(os.path.join(city, "streets.geojson"))
        engine_port = free_port()
        engine_log = open(os.path.join(folder, "osrm.log"), "w")
        engine = subprocess.Popen([os.path.join(ROOT, "scripts/roads.sh"), "--serve", str(engine_port)],
                                  stdout=engine_log, stderr=subprocess.STDOUT)
        try:
            wait_until("osrm-routed to be ready",
                       lambda: "running and waiting for requests" in open(engine_log.name).read(), 15)
            stack = Stack(args.bin_dir, folder, vehicles=60,
                          worker_settings=(f"http.streets={city}/streets.geojson",),
                          fleet_arguments=("--driving", "arterial", "--streets", f"{city}/streets.geojson",
                                           "--osrm", f"http://127.0.0.1:{engine_port}"))
        except BaseException:
            engine.terminate()
            engine.wait(10)
            raise
    else:
        # A small city: cars reach their pickups within a minute.
        stack = Stack(args.bin_dir, folder, vehicles=60, fleet_arguments=("--radius", "600"))
    subscriber = subprocess.Popen(
        ["mosquitto_sub", "-p", str(stack.broker_port), "-v", "-t", "rides/+/status", "-t", "ridestatus/deadletter",
         "-t", "rides/+/start", "-t", "rides/+/assign", "-t", "rides/+/route", "-t", "fleet/vehicles/+/position"],
        stdout=subprocess.PIPE, text=True)
    sources = {}
    letters = []
    late = []
    routes = []  # (topic, route object) dispatch sent
    cars = {}  # ride -> vehicle, from its booking or assignment
    moving = set()  # vehicles on their way to a pickup or a drop-off, by their rides' statuses
    positions = []  # (vehicle, latitude, longitude) of those
    off_street = []
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
            if topic.endswith("/start") or topic.endswith("/assign") or topic.endswith("/route"):
                message = json.loads(payload)
                if message.get("vehicleId"):
                    cars[topic.split("/")[1]] = message["vehicleId"]
                if topic.endswith("/start"):
                    continue
                route = message.get("route") if topic.endswith("/assign") else message
                if route:
                    routes.append((topic, route))
                continue
            if topic.endswith("/position"):
                fix = json.loads(payload)
                vehicle = topic.split("/")[2]
                if streets and vehicle in moving and "latitude" in fix:
                    positions.append((vehicle, fix["latitude"], fix["longitude"]))
                continue
            status = json.loads(payload)
            phase = status["phase"]
            car = cars.get(status["rideIdentifier"])
            if car:
                if phase in ("approachingPickup", "ongoing"):
                    moving.add(car)
                else:
                    moving.discard(car)
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
        if streets:
            config = stack.get("/map-config.json")
            served = stack.get("/streets.geojson")
    finally:
        subscriber.terminate()
        subscriber.wait(5)
        stack.stop()
        if engine:
            engine.terminate()
            engine.wait(10)
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
    if streets:
        # E2 on real streets: every route is the engine's, on the extract's streets, as long as the engine says.
        print(f"{len(routes)} routes from dispatch, {len(positions)} positions of cars under way")
        if len(routes) < 10 or len(positions) < 100:
            problems.append(f"too little seen to judge: {len(routes)} routes, {len(positions)} positions")
        for topic, route in routes:
            points = decode_polyline(route["polyline"], route["precision"])
            worst = max(streets.offset(lat, lon) for lat, lon in points)
            if worst > 1.5:
                problems.append(f"{topic}: a route point {worst:.1f} m off every street: not the engine's route")
            if abs(length(points) - route["distance"]) > max(5, 0.03 * route["distance"]):
                problems.append(f"{topic}: the line is {length(points):.0f} m, the engine said {route['distance']} m")
        # GPS noise is at most 3 m; the pull-in short of a pickup stays on the route.
        off_street = [(vehicle, round(streets.offset(lat, lon), 1)) for vehicle, lat, lon in positions
                      if streets.offset(lat, lon) > 4]
        if off_street:
            problems.append(f"{len(off_street)} positions of cars under way off every street, e.g. {off_street[:3]}")
        if not config or config.get("streets") != "/streets.geojson" or "ODbL" not in config.get("streetsAttribution", ""):
            problems.append(f"the map's configuration does not name the streets and their licence: {config}")
        if not served or len(served.get("features", [])) != streets.count:
            problems.append("/streets.geojson does not serve the extract's streets")
    if problems:
        print("FAILED: " + "; ".join(problems) + f" (logs in {folder})")
        sys.exit(1)
    shutil.rmtree(folder, ignore_errors=True)
    print("E2 end to end: routed rides say route before and after the pickup, the rest estimate; no dead letter"
          + ("; on real streets every route is the engine's and every car drives on a street" if streets else ""))


if __name__ == "__main__":
    main()
