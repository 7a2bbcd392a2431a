package peerbench

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd, unsorted", []float64{300, 90, 120}, 120},
		{"even: mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"an outlier does not move it", []float64{100, 101, 0.6}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := Median(in); got != tc.want {
				t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("Median reordered its input: %v", in)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 0},
		{[]float64{90, 100, 110}, 0.2},
		{[]float64{0, 0, 0}, 0},
	} {
		if got := Spread(tc.in); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Spread(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testdata/llama-bench.json is a real `llama-bench -p 512 -n 128 -d 0,512
// -t 2 -r 3 -o json` run on a loaded machine (hence its wild samples).
func TestParseLlamaBenchRecorded(t *testing.T) {
	ts, err := ParseLlamaBench(readTestdata(t, "llama-bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 4 {
		t.Fatalf("%d tests, want 4 (pp512 and tg128 at depths 0 and 512)", len(ts))
	}
	for _, tc := range []struct {
		np, ng, depth int
		median        float64
		samples       []float64
	}{
		{512, 0, 0, 293.349, []float64{293.349, 268.053, 888.416}},
		{0, 128, 0, 82.3364, []float64{65.4907, 85.2325, 82.3364}},
		{512, 0, 512, 529.75, []float64{529.75, 598.576, 111.479}},
		{0, 128, 512, 4.78213, []float64{4.78213, 9.68676, 0.612113}},
	} {
		got, err := FindLlamaBench(ts, tc.np, tc.ng, tc.depth)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.SamplesTS, tc.samples) || got.MedianTS() != tc.median {
			t.Errorf("pp%d tg%d d%d: samples %v median %v, want %v median %v",
				tc.np, tc.ng, tc.depth, got.SamplesTS, got.MedianTS(), tc.samples, tc.median)
		}
		if got.NThreads != 2 || got.ModelSize != 269100288 {
			t.Errorf("pp%d tg%d d%d: threads %d, model size %d", tc.np, tc.ng, tc.depth, got.NThreads, got.ModelSize)
		}
	}
	if _, err := FindLlamaBench(ts, 1024, 0, 0); err == nil {
		t.Error("FindLlamaBench found a pp1024 test the output does not have")
	}
}

func TestParseLlamaBenchBad(t *testing.T) {
	for _, in := range []string{"", "[]", "{}", "llama-bench: error", `[{"n_prompt": "x"}]`} {
		if _, err := ParseLlamaBench([]byte(in)); err == nil {
			t.Errorf("ParseLlamaBench(%q) took it", in)
		}
	}
}

func TestMedianTSWithoutSamples(t *testing.T) {
	if got := (LlamaBenchTest{AvgTS: 81.5}).MedianTS(); got != 81.5 {
		t.Errorf("MedianTS without samples = %v, want avg_ts 81.5", got)
	}
}

// testdata/generate.json is a real `troupe generate --prompt-ids ... --json`
// run on the built-in demo model.
func TestParseGenerateRecorded(t *testing.T) {
	b := readTestdata(t, "generate.json")
	g, err := ParseGenerate(b, 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	if g.DecodeSteps != 3 || g.PromptMS <= 0 || g.GenerateMS <= 0 || g.Backend == "" {
		t.Fatalf("timings %+v", g)
	}
	if want := 5 / g.PromptMS * 1000; math.Abs(g.PrefillTokPerS()-want) > 1e-9 {
		t.Errorf("prefill %v tok/s, want prompt_tokens/prompt_ms = %v", g.PrefillTokPerS(), want)
	}
	if want := 3 / g.GenerateMS * 1000; math.Abs(g.DecodeTokPerS()-want) > 1e-9 {
		t.Errorf("decode %v tok/s, want decode_steps/generate_ms = %v", g.DecodeTokPerS(), want)
	}
	if _, err := ParseGenerate(b, 512, 4); err == nil || !strings.Contains(err.Error(), "want 512") {
		t.Errorf("a run with the wrong prompt length was taken: %v", err)
	}
	if _, err := ParseGenerate(b, 5, 128); err == nil {
		t.Error("a run that generated too few tokens was taken")
	}
}

func TestParseGenerateBad(t *testing.T) {
	for _, in := range []string{"", "{}", `{"ids":[1]}`, "troupe: no model"} {
		if _, err := ParseGenerate([]byte(in), 1, 1); err == nil {
			t.Errorf("ParseGenerate(%q) took it", in)
		}
	}
}

func TestTokPerSMissing(t *testing.T) {
	var g GenerateTimings
	if g.PrefillTokPerS() != 0 || g.DecodeTokPerS() != 0 {
		t.Error("empty timings give a speed")
	}
	g = GenerateTimings{PromptTokens: 1, PromptMS: 4, DecodeSteps: 0, GenerateMS: 10}
	if g.PrefillTokPerS() != 250 || g.DecodeTokPerS() != 0 {
		t.Errorf("prefill %v (want 250), decode %v (want 0: no steps)", g.PrefillTokPerS(), g.DecodeTokPerS())
	}
}

// testdata/loadgen-c8.json and loadgen-multi.json are real bench/loadgen
// summaries of llama-server on the peer model.
func TestParseLoadgenRecorded(t *testing.T) {
	s, err := ParseLoadgen(readTestdata(t, "loadgen-c8.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Load) != 1 || len(s.MultiTurn) != 0 {
		t.Fatalf("%d load levels, %d multi-turn results", len(s.Load), len(s.MultiTurn))
	}
	l := s.Load[0]
	if l.Concurrency != 8 || l.Requests != 32 || l.OutputTokPerS <= 0 || l.RequestsPerS <= 0 ||
		l.TTFTms.P50 <= 0 || l.ITLms.P50 <= 0 || l.ITLms.P99 < l.ITLms.P50 || l.OutputTokensMean != 64 {
		t.Errorf("load level %+v", l)
	}
	m, err := ParseLoadgen(readTestdata(t, "loadgen-multi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.MultiTurn) != 1 {
		t.Fatalf("%d multi-turn results", len(m.MultiTurn))
	}
	mt := m.MultiTurn[0]
	if mt.Conversations != 8 || mt.Turn2TTFTms.P50 <= 0 || mt.ColdTTFTms.P50 <= 0 || mt.Turn2PromptTokens <= mt.Turn2CachedTokens {
		t.Errorf("multi-turn %+v", mt)
	}
	if _, err := ParseLoadgen([]byte(`{"tool":"bench/loadgen"}`)); err == nil {
		t.Error("a summary without results was taken")
	}
}
