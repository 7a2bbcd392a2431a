package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids and decodes ids to text exactly as
// the Hugging Face tokenizers library does for the same tokenizer.json.
// It is immutable after loading and safe for concurrent use.
type Tokenizer struct {
	model      *bpeModel
	normalizer normalizer
	pre        preTokenizer
	post       postProcessor
	decoder    decoderSpec
	added      []AddedToken
	addedRaw   *addedMatcher // added tokens matched on the input as given
	addedNorm  *addedMatcher // added tokens matched on normalized text
	splitRaw   *addedMatcher // addedRaw without the special tokens
	splitNorm  *addedMatcher // addedNorm without the special tokens

	idToTok        []string
	hasTok         []bool
	special        []bool
	addedByContent map[string]int32

	bos, eos       int32
	hasBOS, hasEOS bool
	raw            bool
	cleanup        bool
	needAlign      bool

	postPre, postSuf []int32 // what the post-processor adds (EncodeIDs)
	postSimple       bool

	pool sync.Pool // *scratch

	tokBytesOnce sync.Once
	tokBytes     [][]byte // AllTokenBytes, built once on first use
}

// Encoding is the result of Encode.
type Encoding struct {
	// IDs are the token ids.
	IDs []int32
	// Tokens are the token strings (vocabulary entries, or the matched text
	// for added tokens).
	Tokens []string
	// Offsets are the [start, end) byte ranges of each token in the input
	// text; tokens added by the post-processor have [0, 0).
	Offsets [][2]int
	// SpecialMask is true for tokens added by the post-processor.
	SpecialMask []bool
}

func (t *Tokenizer) scratch() *scratch {
	if sc, ok := t.pool.Get().(*scratch); ok {
		return sc
	}
	return &scratch{}
}

// Encode tokenizes text with tokens, offsets and the special-token mask.
// addSpecial applies the post-processor (e.g. BOS), as
// add_special_tokens=True does.
func (t *Tokenizer) Encode(text string, addSpecial bool) Encoding {
	e := encBuf{details: true}
	t.encode(text, addSpecial, false, &e)
	return Encoding{IDs: e.ids, Tokens: e.toks, Offsets: e.offs, SpecialMask: e.mask}
}

// EncodeSplitSpecial is Encode with the text of special tokens tokenized as
// plain text: "<|im_start|>" in the input is never the special token
// (transformers' split_special_tokens=True, llama.cpp's parse_special=false,
// llama-tokenize --no-parse-special). Added tokens that are not special
// are still matched. Use it for text that must not inject control tokens.
func (t *Tokenizer) EncodeSplitSpecial(text string, addSpecial bool) Encoding {
	e := encBuf{details: true}
	t.encode(text, addSpecial, true, &e)
	return Encoding{IDs: e.ids, Tokens: e.toks, Offsets: e.offs, SpecialMask: e.mask}
}

// EncodeIDs returns only the ids: the serving fast path, which builds no
// token strings, offsets or alignments.
func (t *Tokenizer) EncodeIDs(text string, addSpecial bool) []int32 {
	return t.AppendIDs(nil, text, addSpecial)
}

// AppendIDs appends the ids of text to dst and returns the extended slice.
func (t *Tokenizer) AppendIDs(dst []int32, text string, addSpecial bool) []int32 {
	return t.appendIDs(dst, text, addSpecial, false)
}

// AppendIDsSplitSpecial is AppendIDs with special tokens' text tokenized as
// plain text (see EncodeSplitSpecial).
func (t *Tokenizer) AppendIDsSplitSpecial(dst []int32, text string, addSpecial bool) []int32 {
	return t.appendIDs(dst, text, addSpecial, true)
}

func (t *Tokenizer) appendIDs(dst []int32, text string, addSpecial, split bool) []int32 {
	if !t.postSimple {
		e := encBuf{}
		t.encode(text, addSpecial, split, &e)
		return append(dst, e.ids...)
	}
	if addSpecial {
		dst = append(dst, t.postPre...)
	}
	e := encBuf{ids: dst}
	t.encodeSeq(text, split, &e)
	if addSpecial {
		e.ids = append(e.ids, t.postSuf...)
	}
	return e.ids
}

func (t *Tokenizer) encode(text string, addSpecial, split bool, e *encBuf) {
	t.encodeSeq(text, split, e)
	if t.post != nil {
		t.post.process(e, addSpecial)
	}
}

// encodeSeq runs everything before the post-processor: added tokens,
// normalizer, pre-tokenizer, model. With split, special added tokens are
// not matched.
func (t *Tokenizer) encodeSeq(text string, split bool, e *encBuf) {
	text = validUTF8(text)
	addedRaw, addedNorm := t.addedRaw, t.addedNorm
	if split {
		addedRaw, addedNorm = t.splitRaw, t.splitNorm
	}
	track := e.details || t.needAlign
	sc := t.scratch()
	defer t.pool.Put(sc)

	// The model's emit for the current piece.
	var cur piece
	emitTok := func(id int32, s, en int) {
		var tok string
		var o [2]int
		if e.details {
			tok = t.model.vocabR[id]
			o = [2]int{int(cur.al[s].s), int(cur.al[en-1].e)}
		}
		e.ids = append(e.ids, id)
		if e.details {
			e.toks = append(e.toks, tok)
			e.offs = append(e.offs, o)
			e.mask = append(e.mask, false)
		}
	}
	modelPiece := func(p piece) {
		if p.byteLevel && !t.model.byteMode {
			p = materializeByteLevel(p)
		}
		cur = p
		t.model.tokenize(p, sc, emitTok)
	}
	run := modelPiece
	switch pre := t.pre.(type) {
	case nil:
	case seqPre:
		run = pre.chain(modelPiece)
	default:
		run = func(p piece) { pre.split(p, modelPiece) }
	}
	textPiece := func(p piece) {
		if p.text != "" {
			run(p)
		}
	}
	segment := func(seg string, off int) {
		var al []span
		if track {
			al = charSpans(seg, off)
		}
		ns, nal := seg, al
		if t.normalizer != nil {
			ns, nal = t.normalizer.normalize(seg, al)
		}
		if addedNorm.empty() {
			textPiece(piece{text: ns, al: nal})
			return
		}
		p := piece{text: ns, al: nal}
		for _, sp := range addedNorm.find(ns, nil) {
			if sp.tok < 0 {
				textPiece(p.sub(sp.s, sp.e))
				continue
			}
			a := addedNorm.toks[sp.tok]
			var o [2]int
			if nal != nil {
				o = [2]int{int(nal[sp.s].s), int(nal[sp.e-1].e)}
			}
			e.add(a.ID, ns[sp.s:sp.e], o[0], o[1], false)
		}
	}
	if addedRaw.empty() {
		segment(text, 0)
		return
	}
	for _, sp := range addedRaw.find(text, nil) {
		if sp.tok < 0 {
			segment(text[sp.s:sp.e], sp.s)
			continue
		}
		e.add(addedRaw.toks[sp.tok].ID, text[sp.s:sp.e], sp.s, sp.e, false)
	}
}

// validUTF8 replaces each invalid byte by U+FFFD (Rust strings are always
// valid; offsets then refer to the repaired text).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			sb.WriteString("\uFFFD")
		} else {
			sb.WriteString(s[i : i+w])
		}
		i += w
	}
	return sb.String()
}

// TokenID returns the id of a token string (added tokens first, then the
// model vocabulary).
func (t *Tokenizer) TokenID(tok string) (int32, bool) {
	if id, ok := t.addedByContent[tok]; ok {
		return id, true
	}
	return t.model.vocab.get(tok)
}

// IDToken returns the token string of an id.
func (t *Tokenizer) IDToken(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.idToTok) || !t.hasTok[id] {
		return "", false
	}
	return t.idToTok[id], true
}

// IsSpecial reports whether id is a special token (skipped by
// skipSpecial decoding).
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// VocabSize is one more than the largest id of the model vocabulary and
// the added tokens: the size an embedding or logits row needs.
func (t *Tokenizer) VocabSize() int { return len(t.idToTok) }

// BOS returns the id of tokenizer_config.json's bos_token (of a GGUF
// file: tokenizer.ggml.bos_token_id, or llama.cpp's default).
func (t *Tokenizer) BOS() (int32, bool) { return t.bos, t.hasBOS }

// EOS returns the id of tokenizer_config.json's eos_token (of a GGUF
// file: tokenizer.ggml.eos_token_id, or llama.cpp's default).
func (t *Tokenizer) EOS() (int32, bool) { return t.eos, t.hasEOS }

// AddedTokens returns a copy of the added tokens of tokenizer.json.
func (t *Tokenizer) AddedTokens() []AddedToken { return append([]AddedToken(nil), t.added...) }

// Decode turns ids back into text (unknown ids are skipped). With
// skipSpecial, special added tokens are left out. Unless loaded with
// Options.Raw, clean_up_tokenization_spaces is applied when the
// tokenizer_config.json asks for it.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	d := t.NewStreamDecoder(skipSpecial)
	var sb strings.Builder
	for _, id := range ids {
		d.add(id, &sb)
	}
	d.flush(&sb)
	return sb.String()
}
