#!/usr/bin/env bash
# The whole test suite: vet, then every package's tests against real SQLite and a throwaway
# PostgreSQL cluster (started by the tests themselves with initdb/pg_ctl on 127.0.0.1).
# Installs PostgreSQL with apt-get when the machine lacks it.
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

go vet ./...
go test -count=1 -timeout 20m "$@" ./...
