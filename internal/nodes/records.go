package nodes

import (
	"bytes"
	"context"
)

// TakeStatus returns the status of every node that reported since the last call, with its
// inventory when that changed, and clears their marks: the store writes them at its next
// flush. retry is what the previous call returned when the store could not write it: those
// nodes (the ones still held) are marked again first, so their current status is written.
func (r *Registry) TakeStatus(retry []Status) []Status {
	for i := range retry {
		n := r.set.get(retry[i].NodeID)
		if n == nil {
			continue
		}
		n.statusDirty.Store(true)
		if retry[i].Inventory != nil {
			n.mu.Lock()
			n.inventoryDirty = true
			n.mu.Unlock()
		}
	}
	var out []Status
	for _, n := range r.set.sorted() {
		if !n.statusDirty.CompareAndSwap(true, false) {
			continue
		}
		n.mu.Lock()
		if !n.deleted {
			out = append(out, n.status())
		}
		n.mu.Unlock()
	}
	return out
}

// Apply takes in what other server replicas wrote (nodestore reads it every flush interval):
// a deletion removes the node unless it registered again since; a registration is added, or
// replaces an older one held; a report newer than the one held replaces it, and the report of
// a node not held loads that node from the store.
func (r *Registry) Apply(ctx context.Context, c Changes) error {
	for _, d := range c.Deletions {
		r.regMu.Lock()
		gone := false
		if n := r.set.get(d.ID); n != nil {
			n.mu.Lock()
			gone = n.registeredAt <= d.At // not registered again since
			if gone {
				n.deleted = true
			}
			cred := n.credHash
			n.mu.Unlock()
			if gone {
				r.set.remove(n, cred)
			}
		}
		r.regMu.Unlock()
		if gone {
			r.notifyDeleted(d.ID)
		}
	}
	pools := make([]string, len(c.Registrations))
	for i := range c.Registrations {
		pools[i] = c.Registrations[i].PoolID
	}
	r.knowPools(ctx, pools...)
	now := r.now()
	for i := range c.Registrations {
		rec := &c.Registrations[i]
		r.regMu.Lock()
		n := r.set.get(rec.NodeID)
		if n == nil {
			fresh, err := restore(rec, now, r.health)
			if err != nil {
				r.regMu.Unlock()
				return err
			}
			r.set.add(fresh)
			n = fresh
		} else {
			n.mu.Lock()
			if rec.UpdatedAt > n.updatedAt {
				n.setRegistration(&rec.Registration)
			}
			n.mu.Unlock()
			r.listGen.Add(1)
		}
		r.regMu.Unlock()
		r.notify(n)
	}
	var missing []string
	for i := range c.Statuses {
		s := &c.Statuses[i]
		n := r.set.get(s.NodeID)
		if n == nil {
			missing = append(missing, s.NodeID)
			continue
		}
		n.mu.Lock()
		newer := s.ReportedAt > n.reportedAt && !n.deleted
		if newer {
			n.setLive(s)
			n.statusAt, n.learnedAt = max(n.statusAt, s.ReportedAt), now
			if inv := s.Inventory; inv != nil && (!bytes.Equal(inv.Templates, n.templatesJSON) || !bytes.Equal(inv.Images, n.imagesJSON) ||
				inv.TemplatesReported != n.templatesReported) {
				if err := n.setInventory(inv); err != nil {
					r.log.Warn("another replica's record of a node's images and templates does not parse", "node", n.id, "err", err)
				}
			}
		}
		n.mu.Unlock()
		if newer {
			r.notify(n)
		}
	}
	for _, id := range missing {
		if _, err := r.find(ctx, id); err != nil {
			return err
		}
	}
	return nil
}
