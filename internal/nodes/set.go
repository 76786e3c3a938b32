package nodes

import (
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// numShards is how many shards the node map is split into, so reports for different nodes
// rarely meet on a lock.
const numShards = 64

type shard struct {
	mu sync.RWMutex
	m  map[string]*node
}

// nodeSet is the registry's nodes by id, their order, who owns which credential, and the ids
// recently found nowhere. Adding and removing happen under Registry.regMu; reads need no lock of
// the caller. Its own locks (a shard's mu, orderMu, credMu, missMu) are leaves: nothing else is
// taken while one is held.
type nodeSet struct {
	seed     maphash.Seed
	shards   [numShards]shard
	orderMu  sync.Mutex
	order    atomic.Pointer[orderCache] // every node sorted by id, as of generation orderGen
	orderGen atomic.Uint64              // +1 on every add and remove
	listGen  *atomic.Uint64             // the registry's list generation, +1 on every add and remove

	credMu sync.RWMutex
	creds  map[string]string // credential hash -> node id

	missMu sync.Mutex
	misses map[string]int64 // node id -> Unix ms until which it is known to be absent
}

func (s *nodeSet) init(seed maphash.Seed, listGen *atomic.Uint64) {
	s.seed, s.listGen = seed, listGen
	for i := range s.shards {
		s.shards[i].m = map[string]*node{}
	}
	s.creds, s.misses = map[string]string{}, map[string]int64{}
}

func (s *nodeSet) shard(id string) *shard {
	return &s.shards[maphash.String(s.seed, id)%numShards]
}

// get returns node id, or nil.
func (s *nodeSet) get(id string) *node {
	sh := s.shard(id)
	sh.mu.RLock()
	n := sh.m[id]
	sh.mu.RUnlock()
	return n
}

// add puts n in the set. Requires Registry.regMu.
func (s *nodeSet) add(n *node) {
	sh := s.shard(n.id)
	sh.mu.Lock()
	sh.m[n.id] = n
	sh.mu.Unlock()
	s.orderGen.Add(1)
	s.listGen.Add(1)
	if n.credHash != "" {
		s.credMu.Lock()
		s.creds[n.credHash] = n.id
		s.credMu.Unlock()
	}
	s.missMu.Lock()
	delete(s.misses, n.id)
	s.missMu.Unlock()
}

// remove drops n and forgets its credential credHash. Requires Registry.regMu.
func (s *nodeSet) remove(n *node, credHash string) {
	sh := s.shard(n.id)
	sh.mu.Lock()
	if sh.m[n.id] == n {
		delete(sh.m, n.id)
	}
	sh.mu.Unlock()
	s.orderGen.Add(1)
	s.listGen.Add(1)
	if credHash != "" {
		s.credMu.Lock()
		delete(s.creds, credHash)
		s.credMu.Unlock()
	}
	s.markMissing(n.id)
}

// owner returns the id of the node whose credential has hash.
func (s *nodeSet) owner(hash string) (string, bool) {
	s.credMu.RLock()
	defer s.credMu.RUnlock()
	id, ok := s.creds[hash]
	return id, ok
}

// missTTL is how long a node id found in neither memory nor the store is answered from memory,
// so a storm of reports from a deleted node costs no database reads.
const missTTL = 5 * time.Second

// maxMisses bounds the negative cache.
const maxMisses = 100000

// markMissing remembers for missTTL that node id is nowhere.
func (s *nodeSet) markMissing(id string) {
	s.missMu.Lock()
	if len(s.misses) >= maxMisses {
		clear(s.misses)
	}
	s.misses[id] = time.Now().Add(missTTL).UnixMilli()
	s.missMu.Unlock()
}

// knownMissing reports whether node id was found nowhere within the last missTTL.
func (s *nodeSet) knownMissing(id string) bool {
	s.missMu.Lock()
	until, known := s.misses[id]
	s.missMu.Unlock()
	return known && time.Now().UnixMilli() < until
}

// orderCache is the sorted node list of one generation of the node set.
type orderCache struct {
	gen   uint64
	nodes []*node
}

// sorted returns every node sorted by id. The slice is shared: do not modify it. It is cached
// until a node is added or removed; a list built while one was is returned but not cached, so
// the cache never misses a node.
func (s *nodeSet) sorted() []*node {
	gen := s.orderGen.Load()
	if c := s.order.Load(); c != nil && c.gen == gen {
		return c.nodes
	}
	s.orderMu.Lock()
	defer s.orderMu.Unlock()
	gen = s.orderGen.Load()
	if c := s.order.Load(); c != nil && c.gen == gen {
		return c.nodes
	}
	var all []*node
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for _, n := range sh.m {
			all = append(all, n)
		}
		sh.mu.RUnlock()
	}
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	if s.orderGen.Load() == gen {
		s.order.Store(&orderCache{gen: gen, nodes: all})
	}
	return all
}
