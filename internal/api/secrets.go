package api

import (
	"context"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/secrets"
)

// SecretCreateInput is the input of secrets.create. Value is sealed at rest and never returned,
// logged or audited.
type SecretCreateInput struct {
	TenantID string `json:"tenantId"`
	Name     string `json:"name"`  // 1-63 of letters, digits, '.', '_', '-'
	Value    string `json:"value"` // 1 byte to 64 KiB
}

// SecretOutput is a secret's metadata (never its value), as secrets.create and secrets.delete
// return it.
type SecretOutput struct{ secrets.Secret }

// AuditTarget names the secret in the audit row.
func (s SecretOutput) AuditTarget() string { return s.ID }

// SecretList is the output of secrets.list, by name.
type SecretList struct {
	Items []secrets.Secret `json:"items"`
}

// SecretDeleteInput is the input of secrets.delete: the secret's name or id.
type SecretDeleteInput struct {
	TenantID string `json:"tenantId"`
	Name     string `json:"name"`
}

func registerSecretsMethods(r *Registry, d *deps) {
	r.Register(Method{
		Name: "secrets.create", Summary: "Store a secret value (sealed at rest, never returned); documents refer to it as secret://NAME", Write: true,
		Permission: "compute:secrets:create", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in SecretCreateInput) (any, error) {
			s, err := d.secrets.Create(ctx, c.Q, in.TenantID, in.Name, in.Value, c.Principal.ID, d.now())
			return SecretOutput{s}, err
		}),
		Input: SecretCreateInput{}, Output: secrets.Secret{}, MaxBody: MaxSecretBody,
	})
	r.Register(Method{
		Name: "secrets.update", Summary: "Replace a secret's value (rotation); objects referring to it keep their reference", Write: true,
		Permission: "compute:secrets:update", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in SecretCreateInput) (any, error) {
			if in.Name == "" {
				return nil, cubefleet.Invalid("name", "name (or the secret's id) is required")
			}
			s, err := d.secrets.Update(ctx, c.Q, in.TenantID, in.Name, in.Value)
			return SecretOutput{s}, err
		}),
		Input: SecretCreateInput{}, Output: secrets.Secret{}, MaxBody: MaxSecretBody,
	})
	r.Register(Method{
		Name: "secrets.list", Summary: "List a tenant's secrets (names and metadata, never values)",
		Permission: "compute:secrets:list", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in TenantInput) (any, error) {
			items, err := secrets.List(ctx, c.Q, in.TenantID)
			return SecretList{Items: items}, err
		}),
		Input: TenantInput{}, Output: SecretList{},
	})
	r.Register(Method{
		Name: "secrets.delete", Summary: "Delete a secret by name or id (refused while an object refers to it)", Write: true,
		Permission: "compute:secrets:delete", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in SecretDeleteInput) (any, error) {
			if in.Name == "" {
				return nil, cubefleet.Invalid("name", "name (or the secret's id) is required")
			}
			s, err := secrets.Get(ctx, c.Q, in.TenantID, in.Name)
			if err != nil {
				return nil, err
			}
			users, err := compute.SecretUsers(ctx, c.Q, in.TenantID, s.Refs())
			if err != nil {
				return nil, err
			}
			if len(users) > 0 {
				return nil, cubefleet.Errorf(cubefleet.CodeConflict, "secret %s is still used by %s %s (%s); change that first, or rotate the value with secrets update",
					s.Name, users[0].Kind, users[0].Name, users[0].ID)
			}
			s, err = secrets.Delete(ctx, c.Q, in.TenantID, in.Name)
			return SecretOutput{s}, err
		}),
		Input: SecretDeleteInput{}, Output: secrets.Secret{},
	})
}
