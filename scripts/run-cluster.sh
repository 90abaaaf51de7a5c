#!/usr/bin/env bash
# `make run-cluster`: a group of workers on a clustered broker, granted their rides by etcd (G6), on loopback:
# three etcd members, a 3-node NATS cluster with its MQTT listener (MQTT 3.1.1), three workers (each on its own node,
# failing over to the others), the fleet simulator on node 0 and the live view on node 2. Ctrl-C stops everything,
# in reverse order. Everything lives under var/cluster/ (fresh each run); logs are var/cluster/*.log.
#
# A local demonstration of the topology docs/operations.md describes ("Clustered brokers"), not a deployment: the
# NATS nodes take plain MQTT on loopback without accounts, and etcd speaks plain HTTP on loopback.
# Try: kill -STOP a worker (var/cluster/w1.pid) for 15 s and see its rides move, and come back without a
# rollback; kill a NATS node; kill etcd's leader.
set -uo pipefail
cd "$(dirname "$0")/.."

bin="${BIN_DIR:-.build/debug}"
vehicles="${VEHICLES:-30}"
base="${CLUSTER_PORT_BASE:-24000}"  # ports base .. base+39 on 127.0.0.1
dir=var/cluster
trap '' PIPE
say() { printf '%s\n' "$*" 2>/dev/null || true; }

nats="$(./scripts/nats-server.sh)" || { say "nats-server is not installed: scripts/nats-server.sh --install"; exit 1; }
command -v etcd >/dev/null || [ -x /usr/bin/etcd ] || { say "etcd is not installed: make deps"; exit 1; }
for tool in ride-status-worker fleet-sim ride-watch; do
    [ -x "$bin/$tool" ] || { say "$bin/$tool is missing: make run-cluster builds it"; exit 1; }
done
for port in $(seq "$base" $((base + 39))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        say "port $port is in use: CLUSTER_PORT_BASE=<another base> make run-cluster"; exit 1
    fi
done

if [ -d "$dir" ]; then
    for f in "$dir"/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
    sleep 1
fi
rm -rf "$dir" && mkdir -p "$dir"

pids=()
stop() {
    trap - INT TERM HUP EXIT
    say ""
    say "==> stopping the simulator, the workers, NATS and etcd"
    # One at a time, newest first: a worker revokes its etcd lease and says offline while etcd and NATS still run.
    for (( index=${#pids[@]}-1; index>=0; index-- )); do
        local pid="${pids[$index]}"
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null && say "    pid $pid did not stop within 10 s of SIGTERM: killed"
    done
    exit 0
}
trap stop INT TERM HUP EXIT

start() {  # start NAME COMMAND...: in the background, its pid kept, its output in var/cluster/NAME.log
    local name="$1"; shift
    "$@" >> "$dir/$name.log" 2>&1 &
    pids+=("$!")
    echo "$!" > "$dir/$name.pid"
}

# etcd: ports base+0..5 (client, peer per member)
etcd_cluster=""; endpoints=""
for i in 0 1 2; do
    etcd_cluster+="${etcd_cluster:+,}e$i=http://127.0.0.1:$((base + 2 * i + 1))"
    endpoints+="${endpoints:+,}http://127.0.0.1:$((base + 2 * i))"
done
say "==> starting 3 etcd members (clients: $endpoints; logs: $dir/e*.log)"
for i in 0 1 2; do
    client="http://127.0.0.1:$((base + 2 * i))"; peer="http://127.0.0.1:$((base + 2 * i + 1))"
    ETCD_UNSUPPORTED_ARCH= start "e$i" /usr/bin/etcd --name "e$i" --data-dir "$dir/e$i" \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
        --initial-cluster "$etcd_cluster" --initial-cluster-state new --initial-cluster-token ride-status-demo \
        --heartbeat-interval 100 --election-timeout 1000
done

# NATS: client base+10+i, cluster base+20+i, MQTT base+30+i
routes=""; for i in 0 1 2; do routes+="    nats-route://127.0.0.1:$((base + 20 + i))"$'\n'; done
mqtt_urls=()
for i in 0 1 2; do
    mqtt_urls+=("mqtt://127.0.0.1:$((base + 30 + i))")
    cat > "$dir/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:$((base + 10 + i))
jetstream { store_dir: "$dir/js-n$i", max_memory_store: 64MB, max_file_store: 256MB }
cluster {
  name: rides
  listen: 127.0.0.1:$((base + 20 + i))
  routes: [
$routes  ]
}
mqtt { listen: 127.0.0.1:$((base + 30 + i)) }
CONF
done
say "==> starting a 3-node NATS cluster (MQTT: ${mqtt_urls[*]}; logs: $dir/n*.log)"
for i in 0 1 2; do start "n$i" "$nats" -c "$dir/n$i.conf"; done

say "==> waiting for etcd's health and NATS's MQTT listeners (JetStream elects its leaders first: up to a minute)"
deadline=$((SECONDS + 90))
for i in 0 1 2; do
    until curl -fsS "http://127.0.0.1:$((base + 2 * i))/health" 2>/dev/null | grep -q '"health":"true"'; do
        [ $SECONDS -lt $deadline ] || { say "etcd e$i not healthy: see $dir/e$i.log"; exit 1; }
        sleep 0.3
    done
    until mosquitto_pub -V mqttv311 -h 127.0.0.1 -p $((base + 30 + i)) -q 1 -t probe/ready -m x 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || { say "NATS node n$i's MQTT listener not ready: see $dir/n$i.log"; exit 1; }
        sleep 0.5
    done
done

say "==> starting 3 workers, each on its own node and failing over to the others; ownership from etcd (G6)"
for i in 0 1 2; do
    urls="${mqtt_urls[$i]},${mqtt_urls[$(( (i + 1) % 3 ))]},${mqtt_urls[$(( (i + 2) % 3 ))]}"
    start "w$i" "$bin/ride-status-worker" --broker "$urls" --worker-id "w$i" --state-dir "$dir/w$i" \
        --metrics-port $((base + 36 + i)) --set broker.protocol=3.1.1 --set group.authority=etcd \
        --set group.etcdEndpoints="$endpoints" --set http.tileURL=
    say "    w$i: log $dir/w$i.log, metrics http://127.0.0.1:$((base + 36 + i))/metrics"
done

say "==> starting fleet-sim with $vehicles vehicles on node 0 (log: $dir/fleet-sim.log)"
start fleet-sim "$bin/fleet-sim" --broker "${mqtt_urls[0]}" --protocol 3.1.1 --vehicles "$vehicles"
say "==> live view on node 2 (Ctrl-C stops everything; the workers' ids show only over MQTT 5, so not here)"
# In the background, waited for: a trap runs only once the foreground command ends, so a SIGTERM to this script
# would otherwise wait for the live view.
"$bin/ride-watch" --broker "${mqtt_urls[2]}" --protocol 3.1.1 &
pids+=("$!")
wait "$!"
