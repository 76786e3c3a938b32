package nodeapi

import (
	"math"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Encoders of the contract's values without reflection, for the paths that write thousands a
// second (the registry's answers, the flusher's rows). Each writes what encoding/json writes for
// the same value, compact.

// AppendString appends s as a JSON string. s is valid UTF-8 (the decoder refuses anything
// else); should it not be, "" is appended.
func AppendString(dst []byte, s string) []byte {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		return append(dst, `""`...)
	}
	return out
}

// AppendFloat appends v as encoding/json writes a float64; NaN and ±Inf, which JSON cannot
// hold (and the decoder never accepts), as 0.
func AppendFloat(dst []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, '0')
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(dst, v, format, -1, 64)
}

// AppendConditions appends cs as a JSON array (`[]` for none).
func AppendConditions(dst []byte, cs []Condition) []byte {
	dst = append(dst, '[')
	for i, c := range cs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":`...)
		dst = AppendString(dst, c.Type)
		dst = append(dst, `,"status":`...)
		dst = AppendString(dst, c.Status)
		dst = appendOptString(dst, `,"lastHeartbeatTime":`, c.LastHeartbeatTime)
		dst = appendOptString(dst, `,"lastTransitionTime":`, c.LastTransitionTime)
		dst = appendOptString(dst, `,"reason":`, c.Reason)
		dst = appendOptString(dst, `,"message":`, c.Message)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendOptString appends key (`,"name":`) and s unless s is empty (omitempty).
func appendOptString(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return AppendString(append(dst, key...), s)
}

// AppendJSON appends a as a JSON object.
func (a *Allocated) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"milli_cpu":`...)
	dst = strconv.AppendInt(dst, a.MilliCPU, 10)
	dst = append(dst, `,"memory_mb":`...)
	dst = strconv.AppendInt(dst, a.MemoryMB, 10)
	dst = append(dst, `,"mvm_num":`...)
	dst = strconv.AppendInt(dst, a.MVMNum, 10)
	dst = append(dst, `,"mvm_running_num":`...)
	dst = strconv.AppendInt(dst, a.MVMRunningNum, 10)
	dst = append(dst, `,"nic_queues":`...)
	dst = strconv.AppendInt(dst, a.NICQueues, 10)
	dst = append(dst, `,"data_disk_mb":`...)
	dst = strconv.AppendInt(dst, a.DataDiskMB, 10)
	dst = append(dst, `,"storage_disk_mb":`...)
	dst = strconv.AppendInt(dst, a.StorageDiskMB, 10)
	return append(dst, '}')
}

// AppendJSON appends d as a JSON object.
func (d *DiskUsage) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"data_disk_usage_per":`...)
	dst = AppendFloat(dst, d.DataDiskUsagePer)
	dst = append(dst, `,"storage_disk_usage_per":`...)
	dst = AppendFloat(dst, d.StorageDiskUsagePer)
	dst = append(dst, `,"sys_disk_usage_per":`...)
	dst = AppendFloat(dst, d.SysDiskUsagePer)
	return append(dst, '}')
}
