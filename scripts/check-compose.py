#!/usr/bin/env python3
"""No Docker engine runs on CI: parse docker-compose.yml, docker-compose.cluster.yml and the Dockerfile, and check what
they name exists."""
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

# G6: docker-compose.cluster.yml, a group on a 3-node NATS cluster with etcd as its authority.
def environment_names():
    """RIDESTATUS_ names of the worker's settings: each key of WorkerSettings+Keys.swift, as SettingsLayers maps it
    (`rides.updateInterval` -> RIDESTATUS_RIDES_UPDATE_INTERVAL)."""
    with open(os.path.join(root, "Sources", "RideStatusService", "WorkerSettings+Keys.swift")) as handle:
        keys = re.findall(r'^\s+"([a-z]+\.[A-Za-z.]+)": \{', handle.read(), re.M)
    return {"RIDESTATUS_" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).replace(".", "_").upper() for key in keys}


with open(os.path.join(root, "docker-compose.cluster.yml")) as handle:
    cluster = yaml.safe_load(handle).get("services", {})
with open(os.path.join(root, "scripts", "nats-server.sh")) as handle:
    nats_version = re.search(r'^version="([^"]+)"', handle.read(), re.M).group(1)
known = environment_names()
members = [f"etcd-{i}" for i in range(3)]
nodes = [f"nats-{i}" for i in range(3)]
workers = [f"worker-{i}" for i in range(3)]
for name in members + nodes + workers + ["simulator"]:
    if name not in cluster:
        problems.append(f"docker-compose.cluster.yml: service '{name}' is missing")
for name, service in cluster.items():
    if service.get("ports"):
        problems.append(f"docker-compose.cluster.yml: {name} publishes ports; the topology stays on its network")
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("./") and not os.path.exists(os.path.join(root, source)):
            problems.append(f"docker-compose.cluster.yml: {name} mounts {source}, which does not exist")
for name in members:
    service = cluster.get(name, {})
    if not re.fullmatch(r"gcr\.io/etcd-development/etcd:v3\.4\.\d+", str(service.get("image", ""))):
        problems.append(f"docker-compose.cluster.yml: {name} is not etcd pinned to a 3.4.z release")
    command = " ".join(map(str, service.get("command", [])))
    if f"--name {name}" not in command or not all(f"{member}=http://{member}:2380" in command for member in members):
        problems.append(f"docker-compose.cluster.yml: {name} does not name itself and the three members")
for name in nodes:
    service = cluster.get(name, {})
    if service.get("image") != f"nats:{nats_version}-alpine":
        problems.append(f"docker-compose.cluster.yml: {name} is not nats {nats_version}, the pin of scripts/nats-server.sh")
    if service.get("environment", {}).get("NATS_NAME") != name:
        problems.append(f"docker-compose.cluster.yml: {name} does not give its name to config/nats-cluster.conf")
with open(os.path.join(root, "config", "nats-cluster.conf")) as handle:
    nats_conf = handle.read()
for node in nodes:
    if f"nats-route://{node}:6222" not in nats_conf:
        problems.append(f"config/nats-cluster.conf does not route to {node}")
if "mqtt" not in nats_conf or "jetstream" not in nats_conf:
    problems.append("config/nats-cluster.conf lacks MQTT or JetStream (MQTT needs JetStream)")
for index, name in enumerate(workers):
    environment = cluster.get(name, {}).get("environment", {})
    for variable in sorted(set(environment) - known):
        problems.append(f"docker-compose.cluster.yml: {name} sets {variable}, which is no worker setting")
    if environment.get("RIDESTATUS_GROUP_AUTHORITY") != "etcd":
        problems.append(f"docker-compose.cluster.yml: {name} does not take etcd as its authority (G6)")
    endpoints = str(environment.get("RIDESTATUS_GROUP_ETCD_ENDPOINTS", "")).split(",")
    if sorted(endpoints) != [f"http://{member}:2379" for member in members]:
        problems.append(f"docker-compose.cluster.yml: {name} is not given the three etcd members")
    urls = str(environment.get("RIDESTATUS_BROKER_URL", "")).split(",")
    if sorted(urls) != [f"mqtt://{node}:1883" for node in nodes] or urls[0] != f"mqtt://{nodes[index]}:1883":
        problems.append(f"docker-compose.cluster.yml: {name} does not start on its own node with the others after it")
    if str(environment.get("RIDESTATUS_BROKER_PROTOCOL")) != "3.1.1":
        problems.append(f"docker-compose.cluster.yml: {name} does not speak MQTT 3.1.1 (NATS)")
for variable in sorted(set(services.get("worker", {}).get("environment", {})) - known):
    problems.append(f"docker-compose.yml: the worker sets {variable}, which is no worker setting")
ids = [cluster.get(name, {}).get("environment", {}).get("RIDESTATUS_WORKER_ID") for name in workers]
if len(set(ids)) != len(workers) or None in ids:
    problems.append(f"docker-compose.cluster.yml: the workers' ids are not set and distinct: {ids}")

if problems:
    print("compose check failed:\n  " + "\n  ".join(problems))
    sys.exit(1)
print(f"compose check: {len(services)} services, mounted files and Dockerfile sources exist; the cluster's "
      f"{len(cluster)} services: etcd and NATS pinned, each worker on etcd with the three nodes and members")
