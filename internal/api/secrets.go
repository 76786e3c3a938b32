package api

import (
	"context"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/secrets"
)

// secretAnswer is a secret's metadata (never its value), naming it in the audit row.
func secretAnswer(s secrets.Secret, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return audited{out: secretFrom(s), target: s.ID}, nil
}

// registerSecretsMethods registers secrets.* (permission compute:secrets:<verb> on
// tenant/<id>). A value is sealed at rest and never returned, logged or audited.
func registerSecretsMethods(r *Registry, d *deps) {
	r.Register(Method{Name: "secrets.create", Handle: Typed(d.secretsCreate)})
	r.Register(Method{Name: "secrets.update", Handle: Typed(d.secretsUpdate)})
	r.Register(Method{Name: "secrets.list", Handle: Typed(d.secretsList)})
	r.Register(Method{Name: "secrets.delete", Handle: Typed(d.secretsDelete)})
}

// secretsCreate is the handler of secrets.create.
func (d *deps) secretsCreate(ctx context.Context, c *Call, in contract.SecretCreateInput) (any, error) {
	return secretAnswer(d.secrets.Create(ctx, c.Q, in.TenantID, in.Name, in.Value, c.Principal.ID, d.now()))
}

// secretsUpdate is the handler of secrets.update.
func (d *deps) secretsUpdate(ctx context.Context, c *Call, in contract.SecretCreateInput) (any, error) {
	if in.Name == "" {
		return nil, cubefleet.Invalid("name", "name (or the secret's id) is required")
	}
	return secretAnswer(d.secrets.Update(ctx, c.Q, in.TenantID, in.Name, in.Value))
}

// secretsList is the handler of secrets.list.
func (d *deps) secretsList(ctx context.Context, c *Call, in TenantInput) (any, error) {
	items, err := secrets.List(ctx, c.Q, in.TenantID)
	return contract.SecretList{Items: sliceOf(items, secretFrom)}, err
}

// secretsDelete is the handler of secrets.delete.
func (d *deps) secretsDelete(ctx context.Context, c *Call, in contract.SecretDeleteInput) (any, error) {
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
	return secretAnswer(secrets.Delete(ctx, c.Q, in.TenantID, in.Name))
}
