package api

// MaxSecretValueBytes bounds SecretCreateInput.Value (64 KiB).
const MaxSecretValueBytes = 64 << 10

// SecretCreateInput is the input of secrets.create. Value is sealed at rest and never returned,
// logged or audited.
type SecretCreateInput struct {
	TenantID string `json:"tenantId"`
	// 1-63 of letters, digits, '.', '_', '-'
	Name string `json:"name"`
	// 1 byte to 64 KiB
	Value string `json:"value"`
}

// Secret is a secret as listings show it: never its value.
type Secret struct {
	ID        string `json:"id"`
	TenantID  string `json:"tenantId"`
	Name      string `json:"name"`
	CreatedBy string `json:"createdBy"`
	// Unix ms
	CreatedAt int64 `json:"createdAt"`
}

// SecretDeleteInput is the input of secrets.delete: the secret's name or id.
type SecretDeleteInput struct {
	TenantID string `json:"tenantId"`
	Name     string `json:"name"`
}

// SecretList is the output of secrets.list, by name.
type SecretList struct {
	Items []Secret `json:"items"`
}
