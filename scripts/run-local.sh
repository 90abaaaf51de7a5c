#!/usr/bin/env bash
# `make run`: a local mosquitto on loopback, the worker, the fleet simulator and the live view.
# Ctrl-C stops all of them. Logs: var/log/. Data: var/mosquitto/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."

port="${BROKER_PORT:-1883}"
vehicles="${VEHICLES:-50}"
bin=.build/release
mkdir -p var/log var/mosquitto var/worker

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "error: something already listens on 127.0.0.1:$port. Stop it, or run: make run BROKER_PORT=18830" >&2
    exit 1
fi

# The broker configuration of the repo, bound to loopback and storing its data under var/.
sed -e "s|^listener 1883.*|listener $port 127.0.0.1|" \
    -e "s|^persistence_location .*|persistence_location $PWD/var/mosquitto/|" \
    -e "s|^log_dest stdout|log_dest file $PWD/var/log/mosquitto.log|" \
    config/mosquitto.conf > var/mosquitto/mosquitto.conf
[ "$(id -u)" -eq 0 ] && echo "user root" >> var/mosquitto/mosquitto.conf

# Each child runs in a session of its own (setsid): Ctrl-C reaches the whole foreground process group, and
# mosquitto would otherwise exit at once, before the worker has said offline and flushed (L8). The children
# are stopped here instead, in order.
pids=()
cleanup() {
    trap - INT TERM EXIT
    echo
    echo "==> stopping simulator, worker and broker"
    # Reverse start order: the simulator first, then the worker (it says offline and flushes), the broker last.
    for (( index=${#pids[@]}-1; index>=0; index-- )); do
        kill -TERM "${pids[index]}" 2>/dev/null || true
        wait "${pids[index]}" 2>/dev/null || true
    done
    echo "==> stopped. Logs are in var/log/."
}
trap cleanup INT TERM EXIT

mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)
echo "==> starting mosquitto on 127.0.0.1:$port (log: var/log/mosquitto.log)"
setsid "$mosquitto_bin" -c var/mosquitto/mosquitto.conf &
pids+=($!)
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

echo "==> starting ride-status-worker (log: var/log/worker.log, metrics: http://127.0.0.1:9466/metrics)"
setsid "$bin/ride-status-worker" --broker "mqtt://127.0.0.1:$port" --state-dir var/worker >> var/log/worker.log 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:9466/readyz >/dev/null 2>&1 && break; sleep 0.1; done

echo "==> starting fleet-sim with $vehicles vehicles (log: var/log/fleet-sim.log)"
setsid "$bin/fleet-sim" --broker "mqtt://127.0.0.1:$port" --vehicles "$vehicles" --bad-input-rate 0.002 >> var/log/fleet-sim.log 2>&1 &
pids+=($!)

echo "==> live view (Ctrl-C stops everything)"
sleep 1
"$bin/ride-watch" --broker "mqtt://127.0.0.1:$port" || true
