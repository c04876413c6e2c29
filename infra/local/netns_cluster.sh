#!/usr/bin/env bash
# A real multi-node Ray cluster on one machine: a head node and N worker nodes.
#
#   infra/local/netns_cluster.sh up      # start it; prints the variables a client needs
#   infra/local/netns_cluster.sh down    # stop exactly the processes `up` started
#   infra/local/netns_cluster.sh env     # print those variables again
#
# Run as root, each worker node lives in its own network namespace with its own address on a
# private bridge (so Ray really talks between nodes over the network); otherwise the workers are
# separate `ray start` processes on 127.0.0.1. All nodes share this machine's disk, so any local
# path is "shared storage" for `workdir=`.
#
# Secure by default: token authentication (RAY_AUTH_MODE=token, a fresh 256-bit token in
# $LMFORGE_CLUSTER_DIR/auth_token, mode 600) on every node, and the dashboard / Jobs API bound to
# 127.0.0.1 unless DASHBOARD_HOST says otherwise. An unauthenticated Jobs API anywhere on a network
# is remote code execution for whoever reaches it (CVE-2023-48022).
#
# Settings (environment):
#   LMFORGE_CLUSTER_DIR  state: token, pids, logs, cluster.env  (default /tmp/lmforge-cluster)
#   WORKERS              worker nodes (default 2)
#   WORKER_CPUS          CPUs per worker node (default 1)
#   HEAD_CPUS            CPUs on the head node (default 0: stage tasks go to the workers)
#   GCS_PORT DASHBOARD_PORT CLIENT_PORT RUNTIME_ENV_PORT   head ports (default 6379, 8265,
#                        10001, 8266; keep them out of 10002-19999, Ray's worker port range).
#                        RUNTIME_ENV_PORT is fixed because Ray Client (ray://) needs it known.
#   AGENT_PORT           the head's dashboard agent (default 52365; the Jobs API hands jobs to it,
#                        so pick another if a second Ray on this machine holds 52365)
#   DASHBOARD_HOST       address of the dashboard and Jobs API (default 127.0.0.1)
#   NETNS                auto | on | off (default auto: on when root and `ip netns` works)
#   SUBNET               first three octets of the bridge network (default 10.213.7)
#   OBJECT_STORE_MB      object store per node (default 300)
#   RAY                  the `ray` executable (default: `ray` beside `python3` on PATH)
#   HEAD_GRACE_S         `down`: seconds the head gets after SIGTERM before SIGKILL (default 5)
set -euo pipefail

DIR=${LMFORGE_CLUSTER_DIR:-/tmp/lmforge-cluster}
WORKERS=${WORKERS:-2}
WORKER_CPUS=${WORKER_CPUS:-1}
HEAD_CPUS=${HEAD_CPUS:-0}
GCS_PORT=${GCS_PORT:-6379}
DASHBOARD_PORT=${DASHBOARD_PORT:-8265}
CLIENT_PORT=${CLIENT_PORT:-10001}
RUNTIME_ENV_PORT=${RUNTIME_ENV_PORT:-$((DASHBOARD_PORT + 1))}
AGENT_PORT=${AGENT_PORT:-52365}
DASHBOARD_HOST=${DASHBOARD_HOST:-127.0.0.1}
NETNS=${NETNS:-auto}
SUBNET=${SUBNET:-10.213.7}
OBJECT_STORE_MB=${OBJECT_STORE_MB:-300}
RAY=${RAY:-$(dirname "$(command -v python3)")/ray}
BRIDGE=lmf-br-${SUBNET##*.}
NS_PREFIX=lmf-${SUBNET##*.}-w

die() { echo "netns_cluster: $*" >&2; exit 1; }

use_netns() {
  case "$NETNS" in
    on) return 0 ;;
    off) return 1 ;;
    auto) [[ $(id -u) == 0 ]] && command -v ip >/dev/null && ip netns list >/dev/null 2>&1 ;;
    *) die "NETNS must be auto, on or off (got '$NETNS')" ;;
  esac
}

# Start one node as `ray start --block` in its own session, so `down` can end its whole process
# group by id. Arguments: node name, then the command prefix and ray arguments.
start_node() {
  local name=$1; shift
  mkdir -p "$DIR/logs"
  setsid "$@" >"$DIR/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$DIR/pids/$name.pid"
}

common_env() {
  # The cluster's `python` (job entrypoints, workers) is the one beside `ray`.
  export PATH="$(dirname "$RAY"):$PATH"
  export RAY_AUTH_MODE=token
  export RAY_AUTH_TOKEN_PATH="$DIR/auth_token"
  export RAY_USAGE_STATS_ENABLED=0
  export RAY_DEDUP_LOGS=0
  export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
}

write_env() {
  local head_ip=$1
  cat >"$DIR/cluster.env" <<EOF
export RAY_ADDRESS=$head_ip:$GCS_PORT
export RAY_API_SERVER_ADDRESS=http://$DASHBOARD_HOST:$DASHBOARD_PORT
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH=$DIR/auth_token
EOF
}

wait_for_nodes() {
  local want=$1 deadline=$((SECONDS + 180)) python
  python=$(dirname "$RAY")/python
  while ((SECONDS < deadline)); do
    local alive pidfile
    for pidfile in "$DIR"/pids/*.pid; do
      if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        local name
        name=$(basename "$pidfile" .pid)
        echo "netns_cluster: node $name exited; the end of $DIR/logs/$name.log:" >&2
        tail -n 5 "$DIR/logs/$name.log" >&2
        return 1
      fi
    done
    alive=$("$python" - "$DASHBOARD_HOST" "$DASHBOARD_PORT" <<'PY' 2>/dev/null || true
import sys
from ray.util.state import list_nodes
nodes = list_nodes(address=f"http://{sys.argv[1]}:{sys.argv[2]}", filters=[("state", "=", "ALIVE")])
print(len(nodes))
PY
)
    if [[ "$alive" == "$want" ]]; then
      echo "netns_cluster: $want nodes alive"
      return 0
    fi
    sleep 2
  done
  echo "netns_cluster: only '${alive:-0}' of $want nodes came up; logs in $DIR/logs" >&2
  return 1
}

up() {
  [[ -x "$RAY" ]] || die "no ray executable at $RAY; set RAY=/path/to/.venv/bin/ray"
  [[ -e "$DIR/pids" ]] && die "$DIR/pids exists: a cluster is up (run '$0 down' first)"
  mkdir -p "$DIR/pids" "$DIR/tmp"
  chmod 700 "$DIR"
  (umask 077; "$(dirname "$RAY")/python" -c 'import secrets; print(secrets.token_hex(32))' \
    >"$DIR/auth_token")
  common_env
  local head_ip=127.0.0.1 netns=0
  if use_netns; then
    netns=1
    head_ip=$SUBNET.1
    ip link add "$BRIDGE" type bridge
    ip addr add "$head_ip/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    echo "$BRIDGE" >"$DIR/bridge"
  fi
  local mem=$((OBJECT_STORE_MB * 1024 * 1024))
  start_node head "$RAY" start --head --block --disable-usage-stats \
    --node-ip-address="$head_ip" --port="$GCS_PORT" --num-cpus="$HEAD_CPUS" --num-gpus=0 \
    --dashboard-host="$DASHBOARD_HOST" --dashboard-port="$DASHBOARD_PORT" \
    --ray-client-server-port="$CLIENT_PORT" --object-store-memory="$mem" \
    --runtime-env-agent-port="$RUNTIME_ENV_PORT" --dashboard-agent-listen-port="$AGENT_PORT" \
    --temp-dir="$DIR/tmp/head"
  local i
  for ((i = 1; i <= WORKERS; i++)); do
    local args=(start --block --disable-usage-stats --address="$head_ip:$GCS_PORT"
      --num-cpus="$WORKER_CPUS" --num-gpus=0 --object-store-memory="$mem"
      --temp-dir="$DIR/tmp/w$i")
    if ((netns)); then
      local ns=$NS_PREFIX$i ip=$SUBNET.$((10 + i))
      ip netns add "$ns"
      echo "$ns" >>"$DIR/namespaces"
      ip link add "$ns-h" type veth peer name eth0 netns "$ns"
      ip link set "$ns-h" master "$BRIDGE" up
      ip -n "$ns" addr add "$ip/24" dev eth0
      ip -n "$ns" link set eth0 up
      ip -n "$ns" link set lo up
      # Every namespace shares this machine's hostname, which resolves to loopback: point
      # torch.distributed's Gloo at the node's own interface instead.
      start_node "w$i" ip netns exec "$ns" env GLOO_SOCKET_IFNAME=eth0 \
        "$RAY" "${args[@]}" --node-ip-address="$ip"
    else
      # Same address as the head: give each node its own agent ports.
      local base=$((DASHBOARD_PORT + 100 * i))
      start_node "w$i" "$RAY" "${args[@]}" --node-ip-address=127.0.0.1 \
        --dashboard-agent-listen-port=$base --dashboard-agent-grpc-port=$((base + 1)) \
        --metrics-export-port=$((base + 2)) --runtime-env-agent-port=$((base + 3))
    fi
  done
  write_env "$head_ip"
  if ! wait_for_nodes $((WORKERS + 1)); then
    down
    exit 1
  fi
  echo "netns_cluster: up ($( ((netns)) && echo "network namespaces" || echo "one address"))"
  cat "$DIR/cluster.env"
}

# End the process groups of the given pid files: SIGTERM to all, then SIGKILL to those still
# there once `grace` seconds have passed. Arguments: grace, then pid files.
stop_nodes() {
  local grace=$1; shift
  local pidfile deadline=$((SECONDS + grace))
  for pidfile in "$@"; do kill -TERM -- "-$(cat "$pidfile")" 2>/dev/null || true; done
  for pidfile in "$@"; do
    while kill -0 -- "-$(cat "$pidfile")" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    kill -KILL -- "-$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

down() {
  # Worker nodes first, while the head still answers them: they leave in about 3 s (30 s or
  # more when the head goes at the same time). The head's `ray start --block` then lingers 30 s
  # or more after SIGTERM, its raylet already gone; it holds nothing that needs flushing (no GCS
  # storage), so it gets HEAD_GRACE_S seconds.
  local workers=() pidfile
  for pidfile in "$DIR"/pids/*.pid; do
    [[ -e "$pidfile" && "$pidfile" != "$DIR/pids/head.pid" ]] && workers+=("$pidfile")
  done
  ((${#workers[@]} == 0)) || stop_nodes 30 "${workers[@]}"
  if [[ -e "$DIR/pids/head.pid" ]]; then stop_nodes "${HEAD_GRACE_S:-5}" "$DIR/pids/head.pid"; fi
  if [[ -f "$DIR/namespaces" ]]; then
    local ns pid
    while read -r ns; do
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
      ip netns del "$ns" 2>/dev/null || true
    done <"$DIR/namespaces"
    rm -f "$DIR/namespaces"
  fi
  if [[ -f "$DIR/bridge" ]]; then
    ip link del "$(cat "$DIR/bridge")" 2>/dev/null || true
    rm -f "$DIR/bridge"
  fi
  rmdir "$DIR/pids" 2>/dev/null || true
  echo "netns_cluster: down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) cat "$DIR/cluster.env" ;;
  *) die "usage: $0 up|down|env" ;;
esac
