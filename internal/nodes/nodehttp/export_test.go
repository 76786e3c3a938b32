package nodehttp

import "time"

// RefusalWindow is refusalWindow, for the tests of package nodehttp_test.
const RefusalWindow = refusalWindow

// ForgetReadyz drops h's cached readyz answer, so the next readyz asks the database.
func ForgetReadyz(h *Handler) {
	h.readyz.mu.Lock()
	h.readyz.at = time.Time{}
	h.readyz.mu.Unlock()
}
