package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/troupe-ai/troupe/gguf"
)

// GGUF metadata keys of the tokenizer, as llama.cpp writes and reads them.
const (
	// GGUFModelKey names the tokenizer type: "llama" (SentencePiece BPE
	// by scores, with byte fallback) and "gpt2" (byte-level BPE with
	// merges) are supported.
	GGUFModelKey = "tokenizer.ggml.model"
	// GGUFPreKey names the pre-tokenizer of a gpt2 vocabulary (the regex
	// that cuts text into words before BPE): "llama-bpe", "qwen2", ...
	GGUFPreKey = "tokenizer.ggml.pre"
	// GGUFChatTemplateKey holds the model's chat template (Jinja).
	GGUFChatTemplateKey = "tokenizer.chat_template"

	ggufTokensKey     = "tokenizer.ggml.tokens"
	ggufScoresKey     = "tokenizer.ggml.scores"
	ggufTypesKey      = "tokenizer.ggml.token_type"
	ggufMergesKey     = "tokenizer.ggml.merges"
	ggufBOSKey        = "tokenizer.ggml.bos_token_id"
	ggufEOSKey        = "tokenizer.ggml.eos_token_id"
	ggufUNKKey        = "tokenizer.ggml.unknown_token_id"
	ggufPADKey        = "tokenizer.ggml.padding_token_id"
	ggufAddBOSKey     = "tokenizer.ggml.add_bos_token"
	ggufAddEOSKey     = "tokenizer.ggml.add_eos_token"
	ggufAddSpaceKey   = "tokenizer.ggml.add_space_prefix"
	ggufGeneralName   = "general.name"
	ggufGeneralArchit = "general.architecture"
)

// llama.cpp's token types (tokenizer.ggml.token_type) and the attribute
// bits it derives from them.
const (
	ggufTypeNormal      = 1
	ggufTypeUnknown     = 2
	ggufTypeControl     = 3
	ggufTypeUserDefined = 4
	ggufTypeUnused      = 5
	ggufTypeByte        = 6
)

const (
	attrUnknown uint8 = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
)

// ggufPre is what a tokenizer.ggml.pre name selects: the regexes applied
// one after the other (each splits the pieces the previous one left,
// keeping the text between matches as pieces of its own), and the flags
// llama.cpp sets with it.
type ggufPre struct {
	patterns     []string
	ignoreMerges bool // a word that is a token is taken whole (Llama 3)
	addBOS       bool // default of add_bos_token
	noCleanup    bool // llama.cpp's clean_spaces is off
	noBOS        bool // no default BOS id (GLM-4)
}

// Patterns that are no HF pre-tokenizer regex of their own.
const (
	patNumber       = `\p{N}`
	patNumbers      = `\p{N}+`
	patPunctDefault = "[\\p{P}\\$\\+<=>\\^~\\|]+"
	patPunctFalcon  = "[\\p{P}\\$\\+<=>\\^~\\|`]+"
	pat3Digits      = `[0-9][0-9][0-9]`
	patBloom        = ` ?[^(\s|.,!?…。，、।۔،)]+`
	patTekken       = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patQwen35       = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patSeedCoder    = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`
	patBailing      = `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`
	patUfakzeka     = `[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patMiniCPM5     = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patExaoneMoE    = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`
	patJais2        = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`
	patTinyAyaDig   = `\d{1,3}(?=(?:\d{3})*\b)`
	patLagunaLines  = `[^\n]+|[\n]+`
	// The cased letters of the HF deepseek-llm regex, escaped: several are
	// canonical singletons (U+1F7D, U+1FBE, U+2126, U+212A ...) that text
	// tools silently normalize.
	patDeepSeekLLM = "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+"
	patDeepSeekPun = `\s?[!-/:-~！-／：-～‘-‟　-。]+`
	patTrailingWS  = `\s+\z`
	patDeepSeekCJK = `[一-龥ࠀ-一가-퟿]+`
	patNewline     = "[\r\n]"
)

// ggufPreTable maps every tokenizer.ggml.pre name troupe knows to its
// pre-tokenizer, following llama.cpp's llama-vocab.cpp (its names, its
// regexes and its flags). Where llama.cpp rewrote a Hugging Face regex
// for std::regex (no (?i:...), no look-ahead), the Hugging Face original
// is used: it is the same language, and the common ones (GPT-2, Llama 3,
// Qwen2, GPT-4o, DeepSeek-V3) have hand-written matchers here.
func ggufPreTable() map[string]ggufPre {
	gpt2 := ggufPre{patterns: []string{patGPT2}}
	llama3 := ggufPre{patterns: []string{patCL100K}, ignoreMerges: true, addBOS: true}
	cl100k := ggufPre{patterns: []string{patCL100K}}
	qwen2 := ggufPre{patterns: []string{patQwen2}, noCleanup: true}
	starcoder := ggufPre{patterns: []string{patNumber, patGPT2}}
	deepseek3 := ggufPre{patterns: []string{patDigits3, patDeepSeekC, patDeepSeek}, noCleanup: true}
	gpt4o := ggufPre{patterns: []string{patO200K}, noCleanup: true}
	bloom := ggufPre{patterns: []string{patBloom}}
	t := map[string]ggufPre{
		"default":          {patterns: []string{patPunctDefault, patGPT2, patNumbers, pat3Digits}},
		"falcon":           {patterns: []string{patPunctFalcon, patGPT2, pat3Digits}},
		"deepseek-llm":     {patterns: []string{patNewline, patDeepSeekLLM, patDeepSeekPun, patTrailingWS, patDeepSeekCJK, patNumbers}, noCleanup: true},
		"deepseek-coder":   {patterns: []string{patNewline, `\s?\p{L}+`, `\s?\p{P}+`, patDeepSeekCJK, patNumber}, noCleanup: true},
		"deepseek-v3":      deepseek3,
		"hunyuan-dense":    deepseek3,
		"hy_v4":            deepseek3,
		"joyai-llm":        deepseek3,
		"dbrx":             cl100k,
		"smaug-bpe":        cl100k,
		"glm4":             {patterns: []string{patCL100K}, noBOS: true},
		"chatglm-bpe":      {patterns: []string{patCL100K}, noBOS: true},
		"poro-chat":        {patterns: []string{patBloom}, noCleanup: true},
		"bloom":            bloom,
		"gpt3-finnish":     bloom,
		"viking":           {patterns: []string{patBloom, patNumber}, noCleanup: true},
		"tekken":           {patterns: []string{patTekken}, ignoreMerges: true, addBOS: true, noCleanup: true},
		"qwen35":           {patterns: []string{patQwen35}, noCleanup: true},
		"seed-coder":       {patterns: []string{patSeedCoder}, noCleanup: true},
		"bailingmoe":       {patterns: []string{patBailing}, noCleanup: true},
		"bailingmoe2":      {patterns: []string{patBailing}, noCleanup: true},
		"llada-moe":        {patterns: []string{patBailing}, noCleanup: true},
		"ufakzeka":         {patterns: []string{patUfakzeka}, noCleanup: true},
		"minicpm5":         {patterns: []string{patDigits3, patMiniCPM5}, ignoreMerges: true},
		"exaone-moe":       {patterns: []string{patExaoneMoE}},
		"jais-2":           {patterns: []string{patJais2}},
		"tiny_aya":         {patterns: []string{patTinyAyaDig, patO200K}, noCleanup: true},
		"cohere2moe":       {patterns: []string{patTinyAyaDig, patO200K}, noCleanup: true},
		"laguna":           {patterns: []string{patLagunaLines, patQwen2}, noCleanup: true},
		"command-r":        {patterns: []string{patNumber, patGPT2}, noCleanup: true},
		"smollm":           {patterns: []string{patNumber, patGPT2}, noCleanup: true},
		"exaone4":          gpt2,
		"chameleon":        {patterns: []string{`<sentinel:[0-9]+>`, `(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`, "([\\t\\n]|    |  )", patNumber, "[\\p{P}!-/:-@\\[-`{-~]", patGPT2}, addBOS: true, noCleanup: true},
		"grok-2":           qwen2,
		"megrez":           {patterns: []string{patQwen2}},
		"stablelm2":        {patterns: []string{patQwen2}},
		"hunyuan":          qwen2,
		"solar-open":       qwen2,
		"qwen2":            qwen2,
		"deepseek-r1-qwen": qwen2,
		"kormo":            qwen2,
		"f2llmv2":          qwen2,
		"trillion":         {patterns: []string{patGPT2}, noCleanup: true},
		"granite-docling":  {patterns: []string{patGPT2}, noCleanup: true},
	}
	for _, n := range []string{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"} {
		t[n] = llama3
	}
	for _, n := range []string{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais"} {
		t[n] = gpt2
	}
	for _, n := range []string{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"} {
		t[n] = starcoder
	}
	for _, n := range []string{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"} {
		t[n] = gpt4o
	}
	return t
}

// GGUFPreTokenizers lists the tokenizer.ggml.pre names LoadGGUF knows,
// sorted.
func GGUFPreTokenizers() []string {
	t := ggufPreTable()
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ggufPreName is the tokenizer.ggml.pre name of a pre-tokenizer given as
// its regexes in order (a tokenizer.json's Split patterns, with GPT-2's
// regex for a ByteLevel that splits and `\p{N}` for Digits that split
// every digit): the canonical name of a known one (llama-bpe, qwen2,
// gpt-2, smollm, ...), which LoadGGUF reads back to the same regexes. ok
// is false when no name has exactly these regexes.
func ggufPreName(patterns []string) (name string, ok bool) {
	t := ggufPreTable()
	for _, n := range []string{"llama-bpe", "qwen2", "gpt-2", "smollm", "deepseek-v3", "gpt-4o", "tekken", "deepseek-llm", "deepseek-coder", "falcon", "default", "bloom"} {
		if slices.Equal(t[n].patterns, patterns) {
			return n, true
		}
	}
	names := GGUFPreTokenizers()
	for _, n := range names {
		if slices.Equal(t[n].patterns, patterns) {
			return n, true
		}
	}
	return "", false
}

// GGUFPre is the tokenizer.ggml.pre name of t's pre-tokenizer
// (ggufPreName of its regexes in order: each Split that isolates a regular
// expression's matches, Digits one by one, a ByteLevel that splits by
// GPT-2's regex), for writing t into a GGUF file. A step GGUF cannot name
// is an error.
func (t *Tokenizer) GGUFPre() (string, error) {
	var steps []preTokenizer
	switch p := t.pre.(type) {
	case nil:
		return "", errors.New("tokenizer: no pre-tokenizer, which GGUF's byte-level BPE needs")
	case seqPre:
		steps = p
	default:
		steps = []preTokenizer{p}
	}
	var patterns []string
	for _, st := range steps {
		switch p := st.(type) {
		case *splitPre:
			if p.regex == "" || p.invert || p.beh != behIsolated {
				return "", errors.New("tokenizer: a pre-tokenizer step other than an isolating regular expression has no GGUF name")
			}
			patterns = append(patterns, p.regex)
		case *byteLevelPre:
			if p.useRegex {
				patterns = append(patterns, patGPT2)
			}
		default:
			return "", fmt.Errorf("tokenizer: pre-tokenizer step %T has no GGUF name", st)
		}
	}
	name, ok := ggufPreName(patterns)
	if !ok {
		return "", fmt.Errorf("tokenizer: its pre-tokenizer (%q) has no tokenizer.ggml.pre name llama.cpp knows", patterns)
	}
	return name, nil
}

// LoadGGUF reads the tokenizer stored in a GGUF file's metadata (see
// LoadGGUFFile).
func LoadGGUF(path string, opts Options) (*Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	return LoadGGUFFile(f, opts)
}

// LoadGGUFFile builds the Tokenizer of a GGUF file's tokenizer.ggml.*
// metadata, encoding as llama.cpp's llama_tokenize does (what llama-tokenize
// prints):
//
//   - "gpt2": byte-level BPE over tokenizer.ggml.merges, after the
//     pre-tokenizer regexes named by tokenizer.ggml.pre (GGUFPreTokenizers;
//     an unknown name is an error).
//   - "llama": SentencePiece-style BPE, merging at each step the adjacent
//     pair whose concatenation is the token with the highest score
//     (leftmost first on equal scores), bytes not covered by a token as
//     <0xNN> byte tokens, spaces as "▁", and a "▁" prepended to each text
//     segment (unless tokenizer.ggml.add_space_prefix is false).
//
// Tokens of type CONTROL, USER_DEFINED or UNKNOWN (and the end-of-generation
// and fill-in-the-middle tokens llama.cpp recognises by their text) are
// matched in the text before anything else; CONTROL and UNKNOWN ones are
// special (EncodeSplitSpecial and skipSpecial decoding leave them out), as
// llama.cpp's parse_special does. BOS and EOS come from
// tokenizer.ggml.bos_token_id / eos_token_id and are added as
// add_bos_token / add_eos_token say, with llama.cpp's defaults when a key
// is missing. Unless opts.Raw is set, decoding applies
// clean_up_tokenization_spaces where llama.cpp's detokenizer cleans spaces.
//
// Special tokens that overlap each other in the text are resolved leftmost
// longest (llama.cpp tries them longest first over the whole text); real
// vocabularies have no such overlaps.
func LoadGGUFFile(f *gguf.File, opts Options) (*Tokenizer, error) {
	t, err := loadGGUF(f, opts)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", f.Path, err)
	}
	return t, nil
}

// GGUFChatTemplate returns the chat template a GGUF file carries under
// tokenizer.chat_template, or "" when it has none. A value that is not a
// string is an error.
func GGUFChatTemplate(f *gguf.File) (string, error) {
	if !f.Has(GGUFChatTemplateKey) {
		return "", nil
	}
	s, err := f.String(GGUFChatTemplateKey)
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	return s, nil
}

// GGUFNamedChatTemplates returns the extra chat templates a GGUF file
// carries besides the default one (GGUFChatTemplate): the names listed
// under tokenizer.chat_templates, each stored under
// tokenizer.chat_template.<name> ("tool_use", "rag", ...). A file without
// them gives an empty map; a listed name without its template, or a value
// of the wrong type, is an error.
func GGUFNamedChatTemplates(f *gguf.File) (map[string]string, error) {
	out := map[string]string{}
	if !f.Has(GGUFChatTemplateKey + "s") {
		return out, nil
	}
	names, err := f.Strings(GGUFChatTemplateKey + "s")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	for _, n := range names {
		s, err := f.String(GGUFChatTemplateKey + "." + n)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: chat template %q: %w", n, err)
		}
		out[n] = s
	}
	return out, nil
}

// ggufVocab is the token table of a file.
type ggufVocab struct {
	toks   []string
	scores []float32
	attrs  []uint8
}

func loadGGUF(f *gguf.File, opts Options) (*Tokenizer, error) {
	if !f.Has(GGUFModelKey) {
		return nil, fmt.Errorf("no tokenizer in the metadata (key %q is missing)", GGUFModelKey)
	}
	kind, err := f.String(GGUFModelKey)
	if err != nil {
		return nil, err
	}
	if kind != "llama" && kind != "gpt2" {
		return nil, fmt.Errorf("%s %q is not supported (supported: \"llama\" for SentencePiece, \"gpt2\" for byte-level BPE)", GGUFModelKey, kind)
	}
	var pre ggufPre
	if kind == "gpt2" {
		name := "default"
		if f.Has(GGUFPreKey) {
			if name, err = f.String(GGUFPreKey); err != nil {
				return nil, err
			}
		}
		var ok bool
		if pre, ok = ggufPreTable()[name]; !ok {
			return nil, fmt.Errorf("%s %q is not a pre-tokenizer troupe knows (known: %s)", GGUFPreKey, name, strings.Join(GGUFPreTokenizers(), ", "))
		}
	}
	v, err := readGGUFVocab(f)
	if err != nil {
		return nil, err
	}
	adjustGGUFAttrs(v)

	// The vocabulary, with llama.cpp's rule for duplicates (an error).
	var vb vocabBuilder
	vb.ents = make([]vocabEntry, 0, len(v.toks))
	for id, tok := range v.toks {
		vb.add([]byte(tok), int32(id))
	}
	vocab, err := vb.build()
	if err != nil {
		return nil, err
	}
	if vocab.n != len(v.toks) {
		for id, tok := range v.toks {
			if got, _ := vocab.get(tok); got != int32(id) {
				return nil, fmt.Errorf("%s: duplicate token %q (ids %d and %d)", ggufTokensKey, tok, id, got)
			}
		}
	}

	// Special ids: llama.cpp's defaults, then the keys.
	ids := map[string]int32{ggufBOSKey: -1, ggufEOSKey: -1, ggufUNKKey: -1, ggufPADKey: -1}
	if kind == "llama" {
		ids[ggufBOSKey], ids[ggufEOSKey], ids[ggufUNKKey] = 1, 2, 0
	} else {
		ids[ggufEOSKey] = 11
		if !pre.noBOS {
			ids[ggufBOSKey] = 11
		}
	}
	for _, key := range []string{ggufBOSKey, ggufEOSKey, ggufUNKKey, ggufPADKey} {
		if ids[key] >= int32(len(v.toks)) {
			ids[key] = -1
		}
		if !f.Has(key) {
			continue
		}
		n, err := f.Int(key)
		if err != nil {
			return nil, err
		}
		if n >= 0 && n < len(v.toks) {
			ids[key] = int32(n)
		}
	}
	addBOS, addEOS := kind == "llama" || pre.addBOS, false
	for _, kb := range []struct {
		key string
		dst *bool
	}{{ggufAddBOSKey, &addBOS}, {ggufAddEOSKey, &addEOS}} {
		if f.Has(kb.key) {
			if *kb.dst, err = f.Bool(kb.key); err != nil {
				return nil, err
			}
		}
	}
	if addBOS && ids[ggufBOSKey] < 0 {
		return nil, fmt.Errorf("%s is true but %s is not set", ggufAddBOSKey, ggufBOSKey)
	}
	if addEOS && ids[ggufEOSKey] < 0 {
		return nil, fmt.Errorf("%s is true but %s is not set", ggufAddEOSKey, ggufEOSKey)
	}

	t := &Tokenizer{raw: opts.Raw}
	switch kind {
	case "gpt2":
		err = t.buildGGUFBPE(f, v, vocab, pre)
	case "llama":
		err = t.buildGGUFSPM(f, v, vocab, ids[ggufUNKKey])
	}
	if err != nil {
		return nil, err
	}

	// Added tokens: what llama.cpp's tokenizer_st_partition matches.
	for id, a := range v.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) == 0 {
			continue
		}
		t.added = append(t.added, AddedToken{
			ID:      int32(id),
			Content: v.toks[id],
			Special: a&(attrControl|attrUnknown) != 0,
		})
	}
	applyGGUFStrip(f, t.added)
	t.indexVocab()
	t.buildAddedMatchers()

	var tp templatePost
	if addBOS {
		id := ids[ggufBOSKey]
		tp.items = append(tp.items, templateItem{ids: []int32{id}, toks: []string{v.toks[id]}})
	}
	tp.items = append(tp.items, templateItem{seq: true})
	if addEOS {
		id := ids[ggufEOSKey]
		tp.items = append(tp.items, templateItem{ids: []int32{id}, toks: []string{v.toks[id]}})
	}
	t.post = tp
	if id := ids[ggufBOSKey]; id >= 0 {
		t.bos, t.hasBOS = id, true
	}
	if id := ids[ggufEOSKey]; id >= 0 {
		t.eos, t.hasEOS = id, true
	}
	t.cleanup = kind == "gpt2" && !pre.noCleanup && !opts.Raw
	t.needAlign = needsAlignment(t.pre)
	t.compilePostFast()
	return t, nil
}

// readGGUFVocab reads tokens, scores and token types.
func readGGUFVocab(f *gguf.File) (*ggufVocab, error) {
	if !f.Has(ggufTokensKey) {
		return nil, fmt.Errorf("metadata key %q (the vocabulary) is missing", ggufTokensKey)
	}
	toks, err := f.Strings(ggufTokensKey)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%s is empty", ggufTokensKey)
	}
	if len(toks) > math.MaxInt32 {
		return nil, fmt.Errorf("%s has %d tokens, more than an int32 id can name", ggufTokensKey, len(toks))
	}
	v := &ggufVocab{toks: slices.Clone(toks), scores: make([]float32, len(toks)), attrs: make([]uint8, len(toks))}
	for i, tok := range v.toks {
		if tok == "" {
			v.toks[i] = fmt.Sprintf("[EMPTY_%d]", i) // as llama.cpp names an empty token
		}
	}
	if f.Has(ggufScoresKey) {
		val, _ := f.Value(ggufScoresKey)
		switch {
		case val.Type() == gguf.TypeArray && val.ElemType() == gguf.TypeFloat32:
			s, _ := val.Float32s()
			if len(s) < len(toks) {
				return nil, fmt.Errorf("%s has %d scores for %d tokens", ggufScoresKey, len(s), len(toks))
			}
			copy(v.scores, s)
		case val.Type() == gguf.TypeArray && val.ElemType() == gguf.TypeInt32:
			s, _ := val.Int32s()
			if len(s) < len(toks) {
				return nil, fmt.Errorf("%s has %d scores for %d tokens", ggufScoresKey, len(s), len(toks))
			}
			for i := range v.scores {
				v.scores[i] = float32(s[i])
			}
		default:
			if _, err := f.Float32s(ggufScoresKey); err != nil {
				return nil, err
			}
		}
	}
	for i := range v.attrs {
		v.attrs[i] = attrNormal
	}
	if f.Has(ggufTypesKey) {
		types, err := f.Int32s(ggufTypesKey)
		if err != nil {
			return nil, err
		}
		if len(types) < len(toks) {
			return nil, fmt.Errorf("%s has %d entries for %d tokens", ggufTypesKey, len(types), len(toks))
		}
		for i := range v.attrs {
			switch types[i] {
			case ggufTypeNormal:
				v.attrs[i] = attrNormal
			case ggufTypeUnknown:
				v.attrs[i] = attrUnknown
			case ggufTypeControl:
				v.attrs[i] = attrControl
			case ggufTypeUserDefined:
				v.attrs[i] = attrUserDefined
			case ggufTypeUnused:
				v.attrs[i] = attrUnused
			case ggufTypeByte:
				v.attrs[i] = attrByte
			default:
				v.attrs[i] = 0
			}
		}
	}
	return v, nil
}

// ggufControlTexts returns the end-of-generation and fill-in-the-middle
// tokens llama.cpp recognises by their text and makes CONTROL whatever
// their type.
func ggufControlTexts() []string {
	return []string{
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~[",
		"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>",
		"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>",
		"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>",
		"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
		"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
	}
}

// adjustGGUFAttrs applies llama.cpp's corrections of token types by text
// (llama_vocab::impl::load): end-of-generation and FIM tokens become
// CONTROL, gpt-oss's channel tokens USER_DEFINED, and the two exceptions it
// makes for gpt-oss's "<|end|>" and Gemma 4's "</s>".
func adjustGGUFAttrs(v *ggufVocab) {
	byText := make(map[string]int, 64)
	for _, s := range ggufControlTexts() {
		byText[s] = 1
	}
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		byText[s] = 2
	}
	idOf := map[string]int{}
	for id, tok := range v.toks {
		switch byText[tok] {
		case 1:
			v.attrs[id] |= attrControl
			idOf[tok] = id
		case 2:
			v.attrs[id] = attrUserDefined
		}
	}
	has := func(s string) bool { _, ok := idOf[s]; return ok }
	if id, ok := idOf["<|end|>"]; ok && ((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"))) {
		v.attrs[id] = attrUserDefined
	}
	if id, ok := idOf["</s>"]; ok && has("<|tool_response>") {
		v.attrs[id] = attrNormal
	}
}

// applyGGUFStrip sets the lstrip / rstrip rules llama.cpp gives a few
// models by name (their files carry no per-token attributes).
func applyGGUFStrip(f *gguf.File, added []AddedToken) {
	str := func(key string) string {
		s, _ := f.String(key)
		return s
	}
	name, pre, arch := strings.ToLower(str(ggufGeneralName)), str(GGUFPreKey), str(ggufGeneralArchit)
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case containsAny(pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(arch, "nomic-bert-moe", "jina-bert-v3"):
		for i := range added {
			if added[i].Content == "<mask>" {
				added[i].LStrip = true
			}
		}
	case containsAny(name, "phi-3", "phi3"):
		for i := range added {
			switch added[i].Content {
			case "<unk>", "<s>", "<|endoftext|>":
			default:
				added[i].RStrip = true
			}
		}
	case containsAny(name, "modern-bert"):
		for i := range added {
			if added[i].Content == "[MASK]" {
				added[i].LStrip = true
			}
		}
	}
}

// buildGGUFBPE sets up byte-level BPE: merges, pre-tokenizer, decoder.
func (t *Tokenizer) buildGGUFBPE(f *gguf.File, v *ggufVocab, vocab *vocabTable, pre ggufPre) error {
	if !f.Has(ggufMergesKey) {
		return fmt.Errorf("metadata key %q is missing (a gpt2 tokenizer needs its merges)", ggufMergesKey)
	}
	raw, err := f.Strings(ggufMergesKey)
	if err != nil {
		return err
	}
	merges := make([][2]string, 0, len(raw))
	for i, mg := range raw {
		// llama.cpp splits at the first space after the first byte.
		k := -1
		if len(mg) > 1 {
			k = strings.IndexByte(mg[1:], ' ')
		}
		if k < 0 {
			return fmt.Errorf("%s[%d] %q is not two tokens separated by a space", ggufMergesKey, i, mg)
		}
		merges = append(merges, [2]string{mg[:k+1], mg[k+2:]})
	}
	m, err := newBPE(bpeConfig{Type: "BPE", IgnoreMerges: pre.ignoreMerges}, vocab, nil, merges)
	if err != nil {
		return fmt.Errorf("%s: %w", ggufMergesKey, err)
	}
	t.model = m
	var steps seqPre
	for _, p := range pre.patterns {
		mt, err := ggufMatcher(p)
		if err != nil {
			return fmt.Errorf("pre-tokenizer: %w", err)
		}
		steps = append(steps, &splitPre{m: mt, beh: behIsolated})
	}
	steps = append(steps, &byteLevelPre{})
	t.pre = steps
	if t.decoder, err = parseDecoder([]byte(`{"type":"ByteLevel"}`)); err != nil {
		return err
	}
	return nil
}

// ggufMatcher compiles one pre-tokenizer pattern; single-character classes
// are matched without a regex engine.
func ggufMatcher(p string) (matcher, error) {
	switch p {
	case patNumber:
		return runeMatcher{pred: unicode.IsNumber}, nil
	case patNewline:
		return runeMatcher{pred: func(r rune) bool { return r == '\r' || r == '\n' }}, nil
	}
	return compilePattern(p)
}

// buildGGUFSPM sets up SentencePiece-style BPE by scores.
func (t *Tokenizer) buildGGUFSPM(f *gguf.File, v *ggufVocab, vocab *vocabTable, unk int32) error {
	addSpace := true
	if f.Has(ggufAddSpaceKey) {
		var err error
		if addSpace, err = f.Bool(ggufAddSpaceKey); err != nil {
			return err
		}
	}
	cfg := bpeConfig{Type: "BPE", ByteFallback: true, FuseUnk: true}
	if unk >= 0 {
		u := v.toks[unk]
		cfg.UnkToken = &u
	}
	m, err := newBPE(cfg, vocab, nil, nil)
	if err != nil {
		return err
	}
	m.merges = scoreMerges(v, vocab)
	t.model = m

	space := replaceNormalizer{m: literalMatcher{lit: " "}, content: "▁"}
	if addSpace {
		t.normalizer = seqNormalizer{prependNormalizer{prefix: " "}, space}
	} else {
		t.normalizer = space
	}
	dec := `{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"}`
	if addSpace {
		dec += `,{"type":"Strip","content":" ","start":1,"stop":0}`
	}
	if t.decoder, err = parseDecoder([]byte(dec + `]}`)); err != nil {
		return err
	}
	return nil
}

// scoreMerges turns SentencePiece scores into a merge table: every token
// that is the concatenation of two tokens is a merge of that pair, ranked
// by its score (higher first; equal scores share a rank, so that the merge
// loop, which takes the lowest (rank, position), picks the leftmost pair
// as llama.cpp's llm_tokenizer_spm does).
func scoreMerges(v *ggufVocab, vocab *vocabTable) *mergeTable {
	distinct := slices.Clone(v.scores)
	slices.SortFunc(distinct, func(a, b float32) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	distinct = slices.Compact(distinct)
	rank := func(s float32) int32 {
		i, _ := slices.BinarySearchFunc(distinct, s, func(e, target float32) int {
			switch {
			case e > target:
				return -1
			case e < target:
				return 1
			}
			return 0
		})
		return int32(i)
	}
	mt := newMergeTable(len(v.toks))
	for id, tok := range v.toks {
		if got, _ := vocab.get(tok); got != int32(id) {
			continue
		}
		r := rank(v.scores[id])
		for k := 1; k < len(tok); k++ {
			if !isRuneStart(tok[k]) {
				continue
			}
			a, okA := vocab.get(tok[:k])
			if !okA {
				continue
			}
			b, okB := vocab.get(tok[k:])
			if !okB {
				continue
			}
			mt.put(pairKey(a, b), mergeVal{rank: r, id: int32(id)})
		}
	}
	return mt
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// LoadPath loads the tokenizer at path, which may be a folder holding
// tokenizer.json (Load; it wins when present), a GGUF file (LoadGGUF), or a
// folder without tokenizer.json that holds one GGUF model (gguf.Find).
func LoadPath(path string, opts Options) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if !st.IsDir() {
		return LoadGGUF(path, opts)
	}
	if _, err := os.Stat(filepath.Join(path, "tokenizer.json")); err == nil {
		return Load(path, opts)
	}
	g, err := gguf.Find(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s has no tokenizer.json: %w", path, err)
	}
	return LoadGGUF(g, opts)
}
