package grammar_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/internal/fixtures"
)

var maskbenchAll = flag.Bool("maskbench", false, "score every MaskBench fixture (slow); by default every 8th")

// maskbenchFile is one fixture of ../shared/fixtures/jsonschema/data.
type maskbenchFile struct {
	Schema json.RawMessage `json:"schema"`
	Tests  []struct {
		Valid bool            `json:"valid"`
		Data  json.RawMessage `json:"data"`
	} `json:"tests"`
}

// maskbenchScore counts outcomes as MaskBench does (the fixture README).
type maskbenchScore struct {
	files, passing, compileErrors, validationErrors, invalidationErrors, valid, invalid int
	compile                                                                             []time.Duration
	invalidated                                                                         []string // files with an invalidation error
	refused                                                                             []string // files with a validation error
	errors                                                                              map[string]int
}

// compactData re-encodes an instance as compact JSON, keeping its key
// order and number literals.
func compactData(raw json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func scoreMaskBench(t *testing.T, every int) maskbenchScore {
	dir := fixtures.Path(t, "jsonschema", "data")
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no MaskBench fixtures in %s: %v", dir, err)
	}
	sort.Strings(names)
	sc := maskbenchScore{errors: map[string]int{}}
	for i, name := range names {
		if i%every != 0 {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var f maskbenchFile
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sc.files++
		base := filepath.Base(name)
		t0 := time.Now()
		g, err := grammar.CompileSchema(f.Schema)
		sc.compile = append(sc.compile, time.Since(t0))
		if err != nil {
			sc.compileErrors++
			msg := err.Error()
			if i := strings.Index(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			if j := strings.Index(msg, ":"); j >= 0 {
				msg = msg[:j]
			}
			sc.errors[msg]++
			continue
		}
		pass := true
		for _, tc := range f.Tests {
			text, err := compactData(tc.Data)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m := grammar.NewMatcher(g)
			accepted := m.AdvanceBytes(text) && m.CanEnd()
			if tc.Valid {
				sc.valid++
			} else {
				sc.invalid++
			}
			switch {
			case tc.Valid && !accepted:
				sc.validationErrors++
				sc.refused = append(sc.refused, base)
				pass = false
			case !tc.Valid && accepted:
				sc.invalidationErrors++
				sc.invalidated = append(sc.invalidated, base)
				pass = false
			}
		}
		if pass {
			sc.passing++
		}
	}
	return sc
}

// TestMaskBench scores the JSON Schema compiler on the MaskBench fixtures:
// an invalid instance accepted is a failure (the one outcome a strict
// engine never allows); validation errors, compile errors and the passing
// share are reported. -maskbench scores every file (every 8th by default,
// every 16th under the race detector).
func TestMaskBench(t *testing.T) {
	every := 8
	if raceDetector {
		every = 16
	}
	if *maskbenchAll {
		every = 1
	}
	if testing.Short() {
		every = 64
	}
	sc := scoreMaskBench(t, every)
	slices.Sort(sc.compile)
	q := func(p float64) time.Duration {
		return sc.compile[min(len(sc.compile)-1, int(p*float64(len(sc.compile))))]
	}
	t.Logf("MaskBench, %d files (every %d): passing %d (%.1f%%), compile errors %d, validation errors %d of %d valid, invalidation errors %d of %d invalid; compile p50 %v p99 %v",
		sc.files, every, sc.passing, 100*float64(sc.passing)/float64(sc.files), sc.compileErrors, sc.validationErrors, sc.valid,
		sc.invalidationErrors, sc.invalid, q(0.5), q(0.99))
	type kv struct {
		k string
		n int
	}
	var errs []kv
	for k, n := range sc.errors {
		errs = append(errs, kv{k, n})
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].n > errs[j].n })
	var lines []string
	for i, e := range errs {
		if i == 12 {
			break
		}
		lines = append(lines, fmt.Sprintf("%5d %s", e.n, e.k))
	}
	t.Logf("compile errors by reason:\n%s", strings.Join(lines, "\n"))
	if len(sc.refused) > 0 {
		t.Logf("validation errors in: %s", strings.Join(firstN(sc.refused, 20), " "))
	}
	if sc.invalidationErrors > 0 {
		t.Errorf("%d invalid instances accepted, in: %s", sc.invalidationErrors, strings.Join(firstN(sc.invalidated, 20), " "))
	}
}

func firstN(s []string, n int) []string {
	s = slices.Compact(s)
	if len(s) > n {
		return s[:n]
	}
	return s
}

// BenchmarkMaskBench: masks over the Llama 3.1 vocabulary at every token of
// the valid instances of a sample of MaskBench schemas (every 28th file,
// about 200), each schema compiled afresh, so masks cached in a grammar help
// only within one schema's instances; reports p50 and p99 over all masks,
// the same of the masks' thread CPU time (cpu-*, less inflated by a loaded
// machine; Linux only), and the grammars' mask caches after their
// instances (CacheStats.Bytes).
// An instance the grammar refuses is followed up to the refused token.
func BenchmarkMaskBench(b *testing.B) {
	tk, v := llamaVocab(b)
	dir := fixtures.Path(b, "jsonschema", "data")
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(names) == 0 {
		b.Fatalf("no MaskBench fixtures in %s: %v", dir, err)
	}
	sort.Strings(names)
	type inst struct {
		schema []byte
		ids    [][]int32
	}
	var set []inst
	for i := 0; i < len(names); i += 28 {
		data, err := os.ReadFile(names[i])
		if err != nil {
			b.Fatal(err)
		}
		var f maskbenchFile
		if err := json.Unmarshal(data, &f); err != nil {
			b.Fatalf("%s: %v", names[i], err)
		}
		in := inst{schema: f.Schema}
		for _, tc := range f.Tests {
			if text, err := compactData(tc.Data); tc.Valid && err == nil {
				in.ids = append(in.ids, tk.EncodeIDs(string(text), false))
			}
		}
		set = append(set, in)
	}
	mask := grammar.NewMask(v.Size())
	var times, cpu []time.Duration
	schemas, masks := 0, 0
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cacheBytes []int
	b.ResetTimer()
	for range b.N {
		for _, in := range set {
			g, err := grammar.CompileSchema(in.schema)
			if err != nil {
				continue
			}
			schemas++
			for _, ids := range in.ids {
				m := grammar.NewMatcher(g)
				for _, id := range ids {
					c0, t0 := threadCPU(), time.Now()
					v.Fill(m, mask)
					times = append(times, time.Since(t0))
					cpu = append(cpu, threadCPU()-c0)
					bs, _ := tk.TokenBytes(id)
					if !mask.Has(id) || !m.AdvanceBytes(bs) {
						break
					}
				}
			}
			cacheBytes = append(cacheBytes, g.CacheStats().Bytes)
		}
	}
	masks = len(times)
	slices.Sort(times)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(times[len(times)/2]), "p50-µs")
	b.ReportMetric(us(times[len(times)*99/100]), "p99-µs")
	b.ReportMetric(us(times[len(times)-1]), "max-µs")
	slices.Sort(cpu)
	b.ReportMetric(us(cpu[len(cpu)/2]), "cpu-p50-µs")
	b.ReportMetric(us(cpu[len(cpu)*99/100]), "cpu-p99-µs")
	b.ReportMetric(float64(masks)/float64(b.N), "masks")
	b.ReportMetric(float64(schemas)/float64(b.N), "schemas")
	slices.Sort(cacheBytes)
	b.ReportMetric(float64(cacheBytes[len(cacheBytes)/2])/1024, "cache-p50-KB")
	b.ReportMetric(float64(cacheBytes[len(cacheBytes)-1])/1024, "cache-max-KB")
}
