package router

import (
	"sort"
	"strings"
)

// trie is a byte-wise compressed radix tree mapping keys to int32 values. It
// answers one question: which keys are prefixes of an input, longest first.
// Each node with a value links to its nearest ancestor with a value (up), so
// after one walk down to the deepest such node the others follow without a
// stack. It is built once and read-only afterwards.
type trie struct {
	nodes []tnode // nodes[0] is the root, whose key is ""
}

type tnode struct {
	label string  // bytes from the parent's key to this node's key
	first string  // first byte of each child's label, sorted
	kids  []int32 // children, in the order of first
	val   int32   // value, -1 when no key ends here
	up    int32   // nearest proper ancestor with a value, -1 when none
}

// ptrie is one trie of prefixes with their candidates: the trie's value v
// stands for keys[v], whose candidates are cands[v]. It is immutable: an
// Update that changes one of its prefixes builds another (updater.trieOf).
type ptrie struct {
	t     trie
	keys  []string
	cands [][]cand
}

// newPtrie builds the trie of keys, whose candidates are cands. It keeps
// both slices.
func newPtrie(keys []string, cands [][]cand) *ptrie {
	p := &ptrie{}
	p.init(keys, cands)
	return p
}

// init makes p the trie of keys (newPtrie), in place: Build makes a
// table's tries in one array.
func (p *ptrie) init(keys []string, cands [][]cand) {
	*p = ptrie{t: newTrie(), keys: keys, cands: cands}
	for i, k := range keys {
		p.t.put(k, int32(i))
	}
	p.t.link()
}

func newTrie() trie {
	return trie{nodes: []tnode{{val: -1, up: -1}}}
}

// put stores val for key, replacing an earlier value.
func (t *trie) put(key string, val int32) {
	n := int32(0)
	for {
		if key == "" {
			t.nodes[n].val = val
			return
		}
		nd := &t.nodes[n]
		k := strings.IndexByte(nd.first, key[0])
		if k < 0 {
			t.addKid(n, tnode{label: key, val: val, up: -1})
			return
		}
		c := nd.kids[k]
		l := t.nodes[c].label
		common := 0
		for common < len(l) && common < len(key) && l[common] == key[common] {
			common++
		}
		if common == len(l) {
			n, key = c, key[common:]
			continue
		}
		// Split c: a new middle node takes the common part of the label.
		mid := int32(len(t.nodes))
		t.nodes = append(t.nodes, tnode{label: l[:common], val: -1, up: -1,
			first: l[common : common+1], kids: []int32{c}})
		t.nodes[c].label = l[common:]
		t.nodes[n].kids[k] = mid
		n, key = mid, key[common:]
	}
}

func (t *trie) addKid(parent int32, child tnode) {
	c := int32(len(t.nodes))
	t.nodes = append(t.nodes, child)
	p := &t.nodes[parent]
	b := child.label[0]
	i := sort.Search(len(p.first), func(i int) bool { return p.first[i] >= b })
	p.first = p.first[:i] + string(b) + p.first[i:]
	p.kids = append(p.kids, 0)
	copy(p.kids[i+1:], p.kids[i:])
	p.kids[i] = c
}

// link fills the up links; call it once after the last put.
func (t *trie) link() {
	var walk func(n, up int32)
	walk = func(n, up int32) {
		t.nodes[n].up = up
		if t.nodes[n].val >= 0 {
			up = n
		}
		for _, c := range t.nodes[n].kids {
			walk(c, up)
		}
	}
	walk(0, -1)
}

// longest returns the deepest node holding a value whose key is a prefix of
// p, or -1. Follow tnode.up for the shorter ones.
func (t *trie) longest(p []byte) int32 {
	nodes := t.nodes
	best := int32(-1)
	n := int32(0)
	nd := &nodes[0]
	for {
		if nd.val >= 0 {
			best = n
		}
		if len(p) == 0 {
			return best
		}
		k := strings.IndexByte(nd.first, p[0])
		if k < 0 {
			return best
		}
		n = nd.kids[k]
		nd = &nodes[n]
		l := nd.label
		if len(p) < len(l) || string(p[:len(l)]) != l {
			return best
		}
		p = p[len(l):]
	}
}

// longestRev is longest for keys stored reversed: it walks p from its last
// byte to its first, so a key "moc.oof." (stored for "*.foo.com") matches
// p = "www.foo.com".
func (t *trie) longestRev(p []byte) int32 {
	nodes := t.nodes
	best := int32(-1)
	n := int32(0)
	nd := &nodes[0]
	end := len(p) // p[:end] is what is left to walk, consumed from the end
	for {
		if nd.val >= 0 {
			best = n
		}
		if end == 0 {
			return best
		}
		k := strings.IndexByte(nd.first, p[end-1])
		if k < 0 {
			return best
		}
		n = nd.kids[k]
		nd = &nodes[n]
		l := nd.label
		if end < len(l) {
			return best
		}
		for j := 0; j < len(l); j++ {
			if p[end-1-j] != l[j] {
				return best
			}
		}
		end -= len(l)
	}
}
