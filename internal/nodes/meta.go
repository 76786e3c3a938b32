package nodes

import "context"

// metaOK is the envelope head of a successful CubeMaster answer.
const metaOK = `{"ret":{"ret_code":200,"ret_msg":"ok"},"data":`

// AppendMetaList appends CubeMaster's node listing (nodeapi.MetaNodes, GET nodeapi.MetaNodesPath: the `ret` envelope and
// every node's NodeSnapshot, sorted by node id) to dst.
func (r *Registry) AppendMetaList(dst []byte) []byte {
	now := r.now()
	dst = append(dst, metaOK...)
	dst = append(dst, '[')
	first := true
	for _, n := range r.set.sorted() {
		n.mu.Lock()
		if n.deleted {
			n.mu.Unlock()
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = n.appendSnapshot(dst, r.health.state(n, now))
		n.mu.Unlock()
	}
	return append(dst, "]}"...)
}

// AppendMetaNode appends CubeMaster's answer for one node (nodeapi.MetaNode) to dst. Errors:
// NOT_FOUND.
func (r *Registry) AppendMetaNode(ctx context.Context, dst []byte, id string) ([]byte, error) {
	n, err := r.live(ctx, id)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	dst = append(dst, metaOK...)
	dst = n.appendSnapshot(dst, r.health.state(n, r.now()))
	return append(dst, '}'), nil
}
