#!/usr/bin/env bash
# echo-client --reconnect across a switch of network, in namespaces this script makes:
#   client namespace: wlan0-N (default route first) and wwan0-N, each a veth to
#   the server namespace, which holds the server address on its loopback.
# Mid-run the default route moves to wwan0-N and wlan0-N goes down. The client must
# report the change, show its call failing with unavailable (connectivity changed),
# go on over wwan0-N with a new call, and finish every round trip.
# Usage: reconnect-across-switch.sh BIN_DIR BACKEND   (root; prints the client's output)
set -euo pipefail
bin=$1
backend=${2:-bsd}
id=$(( $$ % 100000 ))
client=sy-rc-c-$id
server=sy-rc-s-$id
server_pid=""
client_pid=""
cleanup() {
    [ -n "$client_pid" ] && kill "$client_pid" 2>/dev/null || true
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    ip netns del "$client" 2>/dev/null || true
    ip netns del "$server" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$client"
ip netns add "$server"
ip link add "wlan0-$id" type veth peer name "sw-$id"
ip link add "wwan0-$id" type veth peer name "sc-$id"
ip link set "wlan0-$id" netns "$client"
ip link set "wwan0-$id" netns "$client"
ip link set "sw-$id" netns "$server"
ip link set "sc-$id" netns "$server"
ip -n "$server" link set lo up
ip -n "$server" addr add 10.213.100.1/32 dev lo
ip -n "$server" addr add 10.213.1.1/24 dev "sw-$id"
ip -n "$server" addr add 10.213.2.1/24 dev "sc-$id"
ip -n "$server" link set "sw-$id" up
ip -n "$server" link set "sc-$id" up
ip -n "$client" link set lo up
ip -n "$client" addr add 10.213.1.2/24 dev "wlan0-$id"
ip -n "$client" addr add 10.213.2.2/24 dev "wwan0-$id"
ip -n "$client" link set "wlan0-$id" up
ip -n "$client" link set "wwan0-$id" up
ip -n "$client" route add default via 10.213.1.1 dev "wlan0-$id"

out=$(mktemp)
ip netns exec "$server" "$bin/echo-server" --backend "$backend" --mode framed --host 10.213.100.1 --port 7007 >"$out.server" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q listening "$out.server" && break; sleep 0.05; done
ip netns exec "$client" timeout 60 "$bin/echo-client" --backend "$backend" --mode framed --reconnect \
    --host 10.213.100.1 --port 7007 --count 150000 --size 64 >"$out" 2>&1 &
client_pid=$!
sleep 1
ip -n "$client" route replace default via 10.213.2.1 dev "wwan0-$id"
ip -n "$client" link set "wlan0-$id" down
status=0
wait "$client_pid" || status=$?
client_pid=""
cat "$out"
rm -f "$out" "$out.server"
exit $status
