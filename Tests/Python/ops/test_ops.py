#!/usr/bin/env python3
"""The operations files against the real worker:
  - promtool: the alert rules check and pass their unit tests (ops/prometheus/alerts-test.yml), the scrape
    configuration checks, and `promtool check metrics` finds nothing wrong in a real scrape;
  - a real scrape of a worker with rides and bad input (mosquitto, the worker, fleet-sim on free ports): every
    metric has `# HELP`, every metric the dashboard and the alerts use exists, and the cadence-gap histogram
    has edges that can show the promise (just above the interval, and 20 s);
  - the Grafana dashboard is JSON with a query in every panel;
  - the terminal view (ride-watch --plain) shows the rides' statuses, the workers and the dead letters.

Usage: Tests/Python/ops/test_ops.py [--bin-dir .build/debug]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import threading
import time
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from stack import ROOT, Stack, wait_until  # noqa: E402

ALERTS = os.path.join(ROOT, "ops/prometheus")
DASHBOARD = os.path.join(ROOT, "ops/grafana/ride-status-worker.json")


def promtool(*arguments, stdin=None):
    result = subprocess.run(["promtool", *arguments], cwd=ALERTS, input=stdin, capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"promtool {' '.join(arguments)} failed:\n{output}"
    return output


def used_metrics(text):
    """The metric families a PromQL text names (histogram series map to their family)."""
    names = set(re.findall(r"\bridestatus_[a-z_]+", text))
    return {re.sub(r"_(bucket|count|sum)$", "", name) for name in names}


def check_terminal_view(bin_dir, stack):
    """ride-watch reads statuses, presence and dead letters through RideStatusKit."""
    view = subprocess.Popen([os.path.join(bin_dir, "ride-watch"), "--broker", stack.broker, "--plain"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Until a status, the worker and a dead letter have shown, at most 30 s: fleet-sim's bad input goes mostly to
    # vehicles' position topics, which the worker hears only for vehicles with a ride, so in the first seconds a
    # dead letter may not have come yet (5 s of watching failed when fleet-sim's random draws moved).
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in view.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        shown = list(lines)
        if (any(" seq " in line for line in shown) and any(line.startswith("dead letter ") for line in shown)
                and any(line.startswith("worker ") and line.endswith(" online") for line in shown)):
            break
        time.sleep(0.2)
    view.terminate()
    view.wait(5)
    reader.join(5)
    output = "\n".join(lines)
    statuses = [line for line in lines if " seq " in line]
    assert statuses, f"ride-watch showed no status:\n{output[:2000]}"
    assert any(line.startswith("worker ") and line.endswith(" online") for line in lines), "the worker online"
    assert any(line.startswith("dead letter ") for line in lines), "the dead letters of the bad input"
    assert not any("does not decode" in line for line in lines), f"a status RideStatusKit could not read:\n{output}"
    print(f"ride-watch: {len(statuses)} statuses, the worker, and dead letters shown")


def run(bin_dir):
    promtool("check", "rules", "alerts.yml")
    promtool("test", "rules", "alerts-test.yml")
    promtool("check", "config", "prometheus.yml")
    print("promtool: rules, rule tests and configuration pass")

    dashboard = json.load(open(DASHBOARD))
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert dashboard["panels"] and all(panel["targets"] for panel in dashboard["panels"]), "every panel queries"
    wanted = used_metrics("\n".join(expressions)) | used_metrics(open(os.path.join(ALERTS, "alerts.yml")).read())

    folder = tempfile.mkdtemp(prefix="ride-ops-")
    stack = Stack(bin_dir, folder, vehicles=20, bad_input_rate=0.05)
    try:
        def scraped():
            text = (stack.get("/metrics", raw=True) or b"").decode()
            present = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
            return not (wanted - present) and text
        try:
            text = wait_until("every metric the dashboard and alerts use", scraped, 30, interval=1)
        except AssertionError:
            text = (stack.get("/metrics", raw=True) or b"").decode()
            present = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
            raise AssertionError(f"metrics used but never exposed: {sorted(wanted - present)}")
        check_terminal_view(bin_dir, stack)
    finally:
        stack.stop()
    shutil.rmtree(folder, ignore_errors=True)

    typed = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    helped = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    assert typed and not set(typed) - helped, f"metrics without # HELP: {sorted(set(typed) - helped)}"
    promtool("check", "metrics", stdin=text)
    edges = sorted(float(edge) for edge in re.findall(r'ridestatus_cadence_gap_seconds_bucket\{le="([0-9.]+)"\}', text))
    interval = 1.0  # the stack runs the worker with --update-interval 1
    assert any(interval < edge <= interval * 1.05 for edge in edges), f"no edge just above the interval: {edges}"
    assert 20.0 in edges, f"no edge at 20 s (C1's ceiling, the alert's threshold): {edges}"
    print(f"scrape: {len(typed)} metrics, each with # HELP; {len(wanted)} used by the dashboard and alerts, all "
          f"exposed; cadence-gap edges {edges}")
    print("ops test passed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, ".build/debug"))
    arguments = parser.parse_args()
    try:
        run(arguments.bin_dir)
    except AssertionError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
