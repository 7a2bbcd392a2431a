package tokenizer

import (
	"fmt"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// bpeModel is the BPE model of tokenizer.json, merging pairs in the exact
// order of the Rust implementation (models/bpe/word.rs): a min-heap of
// candidate merges ordered by (rank, position), with stale entries skipped
// only when the pair at their position no longer yields the same token.
type bpeModel struct {
	vocab        *vocabTable
	vocabR       []string // id -> token; "" where the id is not in the vocab
	vocabHas     []bool
	merges       *mergeTable
	unk          int32 // -1 without unk_token
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	prefix       *string // continuing_subword_prefix
	suffix       *string // end_of_word_suffix
	fallbackIDs  [256]int32

	// Byte mode: ByteLevel pieces are tokenized from their raw bytes, with
	// byteIDs the ids of the 256 ByteLevel characters and rawLen the number
	// of raw bytes each token stands for. Enabled when every ByteLevel
	// character is in the vocabulary and no prefix or suffix is configured.
	byteMode bool
	byteIDs  [256]int32
	rawLen   []int32

	// metaSplit: character-mode words may be cut before a "▁" (U+2581, the
	// SentencePiece space) that follows another character, because a merge
	// spanning such a cut would produce a vocabulary token with "▁" right
	// after a different character, and only the few metaBad tokens are like
	// that (Gemma has one, ">▁</"; Llama 2 none): a cut is skipped where one
	// of them occurs across it. BPE merges only adjacent symbols, so the
	// words then merge independently with identical results, which makes
	// Llama 2 and Gemma (whose whole text is one BPE word) merge word by
	// word with the cache. Checked at load; off with a subword prefix or
	// suffix (they depend on word boundaries) or when a metaBad token could
	// come from byte-fallback or unk symbols, whose token text is not the
	// input text.
	metaSplit bool
	metaBad   []string

	cache *wordCache
}

type mergeVal struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

type bpeConfig struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
}

func newBPE(cfg bpeConfig, vocab *vocabTable, mergeIDs [][2]int32, mergeStrs [][2]string) (*bpeModel, error) {
	if cfg.Dropout != nil && *cfg.Dropout > 0 {
		return nil, fmt.Errorf("BPE dropout %v is not supported (it makes encoding random)", *cfg.Dropout)
	}
	m := &bpeModel{
		vocab:        vocab,
		merges:       newMergeTable(len(mergeIDs) + len(mergeStrs)),
		unk:          -1,
		fuseUnk:      cfg.FuseUnk,
		byteFallback: cfg.ByteFallback,
		ignoreMerges: cfg.IgnoreMerges,
		prefix:       cfg.ContinuingSubwordPrefix,
		suffix:       cfg.EndOfWordSuffix,
		cache:        newWordCache(),
	}
	m.vocabR = make([]string, vocab.size())
	m.vocabHas = make([]bool, vocab.size())
	vocab.each(func(tok string, id int32) { m.vocabR[id], m.vocabHas[id] = tok, true })
	if cfg.UnkToken != nil {
		if id, ok := vocab.get(*cfg.UnkToken); ok {
			m.unk = id
		}
	}
	for b := range 256 {
		m.fallbackIDs[b] = -1
		if id, ok := vocab.get(fmt.Sprintf("<0x%02X>", b)); ok {
			m.fallbackIDs[b] = id
		}
	}
	prefixLen := 0
	if m.prefix != nil {
		prefixLen = len(*m.prefix)
	}
	for i, mg := range mergeStrs {
		a, ok := vocab.get(mg[0])
		if !ok {
			return nil, fmt.Errorf("BPE merge %d: token %q not in vocab", i, mg[0])
		}
		b, ok := vocab.get(mg[1])
		if !ok {
			return nil, fmt.Errorf("BPE merge %d: token %q not in vocab", i, mg[1])
		}
		mergeIDs = append(mergeIDs, [2]int32{a, b})
	}
	// Resolve the merged tokens on two goroutines (read-only lookups), then
	// fill the table in rank order.
	merged := make([]int32, len(mergeIDs))
	resolve := func(lo, hi int) error {
		var buf []byte
		prev := int32(-2)
		for i := lo; i < hi; i++ {
			a, b := m.vocabR[mergeIDs[i][0]], m.vocabR[mergeIDs[i][1]]
			if len(b) < prefixLen {
				return fmt.Errorf("BPE merge %d: %q is shorter than the subword prefix", i, b)
			}
			b = b[prefixLen:]
			// Trained BPE vocabularies usually give merge i's token the id
			// after merge i-1's: check that guess before hashing.
			if g := prev + 1; g >= 0 && int(g) < len(m.vocabR) && m.vocabHas[g] {
				if t := m.vocabR[g]; len(t) == len(a)+len(b) && t[:len(a)] == a && t[len(a):] == b {
					merged[i], prev = g, g
					continue
				}
			}
			buf = append(append(buf[:0], a...), b...)
			n, ok := vocab.getBytes(buf)
			if !ok {
				return fmt.Errorf("BPE merge %d: merged token %q not in vocab", i, buf)
			}
			merged[i], prev = n, n
		}
		return nil
	}
	half := len(mergeIDs) / 2
	errc := make(chan error, 1)
	go func() { errc <- resolve(half, len(mergeIDs)) }()
	err1 := resolve(0, half)
	if err2 := <-errc; err1 == nil {
		err1 = err2
	}
	if err1 != nil {
		return nil, err1
	}
	for i, mg := range mergeIDs {
		m.merges.put(pairKey(mg[0], mg[1]), mergeVal{rank: int32(i), id: merged[i]})
	}
	m.byteMode = (m.prefix == nil || *m.prefix == "") && (m.suffix == nil || *m.suffix == "")
	for b := range 256 {
		id, ok := vocab.get(string(byteToRune[b]))
		if !ok {
			m.byteMode = false
			break
		}
		m.byteIDs[b] = id
	}
	m.metaSplit = (m.prefix == nil || *m.prefix == "") && (m.suffix == nil || *m.suffix == "")
	if _, ok := vocab.get("▁"); !ok {
		m.metaSplit = false
	}
	unkTok := ""
	if m.unk >= 0 {
		unkTok = m.vocabR[m.unk]
	}
	for _, tok := range m.vocabR {
		if !m.metaSplit {
			break
		}
		if len(metaCuts(tok)) == 0 {
			continue
		}
		if strings.Contains(tok, "<0x") || (unkTok != "" && strings.Contains(tok, unkTok)) || len(m.metaBad) >= 64 {
			m.metaSplit = false
			break
		}
		m.metaBad = append(m.metaBad, tok)
	}
	if m.byteMode {
		m.rawLen = make([]int32, len(m.vocabR))
		for id, tok := range m.vocabR {
			n := int32(0)
			for _, r := range tok {
				if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
					n = 0
					break
				}
				n++
			}
			m.rawLen[id] = n
		}
	}
	return m, nil
}

// byteLevelRaw decodes a token made only of ByteLevel characters.
func byteLevelRaw(dst []byte, tok string) ([]byte, bool) {
	for _, r := range tok {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return dst, false
		}
		dst = append(dst, byte(runeToByte[r]))
	}
	return dst, true
}

// tokenize emits the tokens of one piece: id and byte range within the
// piece text.
func (m *bpeModel) tokenize(p piece, sc *scratch, emit func(id int32, start, end int)) {
	if p.text == "" {
		return
	}
	if p.byteLevel && !m.byteMode {
		p = materializeByteLevel(p)
	}
	if p.byteLevel {
		m.tokenizeBytes(p.text, sc, emit)
		return
	}
	s := p.text
	if m.ignoreMerges {
		if id, ok := m.vocab.get(s); ok {
			emit(id, 0, len(s))
			return
		}
	}
	if !m.metaSplit {
		m.tokenizeWord(s, 0, sc, emit)
		return
	}
	// Cut before every "▁" that follows another character: no merge can
	// join across such a cut (see metaSplit), so the words merge
	// independently, and short ones hit the cache.
	start := 0
	for i := 1; i < len(s); {
		k := strings.Index(s[i:], "▁")
		if k < 0 {
			break
		}
		i += k
		if !strings.HasSuffix(s[:i], "▁") && m.safeCut(s, i) {
			m.tokenizeWord(s[start:i], start, sc, emit)
			start = i
		}
		i += len("▁")
	}
	m.tokenizeWord(s[start:], start, sc, emit)
}

// safeCut reports whether no metaBad token occurs across the cut at i.
func (m *bpeModel) safeCut(s string, i int) bool {
	for _, bad := range m.metaBad {
		for _, j := range metaCuts(bad) {
			if i >= j && strings.HasPrefix(s[i-j:], bad) {
				return false
			}
		}
	}
	return true
}

// metaCuts returns the byte positions in tok of each "▁" that follows a
// different character.
func metaCuts(tok string) []int {
	var out []int
	for i := 1; i < len(tok); {
		k := strings.Index(tok[i:], "▁")
		if k < 0 {
			break
		}
		i += k
		if !strings.HasSuffix(tok[:i], "▁") {
			out = append(out, i)
		}
		i += len("▁")
	}
	return out
}

// tokenizeWord merges one word (character mode); base is its offset in
// the piece.
func (m *bpeModel) tokenizeWord(s string, base int, sc *scratch, emit func(id int32, start, end int)) {
	if w, ok := m.cache.get(s, false); ok {
		off := base
		for k, id := range w.ids {
			emit(id, off, off+int(w.lens[k]))
			off += int(w.lens[k])
		}
		return
	}
	syms := m.initChars(s, sc.syms[:0])
	syms = m.mergeAll(syms, sc)
	sc.syms = syms
	var cw cachedWord
	cache := len(s) < maxCachedWord
	off := base
	for _, sy := range syms {
		if sy.n == 0 {
			continue
		}
		emit(sy.id, off, off+int(sy.n))
		off += int(sy.n)
		if cache {
			cw.ids = append(cw.ids, sy.id)
			cw.lens = append(cw.lens, sy.n)
		}
	}
	if cache {
		m.cache.put(s, false, cw)
	}
}

func (m *bpeModel) tokenizeBytes(s string, sc *scratch, emit func(id int32, start, end int)) {
	if m.ignoreMerges {
		buf := sc.buf[:0]
		for i := 0; i < len(s); i++ {
			buf = utf8.AppendRune(buf, byteToRune[s[i]])
		}
		sc.buf = buf
		if id, ok := m.vocab.getBytes(buf); ok {
			emit(id, 0, len(s))
			return
		}
	}
	if w, ok := m.cache.get(s, true); ok {
		off := 0
		for _, id := range w.ids {
			n := int(m.rawLen[id])
			emit(id, off, off+n)
			off += n
		}
		return
	}
	syms := sc.syms[:0]
	for i := 0; i < len(s); i++ {
		syms = append(syms, sym{id: m.byteIDs[s[i]], prev: int32(i - 1), next: int32(i + 1), n: 1})
	}
	syms = m.mergeAll(syms, sc)
	sc.syms = syms
	var cw cachedWord
	cache := len(s) < maxCachedWord
	off := 0
	for _, sy := range syms {
		if sy.n == 0 {
			continue
		}
		emit(sy.id, off, off+int(sy.n))
		off += int(sy.n)
		if cache {
			cw.ids = append(cw.ids, sy.id)
		}
	}
	if cache {
		m.cache.put(s, true, cw)
	}
}

type sym struct {
	id         int32
	prev, next int32
	n          int32 // byte length; 0 once merged away
}

// initChars builds the initial symbols of a word from its characters
// (Rust BPE::merge_word): subword prefix and end-of-word suffix, byte
// fallback for unknown characters, and unk (fused when fuse_unk is set).
func (m *bpeModel) initChars(s string, syms []sym) []sym {
	add := func(id int32, n int) {
		k := int32(len(syms))
		syms = append(syms, sym{id: id, prev: k - 1, next: k + 1, n: int32(n)})
	}
	unkID, unkLen := int32(-1), 0
	var key strings.Builder
	for i := 0; i < len(s); {
		_, w := utf8.DecodeRuneInString(s[i:])
		ch := s[i : i+w]
		first, last := i == 0, i+w == len(s)
		i += w
		look := ch
		if (!first && m.prefix != nil && *m.prefix != "") || (last && m.suffix != nil && *m.suffix != "") {
			key.Reset()
			if !first && m.prefix != nil {
				key.WriteString(*m.prefix)
			}
			key.WriteString(ch)
			if last && m.suffix != nil {
				key.WriteString(*m.suffix)
			}
			look = key.String()
		}
		if id, ok := m.vocab.get(look); ok {
			if unkID >= 0 {
				add(unkID, unkLen)
				unkID = -1
			}
			add(id, len(ch))
			continue
		}
		if m.byteFallback {
			ok := true
			for k := 0; k < len(look); k++ {
				if m.fallbackIDs[look[k]] < 0 {
					ok = false
					break
				}
			}
			if ok {
				for k := 0; k < len(look); k++ {
					add(m.fallbackIDs[look[k]], 1)
				}
				continue
			}
		}
		if m.unk >= 0 {
			switch {
			case unkID >= 0 && m.fuseUnk:
				unkLen += len(ch)
			case unkID >= 0:
				add(unkID, unkLen)
				unkID, unkLen = m.unk, len(ch)
			default:
				unkID, unkLen = m.unk, len(ch)
			}
		}
	}
	if unkID >= 0 {
		add(unkID, unkLen)
	}
	return syms
}

type mergeItem struct{ rank, pos, id int32 }

func itemLess(a, b mergeItem) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeAll applies the merges to the symbol list (Rust Word::merge_all).
func (m *bpeModel) mergeAll(syms []sym, sc *scratch) []sym {
	n := int32(len(syms))
	if n < 2 {
		return syms
	}
	syms[n-1].next = -1
	h := sc.heap[:0]
	for i := int32(0); i+1 < n; i++ {
		if mv, ok := m.merges.get(pairKey(syms[i].id, syms[i+1].id)); ok {
			h = heapPush(h, mergeItem{mv.rank, i, mv.id})
		}
	}
	for len(h) > 0 {
		var top mergeItem
		top, h = heapPop(h)
		cur := &syms[top.pos]
		if cur.n == 0 || cur.next == -1 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		if mv, ok := m.merges.get(pairKey(cur.id, right.id)); !ok || mv.id != top.id {
			continue
		}
		cur.id = top.id
		cur.n += right.n
		cur.next = right.next
		syms[nextPos].n = 0
		if right.next >= 0 && right.next < n {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mv, ok := m.merges.get(pairKey(syms[cur.prev].id, cur.id)); ok {
				h = heapPush(h, mergeItem{mv.rank, cur.prev, mv.id})
			}
		}
		if cur.next >= 0 && cur.next < n {
			if mv, ok := m.merges.get(pairKey(cur.id, syms[cur.next].id)); ok {
				h = heapPush(h, mergeItem{mv.rank, top.pos, mv.id})
			}
		}
	}
	sc.heap = h
	return syms
}

func heapPush(h []mergeItem, it mergeItem) []mergeItem {
	h = append(h, it)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !itemLess(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []mergeItem) (mergeItem, []mergeItem) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		c := l
		if r := l + 1; r < len(h) && itemLess(h[r], h[l]) {
			c = r
		}
		if !itemLess(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	return top, h
}

// scratch holds per-call buffers; a sync.Pool in the Tokenizer recycles
// them so concurrent encodes never share one.
type scratch struct {
	syms []sym
	heap []mergeItem
	buf  []byte
}

const (
	maxCachedWord = 256
	cacheSlots    = 1 << 16
)

type cachedWord struct {
	ids  []int32
	lens []int32 // byte lengths (character mode only)
}

type cacheEntry struct {
	key       string
	bytesMode bool
	w         cachedWord
}

// wordCache memoizes merged words, like the Rust BPE cache. It is a
// direct-mapped table of atomic pointers: a lookup is one hash, one atomic
// load and one string comparison, with no lock, which matters because every
// word of every prompt goes through it; a colliding word simply replaces
// the previous one. Keys are copied so the cache never pins caller text.
type wordCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry]
}

func newWordCache() *wordCache {
	return &wordCache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[cacheEntry], cacheSlots)}
}

func (c *wordCache) slot(s string, bytesMode bool) *atomic.Pointer[cacheEntry] {
	h := maphash.String(c.seed, s)
	if bytesMode {
		h = ^h
	}
	return &c.slots[h&(cacheSlots-1)]
}

func (c *wordCache) get(s string, bytesMode bool) (cachedWord, bool) {
	e := c.slot(s, bytesMode).Load()
	if e == nil || e.bytesMode != bytesMode || e.key != s {
		return cachedWord{}, false
	}
	return e.w, true
}

func (c *wordCache) put(s string, bytesMode bool, w cachedWord) {
	if len(s) >= maxCachedWord {
		return
	}
	c.slot(s, bytesMode).Store(&cacheEntry{key: strings.Clone(s), bytesMode: bytesMode, w: w})
}
