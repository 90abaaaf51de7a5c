#!/usr/bin/env bash
# `make run`: a local mosquitto on loopback, the worker, the fleet simulator and the live view.
#
# Whatever stops this script (Ctrl-C, a closed terminal, a broken pipe, SIGTERM, SIGHUP, the live view
# ending), its children stop with it, in reverse order. Each run starts from a clean slate (no rides of
# earlier runs) unless KEEP=1. Logs: var/log/. Data: var/mosquitto/ (ignored by git). `make reset`
# clears var/ without touching the build.
set -uo pipefail
cd "$(dirname "$0")/.."

port="${BROKER_PORT:-8883}"
worker_port="${WORKER_BROKER_PORT:-$((port + 1))}"
metrics_port="${METRICS_PORT:-9466}"
# The routing engine (osrm-routed on central Helsinki's streets, scripts/roads.sh): fleet-sim's cars drive its routes.
# STREETS=0 drives the made-up roads of DRIVING around Berlin instead.
osrm_port="${OSRM_PORT:-5005}"
streets="${STREETS:-1}"
vehicles="${VEHICLES:-50}"
# How the simulated cars drive (fleet-sim --driving): classes of real driving by default, grid for the
# old grid city.
driving="${DRIVING:-classes}"
keep="${KEEP:-0}"
# The executables: `make run` passes its build's folder (debug unless RELEASE=1).
bin="${BIN_DIR:-.build/debug}"
run_dir=var/run

# Output may go to a pipe that closes (`make run | tee`, a closed terminal): never die of SIGPIPE mid-cleanup.
trap '' PIPE
say() { printf '%s\n' "$*" 2>/dev/null || true; }

# Children left by an earlier run that did not get to clean up (SIGKILL, a crash): ours by their pid files
# and command names, so they are stopped; anything else holding a port is named, and left alone.
stop_leftovers() {
    [ -d "$run_dir" ] || return 0
    # Reverse start order, so that the worker can still say offline and flush to the broker (L8).
    for name in push-demo ride-watch fleet-sim ride-status-worker osrm-routed mosquitto; do
        local file="$run_dir/$name.pid"
        [ -e "$file" ] || continue
        local pid
        pid=$(cat "$file" 2>/dev/null)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q "$name" "/proc/$pid/cmdline" 2>/dev/null; then
            say "==> an earlier make run left $name running (pid $pid): stopping it"
            kill -TERM "$pid" 2>/dev/null
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$file"
    done
}

port_holder() {
    ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'users:(([^)]*' | sed 's/users:((//' | head -1
}

check_port() {
    local port=$1 what=$2 hint=$3
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        local holder
        holder=$(port_holder "$port")
        say "error: 127.0.0.1:$port ($what) is taken${holder:+ by $holder}. Stop it, or run: make run $hint" >&2
        exit 1
    fi
}

stop_leftovers
check_port "$port" "the broker" "BROKER_PORT=$((port + 10000 > 65535 ? port - 2 : port + 10000))"
check_port "$worker_port" "the broker's worker listener" "WORKER_BROKER_PORT=$((worker_port + 10000 > 65535 ? worker_port - 2 : worker_port + 10000))"
check_port "$metrics_port" "the worker's /metrics" "METRICS_PORT=$((metrics_port + 10000 > 65535 ? metrics_port - 1 : metrics_port + 10000))"
if [ "$streets" = 1 ]; then
    check_port "$osrm_port" "the routing engine" "OSRM_PORT=$((osrm_port + 10000 > 65535 ? osrm_port - 1 : osrm_port + 10000))"
    # Fetched and prepared once (seconds); without PyPI, or off x86_64, the cars drive made-up roads instead.
    if ! scripts/roads.sh --install; then
        say "==> the streets could not be prepared (see above): the cars drive made-up roads around Berlin (STREETS=0)"
        streets=0
    fi
    roads=$(scripts/roads.sh 2>/dev/null) || streets=0
fi

mkdir -p var/log var/mosquitto var/worker "$run_dir"
if [ "$keep" != 1 ]; then
    # A clean slate: no retained rides, sessions or logs of earlier runs (KEEP=1 keeps them).
    rm -f var/mosquitto/*.db var/log/*.log
    say "==> starting from a clean slate (make run KEEP=1 keeps the rides of the previous run)"
else
    say "==> keeping the rides of the previous run (KEEP=1)"
fi

# The deployment's CA, certificates and accounts, made once and kept under var/security: the quick
# start runs the real setup, TLS and passwords included, only on loopback.
security=var/security
scripts/deploy-setup.sh "$security" > var/log/deploy-setup.log 2>&1 || {
    say "error: scripts/deploy-setup.sh failed; see var/log/deploy-setup.log" >&2
    exit 1
}
say "==> TLS and accounts from $security (CA: $security/tls/ca.crt; each account's password: $security/secrets/; riders: scripts/broker-accounts.py add-rider, docs/security.md)"

# The broker configuration of the repo, bound to loopback, with the secrets, accounts and data under var/, and
# Debian's path of the dynamic security plugin (the shipped file names the eclipse-mosquitto image's).
plugin=$(ls /usr/lib/*-linux-gnu/mosquitto_dynamic_security.so /usr/lib/mosquitto_dynamic_security.so 2>/dev/null | head -1)
[ -n "$plugin" ] || { say "error: mosquitto_dynamic_security.so not found (Debian's mosquitto package has it)" >&2; exit 1; }
sed -e "s|^listener 8883.*|listener $port 127.0.0.1|" \
    -e "s|^listener 8884.*|listener $worker_port 127.0.0.1|" \
    -e "s|/secrets/|$PWD/$security/|" \
    -e "s|/accounts/|$PWD/$security/|" \
    -e "s|^plugin /usr/lib/mosquitto_dynamic_security.so|plugin $plugin|" \
    -e "s|^persistence_location .*|persistence_location $PWD/var/mosquitto/|" \
    -e "s|^log_dest stdout|log_dest file $PWD/var/log/mosquitto.log|" \
    config/mosquitto.conf > var/mosquitto/mosquitto.conf
[ "$(id -u)" -eq 0 ] && echo "user root" >> var/mosquitto/mosquitto.conf

# Each child runs in a session of its own (setsid): Ctrl-C reaches the whole foreground process group, and
# mosquitto would otherwise exit at once, before the worker has said offline and flushed (L8). The children
# are stopped here instead, in order.
pids=()
names=()
cleaned=0
watchdog=""
view=""
cleanup() {
    [ "$cleaned" = 1 ] && return
    cleaned=1
    trap '' INT TERM HUP
    [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
    [ -n "$view" ] && kill "$view" 2>/dev/null && rm -f "$run_dir/ride-watch.pid"
    say ""
    say "==> stopping ride-push, simulator, worker and broker"
    # Reverse start order: the simulator first, then the worker (it says offline and flushes), the broker last.
    for (( index=${#pids[@]}-1; index>=0; index-- )); do
        kill -TERM "${pids[index]}" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "${pids[index]}" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "${pids[index]}" 2>/dev/null || true
        rm -f "$run_dir/${names[index]}.pid"
    done
    say "==> stopped. Logs are in var/log/."
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Children get the default SIGPIPE back (this script ignores it for itself only).
start() {
    local name=$1
    shift
    (trap - PIPE; exec setsid "$@") &
    pids+=($!)
    names+=("$name")
    echo $! > "$run_dir/$name.pid"
}

# Share links: a signing key made once (dispatch's, in a real deployment), its public half in the key set
# the worker verifies with.
share=$security/share
if [ ! -s "$share/keys.json" ]; then
    mkdir -p "$share" && chmod 700 "$share"
    "$bin/ride-status-worker" share-key --id "local-$(date -u +%Y%m%d)" --private-key "$share/signing.jwk" \
        --key-set "$share/keys.json" >> var/log/deploy-setup.log 2>&1 || {
        say "error: ride-status-worker share-key failed; see var/log/deploy-setup.log" >&2
        exit 1
    }
fi

mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)
say "==> the live map will be at http://127.0.0.1:$metrics_port/ (read API: http://127.0.0.1:$metrics_port/v1/rides)"
say "==> starting mosquitto on 127.0.0.1:$port (TLS and passwords) and :$worker_port (TLS and client certificates) (log: var/log/mosquitto.log)"
start mosquitto "$mosquitto_bin" -c var/mosquitto/mosquitto.conf 2>> var/log/mosquitto.log
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
# A var/security of an earlier release brought to A4 (client ids bound to accounts, receiving denied by default, no
# worker password, accounts listed since made); nothing changes on one that is up to date.
python3 scripts/broker-accounts.py upgrade --secrets "$security/accounts" --static-secrets "$security/secrets" \
    --port "$port" --cafile "$security/tls/ca.crt" --host localhost >> var/log/deploy-setup.log 2>&1 || {
    say "error: scripts/broker-accounts.py upgrade failed; see var/log/deploy-setup.log" >&2
    exit 1
}

# On real streets the map draws them (no tiles needed: they are often unreachable where this runs).
map_settings=()
[ "$streets" = 1 ] && map_settings=(--set "http.streets=$roads/streets.geojson" --set "http.tileURL=")
say "==> starting ride-status-worker (log: var/log/worker.log, metrics: http://127.0.0.1:$metrics_port/metrics)"
start ride-status-worker "$bin/ride-status-worker" --broker "mqtts://localhost:$worker_port" --state-dir var/worker \
    --set "broker.caFile=$security/tls/ca.crt" --set "broker.certificateFile=$security/tls/worker.crt" \
    --set "broker.keyFile=$security/tls/worker.key" --set "http.shareKeys=$share/keys.json" "${map_settings[@]}" \
    --metrics-port "$metrics_port" >> var/log/worker.log 2>&1
ready=0
for _ in $(seq 1 150); do
    if curl -sf --max-time 1 "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1; then ready=1; break; fi
    kill -0 "${pids[1]}" 2>/dev/null || break
    sleep 0.1
done
if [ "$ready" != 1 ]; then
    say "error: the worker did not become ready; the end of var/log/worker.log:" >&2
    tail -n 15 var/log/worker.log >&2 2>/dev/null
    exit 1
fi

city=()
if [ "$streets" = 1 ]; then
    say "==> starting osrm-routed on 127.0.0.1:$osrm_port: central Helsinki's streets (© OpenStreetMap contributors, ODbL) (log: var/log/osrm.log)"
    # A fresh log: with KEEP=1 an earlier run's "ready" line would answer the wait below.
    : > var/log/osrm.log
    start osrm-routed scripts/roads.sh --serve "$osrm_port" >> var/log/osrm.log 2>&1
    for _ in $(seq 1 100); do grep -q "running and waiting for requests" var/log/osrm.log 2>/dev/null && break; sleep 0.1; done
    grep -q "running and waiting for requests" var/log/osrm.log || { say "error: osrm-routed did not start; see var/log/osrm.log" >&2; exit 1; }
    city=(--streets "$roads/streets.geojson" --osrm "http://127.0.0.1:$osrm_port")
fi
where=""
[ "$streets" = 1 ] && where=" along the routing engine's routes in Helsinki"
say "==> starting fleet-sim with $vehicles vehicles driving $driving$where (log: var/log/fleet-sim.log)"
start fleet-sim "$bin/fleet-sim" --broker "mqtts://localhost:$port" --ca-file "$security/tls/ca.crt" \
    --username fleet-sim --password-file "$security/secrets/fleet-sim" --vehicles "$vehicles" \
    --driving "$driving" --bad-input-rate 0.002 "${city[@]}" >> var/log/fleet-sim.log 2>&1

# Says so in the terminal if the worker stops while the live view runs (the view shows its presence too).
(
    while kill -0 "${pids[1]}" 2>/dev/null; do sleep 1; done
    say "" && say "!!! the worker has stopped; see var/log/worker.log" >&2
) &
watchdog=$!

# A share link for the first ride that shows up: what a rider would send a friend (valid for 2 hours).
first_ride=""
for _ in $(seq 1 50); do
    first_ride=$(curl -sf --max-time 1 "http://127.0.0.1:$metrics_port/v1/rides?limit=1" 2>/dev/null \
        | python3 -c 'import json, sys; rides = json.load(sys.stdin)["rides"]; print(rides[0]["rideIdentifier"] if rides else "")' 2>/dev/null)
    [ -n "$first_ride" ] && break
    sleep 0.2
done
if [ -n "$first_ride" ]; then
    link=$("$bin/ride-status-worker" share-link --ride "$first_ride" --private-key "$share/signing.jwk" \
        --expires-in 2h --base-url "http://127.0.0.1:$metrics_port" 2>/dev/null)
    [ -n "$link" ] && say "==> share link for $first_ride (2 hours; that ride alone): $link"
    # The lock screen: ride-push against stand-ins of APNs and FCM, an iPhone and an Android phone
    # registered for that ride with the link's token; every push they accept goes to var/log/push.log.
    token=${link##*/share/}
    token=${token%%[?#]*}
    if [ -n "$link" ] && [ -x "$bin/ride-push" ] && [ -s "$security/secrets/ride-push" ]; then
        # The token in a file of mode 600, not on a command line that `ps` shows every user (A4).
        (umask 077 && printf '%s\n' "$token" > "$share/demo-token")
        start push-demo python3 scripts/push-demo.py --bin-dir "$bin" --ride "$first_ride" --share-token-file "$share/demo-token" \
            --share-keys "$share/keys.json" --folder var/push --broker "mqtts://localhost:$port" \
            --ca-file "$security/tls/ca.crt" --username ride-push --password-file "$security/secrets/ride-push" \
            >> var/log/push.log 2>&1
        say "==> ride-push with APNs and FCM stand-ins: what $first_ride's lock screens get, in var/log/push.log (tail -f)"
    elif [ ! -s "$security/secrets/ride-push" ]; then
        say "==> ride-push not started: $security predates its broker account (rm -rf $security, then make run)"
    fi
fi
say "==> live map: http://127.0.0.1:$metrics_port/ in a browser; live view here (Ctrl-C stops everything)"
sleep 1
# In the background and waited for: a signal to this script alone (SIGTERM, SIGHUP) is handled at once, not
# only once the view ends. The view dies of SIGPIPE when its output goes to a pipe that closes.
# As its own account (watchers): it reads every ride's status and the workers' presence, and writes nothing.
(trap - PIPE; exec "$bin/ride-watch" --broker "mqtts://localhost:$port" --ca-file "$security/tls/ca.crt" \
    --username ride-watch --password-file "$security/secrets/ride-watch") &
view=$!
echo "$view" > "$run_dir/ride-watch.pid"
wait "$view"
