#!/usr/bin/env bash
# Client throughput: MQTTClient and mosquitto_sub receive the same publisher's 200-byte messages through a
# local mosquitto, in the same run, at QoS 0 and QoS 1.
set -euo pipefail
cd "$(dirname "$0")/.."
port="${BENCH_PORT:-18883}"
dir=$(mktemp -d)
printf 'listener %s 127.0.0.1\nallow_anonymous true\nmax_queued_messages 1000000\nmax_inflight_messages 1000\nset_tcp_nodelay true\n' "$port" > "$dir/m.conf"
[ "$(id -u)" -eq 0 ] && echo "user root" >> "$dir/m.conf"
"$(command -v mosquitto || echo /usr/sbin/mosquitto)" -c "$dir/m.conf" > "$dir/broker.log" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; rm -rf "$dir"' EXIT
sleep 0.5
.build/release/ride-bench client --port "$port" --qos 0 --messages "${MESSAGES:-200000}" --runs "${RUNS:-3}"
# QoS 1 from mosquitto_pub -l stalled in our runs; the Swift publisher (at most 1000 unacknowledged) is used.
.build/release/ride-bench client --port "$port" --qos 1 --messages "${MESSAGES:-100000}" --runs "${RUNS:-3}" --publisher swift
