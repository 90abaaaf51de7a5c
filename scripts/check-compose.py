#!/usr/bin/env python3
"""No Docker engine runs on CI: parse docker-compose.yml and the Dockerfile and check what they name exists."""
import os
import re
import sys

import yaml

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
problems = []
with open(os.path.join(root, "docker-compose.yml")) as handle:
    compose = yaml.safe_load(handle)
services = compose.get("services", {})
for name in ("broker", "worker", "simulator"):
    if name not in services:
        problems.append(f"service '{name}' is missing")
if "1883:1883" not in services.get("broker", {}).get("ports", []):
    problems.append("broker does not publish port 1883")
if "9466:9466" not in services.get("worker", {}).get("ports", []):
    problems.append("worker does not publish the metrics port 9466")
if not str(services.get("broker", {}).get("image", "")).startswith("eclipse-mosquitto:2"):
    problems.append("broker is not eclipse-mosquitto 2")
for service in services.values():
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("./") and not os.path.exists(os.path.join(root, source)):
            problems.append(f"mounted file {source} does not exist")
with open(os.path.join(root, "Dockerfile")) as handle:
    dockerfile = handle.read()
for line in dockerfile.splitlines():
    match = re.match(r"^COPY\s+(?!--from)(.+)\s+\S+$", line.strip())
    if match:
        for source in match.group(1).split():
            if not os.path.exists(os.path.join(root, source)):
                problems.append(f"Dockerfile copies {source}, which does not exist")
if problems:
    print("compose check failed:\n  " + "\n  ".join(problems))
    sys.exit(1)
print(f"compose check: {len(services)} services, mounted files and Dockerfile sources exist")
