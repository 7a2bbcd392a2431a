package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Options configures Load, LoadGGUF and LoadPath.
type Options struct {
	// Raw selects the behaviour of tokenizer.json alone, as the Hugging Face
	// Rust tokenizers give it. The zero value selects what transformers'
	// AutoTokenizer does on top of it, which is what troupe serves with:
	// tokenizer_config.json's add_bos_token / add_eos_token rebuild the
	// post-processor (LlamaTokenizerFast.update_post_processor), and
	// clean_up_tokenization_spaces post-processes decoded text. For a GGUF
	// tokenizer, Raw only turns off the clean-up of decoded spaces that
	// llama.cpp's detokenizer applies for some pre-tokenizers.
	Raw bool
}

// Load reads dir/tokenizer.json and, when present, dir/tokenizer_config.json.
func Load(dir string, opts Options) (*Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := LoadBytes(tj, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", dir, err)
	}
	return t, nil
}

// tokenConfig is the part of tokenizer_config.json troupe applies.
type tokenConfig struct {
	AddBOS         *bool      `json:"add_bos_token"`
	AddEOS         *bool      `json:"add_eos_token"`
	BOS            tokenField `json:"bos_token"`
	EOS            tokenField `json:"eos_token"`
	CleanUp        *bool      `json:"clean_up_tokenization_spaces"`
	TokenizerClass string     `json:"tokenizer_class"`
}

// tokenField is a special token given as a string or as an AddedToken
// object ({"__type": "AddedToken", "content": ...}).
type tokenField struct {
	Content string
	Set     bool
}

func (f *tokenField) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		f.Content, f.Set = s, true
		return nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	f.Content, f.Set = o.Content, true
	return nil
}

// LoadBytes builds a Tokenizer from the contents of tokenizer.json and
// tokenizer_config.json (nil or empty when there is none).
func LoadBytes(tokenizerJSON, configJSON []byte, opts Options) (*Tokenizer, error) {
	p, err := parseTokenizerJSON(tokenizerJSON)
	if err != nil {
		return nil, err
	}
	return p.assemble(configJSON, opts)
}

// parsedJSON is a parsed tokenizer.json: the model (shareable between
// tokenizers, being immutable apart from its concurrency-safe cache) and
// the raw JSON of the other components.
type parsedJSON struct {
	model *bpeModel
	parts map[string]json.RawMessage
}

func parseTokenizerJSON(tokenizerJSON []byte) (*parsedJSON, error) {
	var (
		modelCfg  bpeConfig
		modelRaw  = map[string]json.RawMessage{}
		vocab     *vocabTable
		mergeIDs  [][2]int32
		mergeStrs [][2]string
		parts     = map[string]json.RawMessage{}
	)
	sc := &jsonScanner{b: tokenizerJSON}
	err := sc.object(func(key string) error {
		if key != "model" {
			raw, err := sc.skip()
			parts[key] = raw
			return err
		}
		return sc.object(func(mk string) error {
			switch mk {
			case "vocab":
				if sc.peek() != '{' {
					raw, err := sc.skip()
					modelRaw[mk] = raw
					return err
				}
				var vb vocabBuilder
				// Pre-size from the file size (tokenizer.json spends about
				// 60-80 bytes per vocabulary entry, vocab plus merges).
				vb.ents = make([]vocabEntry, 0, len(tokenizerJSON)/64+16)
				vb.sb.Grow(len(tokenizerJSON)/10 + 16)
				err := sc.objectBytes(func(tok []byte) error {
					id, err := sc.integer()
					if err != nil {
						return err
					}
					vb.add(tok, int32(id))
					return nil
				})
				if err != nil {
					return err
				}
				vocab, err = vb.build()
				return err
			case "merges":
				return parseMerges(sc, vocab, &mergeIDs, &mergeStrs)
			}
			raw, err := sc.skip()
			modelRaw[mk] = raw
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	mt := ""
	if r, ok := modelRaw["type"]; ok {
		_ = json.Unmarshal(r, &mt)
	}
	if mt == "" && (mergeIDs != nil || mergeStrs != nil) {
		mt = "BPE"
	}
	if mt != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: unsupported model %q (only BPE is implemented)", mt)
	}
	if vocab == nil {
		return nil, errors.New("tokenizer.json: model.vocab is missing or not an object")
	}
	mj, _ := json.Marshal(modelRaw)
	if err := json.Unmarshal(mj, &modelCfg); err != nil {
		return nil, fmt.Errorf("tokenizer.json model: %w", err)
	}
	model, err := newBPE(modelCfg, vocab, mergeIDs, mergeStrs)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json model: %w", err)
	}
	return &parsedJSON{model: model, parts: parts}, nil
}

// assemble builds a Tokenizer on the parsed model.
func (p *parsedJSON) assemble(configJSON []byte, opts Options) (*Tokenizer, error) {
	var cfg tokenConfig
	if len(configJSON) > 0 {
		if err := json.Unmarshal(configJSON, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	}
	t := &Tokenizer{model: p.model, raw: opts.Raw}
	if err := t.build(p.parts, cfg); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return t, nil
}

func (t *Tokenizer) build(parts map[string]json.RawMessage, cfg tokenConfig) error {
	var err error
	if t.normalizer, err = parseNormalizer(parts["normalizer"]); err != nil {
		return err
	}
	if t.pre, err = parsePreTokenizer(parts["pre_tokenizer"]); err != nil {
		return err
	}
	if t.decoder, err = parseDecoder(parts["decoder"]); err != nil {
		return err
	}
	if raw := parts["added_tokens"]; !isNull(raw) {
		if err := json.Unmarshal(raw, &t.added); err != nil {
			return fmt.Errorf("added_tokens: %w", err)
		}
	}
	t.indexVocab()
	if t.post, err = parsePostProcessor(parts["post_processor"], t.TokenID); err != nil {
		return err
	}
	t.needAlign = needsAlignment(t.pre)

	t.buildAddedMatchers()

	if cfg.BOS.Set {
		if id, ok := t.TokenID(cfg.BOS.Content); ok {
			t.bos = id
			t.hasBOS = true
		}
	}
	if cfg.EOS.Set {
		if id, ok := t.TokenID(cfg.EOS.Content); ok {
			t.eos = id
			t.hasEOS = true
		}
	}
	if !t.raw {
		t.cleanup = cfg.CleanUp != nil && *cfg.CleanUp
		if err := t.applyTransformersTemplate(cfg); err != nil {
			return err
		}
	}
	t.compilePostFast()
	return nil
}

// buildAddedMatchers builds the matchers of the added tokens: the special
// ones first, then the others, as the Rust AddedVocabulary orders its
// matching sets; normalized ones are matched on normalized text, in their
// normalized form. The split variants leave the special tokens out (their
// text is then tokenized as any other text).
func (t *Tokenizer) buildAddedMatchers() {
	build := func(withSpecial bool) (raw, norm *addedMatcher) {
		var rawToks, normToks []AddedToken
		var rawKeys, normKeys []string
		seen := map[string]bool{}
		for pass := range 2 {
			for _, a := range t.added {
				if a.Special != (pass == 0) || a.Content == "" || seen[a.Content] || (a.Special && !withSpecial) {
					continue
				}
				seen[a.Content] = true
				if a.Normalized {
					key := a.Content
					if t.normalizer != nil {
						key, _ = t.normalizer.normalize(key, nil)
					}
					normToks, normKeys = append(normToks, a), append(normKeys, key)
				} else {
					rawToks, rawKeys = append(rawToks, a), append(rawKeys, a.Content)
				}
			}
		}
		return newAddedMatcher(rawToks, rawKeys), newAddedMatcher(normToks, normKeys)
	}
	t.addedRaw, t.addedNorm = build(true)
	t.splitRaw, t.splitNorm = build(false)
}

// applyTransformersTemplate installs the post-processor transformers
// builds, when it builds one.
func (t *Tokenizer) applyTransformersTemplate(cfg tokenConfig) error {
	tp, err := transformersTemplate(cfg, t.TokenID)
	if err != nil || tp == nil {
		return err
	}
	t.post = *tp
	return nil
}

// transformersTemplate reproduces transformers' update_post_processor: the
// Llama and Gemma fast tokenizers always rebuild the post-processor from
// add_bos_token (default true) and add_eos_token (default false) as
// TemplateProcessing "[bos] $A [eos]"; other classes do so when either flag
// is set to true. It returns nil when the tokenizer.json post-processor
// stays.
func transformersTemplate(cfg tokenConfig, lookup func(string) (int32, bool)) (*templatePost, error) {
	cls := strings.TrimSuffix(cfg.TokenizerClass, "Fast")
	llamaLike := cls == "LlamaTokenizer" || cls == "CodeLlamaTokenizer" || cls == "GemmaTokenizer"
	addBOS := cfg.AddBOS != nil && *cfg.AddBOS
	addEOS := cfg.AddEOS != nil && *cfg.AddEOS
	if llamaLike && cfg.AddBOS == nil {
		addBOS = true
	}
	if !llamaLike && !addBOS && !addEOS {
		return nil, nil
	}
	special := func(name string, f tokenField) (templateItem, error) {
		id, ok := lookup(f.Content)
		if !f.Set || !ok {
			return templateItem{}, fmt.Errorf("tokenizer_config.json: add_%s_token is set but %s_token %q is not in the vocabulary", name, name, f.Content)
		}
		return templateItem{ids: []int32{id}, toks: []string{f.Content}}, nil
	}
	var tp templatePost
	if addBOS {
		it, err := special("bos", cfg.BOS)
		if err != nil {
			return nil, err
		}
		tp.items = append(tp.items, it)
	}
	tp.items = append(tp.items, templateItem{seq: true})
	if addEOS {
		it, err := special("eos", cfg.EOS)
		if err != nil {
			return nil, err
		}
		tp.items = append(tp.items, it)
	}
	return &tp, nil
}

func needsAlignment(p preTokenizer) bool {
	switch v := p.(type) {
	case *metaspacePre:
		return v.scheme == "first"
	case seqPre:
		for _, s := range v {
			if needsAlignment(s) {
				return true
			}
		}
	}
	return false
}

// indexVocab builds the id -> token table (added tokens win over the
// model's, as in Rust id_to_token) and the special flags used by decoding.
func (t *Tokenizer) indexVocab() {
	n := len(t.model.vocabR)
	for _, a := range t.added {
		n = max(n, int(a.ID)+1)
	}
	t.idToTok = make([]string, n)
	t.hasTok = make([]bool, n)
	copy(t.idToTok, t.model.vocabR)
	copy(t.hasTok, t.model.vocabHas)
	t.addedByContent = make(map[string]int32, len(t.added))
	specialSet := map[string]bool{}
	for _, a := range t.added {
		if a.ID < 0 {
			continue
		}
		t.idToTok[a.ID], t.hasTok[a.ID] = a.Content, true
		t.addedByContent[a.Content] = a.ID
		if a.Special {
			specialSet[a.Content] = true
		}
	}
	t.special = make([]bool, n)
	for id := range t.idToTok {
		if t.hasTok[id] && specialSet[t.idToTok[id]] {
			t.special[id] = true
		}
	}
}

// compilePostFast precomputes what the post-processor adds around a
// sequence, for EncodeIDs.
func (t *Tokenizer) compilePostFast() {
	t.postPre, t.postSuf, t.postSimple = nil, nil, true
	var walk func(p postProcessor) bool
	walk = func(p postProcessor) bool {
		switch v := p.(type) {
		case nil:
			return true
		case byteLevelPost:
			return true
		case templatePost:
			pre, suf, ok := v.prefixSuffix()
			if !ok {
				return false
			}
			t.postPre = append(pre, t.postPre...)
			t.postSuf = append(t.postSuf, suf...)
			return true
		case seqPost:
			for _, q := range v {
				if !walk(q) {
					return false
				}
			}
			return true
		}
		return false
	}
	if !walk(t.post) {
		t.postSimple = false
	}
}

// parseMerges reads model.merges, either "a b" strings or ["a", "b"] pairs.
// When the vocabulary was read first (as tokenizer.json writes it) each
// merge is resolved to ids on the spot, on two goroutines that each take
// half of the array (the vocabulary lookups dominate loading); otherwise the
// strings are kept for newBPE.
func parseMerges(sc *jsonScanner, vocab *vocabTable, ids *[][2]int32, strs *[][2]string) error {
	if vocab == nil {
		return sc.array(func() error {
			a, b, err := parseMergeElem(sc)
			if err == nil {
				*strs = append(*strs, [2]string{string(a), string(b)})
			}
			return err
		})
	}
	if sc.peek() != '[' {
		return sc.errorf("merges is not an array")
	}
	first, cut, end, err := splitArray(sc.b, sc.i)
	if err != nil {
		return err
	}
	parse := func(from, to int, out *[][2]int32) error {
		ps := &jsonScanner{b: sc.b, i: from}
		*out = make([][2]int32, 0, (to-from)/12+16)
		for {
			if ps.peek() == ',' {
				ps.i++
			}
			if ps.peek() == ']' || ps.i >= to {
				return nil
			}
			a, b, err := parseMergeElem(ps)
			if err != nil {
				return err
			}
			ia, ok := vocab.getBytes(a)
			if !ok {
				return fmt.Errorf("merge token %q not in vocab", a)
			}
			ib, ok := vocab.getBytes(b)
			if !ok {
				return fmt.Errorf("merge token %q not in vocab", b)
			}
			*out = append(*out, [2]int32{ia, ib})
		}
	}
	var lo, hi [][2]int32
	errc := make(chan error, 1)
	go func() { errc <- parse(cut, end, &hi) }()
	err = parse(first, cut, &lo)
	if err2 := <-errc; err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("merges: %w", err)
	}
	*ids = append(lo, hi...)
	sc.i = end + 1
	return nil
}

// parseMergeElem reads one merge: "a b" or ["a", "b"]. The slices alias the
// input (or fresh buffers for escaped strings).
func parseMergeElem(sc *jsonScanner) (a, b []byte, err error) {
	if sc.peek() == '[' {
		var pair [2][]byte
		k := 0
		err := sc.array(func() error {
			s, err := sc.strBytes()
			if k < 2 {
				pair[k] = s
			}
			k++
			return err
		})
		if err == nil && k != 2 {
			err = fmt.Errorf("merge has %d parts", k)
		}
		return pair[0], pair[1], err
	}
	s, err := sc.strBytes()
	if err != nil {
		return nil, nil, err
	}
	sp := bytes.IndexByte(s, ' ')
	if sp < 0 || bytes.IndexByte(s[sp+1:], ' ') >= 0 {
		return nil, nil, fmt.Errorf("merge %q is not two space-separated tokens", s)
	}
	return s[:sp], s[sp+1:], nil
}

// splitArray scans the JSON array opening at b[open] and returns the offset
// just after '[', the offset of an element boundary near the middle (a
// position where an element starts or the array ends), and the offset of
// the closing ']'.
func splitArray(b []byte, open int) (first, cut, end int, err error) {
	first = open + 1
	mid := open + (len(b)-open)/2
	cut = -1
	depth := 0
	for i := open; i < len(b); i++ {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				if cut < 0 {
					cut = i
				}
				return first, cut, i, nil
			}
		case ',':
			if depth == 1 && cut < 0 && i >= mid {
				cut = i + 1
			}
		}
	}
	return 0, 0, 0, errors.New("merges: unterminated array")
}
