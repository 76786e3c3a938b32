package nodeapi

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/cubefleet/cubefleet"
)

// Label rules, as upstream's (CubeOps service/labels.go@22d702b, spec §1.3), except that every
// validation failure is INVALID_INPUT (400), never 500.
const (
	// ReservedLabel is the label isolation (cordon) sets to "true". A node may not send it and
	// the labels API may not change it (403); only isolation does.
	ReservedLabel = "cube.cloud.tencentcloud.com/scheduling-disabled"
	// MaxLabels is how many user labels (every label but ReservedLabel) a node may carry.
	MaxLabels      = 64
	maxLabelName   = 63
	maxLabelPrefix = 253
)

// LabelRuntime is the label under which a cubefleet agent reports its sandbox runtime, "process"
// or "microvm". A sandbox of a template that names a runtime is placed only on nodes whose
// label says it: the create's nodeSelector holds it.
const LabelRuntime = "cubefleet.io/runtime"

var (
	labelName = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dnsLabel  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// checkLabelKey checks a key `[prefix/]name`: name at most 63 characters of
// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, prefix a DNS-1123 subdomain of at most 253.
func checkLabelKey(key string) error {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix {
		if prefix == "" || len(prefix) > maxLabelPrefix {
			return fmt.Errorf("label key %q: the prefix must be a DNS subdomain of 1-%d characters", key, maxLabelPrefix)
		}
		for _, part := range strings.Split(prefix, ".") {
			if !dnsLabel.MatchString(part) {
				return fmt.Errorf("label key %q: the prefix must be a DNS subdomain (lower-case letters, digits, '-' and '.')", key)
			}
		}
	}
	if name == "" || len(name) > maxLabelName || !labelName.MatchString(name) {
		return fmt.Errorf("label key %q: the name must be 1-%d of letters, digits, '-', '_' and '.', starting and ending with a letter or digit", key, maxLabelName)
	}
	return nil
}

// checkLabelValue checks a value: empty, or at most 63 characters of the name pattern.
func checkLabelValue(key, value string) error {
	if value == "" {
		return nil
	}
	if len(value) > maxLabelName || !labelName.MatchString(value) {
		return fmt.Errorf("label %s: the value %q must be empty or 1-%d of letters, digits, '-', '_' and '.', starting and ending with a letter or digit", key, value, maxLabelName)
	}
	return nil
}

// CheckLabels checks a node's whole label set (after merging what the node or an operator sent
// into the stored labels): every key `[prefix/]name` (name at most 63 of
// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, prefix a DNS-1123 subdomain of at most 253), every
// value empty or at most 63 of the name pattern, and at most MaxLabels user labels
// (ReservedLabel is not one). The error is INVALID_INPUT (400) listing every problem, the count
// first.
func CheckLabels(labels map[string]string) error {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []cubefleet.FieldError
	user := 0
	for _, k := range keys {
		if k == ReservedLabel {
			continue
		}
		user++
		if err := checkLabelKey(k); err != nil {
			errs = append(errs, cubefleet.FieldError{Path: "labels." + k, Message: err.Error()})
			continue
		}
		if err := checkLabelValue(k, labels[k]); err != nil {
			errs = append(errs, cubefleet.FieldError{Path: "labels." + k, Message: err.Error()})
		}
	}
	if user > MaxLabels {
		errs = append([]cubefleet.FieldError{{Path: "labels", Message: fmt.Sprintf("cannot have more than %d labels (%d given)", MaxLabels, user)}}, errs...)
	}
	if len(errs) > 0 {
		return cubefleet.InvalidAll(errs)
	}
	return nil
}
