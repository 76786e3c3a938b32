#!/usr/bin/env bash
# The control-plane checks of the one-click compute quickcheck.sh (docs/nodes.md, "CubeMaster's
# routes"), with the requests upstream's script makes: `curl -fsS`, the body piped to a search.
#   (3)  GET http://<master>/notify/health succeeds
#   (4)  GET http://<ops>/internal/v1/nodes/<CUBE_SANDBOX_NODE_IP> contains "IP":"<ip>" (current)
#   (4') GET http://<master>/internal/meta/nodes/<ip> contains "host_ip":"<ip>" (the older script,
#        TencentCloud/CubeSandbox@1ef7499, which greps it with `rg -q`; grep -q reads the same
#        pattern the same way)
# Each is probed every 2 s until CUBE_QUICKCHECK_READY_TIMEOUT (default 120 s, 0: one probe).
# Usage: quickcheck-control-plane.sh MASTER_ADDR OPS_ADDR NODE_IP
set -u
master=$1 ops=$2 ip=$3
budget=${CUBE_QUICKCHECK_READY_TIMEOUT:-120}
check_master() { curl -fsS "http://${master}/notify/health" >/dev/null; }
check_node() { curl -fsS "http://${ops}/internal/v1/nodes/${ip}" | grep -qF "\"IP\":\"${ip}\""; }
check_meta() { curl -fsS "http://${master}/internal/meta/nodes/${ip}" | grep -q "\"host_ip\":\"${ip}\""; }
wait_for() {
	local what=$1 check=$2 deadline=$((SECONDS + budget))
	while :; do
		if $check; then echo "ok: ${what}"; return 0; fi
		if ((SECONDS >= deadline)); then echo "FAIL: ${what}" >&2; return 1; fi
		sleep 2
	done
}
wait_for "CubeMaster health at ${master}" check_master || exit 1
wait_for "node ${ip} registered at ${ops}" check_node || exit 1
wait_for "node ${ip} listed by CubeMaster at ${master}" check_meta || exit 1
