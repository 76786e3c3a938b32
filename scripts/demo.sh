#!/usr/bin/env bash
# The main job end to end on the embedded default: build cubefleet, start a control plane on
# SQLite on loopback (--dev), store the two secrets examples/fleet.json refers to, plan and apply
# the document, plan again to show the fleet converged, show the status, and stop the server.
# Everything lives in a temporary directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
server_pid=""
cleanup() {
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

echo
echo "Demo finished: the server is stopped and $work is removed."
