#!/usr/bin/env bash
# The main job end to end on the embedded default: build cubefleet, start a control plane on
# SQLite on loopback (--dev), store the two secrets examples/fleet.json refers to, plan and apply
# the document, plan again to show the fleet converged, show the status, join one agent on
# loopback (127.0.0.11, the process runtime) to the pool, run a sandbox of the example template
# on it and print its output, then stop the agent and its sandboxes (agent down) and the server.
# Everything lives in a temporary directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
chmod 711 "$work" # a sandbox's user must reach its directory
server_pid=""
agent_pid=""
agent_down() {
  # The agent's sandboxes outlive it (so that a restart keeps them): agent down finds the agent
  # by its env file's settings, stops it, then stops its sandboxes.
  "$work/cubefleet" agent down --env-file "$work/node.env"
}
cleanup() {
  if [ -n "$agent_pid" ]; then
    if ! agent_down >/dev/null 2>&1; then
      kill "$agent_pid" 2>/dev/null || true; wait "$agent_pid" 2>/dev/null || true
      agent_down >/dev/null 2>&1 || true # the agent gone: its sandboxes
    fi
    wait "$agent_pid" 2>/dev/null || true
  fi
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

echo "Building cubefleet..."
go build -o "$work/cubefleet" ./cmd/cubefleet
cf="$work/cubefleet"

# A free loopback port (3010 unless it is taken).
port=${CUBEFLEET_DEMO_PORT:-3010}
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 31010)
fi

step cubefleet server --dev --data-dir "$work/data" --listen "127.0.0.1:$port"
"$cf" server --dev --data-dir "$work/data" --listen "127.0.0.1:$port" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then cat "$work/server.log"; exit 1; fi
  sleep 0.1
done
head -n 5 "$work/server.log"

export CUBEFLEET_URL="http://127.0.0.1:$port"
cfc() { "$cf" --token-file "$work/data/admin.token" "$@"; }

step "cubefleet secrets create hetzner --tenant root   # value read from stdin"
echo "demo-hetzner-token" | cfc secrets create hetzner --tenant root
step "cubefleet secrets create pip-index --tenant root"
echo "https://pypi.example.internal/simple" | cfc secrets create pip-index --tenant root

step cubefleet fleet plan examples/fleet.json --tenant root
cfc fleet plan examples/fleet.json --tenant root

step cubefleet fleet apply examples/fleet.json --tenant root --yes
cfc fleet apply examples/fleet.json --tenant root --yes

step "cubefleet fleet plan examples/fleet.json --tenant root --fail-on-drift   # converged: nothing to do"
cfc fleet plan examples/fleet.json --tenant root --fail-on-drift

step cubefleet fleet status --tenant root
cfc fleet status --tenant root

step "cubefleet fleet export --tenant root"
cfc fleet export --tenant root | head -n 20
echo "..."

# One agent on loopback joins the pool: node 127.0.0.11, sandboxes run as processes.
step "cubefleet nodes join-token create --pool vps-fra --ip 127.0.0.11 > node.token"
(umask 077; cfc nodes join-token create --pool vps-fra --ip 127.0.0.11 >"$work/node.token")
own_user=0
if [ "$(id -u)" != 0 ]; then own_user=1; fi # not root: sandboxes run as this user (development only)
mkdir -p "$work/node/run"
# CUBEFLEET_QUOTA_CPU: the schedulable CPU of a 4-core node (2000 x cores), whatever this machine
# has. The example's warm pool (1 to 2 idle g1.small sandboxes, 2 vCPU and 4 GiB each) and the
# demo's sandbox fit in it with room to spare.
(umask 077; cat >"$work/node.env" <<EOF
ONE_CLICK_DEPLOY_ROLE=compute
CUBEFLEET_CONTROL_PLANE=127.0.0.1:$port
CUBE_SANDBOX_NODE_IP=127.0.0.11
CUBEFLEET_ALLOW_LOOPBACK=1
CUBEFLEET_AGENT_LISTEN=127.0.0.11:$port
CUBE_S3_ENDPOINT=http://127.0.0.1:$port
CUBE_S3_ACCESS_KEY_ID=demo
CUBE_S3_SECRET_ACCESS_KEY=demo
CUBEFLEET_JOIN_TOKEN_FILE=$work/node.token
CUBEFLEET_AGENT_STATE_DIR=$work/node/state
CUBEFLEET_AGENT_PID_FILE=$work/node/run/cubefleet-agent.pid
CUBEFLEET_RUNTIME=process
CUBEFLEET_SANDBOX_DIR=$work/node/var/lib/cubefleet/sandboxes
CUBEFLEET_SANDBOX_ALLOW_OWN_USER=$own_user
CUBEFLEET_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1
CUBEFLEET_QUOTA_CPU=8000
EOF
)
step "cubefleet agent run --env-file node.env &"
"$cf" agent run --env-file "$work/node.env" >"$work/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 1 300); do
  if cfc nodes get 127.0.0.11 -o json 2>/dev/null | grep -q '"localTemplates"'; then break; fi
  if ! kill -0 "$agent_pid" 2>/dev/null; then cat "$work/agent.log"; exit 1; fi
  sleep 0.1
done
cfc nodes list

step "cubefleet sandboxes create --tenant root --template py-small --wait -- /bin/sh -c '...'"
cfc sandboxes create --tenant root --template py-small --wait -- /bin/sh -c 'echo "Hello from a sandbox: uid $(id -u) in $PWD"; echo "6 x 7 = $((6 * 7))"' </dev/null ||
  { cat "$work/agent.log"; exit 1; }
step "cubefleet sandboxes list --tenant root"
cfc sandboxes list --tenant root
step "cubefleet nodes list   # room left for more than the warm pool"
cfc nodes list

step "cubefleet agent down   # the agent, then its sandboxes (the idle warm ones too)"
agent_down
wait "$agent_pid" 2>/dev/null || true
agent_pid=""

echo
echo "Demo finished: the agent, its sandboxes and the server are stopped and $work is removed."
