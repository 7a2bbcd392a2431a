package peerbench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestRowSpeedup(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  Row
		want float64
	}{
		{"throughput, troupe slower", Row{Troupe: 50, Llama: 100}, 0.5},
		{"throughput, troupe faster", Row{Troupe: 150, Llama: 100}, 1.5},
		{"latency, troupe faster", Row{Troupe: 50, Llama: 100, Lower: true}, 2},
		{"latency, troupe slower", Row{Troupe: 200, Llama: 100, Lower: true}, 0.5},
		{"troupe missing", Row{Llama: 100}, 0},
		{"llama missing", Row{Troupe: 100, Lower: true}, 0},
		{"NaN", Row{Troupe: math.NaN(), Llama: 1}, 0},
	} {
		if got := tc.row.Speedup(); got != tc.want {
			t.Errorf("%s: Speedup() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// kernelFixture is the recorded llama-bench run with three troupe runs of
// each shape whose speeds are easy to check.
func kernelFixture(t *testing.T) *KernelResult {
	t.Helper()
	lb, err := ParseLlamaBench(readTestdata(t, "llama-bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	k := &KernelResult{Prompt: 512, Gen: 128, LlamaBench: lb}
	// prefill 512 tokens in 1000, 800, 1600 ms: 512, 640, 320 tok/s (median 512);
	// 127 steps in 1270, 2540, 1000 ms: 100, 50, 127 tok/s (median 100).
	for _, p := range [][2]float64{{1000, 1270}, {800, 2540}, {1600, 1000}} {
		k.TroupeLong = append(k.TroupeLong, GenerateTimings{PromptTokens: 512, PromptMS: p[0], GeneratedTokens: 128, GenerateMS: p[1], DecodeSteps: 127})
	}
	// 128 steps in 1280, 1000, 1600 ms: 100, 128, 80 tok/s (median 100).
	for _, g := range []float64{1280, 1000, 1600} {
		k.TroupeShort = append(k.TroupeShort, GenerateTimings{PromptTokens: 1, PromptMS: 10, GeneratedTokens: 129, GenerateMS: g, DecodeSteps: 128})
	}
	if err := k.summarize(); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKernelMediansAndRows(t *testing.T) {
	k := kernelFixture(t)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"troupe prefill", k.TroupePrefill, 512},
		{"troupe decode d0", k.TroupeDecode0, 100},
		{"troupe decode d512", k.TroupeDecodeN, 100},
		{"llama prefill", k.LlamaPrefill, 293.349},
		{"llama decode d0", k.LlamaDecode0, 82.3364},
		{"llama decode d512", k.LlamaDecodeN, 4.78213},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	rows := k.Rows()
	if len(rows) != 3 || rows[0].Metric != "prefill pp512" || rows[1].Metric != "decode tg128 @ depth 0" || rows[2].Metric != "decode tg128 @ depth 512" {
		t.Fatalf("rows %+v", rows)
	}
	if got, want := rows[0].Speedup(), 512/293.349; math.Abs(got-want) > 1e-9 {
		t.Errorf("prefill ratio %v, want troupe/llama %v", got, want)
	}
	// troupe prefill samples 512, 640, 320: (640-320)/512.
	if got := rows[0].TroupeSpread; math.Abs(got-0.625) > 1e-9 {
		t.Errorf("troupe prefill spread %v, want 0.625", got)
	}
	if got, want := rows[0].LlamaSpread, (888.416-268.053)/293.349; math.Abs(got-want) > 1e-9 {
		t.Errorf("llama prefill spread %v, want %v", got, want)
	}
}

func TestKernelSummarizeNeedsEveryLlamaTest(t *testing.T) {
	k := kernelFixture(t)
	k.LlamaBench = k.LlamaBench[:2] // no depth-512 tests
	if err := k.summarize(); err == nil || !strings.Contains(err.Error(), "depth 512") {
		t.Errorf("summarize without the depth-512 tests: %v", err)
	}
}

func servingFixture(t *testing.T) *ServingResult {
	t.Helper()
	c8, err := ParseLoadgen(readTestdata(t, "loadgen-c8.json"))
	if err != nil {
		t.Fatal(err)
	}
	multi, err := ParseLoadgen(readTestdata(t, "loadgen-multi.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := &ServingResult{}
	s.Llama.C8, s.Llama.Multi = c8.Load[0], multi.MultiTurn[0]
	s.Troupe = s.Llama
	// troupe: twice the throughput, half the latencies, two failed requests.
	s.Troupe.C8.OutputTokPerS *= 2
	s.Troupe.C8.TTFTms.P50 /= 2
	s.Troupe.C8.Errors = 2
	return s
}

func TestServingRows(t *testing.T) {
	s := servingFixture(t)
	byName := map[string]Row{}
	for _, r := range s.Rows() {
		byName[r.Metric] = r
	}
	for _, c := range []struct {
		metric string
		want   float64
	}{
		{"c=8 output", 2},
		{"c=8 TTFT p50", 2},
		{"c=8 inter-token p50", 1},
		{"multi-turn turn-2 TTFT p50", 1},
		{"multi-turn turn-2 / cold TTFT", 1}, // the same runs on both sides
		{"c=8 + long prompts output", 0},     // no mixed run in the fixture
		{"c=1 output", 0},                    // no c=1 run in the fixture: missing on both sides
	} {
		r, ok := byName[c.metric]
		if !ok {
			t.Errorf("no row %q", c.metric)
			continue
		}
		if got := r.Speedup(); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: ratio %v, want %v", c.metric, got, c.want)
		}
	}
	if te, le := s.Errors(); te != 2 || le != 0 {
		t.Errorf("errors troupe %d llama %d, want 2 and 0", te, le)
	}
}

func TestReportTableAndJSON(t *testing.T) {
	r := &Report{
		Host: "test cpu, 2 cores", Threads: 2,
		Models:  Models{Name: ModelName, Check: WeightCheck{HFBytes: 269_030_016, GGUFBytes: 269_100_288}},
		Loads:   []LoadMark{{At: "start", LoadAvg: "1.00 2.00 3.00"}, {At: "end", LoadAvg: "4.00 5.00 6.00"}},
		Kernels: kernelFixture(t), Serving: servingFixture(t),
		Bandwidth: &Bandwidth{Copy: CopyBandwidth{Bytes: 1 << 30, Threads: 2, Best1: 10e9, BestN: 20e9, SamplesN: []float64{20e9}}},
	}
	r.Finish()
	if len(r.Notes) != 1 || strings.Contains(r.Notes[0], "busy") {
		t.Errorf("notes %q: want only the failed requests (no core count, so no busy note)", r.Notes)
	}
	if len(r.Rows) != 17 {
		t.Fatalf("%d rows, want 3 kernel + 14 serving", len(r.Rows))
	}
	if want := 269_030_016.0 * 100; r.Bandwidth.TroupeBytesPerS != want {
		t.Errorf("troupe weight reads %v B/s, want weight bytes × decode tok/s = %v", r.Bandwidth.TroupeBytesPerS, want)
	}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"prefill pp512", "1.75x", // 512 / 293.349
		"c=8 output", "2.00x",
		"llama.cpp/troupe for ms",
		"load average start:", "1.00 2.00 3.00", "4.00 5.00 6.00",
		"26.9 GB/s", // 269 MB × 100 tok/s
		"135% of copy",
		"2 failed requests on troupe",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Rows    []Row `json:"rows"`
		Kernels struct {
			LlamaBench []LlamaBenchTest  `json:"llama_bench"`
			TroupeLong []GenerateTimings `json:"troupe_long"`
		} `json:"kernels"`
		Serving struct {
			Troupe ServerRun `json:"troupe"`
		} `json:"serving"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != 17 || back.Rows[0].Ratio != r.Rows[0].Ratio || len(back.Kernels.LlamaBench) != 4 ||
		len(back.Kernels.TroupeLong) != 3 || back.Serving.Troupe.C8.Errors != 2 {
		t.Errorf("JSON lost raw numbers: %s", js[:min(len(js), 400)])
	}
}

func TestReportBusyNoteAndLoadMarks(t *testing.T) {
	for _, tc := range []struct {
		start string
		busy  bool
	}{
		{"0.31 0.40 0.52", false},
		{"1.00 0.40 0.52", false},
		{"1.50 0.40 0.52", true},
		{"7.82 7.60 7.44", true},
	} {
		k := kernelFixture(t)
		k.Loads = []LoadMark{{At: "kernels start", LoadAvg: "0.50 0.50 0.50"}, {At: "after llama-bench", LoadAvg: "2.10 1.00 0.60"}}
		r := &Report{Cores: 2, Kernels: k, Loads: []LoadMark{{At: "start", LoadAvg: tc.start}, {At: "end", LoadAvg: "2.50 1.20 0.70"}}}
		r.Finish()
		var b bytes.Buffer
		if err := r.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if got := strings.Contains(out, "the machine was busy"); got != tc.busy {
			t.Errorf("start load %s: busy note %v, want %v:\n%s", tc.start, got, tc.busy, out)
		}
		// Every mark, in time order: start, the kernels' own, end.
		i0, i1, i2, i3 := strings.Index(out, tc.start), strings.Index(out, "0.50 0.50 0.50"), strings.Index(out, "2.10 1.00 0.60"), strings.Index(out, "2.50 1.20 0.70")
		if i0 < 0 || !(i0 < i1 && i1 < i2 && i2 < i3) {
			t.Errorf("load marks missing or out of order:\n%s", out)
		}
	}
}

func TestReportFromJSON(t *testing.T) {
	r := &Report{Cores: 2, Threads: 2, Kernels: kernelFixture(t), Serving: servingFixture(t),
		Loads: []LoadMark{{At: "start", LoadAvg: "0.10 0.10 0.10"}}}
	r.Finish()
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(js)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := r.WriteTable(&a); err != nil {
		t.Fatal(err)
	}
	if err := back.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("a report read back prints differently:\n%s\nvs\n%s", a.String(), b.String())
	}
	if _, err := ReadReport([]byte(`{"rows": 3}`)); err == nil {
		t.Error("ReadReport took a malformed report")
	}
}
