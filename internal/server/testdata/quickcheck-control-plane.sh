#!/usr/bin/env bash
# The control-plane checks of the one-click compute quickcheck.sh (specs/cubesandbox-node-agent.md
# §5, checks 3 and 4), as the spec describes them: curl with a 5 s connect timeout and a 10 s
# maximum, probed every 2 s until CUBE_QUICKCHECK_READY_TIMEOUT (default 120 s, 0: one probe).
#   (3) GET http://<master>/notify/health succeeds
#   (4) GET http://<ops>/internal/v1/nodes/<CUBE_SANDBOX_NODE_IP> contains "IP":"<ip>"
# Usage: quickcheck-control-plane.sh MASTER_ADDR OPS_ADDR NODE_IP
set -u
master=$1 ops=$2 ip=$3
budget=${CUBE_QUICKCHECK_READY_TIMEOUT:-120}
curl_get() { curl -sS --connect-timeout 5 --max-time 10 "$@"; }
check_master() { curl_get -f -o /dev/null "http://${master}/notify/health"; }
check_node() { curl_get -f "http://${ops}/internal/v1/nodes/${ip}" | grep -qF "\"IP\":\"${ip}\""; }
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
