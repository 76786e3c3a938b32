package api

// AuditListInput is the input of audit.list: TenantID's rows at or after Since (Unix ms; 0: all),
// at most Limit of them (1-1000, default 100), after Cursor (the previous page's nextCursor).
// Newest asks for the newest Limit rows instead of the oldest (the tail of the log, still oldest
// first; no Cursor then), as events.list's newest does.
type AuditListInput struct {
	TenantID string `json:"tenantId"`
	Since    int64  `json:"since,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Cursor   string `json:"cursor,omitempty"`
	Newest   bool   `json:"newest,omitempty"`
}

// AuditList is a page of audit rows, oldest first; NextCursor is absent on the last page. With
// Newest, OlderExist says whether older rows match too (and NextCursor is absent).
type AuditList struct {
	Items      []AuditEntry `json:"items"`
	NextCursor string       `json:"nextCursor,omitempty"`
	OlderExist bool         `json:"olderExist,omitempty"`
}

// AuditEntry is one audit row. At is Unix milliseconds; Target is the object the call acted on (an
// id), when there is one; Message never holds a secret. Count is how many calls the row stands
// for: 1 (0 is taken as 1), or more for a row that summarizes refused calls (Summary).
type AuditEntry struct {
	ID          string `json:"id"`
	At          int64  `json:"at"`
	TenantID    string `json:"tenantId"`
	PrincipalID string `json:"principalId"`
	Method      string `json:"method"`
	Permission  string `json:"permission"`
	Scope       string `json:"scope"`
	Outcome     string `json:"outcome"`
	Target      string `json:"target,omitempty"`
	RequestID   string `json:"requestId,omitempty"`
	Message     string `json:"message,omitempty"`
	Count       int64  `json:"count,omitempty"`
}
