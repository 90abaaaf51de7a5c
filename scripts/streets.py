#!/usr/bin/env python3
"""The streets of an extract as the map and fleet-sim read them (scripts/roads.sh runs it).

Reads the drivable ways in osmium's OPL text (`osmium cat -f opl`) and writes a small FeatureCollection of
LineStrings whose properties are only `highway`, `name` and `drive`. Not `osmium export`: it drops a way whole when
the extract's cut left some of its nodes out (69 of 1,002 in central Helsinki, where routes ran); here such a way
keeps each run of the nodes that are there, as the routing engine does. `drive` marks the streets a car can reach from the city's centre
and come back from, by the engine's own graph: an extract is cut at its edges, so one-way streets that lead out of
it, and the pieces behind them, are islands (12 % of random place pairs in central Helsinki got "NoRoute"). fleet-sim
puts its cars, pickups and drop-offs only on `drive` streets that are not service ways (driveways, parking aisles).

Usage: scripts/streets.py WAYS.opl OUT.geojson --osrm-routed BIN --graph FILE.osrm
"""
import argparse
import json
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        return json.load(error)


def unescape(text):
    """OPL writes characters outside its safe set as %hex%."""
    return re.sub(r"%([0-9a-f]+)%", lambda match: chr(int(match.group(1), 16)), text)


def read_opl(path):
    """The ways' lines: [(tags, [[longitude, latitude], ...])], a line per run of nodes the extract holds."""
    nodes = {}
    ways = []
    for line in open(path, encoding="utf-8"):
        fields = line.split()
        if not fields:
            continue
        if fields[0].startswith("n"):
            place = {field[0]: field[1:] for field in fields[1:] if field[:1] in ("x", "y")}
            if place.get("x") and place.get("y"):
                nodes[fields[0][1:]] = [float(place["x"]), float(place["y"])]
        elif fields[0].startswith("w"):
            members = {field[0]: field[1:] for field in fields[1:]}
            tags = {}
            for pair in members.get("T", "").split(","):
                key, _, value = pair.partition("=")
                if key:
                    tags[unescape(key)] = unescape(value)
            ways.append((tags, [ref[1:] for ref in members.get("N", "").split(",") if ref]))
    lines = []
    for tags, refs in ways:
        run = []
        for ref in refs + [None]:
            if ref in nodes:
                run.append(nodes[ref])
                continue
            if len(run) >= 2:
                lines.append((tags, run))
            run = []
    return lines


def reachable(base, hub, points, batch=400):
    """For each point, whether the engine finds a route from `hub` to it and back."""
    found = []
    for start in range(0, len(points), batch):
        chunk = points[start:start + batch]
        places = ";".join(f"{lon},{lat}" for lon, lat in [hub] + chunk)
        there = get(f"{base}/table/v1/driving/{places}?sources=0")
        back = get(f"{base}/table/v1/driving/{places}?destinations=0")
        if there.get("code") != "Ok" or back.get("code") != "Ok":
            raise SystemExit(f"error: osrm-routed's table service answered {there.get('code')}, {back.get('code')}")
        for index in range(1, len(chunk) + 1):
            found.append(there["durations"][0][index] is not None and back["durations"][index][0] is not None)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ways")
    parser.add_argument("output")
    parser.add_argument("--osrm-routed", required=True)
    parser.add_argument("--graph", required=True)
    args = parser.parse_args()
    features = [{"geometry": {"type": "LineString", "coordinates": points}, "properties": tags}
                for tags, points in read_opl(args.ways)]
    vertices = [tuple(point) for feature in features for point in feature["geometry"]["coordinates"]]
    if not vertices:
        raise SystemExit(f"error: {args.ways} has no streets")
    port = free_port()
    engine = subprocess.Popen(
        [args.osrm_routed, "-i", "127.0.0.1", "-p", str(port), "-a", "CH", "--max-table-size", "1000", args.graph],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in engine.stdout:
            if "running and waiting for requests" in line:
                break
        else:
            raise SystemExit("error: osrm-routed stopped before it was ready")
        # It logs each request: keep reading, or it blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in engine.stdout], daemon=True).start()
        base = f"http://127.0.0.1:{port}"
        # The hub: of the major-road vertices nearest the extract's middle, the one the most vertices connect with
        # both ways (a hub on an island would mark the island).
        west = min(lon for lon, _ in vertices)
        east = max(lon for lon, _ in vertices)
        south = min(lat for _, lat in vertices)
        north = max(lat for _, lat in vertices)
        middle = ((west + east) / 2, (south + north) / 2)
        major = [tuple(point) for feature in features
                 if feature["properties"].get("highway") in ("primary", "secondary", "tertiary")
                 for point in feature["geometry"]["coordinates"]] or vertices
        candidates = sorted(major, key=lambda p: (p[0] - middle[0]) ** 2 + (p[1] - middle[1]) ** 2)[:5]
        best = max(((sum(reachable(base, hub, vertices)), hub) for hub in candidates))
        hub = best[1]
        marks = iter(reachable(base, hub, vertices))
    finally:
        engine.terminate()
        engine.wait(10)
    kept = 0
    out = []
    for feature in features:
        ends = [next(marks) for _ in feature["geometry"]["coordinates"]]
        drive = all(ends)
        kept += drive
        properties = {key: value for key, value in feature["properties"].items() if key in ("highway", "name")}
        properties["drive"] = drive
        out.append({"type": "Feature", "geometry": feature["geometry"], "properties": properties})
    with open(args.output, "w") as file:
        json.dump({"type": "FeatureCollection", "features": out}, file, separators=(",", ":"))
    print(f"{len(out)} streets, {kept} reachable both ways from {hub[1]:.5f},{hub[0]:.5f} (drive: true)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
