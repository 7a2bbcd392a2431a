package grammar_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/internal/fixtures"
)

// BenchmarkCompile compiles every 8th MaskBench schema and reports the
// compile time's p50 and p99 (a schema that fails to compile counts too:
// its error is the answer).
func BenchmarkCompile(b *testing.B) {
	dir := fixtures.Path(b, "jsonschema", "data")
	names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	sort.Strings(names)
	var schemas [][]byte
	for i, name := range names {
		if i%8 != 0 {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		var f struct{ Schema json.RawMessage }
		if err := json.Unmarshal(data, &f); err != nil {
			b.Fatal(err)
		}
		schemas = append(schemas, f.Schema)
	}
	var times []time.Duration
	for b.Loop() {
		for _, s := range schemas {
			t0 := time.Now()
			grammar.CompileSchema(s)
			times = append(times, time.Since(t0))
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
}
