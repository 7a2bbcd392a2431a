package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// AddedToken is an entry of tokenizer.json's added_tokens.
type AddedToken struct {
	// ID is the token id.
	ID int32 `json:"id"`
	// Content is the token text.
	Content string `json:"content"`
	// SingleWord matches the token only when no word character touches it.
	SingleWord bool `json:"single_word"`
	// LStrip makes the match take the whitespace on its left.
	LStrip bool `json:"lstrip"`
	// RStrip makes the match take the whitespace on its right.
	RStrip bool `json:"rstrip"`
	// Normalized matches the token on normalized text (in its normalized
	// form) instead of the raw input.
	Normalized bool `json:"normalized"`
	// Special tokens are left out by decoding with skipSpecial.
	Special bool `json:"special"`
}

// addedMatcher finds added tokens in text with the semantics of the Rust
// AddedVocabulary: Aho-Corasick leftmost-longest matches, then the
// single_word / lstrip / rstrip rules of find_matches. A byte trie stands
// in for Aho-Corasick: at each position where some token can start it
// walks the trie and keeps the longest token, which is exactly the
// leftmost-longest match.
type addedMatcher struct {
	first [256]bool
	edges map[uint64]int32 // (node<<8 | byte) -> child
	term  []int32          // node -> index into toks, or -1
	toks  []AddedToken
	cl    classifier
}

func newAddedMatcher(toks []AddedToken, contents []string) *addedMatcher {
	m := &addedMatcher{edges: make(map[uint64]int32), term: []int32{-1}, cl: newClassifier()}
	for k, c := range contents {
		if c == "" {
			continue
		}
		m.first[c[0]] = true
		node := int32(0)
		for i := 0; i < len(c); i++ {
			key := uint64(node)<<8 | uint64(c[i])
			nx, ok := m.edges[key]
			if !ok {
				nx = int32(len(m.term))
				m.term = append(m.term, -1)
				m.edges[key] = nx
			}
			node = nx
		}
		if m.term[node] < 0 {
			m.term[node] = int32(len(m.toks))
			m.toks = append(m.toks, toks[k])
		}
	}
	return m
}

func (m *addedMatcher) empty() bool { return m == nil || len(m.toks) == 0 }

// longestAt returns the longest token starting at i.
func (m *addedMatcher) longestAt(s string, i int) (int, int32) {
	node := int32(0)
	best, bestTok := -1, int32(-1)
	for j := i; j < len(s); j++ {
		nx, ok := m.edges[uint64(node)<<8|uint64(s[j])]
		if !ok {
			break
		}
		node = nx
		if t := m.term[node]; t >= 0 {
			best, bestTok = j+1, t
		}
	}
	return best, bestTok
}

type addedSplit struct {
	s, e int
	tok  int32 // index into toks, or -1 for plain text
}

// find splits s into plain text and added tokens (Rust find_matches).
func (m *addedMatcher) find(s string, out []addedSplit) []addedSplit {
	startOff := 0
	for i := 0; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		e, t := m.longestAt(s, i)
		if t < 0 {
			i++
			continue
		}
		start, stop := i, e
		i = e
		tok := &m.toks[t]
		if tok.SingleWord {
			startSpace := start == 0 || !m.endsWithWord(s[:start])
			stopSpace := stop == len(s) || !m.startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.LStrip {
			ns := len(strings.TrimRightFunc(s[:start], isWhiteSpace))
			start = max(ns, startOff)
		}
		if tok.RStrip {
			stop += len(s[stop:]) - len(strings.TrimLeftFunc(s[stop:], isWhiteSpace))
		}
		if startOff < start {
			out = append(out, addedSplit{startOff, start, -1})
		}
		out = append(out, addedSplit{start, stop, t})
		startOff = stop
	}
	if startOff != len(s) {
		out = append(out, addedSplit{startOff, len(s), -1})
	}
	return out
}

func (m *addedMatcher) endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return m.cl.of(r)&clsW != 0
}

func (m *addedMatcher) startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return m.cl.of(r)&clsW != 0
}
