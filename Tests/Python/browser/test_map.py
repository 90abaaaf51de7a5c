#!/usr/bin/env python3
"""The live map in a real browser: Debian's chromium and chromium-driver through Selenium, against a
real mosquitto, the worker and fleet-sim, each started here on free loopback ports.

Checks, in order:
  - the page loads with no console error;
  - it shows as many ride markers as the worker has active rides;
  - a marker moves when its vehicle publishes a fix;
  - a phase change (confirmed -> approachingPickup, P2) changes the marker's colour within 2 s;
  - the ride panel shows the ride's status (L7, through /v1/rides/{id});
  - a share link shows that ride alone: its phase and vehicle, its marker moving with a fix, no request
    for anything but its own status and events, no other ride's identifier on the page; a forged link says so;
  - with `http.streets` (make run's Helsinki extract, scripts/roads.sh), the map draws every street of the file, names
    their ODbL attribution, and says nothing of a missing basemap.
Screenshots go to the output folder (default .build/test-output/browser).

Usage: Tests/Python/browser/test_map.py [--bin-dir .build/debug] [--output DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from stack import ROOT, Stack, iso, offset, share_keys, share_link, wait_until  # noqa: E402

RIDE = "map-test-1"
VEHICLE = "map-test-v1"
PICKUP = (52.5219, 13.4132)


def fix(position, seconds_ago, speed, course):
    return {"vehicleId": VEHICLE, "timestamp": iso(seconds_ago), "latitude": position[0], "longitude": position[1],
            "speed": speed, "course": course, "horizontalAccuracy": 5.0}


def check_share_link(driver, stack, bin_dir, private_key, output, close):
    """Issue 30: a share link shows exactly its ride, follows it live, and asks for nothing else."""
    base = f"http://127.0.0.1:{stack.http_port}"
    link = share_link(bin_dir, private_key, RIDE, base)
    others = [r["rideIdentifier"] for r in stack.get("/v1/rides?limit=1000")["rides"] if r["rideIdentifier"] != RIDE]
    assert others, "fleet-sim's rides, which the link must not show"
    driver.get(link)
    wait_until("the shared ride's status on the page",
               lambda: driver.execute_script("return document.body.dataset.ride") == RIDE, 10)
    wait_until("the phase shown", lambda: "approaching" in driver.find_element(By.ID, "share-phase").text.lower(), 5)
    panel = driver.find_element(By.ID, "panel-status").text
    assert "B-MAP 16" in panel and "Map T." in panel, f"the vehicle and driver: {panel!r}"
    wait_until("the event stream to open", lambda: driver.find_element(By.ID, "connection").text == "live", 5)
    # A fix moves the shared vehicle's marker (through the ride's retained and live status, not /v1); 40 m on
    # from the last fix, well within T4's speed however soon it follows.
    nearer = offset(PICKUP, -260, 0)
    stack.publish(f"fleet/vehicles/{VEHICLE}/position", fix(nearer, 0, 5, 0))
    wait_until("the shared marker to follow the fix",
               lambda: abs((driver.execute_script("return window.sharedRide.position()") or [0])[0] - nearer[0]) < 1e-4,
               5)
    assert driver.execute_script("return window.sharedRide.markers()") == 3, "the vehicle, the pickup, the drop-off"
    legend = driver.find_element(By.ID, "share-legend").text.lower()
    assert all(word in legend for word in ("car", "pickup", "drop-off")), f"the markers' legend: {legend!r}"
    # The stack runs without a basemap (http.tileURL empty): the page says so rather than show grey.
    wait_until("the note that there is no basemap",
               lambda: "basemap" in driver.execute_script(
                   "const n = document.getElementById('offline-note'); return n ? n.textContent : ''"), 5)
    requested = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    token_path = link[len(base):]
    allowed = (token_path + "/status", token_path + "/live", "/leaflet/", "/share.js", "/map.css", "/map-config.json",
               "/streets.geojson")
    strays = [name for name in requested if not name[len(base):].startswith(allowed)]
    assert not strays, f"the share page asked for more than its ride: {strays}"
    source = driver.page_source
    shown = [ride for ride in others if ride in source]
    assert not shown, f"other rides on the share page: {shown}"
    assert driver.execute_script("return document.querySelector('meta[name=referrer]').content") == "no-referrer"
    path = os.path.join(output, "share.png")
    driver.save_screenshot(path)
    print(f"share link: {RIDE} alone, live, {len(requested)} requests all its own; screenshot {path}")

    forged = link.rsplit(".", 1)[0] + "." + "A" * 86
    driver.get(forged)
    wait_until("a forged link refused on the page",
               lambda: driver.execute_script("return document.body.dataset.refused") == "badSignature", 10)
    print("a forged link is refused: " + driver.find_element(By.ID, "panel-title").text)


def check_streets(driver, bin_dir, output):
    """The map with make run's streets: a worker of its own, given the extract's streets and no tiles."""
    roads = subprocess.run([os.path.join(ROOT, "scripts/roads.sh")], capture_output=True, text=True, check=True)
    streets_file = os.path.join(ROOT, roads.stdout.strip(), "streets.geojson")
    with open(streets_file) as handle:
        features = len(json.load(handle)["features"])
    folder = tempfile.mkdtemp(prefix="ride-map-streets-")
    stack = Stack(bin_dir, folder, vehicles=1, worker_settings=[f"http.streets={streets_file}"])
    try:
        driver.get(f"http://127.0.0.1:{stack.http_port}/")
        wait_until("the streets to be drawn", lambda: driver.execute_script("return window.rideMap.streets()") > 0, 10)
        drawn = driver.execute_script("return window.rideMap.streets()")
        assert drawn == features, f"{drawn} streets drawn of the file's {features}"
        attribution = driver.find_element(By.CSS_SELECTOR, ".leaflet-control-attribution").text
        assert "OpenStreetMap" in attribution and "ODbL" in attribution, f"the streets' attribution: {attribution!r}"
        note = driver.execute_script("const n = document.getElementById('offline-note'); return n ? n.textContent : ''")
        assert "basemap" not in note, f"with streets the map says nothing of a basemap: {note!r}"
        driver.save_screenshot(os.path.join(output, "map-streets.png"))
        print(f"streets: all {features} of make run's extract drawn, with their attribution")
    finally:
        stack.stop()
        shutil.rmtree(folder, ignore_errors=True)


def run(bin_dir, output):
    os.makedirs(output, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="ride-map-")
    private_key, key_set = share_keys(bin_dir, folder)
    stack = Stack(bin_dir, folder, worker_settings=[f"http.shareKeys={key_set}"])
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=options)
    try:
        # A ride of our own, whose fixes and phases this test controls; fleet-sim adds the rest.
        stack.publish(f"rides/{RIDE}/start", {
            "rideIdentifier": RIDE, "vehicleId": VEHICLE, "phase": "confirmed",
            "rideOption": {"name": "Compact", "estimatedPickupDate": iso(-600), "usesMeteredFare": True},
            "pickupLocation": {"latitude": PICKUP[0], "longitude": PICKUP[1], "name": "Alexanderplatz"},
            "dropOffLocation": {"latitude": 52.5096, "longitude": 13.3759},
            "vehicle": {"registrationPlate": "B-MAP 16"}, "driver": {"displayName": "Map T."},
        })
        wait_until("the test ride to start", lambda: stack.get(f"/v1/rides/{RIDE}"), 10)
        far = offset(PICKUP, -2000, 0)
        nearer = offset(PICKUP, -1800, 0)
        close = offset(PICKUP, -300, 0)

        def accepted(expected):
            summary = stack.get(f"/v1/rides/{RIDE}/track")
            return summary and summary["fixes"] and abs(summary["fixes"][-1]["latitude"] - expected[0]) < 1e-4
        # The vehicle's subscription (L3) may still be on its way: repeat the first fix until it is taken.
        wait_until("the first fix to be accepted",
                   lambda: stack.publish(f"fleet/vehicles/{VEHICLE}/position", fix(far, 120, 8, 0)) or accepted(far),
                   15, interval=0.5)

        driver.get(f"http://127.0.0.1:{stack.http_port}/")
        wait_until("the page's first update", lambda: driver.execute_script("return window.rideMap && window.rideMap.events"), 15)

        # As many markers as active rides (fleet-sim starts and ends rides: compare at one moment, retrying).
        def counts_match():
            active = stack.get("/v1/workers")["activeRides"]
            shown = driver.execute_script("return window.rideMap.markerCount()")
            return active > 1 and active == shown and (active, shown)
        matched = wait_until("the markers to match the active rides", counts_match, 15, interval=0.3)
        print(f"markers: {matched[1]} for {matched[0]} active rides")

        # A fix moves the marker.
        before = driver.execute_script(f"return window.rideMap.position('{RIDE}')")
        assert abs(before[0] - far[0]) < 1e-4, f"the marker should sit at the first fix, not {before}"
        stack.publish(f"fleet/vehicles/{VEHICLE}/position", fix(nearer, 60, 8, 0))
        wait_until("the marker to move to the new fix",
                   lambda: abs(driver.execute_script(f"return window.rideMap.position('{RIDE}')")[0] - nearer[0]) < 1e-4, 5)
        print("marker moved")

        # A phase change (P2: within approachingDistance of the pickup) changes its colour within 2 s.
        colours = driver.execute_script("return window.rideMap.colours")
        assert driver.execute_script(f"return window.rideMap.colour('{RIDE}')") == colours["confirmed"]
        stack.publish(f"fleet/vehicles/{VEHICLE}/position", fix(close, 0, 8, 0))
        sent = time.monotonic()
        wait_until("the marker's colour to change to approachingPickup",
                   lambda: driver.execute_script(f"return window.rideMap.colour('{RIDE}')") == colours["approachingPickup"],
                   2.0, interval=0.05)
        print(f"colour changed {time.monotonic() - sent:.2f} s after the fix was sent")

        # The ride's panel shows its status.
        driver.execute_script(f"window.rideMap.select('{RIDE}')")
        wait_until("the panel to show the status", lambda: "approachingPickup" in driver.find_element(
            By.CSS_SELECTOR, "#panel-status dd[data-field=phase]").text if driver.find_elements(
            By.CSS_SELECTOR, "#panel-status dd[data-field=phase]") else False, 5)
        vehicle = driver.find_element(By.CSS_SELECTOR, "#panel-status dd[data-field=vehicle]").text
        assert "B-MAP 16" in vehicle, f"the panel should show the vehicle, not {vehicle!r}"
        assert driver.find_elements(By.CSS_SELECTOR, "#panel-timeline li"), "the panel should list the statuses seen"
        print("panel shows the status")

        # The list filters by phase and search.
        driver.find_element(By.ID, "search").send_keys(RIDE)
        wait_until("the list to filter to the test ride", lambda: [e.get_attribute("data-ride") for e in driver.find_elements(
            By.CSS_SELECTOR, "#list li")] == [RIDE], 3)

        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, f"console errors: {errors}"
        path = os.path.join(output, "map.png")
        driver.save_screenshot(path)
        print(f"screenshot: {path}")

        check_share_link(driver, stack, bin_dir, private_key, output, close)
        # L8 with the page still open: the worker ends the event stream and stops cleanly.
        stack.stop()
        print(f"worker stopped in {stack.worker_stop_seconds:.1f} s with the page's event stream open")
        check_streets(driver, bin_dir, output)
    finally:
        driver.quit()
        try:
            stack.stop()
        except AssertionError:
            pass  # stopped above, or the failure that brought us here is the one to report
    shutil.rmtree(folder, ignore_errors=True)
    print("browser test passed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, ".build/debug"))
    parser.add_argument("--output", default=os.path.join(ROOT, ".build/test-output/browser"))
    arguments = parser.parse_args()
    try:
        run(arguments.bin_dir, arguments.output)
    except AssertionError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
