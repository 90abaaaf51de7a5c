#!/usr/bin/env python3
"""The read API against a running worker: mosquitto, the worker and fleet-sim on free loopback ports,
then
  - paging: every page sorted, the pages disjoint and in order, `nextCursor` null on the last, a phase filter
    that keeps only that phase, and each listed ride's status answering with that ride (L7);
  - schemathesis over the OpenAPI document the worker serves (/v1/openapi.json): every documented operation
    with generated inputs, every check (status codes, content types, response schemas, negative inputs), three
    times: without a token (loopback), with a valid share token for one ride, and with a forged one;
  - a share token's scope: its ride only, 403 for another ride and the fleet, 401 for a bad token.

Usage: Tests/Python/api/test_api.py [--bin-dir .build/debug] [--examples N]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from stack import ROOT, Stack, share_keys, share_link, wait_until  # noqa: E402


def check_paging(stack):
    wait_until("a few active rides", lambda: (stack.get("/v1/workers") or {}).get("activeRides", 0) >= 5, 20)
    seen, cursor, pages = [], None, 0
    while True:
        page = stack.get("/v1/rides?limit=2" + (f"&cursor={cursor}" if cursor else ""))
        identifiers = [ride["rideIdentifier"] for ride in page["rides"]]
        assert len(identifiers) <= 2, f"a page holds at most limit rides: {identifiers}"
        assert identifiers == sorted(identifiers), f"a page is sorted by identifier: {identifiers}"
        assert not seen or not identifiers or identifiers[0] > seen[-1], "pages go on after the cursor"
        seen += identifiers
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
        assert cursor == identifiers[-1], "the cursor is the page's last ride"
    assert len(seen) == len(set(seen)) and pages >= 2, f"{pages} pages, {len(seen)} rides, no ride twice"
    everything = stack.get("/v1/rides?limit=1000")["rides"]
    filtered = 0
    for phase in sorted({ride["phase"] for ride in everything}):
        rides = stack.get(f"/v1/rides?phase={phase}&limit=1000")["rides"]
        assert all(ride["phase"] == phase for ride in rides), f"the filter keeps only {phase}"
        filtered += len(rides)
    assert filtered > 0, "the phase filter found the rides listed"
    answered = 0
    for ride in stack.get("/v1/rides?limit=5")["rides"]:
        status = stack.get(f"/v1/rides/{ride['rideIdentifier']}")
        # A ride may end between the list and the status (fleet-sim stops rides): then it is a 404 (None here).
        if status is not None:
            assert status["rideIdentifier"] == ride["rideIdentifier"], "L7: the ride's own status"
            answered += 1
    assert answered > 0, "the listed rides' statuses answer"
    print(f"paging: {len(seen)} rides over {pages} pages, filters and statuses consistent")


def check_methods(stack):
    """HEAD answers where GET does; another method is a 405 naming GET and HEAD (RFC 9110)."""
    import urllib.error
    import urllib.request
    base = f"http://127.0.0.1:{stack.http_port}"
    with urllib.request.urlopen(urllib.request.Request(f"{base}/v1/rides", method="HEAD"), timeout=5) as response:
        assert response.status == 200 and response.read() == b"", "HEAD /v1/rides"
    try:
        urllib.request.urlopen(urllib.request.Request(f"{base}/v1/workers", method="POST", data=b"{}"), timeout=5)
        raise AssertionError("POST /v1/workers should be refused")
    except urllib.error.HTTPError as refused:
        assert refused.code == 405 and refused.headers["Allow"] == "GET, HEAD", f"{refused.code} {refused.headers}"
    print("methods: HEAD answers, POST is a 405 with Allow")


def check_share_scope(stack, token, ride):
    """Issue 30: a share token opens its ride alone; a bad one opens nothing, with its reason."""
    import urllib.error
    import urllib.request

    def answer(path, bearer):
        request = urllib.request.Request(f"http://127.0.0.1:{stack.http_port}{path}",
                                         headers={"Authorization": f"Bearer {bearer}"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    status, body = answer(f"/v1/rides/{ride}", token)
    assert status == 200 and body["rideIdentifier"] == ride, f"the token's ride: {status} {body}"
    status, body = answer("/v1/rides?limit=1000", token)
    assert status == 200 and [r["rideIdentifier"] for r in body["rides"]] == [ride], f"only its ride: {body}"
    others = [r["rideIdentifier"] for r in stack.get("/v1/rides?limit=1000")["rides"] if r["rideIdentifier"] != ride]
    assert others, "other rides to be refused"
    status, body = answer(f"/v1/rides/{others[0]}", token)
    assert status == 403 and body["reason"] == "otherRide", f"another ride: {status} {body}"
    status, body = answer("/v1/workers", token)
    assert status == 403 and body["reason"] == "fleetWide", f"the fleet: {status} {body}"
    status, body = answer(f"/v1/rides/{ride}", token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"))
    assert status == 401 and body["reason"] in ("badSignature", "malformedToken"), f"an altered token: {body}"
    print(f"share scope: {ride} alone, another ride and the fleet refused, an altered token refused")


def schemathesis(base, folder, examples, headers=(), label=""):
    # /v1/live is an endless event stream: the browser test covers it.
    command = [
        "schemathesis", "run", f"{base}/v1/openapi.json", "--url", base, "--checks", "all",
        "--max-examples", str(examples), "--request-timeout", "5", "--no-color", "--exclude-path", "/v1/live",
    ]
    for header in headers:
        command += ["--header", header]
    if not shutil.which("schemathesis"):
        command = [sys.executable, "-m", "schemathesis.cli"] + command[1:]
    print(f"==> schemathesis {label}", flush=True)
    result = subprocess.run(command, cwd=folder)
    assert result.returncode == 0, f"schemathesis {label} found problems (exit {result.returncode}; output above)"


def run(bin_dir, examples):
    folder = tempfile.mkdtemp(prefix="ride-api-")
    private_key, key_set = share_keys(bin_dir, folder)
    stack = Stack(bin_dir, folder, vehicles=30, worker_settings=[f"http.shareKeys={key_set}"])
    try:
        check_paging(stack)
        check_methods(stack)
        base = f"http://127.0.0.1:{stack.http_port}"
        ride = stack.get("/v1/rides?limit=1")["rides"][0]["rideIdentifier"]
        token = share_link(bin_dir, private_key, ride, base).rsplit("/", 1)[1]
        check_share_scope(stack, token, ride)
        schemathesis(base, folder, examples, label="without a token (loopback)")
        schemathesis(base, folder, max(10, examples // 2), [f"Authorization: Bearer {token}"],
                     label=f"with a share token for {ride}")
        forged = token.rsplit(".", 1)[0] + "." + "A" * 86
        schemathesis(base, folder, max(10, examples // 4), [f"Authorization: Bearer {forged}"],
                     label="with a forged share token")
    finally:
        stack.stop()
    shutil.rmtree(folder, ignore_errors=True)
    print("read API test passed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, ".build/debug"))
    parser.add_argument("--examples", type=int, default=40)
    arguments = parser.parse_args()
    try:
        run(arguments.bin_dir, arguments.examples)
    except AssertionError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
