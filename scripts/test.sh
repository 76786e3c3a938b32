#!/usr/bin/env bash
# The whole test suite: vet, staticcheck (the version pinned below, fetched by `go run` on first
# use; any finding fails the script), then every package's tests (the concurrent ones under the
# race detector) against real SQLite and a throwaway PostgreSQL cluster (started by the tests
# themselves with initdb/pg_ctl on 127.0.0.1), plus the multi-host test in network namespaces
# when run as root, the web console's test in headless Chromium and the microvm driver's real
# QEMU boots, and last every benchmark once. The tests include the architecture's rules
# (architecture_test.go: imports, package docs, file length). Installs PostgreSQL, Chromium
# (and, as root, iproute2, e2fsprogs, qemu-system-x86, busybox-static and Debian's cloud kernel,
# unpacked) with apt-get when the machine lacks them.
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

# The sandbox isolation tests give work directories a file system of their own (mkfs.ext4 from
# e2fsprogs, on a loop device), as root.
if [ "$(id -u)" = 0 ] && ! command -v mkfs.ext4 >/dev/null 2>&1 && [ ! -x /usr/sbin/mkfs.ext4 ] && [ ! -x /sbin/mkfs.ext4 ]; then
  echo "Installing e2fsprogs (sandbox disks are ext4 images on loop devices)..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq e2fsprogs >/dev/null
fi

# The fleet's SSH checks run against Debian's sshd started by the test on loopback (under CI=true
# it fails without it); ssh-keygen comes with openssh-client, its dependency.
if [ ! -x /usr/sbin/sshd ]; then
  echo "Installing openssh-server (the roundtrip checks' tests run their own sshd on loopback)..."
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null
  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null; fi
fi

# The console's browser test drives Debian's chromium headless (under CI=true it fails without it).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "Installing chromium (the web console's test runs it headless)..."
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi
fi

# The microvm driver's tests boot real guests under QEMU (TCG where KVM does not boot one): QEMU,
# a static busybox for the test image, e2fsprogs for the images, and Debian's cloud kernel,
# unpacked (apt-get download + dpkg-deb -x, no boot hooks run) into a cache the tests find
# through CUBEFLEET_GUEST_KERNEL.
if [ "$(id -u)" = 0 ]; then
  missing=()
  command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
  dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
  command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "Installing ${missing[*]} (the microvm driver's tests boot guests)..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  kcache=/var/cache/cubefleet/guest-kernel
  kernel=$(ls "$kcache"/root/boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$kernel" ]; then
    echo "Fetching Debian's cloud kernel for the microvm tests (unpacked, not installed)..."
    mkdir -p "$kcache" && chmod 755 "$kcache"
    [ -n "$(apt-cache policy linux-image-cloud-amd64 2>/dev/null | grep Candidate)" ] || apt-get update -qq
    image=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
    (cd "$kcache" && rm -f ./*.deb && apt-get download -qq "$image" 2>/dev/null && dpkg-deb -x ./*.deb root && rm -f ./*.deb)
    kernel=$(ls "$kcache"/root/boot/vmlinuz-* | sort -V | tail -n 1)
  fi
  export CUBEFLEET_GUEST_KERNEL="$kernel"
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
