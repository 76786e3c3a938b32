#!/usr/bin/env bash
# The whole test suite: vet, staticcheck (the version pinned below, fetched by `go run` on first
# use; any finding fails the script), then every package's tests (the concurrent ones under the
# race detector) against real SQLite and a throwaway PostgreSQL cluster (started by the tests
# themselves with initdb/pg_ctl on 127.0.0.1), plus the multi-host test in network namespaces
# when run as root and the web console's test in headless Chromium, and last every benchmark
# once. The tests include the architecture's rules (architecture_test.go: imports, package
# docs, file length). Installs PostgreSQL, Chromium (and iproute2) with apt-get when the
# machine lacks them.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v initdb >/dev/null 2>&1; then
  pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$pgbin" ]; then
    echo "Installing PostgreSQL (the tests start their own throwaway cluster)..."
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; fi
    pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  export PATH="$pgbin:$PATH"
fi

# The multi-host test puts agents in network namespaces of its own (ip from iproute2, as root).
if [ "$(id -u)" = 0 ] && ! command -v ip >/dev/null 2>&1; then
  echo "Installing iproute2 (the multi-host test makes its own network namespaces)..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi

# The console's browser test drives Debian's chromium headless (under CI=true it fails without it).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "Installing chromium (the web console's test runs it headless)..."
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi
fi

go vet ./...
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# The packages with concurrency run under the race detector (a data race fails the run); the
# others run without it, so -race does not double the time of the whole suite.
race=(./internal/agent/... ./internal/nodes/... ./internal/sandboxes/... ./internal/scheduler/...
  ./internal/events ./internal/store ./internal/server ./internal/api)
mapfile -t others < <(go list ./... | grep -vxF -f <(go list "${race[@]}"))
go test -count=1 -timeout 20m -race "$@" "${race[@]}"
go test -count=1 -timeout 20m "$@" "${others[@]}"

# Every benchmark once, at the sizes it keeps under -short, so a benchmark that broke fails here.
go test -count=1 -timeout 20m -short -run '^$' -bench . -benchtime 1x ./...
