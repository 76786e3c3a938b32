package nodeapi

import "strconv"

// TruncationMarker returns the line a sandbox's output stream ends with when it was cut after
// its first limit bytes (SandboxSpec.OutputLimitBytes on the node, --result-max-bytes on the
// control plane): "\n[cubefleet: output truncated after <limit> bytes]\n". The process driver
// writes the same line.
func TruncationMarker(limit int64) string {
	return "\n[cubefleet: output truncated after " + strconv.FormatInt(limit, 10) + " bytes]\n"
}

// MaxTruncationMarkerLen is the longest TruncationMarker (a 19-digit limit).
const MaxTruncationMarkerLen = len("\n[cubefleet: output truncated after  bytes]\n") + 19
