package api

import "encoding/json"

// EventListInput is the input of events.list: Type is exact (node.lost) or a prefix ending in a
// dot (node.); Subject an exact subject (a node id); Since Unix ms; Limit 1-1000 (default 100);
// Cursor the previous page's nextCursor. Newest asks for the newest Limit events instead of the
// oldest (the tail of the log, still oldest first; no Cursor then).
type EventListInput struct {
	Type    string `json:"type,omitempty"`
	Subject string `json:"subject,omitempty"`
	Since   int64  `json:"since,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Cursor  string `json:"cursor,omitempty"`
	Newest  bool   `json:"newest,omitempty"`
}

// EventList is a page of events, oldest first; NextCursor is absent on the last page. With
// Newest, OlderExist says whether older events match too (and NextCursor is absent).
type EventList struct {
	Items      []Event `json:"items"`
	NextCursor string  `json:"nextCursor,omitempty"`
	OlderExist bool    `json:"olderExist,omitempty"`
}

// Event is one entry of the log. ID is `evt_<ULID>`, so ids sort by the time they were made;
// At is Unix milliseconds on the control plane's clock; Type is dotted (`node.suspect`);
// Subject names the object it is about (a node id); Data is a JSON object with the details
// (never a secret).
type Event struct {
	ID       string          `json:"id"`
	At       int64           `json:"at"`
	TenantID string          `json:"tenantId"`
	Type     string          `json:"type"`
	Subject  string          `json:"subject"`
	Data     json.RawMessage `json:"data,omitempty"`
}
