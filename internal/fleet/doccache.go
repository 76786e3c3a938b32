package fleet

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/store"
)

// maxCachedObjects bounds the decoded applied documents a Planner keeps, counted in objects
// (objectCount): a few MB, the documents of every tenant of a typical control plane or of
// twenty tenants at the 5,000-object size.
const maxCachedObjects = 100_000

// docCache keeps decoded applied documents by the SHA-256 of their canonical form, so a drift
// check of an unchanged document neither reads nor decodes it again. A decoded Document is
// shared by the checks that use it and never written to (planning only reads its document).
// When a new document would pass maxCachedObjects the cache starts over. It is safe for
// concurrent use.
type docCache struct {
	mu      sync.Mutex
	docs    map[string]*document.Document
	objects int
}

func (c *docCache) get(hash string) *document.Document {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.docs[hash]
}

func (c *docCache) put(hash string, d *document.Document) {
	n := d.Objects()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.docs == nil || c.objects+n > maxCachedObjects {
		c.docs, c.objects = map[string]*document.Document{}, 0
	}
	if _, ok := c.docs[hash]; !ok && n <= maxCachedObjects {
		c.docs[hash] = d
		c.objects += n
	}
}

// documentHash is the hex SHA-256 of a canonical document: the key of docCache.
func documentHash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// appliedDocument returns tenantID's applied document: from p's cache when hash (the stored
// document_hash; "" for a row applied before there was one) is there, else read from q and
// decoded (and kept, when it has a hash).
func (p *Planner) appliedDocument(ctx context.Context, q store.Querier, tenantID, hash string) (*document.Document, error) {
	if hash != "" {
		if d := p.docs.get(hash); d != nil {
			return d, nil
		}
	}
	var doc string
	err := q.QueryRowContext(ctx, `SELECT document FROM fleet_applied WHERE tenant_id = $1`, tenantID).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("load applied document: tenant %s has none", tenantID)
	}
	if err != nil {
		return nil, fmt.Errorf("load applied document: %w", err)
	}
	d, err := document.DecodeCanonical([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("decode applied document: %w", err)
	}
	if hash != "" && documentHash([]byte(doc)) == hash {
		p.docs.put(hash, d)
	}
	return d, nil
}
