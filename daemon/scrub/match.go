package scrub

import (
	"slices"
	"strings"
)

// matcher finds every occurrence of a set of patterns in one pass over a
// text (Aho–Corasick): the patterns' trie with failure links. The root's
// transitions are a dense table, since most bytes of a log start no
// secret; the other states keep their few edges in flat arrays. Its cost
// per byte does not grow with the number of patterns. A matcher is
// immutable once built.
type matcher struct {
	root [256]int32
	// The edges of state s are labels[first[s]:first[s+1]] leading to
	// targets at the same indexes.
	first   []int32
	labels  []byte
	targets []int32
	fail    []int32
	// longest is the length of the longest pattern that ends at a state
	// (its own or one reached by failure links); 0 for none.
	longest []int32
	// maxLen is the length of the longest pattern.
	maxLen int
}

// trieNode is a state while the trie is built.
type trieNode struct {
	labels  []byte
	targets []int32
	own     int32 // length of the pattern ending here
}

func (n *trieNode) child(c byte) int32 {
	for i, l := range n.labels {
		if l == c {
			return n.targets[i]
		}
	}
	return -1
}

// newMatcher builds the matcher of patterns; empty patterns are ignored.
// It is nil when there is none.
func newMatcher(patterns []string) *matcher {
	nodes := []trieNode{{}}
	maxLen := 0
	for _, p := range patterns {
		if p == "" {
			continue
		}
		maxLen = max(maxLen, len(p))
		s := int32(0)
		for i := 0; i < len(p); i++ {
			t := nodes[s].child(p[i])
			if t < 0 {
				t = int32(len(nodes))
				nodes = append(nodes, trieNode{})
				nodes[s].labels = append(nodes[s].labels, p[i])
				nodes[s].targets = append(nodes[s].targets, t)
			}
			s = t
		}
		nodes[s].own = int32(len(p))
	}
	if maxLen == 0 {
		return nil
	}
	m := &matcher{maxLen: maxLen, fail: make([]int32, len(nodes)), longest: make([]int32, len(nodes)),
		first: make([]int32, len(nodes)+1)}
	for i, c := range nodes[0].labels {
		m.root[c] = nodes[0].targets[i]
	}
	// Failure links breadth first: a state's link is the longest proper
	// suffix of its string that is a state too.
	queue := slices.Clone(nodes[0].targets)
	for _, t := range queue {
		m.longest[t] = nodes[t].own
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for i, c := range nodes[s].labels {
			t := nodes[s].targets[i]
			f := m.fail[s]
			for f != 0 && nodes[f].child(c) < 0 {
				f = m.fail[f]
			}
			if f == 0 {
				m.fail[t] = m.root[c]
			} else {
				m.fail[t] = nodes[f].child(c)
			}
			m.longest[t] = max(nodes[t].own, m.longest[m.fail[t]])
			queue = append(queue, t)
		}
	}
	for s := range nodes {
		m.first[s] = int32(len(m.labels))
		if s != 0 {
			m.labels = append(m.labels, nodes[s].labels...)
			m.targets = append(m.targets, nodes[s].targets...)
		}
	}
	m.first[len(nodes)] = int32(len(m.labels))
	return m
}

// step is the state after reading c in state s (s != 0).
func (m *matcher) step(s int32, c byte) int32 {
	for s != 0 {
		for j := m.first[s]; j < m.first[s+1]; j++ {
			if m.labels[j] == c {
				return m.targets[j]
			}
		}
		s = m.fail[s]
	}
	return m.root[c]
}

// span is a part of a text, [start, end).
type span struct{ start, end int }

// find returns the parts of text covered by patterns, merged where they
// overlap, in order; nil when none is found.
func (m *matcher) find(text string) []span {
	var out []span
	s := int32(0)
	for i := 0; i < len(text); i++ {
		if s == 0 {
			// Most bytes start no pattern: skip them in a tight loop.
			for i < len(text) && m.root[text[i]] == 0 {
				i++
			}
			if i == len(text) {
				break
			}
			s = m.root[text[i]]
		} else {
			s = m.step(s, text[i])
		}
		if l := m.longest[s]; l > 0 {
			// The longest pattern ending here covers every shorter one that
			// does. Matches come by their end: merge backwards.
			sp := span{i + 1 - int(l), i + 1}
			for len(out) > 0 && sp.start < out[len(out)-1].end {
				sp.start = min(sp.start, out[len(out)-1].start)
				out = out[:len(out)-1]
			}
			out = append(out, sp)
		}
	}
	return out
}

// replace replaces every part of text that patterns cover with mask.
func (m *matcher) replace(text, mask string) string {
	if m == nil {
		return text
	}
	spans := m.find(text)
	if spans == nil {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, sp := range spans {
		b.WriteString(text[last:sp.start])
		b.WriteString(mask)
		last = sp.end
	}
	b.WriteString(text[last:])
	return b.String()
}
