package grammar

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/tokenizer"
)

// exactTokens are a vocabulary for exactness tests: every step-th token of
// Llama 3.1, every single byte, and tokens made to sit on the edges of the
// masks' fast paths (escapes, cut characters, quotes with text, numbers,
// tails that turn plain after 64 bytes). EOS is the last.
func exactTokens(t *testing.T, step int) ([][]byte, int32) {
	t.Helper()
	tk, err := tokenizer.Load(fixtures.Path(t, "tokenizers", "llama3_1"), tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := tk.AllTokenBytes()
	var toks [][]byte
	for i := 0; i < len(all); i += step {
		toks = append(toks, all[i])
	}
	for c := range 256 {
		toks = append(toks, []byte{byte(c)})
	}
	for _, s := range []string{
		`"`, `\`, `\"`, `\\`, `\u`, `\u00`, `\u00e9`, `\u00e9abc`, `\uD83D\uDE00x`, `\n`, `\nab`, `é`, "\xc3", "\xa9", "\xa9x",
		"\xe4\xb8", "\xb8\xad", "\xad中", "中文", "\xf0\x9f\x98", "\x80abc", "\xff", "a\xc3", `","`, `":"`, `":`, `"}`, `"]`,
		`"},{"`, `, "`, `,"`, `{"`, `["`, `":"x`, `x"`, `é"`, `1`, `12`, `123`, `-0`, `-5`, `.5`, `.25,"`, `e+`, `e-3`, `1e`,
		`true`, `nul`, `null}`, `1,`, `]}`, `-1234`, `abc-`, `42"`, `@ex`, `.org`, `αβ`, `γé`, `(1`, `+a`, `)*`,
		strings.Repeat("a", 70), strings.Repeat(`\\`, 33) + "abc", strings.Repeat(`\n`, 35) + "xyz", strings.Repeat(`"`, 65) + "q",
		strings.Repeat("é", 40),
	} {
		toks = append(toks, []byte(s))
	}
	toks = append(toks, nil, nil)
	return toks, int32(len(toks) - 1)
}

// bruteMask is the mask by definition: each token whose every byte m
// takes, taken one by one, and EOS where m can end.
func bruteMask(m *Matcher, toks [][]byte, eos int32, dst Mask) {
	clear(dst)
	if m.CanEnd() {
		dst.Set(eos)
	}
	for id, bs := range toks {
		if int32(id) == eos || len(bs) == 0 {
			continue
		}
		mark := m.Mark()
		if m.AdvanceBytes(bs) {
			dst.Set(int32(id))
		}
		m.Reset(mark)
	}
}

type exactCase struct {
	name  string
	g     func(t *testing.T) *Grammar
	texts []string
}

func schemaCase(name, schema string, texts ...string) exactCase {
	return exactCase{name, func(t *testing.T) *Grammar {
		g, err := CompileSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}, texts}
}

var exactCases = []exactCase{
	schemaCase("extraction", `{"type":"object","properties":{
 "name":{"type":"string"},
 "age":{"type":"integer","minimum":0,"maximum":150},
 "role":{"enum":["admin","user","guest"]},
 "tags":{"type":"array","items":{"type":"string"},"maxItems":5},
 "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["city"]}
},"required":["name","age","role"],"additionalProperties":false}`,
		`{"name":"Ada Lovelace, Countess","age":36,"role":"admin","tags":["math","po\"etry"],"address":{"city":"Lon\u00e9don","zip":"12345"}}`,
		`{"name":"中文 😀 é","age":150,"role":"guest","tags":[],"address":{"city":"","zip":"00000"}}`),
	schemaCase("free keys", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`,
		`{"a":"caf\u00e9 \"q\" é中😀\\n\/","zz":[1,-2.5e3,true,null,{"k":"v"}],"b":12,"é\"k":"x"}`),
	schemaCase("numbers enums patterns", `{"type":"object","properties":{
 "n":{"type":"number","minimum":-5.5,"exclusiveMaximum":100},
 "e":{"enum":["x","y\"z",1,null]},
 "p":{"type":"string","pattern":"^[a-c]{2,4}-\\d+$"},
 "arr":{"type":"array","items":{"type":"integer"},"minItems":1}
},"required":["n"],"additionalProperties":{"type":"number"}}`,
		`{"n":-5.25,"e":"y\"z","p":"abc-42","arr":[3,-1,0],"x1":1e-3,"x2":-0.5}`,
		`{"n":99.999,"e":null,"arr":[10]}`),
	schemaCase("pattern prefix", `{"type":"array","items":{"type":"string","pattern":"^[^b\\u00e9]"}}`,
		`["abc","\u00e8x","中\"b"]`),
	schemaCase("bounded strings", `{"type":"object","properties":{
 "s":{"type":"string","maxLength":12},
 "t":{"type":"string","minLength":3,"maxLength":5},
 "u":{"type":"string","minLength":2},
 "o":{"anyOf":[{"type":"string","maxLength":3},{"type":"string","pattern":"^x"}]}
},"required":["s","t","u","o"],"additionalProperties":false}`,
		`{"s":"héllo \"woé","t":"abc","u":"中é","o":"xyzabcdefghi"}`,
		`{"s":"","t":"a\nbcd","u":"aaaaaaaaaaaaaaaaaaaa","o":"ab"}`),
	schemaCase("free patterns", `{"type":"object","properties":{
 "id":{"type":"string","pattern":"[a-z0-9_-]{6}"},
 "d":{"type":"string","format":"date"},
 "w":{"type":"string","pattern":"^[^\\s]*$"}
},"patternProperties":{"^_":{"type":"integer"}},"additionalProperties":{"type":"boolean"},"required":["id"]}`,
		`{"id":"\"é abc_12-x yz","d":"2024-02-29","w":"a,b;c","_x y":1,"other":true}`),
	{"regex", func(t *testing.T) *Grammar {
		return regexGrammar(t, `^(([a-z]+)@(ex|exa)\.(com|org)|\d{3}-\d{4}|[α-ω]+é?)$`, RegexOptions{Anchored: true})
	}, []string{"abc@exa.org", "555-1234", "αβγé"}},
	{"regex json", func(t *testing.T) *Grammar {
		return regexGrammar(t, `a.c\d+é`, RegexOptions{JSON: true})
	}, []string{`xa\"c12é\u00e9y`, `a中c0é`}},
	{"gbnf arithmetic", func(t *testing.T) *Grammar {
		return mustGBNF(t, `
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | [a-zé]+
`)
	}, []string{"(1+ab)*3-(x/(4))", "éa*(((2)))"}},
	{"gbnf json", func(t *testing.T) *Grammar { return mustGBNF(t, jsonGBNF) },
		[]string{`{"a": [1, -2.5e3, {"b": "c\"d\u00e9"}], "é": true}`}},
	{"json value", func(t *testing.T) *Grammar { return JSONValue() },
		[]string{`[[[{"k":[1,2,{"x":"\ud83d\ude00 y"}]}]],"z",-0.5e+2]`}},
}

// TestMaskExactStates compares Fill with bruteMask at every byte of texts
// of several grammars (JSON Schema with enums, numbers, patterns and free
// keys; regular expressions; GBNF), so in the middle of characters,
// escapes, numbers and keys: on a cold cache, again with the masks cached,
// with only the learnt transitions (masks off), and with budgets so small
// that states and masks are dropped all the time.
func TestMaskExactStates(t *testing.T) {
	step := 11
	if testing.Short() {
		step = 61
	}
	toks, eos := exactTokens(t, step)
	v := NewVocab(toks, []int32{eos})
	got := NewMask(v.Size())
	for _, c := range exactCases {
		g := c.g(t)
		// The masks by definition, at every byte of every text.
		want := make([][]Mask, len(c.texts))
		for k, text := range c.texts {
			m := NewMatcher(g)
			for i := 0; i <= len(text); i++ {
				w := NewMask(v.Size())
				bruteMask(m, toks, eos, w)
				want[k] = append(want[k], w)
				if i < len(text) && !m.Advance(text[i]) {
					t.Fatalf("%s: %q refused at %d", c.name, text, i)
				}
			}
		}
		for _, pass := range []string{"cold", "cached", "masks off", "tiny budgets"} {
			switch pass {
			case "masks off":
				g.cache = newStateCache()
				g.cache.noMasks = true
				g.cache.cur.Store(g.cache.newSet())
				// Learn the transitions first.
				for _, text := range c.texts {
					m := NewMatcher(g)
					for i := range len(text) {
						v.Fill(m, got)
						m.Advance(text[i])
					}
				}
			case "tiny budgets":
				g.cache = newStateCache()
				g.cache.stateBudget, g.cache.maskBudget = 4096, 2*8*len(got)
				g.cache.cur.Store(g.cache.newSet())
			}
			for k, text := range c.texts {
				m := NewMatcher(g)
				for i := 0; i <= len(text); i++ {
					v.Fill(m, got)
					for id := range int32(v.Size()) {
						if got.Has(id) != want[k][i].Has(id) {
							t.Fatalf("%s, %s: after %q: token %d (%q) allowed %v by the mask, %v by its bytes",
								c.name, pass, text[:i], id, toks[id], got.Has(id), want[k][i].Has(id))
						}
					}
					if i < len(text) {
						m.Advance(text[i])
					}
				}
			}
		}
	}
}

// TestMaskConcurrent: matchers of one grammar filling masks at once (with
// small budgets, so that states and masks are dropped meanwhile) get the
// masks one matcher gets alone. Run with -race.
func TestMaskConcurrent(t *testing.T) {
	toks, eos := exactTokens(t, 31)
	v := NewVocab(toks, []int32{eos})
	c := exactCases[1]
	text := c.texts[0]
	ref := NewMask(v.Size())
	var want []Mask
	m := NewMatcher(c.g(t))
	for i := 0; i <= len(text); i++ {
		bruteMask(m, toks, eos, ref)
		want = append(want, append(Mask(nil), ref...))
		if i < len(text) {
			m.Advance(text[i])
		}
	}
	g := c.g(t)
	g.cache.stateBudget, g.cache.maskBudget = 64<<10, 3*8*len(ref)
	g.cache.cur.Store(g.cache.newSet())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := NewMask(v.Size())
			for range 3 {
				m := NewMatcher(g)
				for i := 0; i <= len(text); i++ {
					// Workers start at different places of the text.
					j := (i + w*len(text)/8) % (len(text) + 1)
					m = NewMatcher(g)
					m.AdvanceBytes([]byte(text[:j]))
					v.Fill(m, got)
					for k := range got {
						if got[k] != want[j][k] {
							errs <- fmt.Errorf("worker %d after %q: masks differ", w, text[:j])
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
