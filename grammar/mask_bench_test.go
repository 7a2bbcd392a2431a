package grammar_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/tokenizer"
)

// maskSchema is a typical extraction schema: nested object, enum, array,
// bounded integer, free strings.
const maskSchema = `{"type":"object","properties":{
 "name":{"type":"string"},
 "age":{"type":"integer","minimum":0,"maximum":150},
 "role":{"enum":["admin","user","guest"]},
 "tags":{"type":"array","items":{"type":"string"},"maxItems":5},
 "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["city"]}
},"required":["name","age","role"],"additionalProperties":false}`

const maskText = `{"name":"Ada Lovelace, Countess of Lovelace","age":36,"role":"admin","tags":["math","poetry"],"address":{"city":"London","zip":"12345"}}`

func llamaVocab(tb testing.TB) (*tokenizer.Tokenizer, *grammar.Vocab) {
	tb.Helper()
	tk, err := tokenizer.Load(fixtures.Path(tb, "tokenizers", "llama3_1"), tokenizer.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	eos, _ := tk.EOS()
	return tk, grammar.NewVocab(tk.AllTokenBytes(), []int32{eos})
}

// BenchmarkMask: token masks over the Llama 3.1 vocabulary (128k tokens)
// along a schema's output, token by token. p50-µs and p99-µs: each pass
// compiles the schema afresh, so masks cached in the grammar help only
// within the one output; warm-*: a second pass over the same grammar (a
// server that keeps compiled grammars); walk-*: a fresh grammar with the
// cache of whole masks off, every mask walked over the learnt states.
// cpu-*: the cold masks' thread CPU time (less inflated by a loaded
// machine; Linux only). cache-KB is the grammar's mask cache after a pass
// (CacheStats), vocab-MB the heap the Vocab takes.
func BenchmarkMask(b *testing.B) {
	tk, v := llamaVocab(b)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	v2 := grammar.NewVocab(tk.AllTokenBytes(), nil)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	vocabMB := float64(ms.HeapAlloc-before) / (1 << 20)
	runtime.KeepAlive(v2)
	ids := tk.EncodeIDs(maskText, false)
	mask := grammar.NewMask(v.Size())
	var cold, warm, walk, cpu []time.Duration
	pass := func(g *grammar.Grammar, times *[]time.Duration) {
		m := grammar.NewMatcher(g)
		for _, id := range ids {
			c0, t0 := threadCPU(), time.Now()
			v.Fill(m, mask)
			*times = append(*times, time.Since(t0))
			if times == &cold {
				cpu = append(cpu, threadCPU()-c0)
			}
			bs, _ := tk.TokenBytes(id)
			if !mask.Has(id) || !m.AdvanceBytes(bs) {
				b.Fatalf("token %d (%q) refused", id, bs)
			}
		}
	}
	compile := func() *grammar.Grammar {
		g, err := grammar.CompileSchema([]byte(maskSchema))
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	var st grammar.CacheStats
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for range b.N {
		g := compile()
		pass(g, &cold)
		st = g.CacheStats()
		pass(g, &warm)
		g = compile()
		grammar.NoMaskCache(g)
		pass(g, &walk)
	}
	reportQuantiles(b, "", cold)
	reportQuantiles(b, "warm-", warm)
	reportQuantiles(b, "walk-", walk)
	reportQuantiles(b, "cpu-", cpu)
	b.ReportMetric(float64(st.Bytes)/1024, "cache-KB")
	b.ReportMetric(float64(st.States), "states")
	b.ReportMetric(float64(st.Masks), "masks")
	b.ReportMetric(vocabMB, "vocab-MB")
}

// reportQuantiles reports p50 and p99 of times in µs, the metrics'
// names beginning with prefix.
func reportQuantiles(b *testing.B, prefix string, times []time.Duration) {
	slices.Sort(times)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(times[len(times)/2]), prefix+"p50-µs")
	b.ReportMetric(us(times[len(times)*99/100]), prefix+"p99-µs")
}

// TestMaskFollowsText: along a valid output the mask allows each next
// token, EOS only at the end, and a token that breaks the schema is refused.
func TestMaskFollowsText(t *testing.T) {
	tk, v := llamaVocab(t)
	g, err := grammar.CompileSchema([]byte(maskSchema))
	if err != nil {
		t.Fatal(err)
	}
	eos, _ := tk.EOS()
	mask := grammar.NewMask(v.Size())
	m := grammar.NewMatcher(g)
	for i, id := range tk.EncodeIDs(maskText, false) {
		v.Fill(m, mask)
		if mask.Has(eos) {
			t.Fatalf("EOS allowed before the end, at token %d", i)
		}
		bs, _ := tk.TokenBytes(id)
		if !mask.Has(id) || !m.AdvanceBytes(bs) {
			t.Fatalf("token %d (%q) refused", i, bs)
		}
	}
	v.Fill(m, mask)
	if !mask.Has(eos) || mask.Count() != 1 {
		t.Fatalf("at the end: EOS allowed %v, %d tokens allowed", mask.Has(eos), mask.Count())
	}
	// After `{"name":"x","age":` only digits may follow: a quote is refused.
	m = grammar.NewMatcher(g)
	m.AdvanceBytes([]byte(`{"name":"x","age":`))
	v.Fill(m, mask)
	for _, bad := range []string{`"`, `-`, `a`, ` `} {
		if id, ok := tk.TokenID(bad); ok && mask.Has(id) {
			t.Errorf("%q allowed where an age in 0..150 is due", bad)
		}
	}
	if id, ok := tk.TokenID("1"); !ok || !mask.Has(id) {
		t.Error(`"1" refused where an age is due`)
	}
}

// TestMaskExact: the trie walk with its fast path inside free string
// content allows exactly the tokens that taking each token's bytes one by
// one allows, at the states where the fast path matters: inside a string
// value, at the start of a key that may be an additional property, in the
// middle of a multi-byte character, after a backslash.
func TestMaskExact(t *testing.T) {
	tk, v := llamaVocab(t)
	g, err := grammar.CompileSchema([]byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	all := tk.AllTokenBytes()
	eos, _ := tk.EOS()
	got, want := grammar.NewMask(v.Size()), grammar.NewMask(v.Size())
	for _, at := range []string{`{"a":"x y`, `{"a":"x","`, "{\"a\":\"caf\xc3", `{"a":"x\`, `{"a":"x","b":1,"zz`} {
		m := grammar.NewMatcher(g)
		if !m.AdvanceBytes([]byte(at)) {
			t.Fatalf("%q refused", at)
		}
		v.Fill(m, got)
		clear(want)
		if m.CanEnd() {
			want.Set(eos)
		}
		for id, bs := range all {
			mark := m.Mark()
			if len(bs) > 0 && m.AdvanceBytes(bs) {
				want.Set(int32(id))
			}
			m.Reset(mark)
		}
		for id := range int32(v.Size()) {
			if got.Has(id) != want.Has(id) {
				t.Fatalf("after %q: token %d (%q) allowed %v by the mask, %v by its bytes", at, id, all[id], got.Has(id), want.Has(id))
			}
		}
		t.Logf("after %q: %d tokens allowed", at, got.Count())
	}
}
