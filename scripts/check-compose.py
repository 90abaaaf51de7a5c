#!/usr/bin/env python3
"""No Docker engine runs on CI: parse docker-compose.yml and the Dockerfile and check what they name exists."""
import json
import os
import re
import sys

import yaml

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
problems = []
with open(os.path.join(root, "docker-compose.yml")) as handle:
    compose = yaml.safe_load(handle)
services = compose.get("services", {})
for name in ("setup", "broker", "worker", "simulator"):
    if name not in services:
        problems.append(f"service '{name}' is missing")
# Issue 14: only MQTT over TLS leaves the compose network; the worker publishes nothing (its /metrics stays
# inside); every image is pinned to a release.
broker = services.get("broker", {})
if broker.get("ports", []) != ["8883:8883"]:
    problems.append(f"broker must publish only 8883 (TLS), not {broker.get('ports')}")
for name in ("worker", "simulator"):
    if services.get(name, {}).get("ports"):
        problems.append(f"{name} publishes ports: its /metrics must stay on the compose network")
if not re.fullmatch(r"eclipse-mosquitto:2\.\d+\.\d+", str(broker.get("image", ""))):
    problems.append("broker is not eclipse-mosquitto pinned to a 2.x.y release")
if "secrets:/secrets:ro" not in broker.get("volumes", []):
    problems.append("broker does not mount the secrets volume read-only")
# Issue 30: the dynamic security plugin rewrites its file on every account change, so its folder is a volume the
# broker may write, and the setup service makes the file the configuration names.
with open(os.path.join(root, "config", "mosquitto.conf")) as handle:
    plugin_file = re.search(r"^plugin_opt_config_file\s+(\S+)", handle.read(), re.M)
if not plugin_file:
    problems.append("config/mosquitto.conf loads no dynamic security file (plugin_opt_config_file)")
else:
    folder = os.path.dirname(plugin_file.group(1))
    mounts = {volume.split(":")[1]: volume for volume in broker.get("volumes", [])}
    if folder not in mounts or mounts[folder].endswith(":ro"):
        problems.append(f"broker does not mount {folder} writable (the plugin's file {plugin_file.group(1)})")
with open(os.path.join(root, "Dockerfile")) as handle:
    if plugin_file and plugin_file.group(1) not in handle.read():
        problems.append(f"the setup image does not write {plugin_file.group(1)}")
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
for line in dockerfile.splitlines():
    match = re.match(r"^FROM\s+(\S+)", line.strip())
    if match and not re.fullmatch(r"swift:\d+\.\d+\.\d+-bookworm(-slim)?", match.group(1)):
        problems.append(f"Dockerfile image {match.group(1)} is not a pinned Swift release")
if "--force-resolved-versions" not in dockerfile:
    problems.append("the Docker build does not follow deploy/swiftpm-pins.json (--force-resolved-versions)")
# deploy/swiftpm-pins.json pins every package that Package.swift names.
with open(os.path.join(root, "Package.swift")) as handle:
    wanted = {url.lower().removesuffix(".git") for url in re.findall(r'\.package\(url: "([^"]+)"', handle.read())}
with open(os.path.join(root, "deploy", "swiftpm-pins.json")) as handle:
    pinned = {pin["location"].lower().removesuffix(".git") for pin in json.load(handle)["pins"]}
for url in sorted(wanted - pinned):
    problems.append(f"deploy/swiftpm-pins.json does not pin {url} (make lock)")
if problems:
    print("compose check failed:\n  " + "\n  ".join(problems))
    sys.exit(1)
print(f"compose check: {len(services)} services, mounted files and Dockerfile sources exist")
