package api

import "github.com/cubefleet/cubefleet"

// The states of a webhook delivery (WebhookDelivery.State, WebhookDeliveriesInput.State).
const (
	DeliveryPending   = "pending"   // waiting for its next attempt
	DeliveryDelivered = "delivered" // a 2xx answer
	DeliveryFailed    = "failed"    // dead-lettered after the retry horizon; webhooks.redeliver queues it again
)

// The bounds of WebhookRotateInput.OverlapSeconds: absent means DefaultSecretOverlapSeconds
// (24 hours), at most MaxSecretOverlapSeconds (7 days).
const (
	DefaultSecretOverlapSeconds = 24 * 3600
	MaxSecretOverlapSeconds     = 7 * 24 * 3600
)

// WebhookCreateInput is the input of webhooks.create: the endpoint (an http or https URL whose
// host is a public address unless the server allows private targets), the event types it
// receives (node.* types only in the root tenant), and an optional description (at most 200
// characters).
type WebhookCreateInput struct {
	TenantID    string   `json:"tenantId"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
}

// WebhookWithSecret is a subscription with its signing secret: the answer of create and rotate, the
// only time the secret is shown.
type WebhookWithSecret struct {
	Webhook
	Secret string `json:"secret"`
	// PreviousSecretExpiresAt, after a rotation, is when the secret it replaced stops signing
	// (Unix ms).
	PreviousSecretExpiresAt int64 `json:"previousSecretExpiresAt,omitempty"`
}

// Webhook is a tenant's webhook endpoint: events of the listed types in the tenant's log
// are POSTed to URL, signed with the subscription's secret (Standard Webhooks). CreatedAt is
// Unix ms.
type Webhook struct {
	ID          string   `json:"id"`
	TenantID    string   `json:"tenantId"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
	CreatedBy   string   `json:"createdBy"`
	CreatedAt   int64    `json:"createdAt"`
}

// WebhookRef names one of a tenant's subscriptions (whk_...).
type WebhookRef struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
}

// WebhookDeliveriesInput is the input of webhooks.deliveries: SubscriptionID narrows to one
// subscription, State to pending, delivered or failed (dead-lettered); Limit 1-1000 (default
// 100); Cursor the previous page's nextCursor.
type WebhookDeliveriesInput struct {
	TenantID       string `json:"tenantId"`
	SubscriptionID string `json:"subscriptionId,omitempty"`
	State          string `json:"state,omitempty"`
	Limit          int    `json:"limit,omitempty"`
	Cursor         string `json:"cursor,omitempty"`
}

// WebhookDeliveryList is a page of deliveries, newest first; NextCursor (absent on the last
// page) asks for older ones.
type WebhookDeliveryList struct {
	Items      []WebhookDelivery `json:"items"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// WebhookDelivery is one event on its way to one subscription. Times are Unix ms; LastStatus is the
// last answer's HTTP status (0: none, the attempt failed before an answer) and LastError what
// went wrong (never a secret or the URL).
type WebhookDelivery struct {
	ID             string `json:"id"`
	SubscriptionID string `json:"subscriptionId"`
	TenantID       string `json:"tenantId"`
	EventID        string `json:"eventId"`
	EventType      string `json:"eventType"`
	State          string `json:"state"`
	CreatedAt      int64  `json:"createdAt"`
	Attempts       int    `json:"attempts"`
	NextAttemptAt  int64  `json:"nextAttemptAt,omitempty"`
	LastAttemptAt  int64  `json:"lastAttemptAt,omitempty"`
	LastStatus     int    `json:"lastStatus,omitempty"`
	LastError      string `json:"lastError,omitempty"`
	DoneAt         int64  `json:"doneAt,omitempty"`
}

// WebhookList is the output of webhooks.list, oldest first.
type WebhookList struct {
	Items []Webhook `json:"items"`
}

// WebhookRotateInput is the input of webhooks.rotateSecret: OverlapSeconds is how long the
// secrets the subscription had keep signing beside the new one, 0 (at once: they stop signing
// now) to 604800 (7 days); absent means 86400 (24 hours).
type WebhookRotateInput struct {
	TenantID       string `json:"tenantId"`
	ID             string `json:"id"`
	OverlapSeconds *int64 `json:"overlapSeconds,omitempty"`
}

// Outcome says in plain words where the delivery stands (cubefleet.DeliveryOutcome):
// "delivered (HTTP 204)", "waiting for its first attempt", "retrying: the receiver answered
// HTTP 503", "gave up after 12 attempts: ...".
func (d WebhookDelivery) Outcome() string {
	return cubefleet.DeliveryOutcome(d.State, d.LastStatus, d.Attempts, d.LastError)
}
