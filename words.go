// The words the CLI and the console share, over values of the wire (so every layer may use them).

package cubefleet

import (
	"fmt"
	"strings"
)

// DenyDeleteRefusal is the PLAN_BLOCKED error of fleet.apply with denyDelete (--deny-delete) for
// a plan that deletes or archives deletes objects, naming how many; nil when deletes is 0. The
// CLI gives the same refusal before it sends, or suggests, such a plan.
func DenyDeleteRefusal(deletes int) error {
	if deletes == 0 {
		return nil
	}
	return Errorf(CodePlanBlocked, "--deny-delete refuses this plan: it deletes or archives %s (the lines starting with -); keep them in the document, or leave --deny-delete out to apply it", Count(deletes, "object", "objects"))
}

// DeliveryOutcome says in plain words where a webhook delivery stands, from its state
// (pending, delivered or failed), the last answer's HTTP status (0: none), its attempts and its
// last error, as the CLI and the console show it: "delivered (HTTP 204)", "waiting for its
// first attempt", "retrying: the receiver answered HTTP 503", "gave up after 12 attempts: no
// answer within the timeout".
func DeliveryOutcome(state string, lastStatus, attempts int, lastError string) string {
	why := lastError
	if rest, ok := strings.CutPrefix(why, "answered "); ok && lastStatus != 0 {
		why = "the receiver answered HTTP " + rest
	}
	switch {
	case state == "delivered" && lastStatus != 0:
		return fmt.Sprintf("delivered (HTTP %d)", lastStatus)
	case state == "delivered":
		return "delivered"
	case state == "failed":
		return "gave up after " + Count(attempts, "attempt", "attempts") + ": " + why
	case attempts == 0:
		return "waiting for its first attempt"
	}
	return "retrying: " + why
}
