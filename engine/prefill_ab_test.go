package engine_test

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/model"
)

// loadAvg is the 1-minute load average ("?" where unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// BenchmarkPrefillPacked compares 512-token prefills of smollm2-135m (bf16,
// 2 threads) on weights as loaded and on weights packed for the prefill
// kernels (model.PackWeights), in alternating rounds of one run so that both
// see the same machine load; it logs the median tok/s of each, their ratio
// and the load averages. Each b.N iteration is one round of both.
func BenchmarkPrefillPacked(b *testing.B) {
	plain := benchModel(b, gpu.BF16)
	packed := presetModel(b, "smollm2-135m", gpu.BF16) // a second instance of the same weights
	dev, err := cpu.New(cpu.Options{Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(dev.Close)
	if _, err := model.PackWeights(packed, dev); err != nil {
		b.Fatal(err)
	}
	pool := benchPool(b, plain)
	// tok/s, and CPU seconds of the process (both threads: work plus
	// spinning), which other load on the machine moves far less.
	prefill := func(m model.Model) (float64, float64) {
		c0 := cpuSeconds()
		res := run(b, m, dev, pool, []engine.Request{{Prompt: prompt(512), MaxTokens: 1}})
		return 512 / res[0].Prefill.Seconds(), cpuSeconds() - c0
	}
	prefill(plain) // first-use costs (workspace, scratch) out of the rounds
	prefill(packed)
	var a, p, ca, cp []float64
	loads := []string{loadAvg()}
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			if (i+j)%2 == 0 {
				t, c := prefill(plain)
				a, ca = append(a, t), append(ca, c)
			} else {
				t, c := prefill(packed)
				p, cp = append(p, t), append(cp, c)
			}
		}
	}
	loads = append(loads, loadAvg())
	ma, mp := median(a), median(p)
	b.ReportMetric(ma, "plain-tok/s")
	b.ReportMetric(mp, "packed-tok/s")
	b.ReportMetric(mp/ma, "ratio")
	b.Logf("%d rounds, load %s: plain %.0f tok/s (%.0f ms CPU), packed %.0f tok/s (%.0f ms CPU): x%.3f",
		len(a), strings.Join(loads, " -> "), ma, 1e3*median(ca), mp, 1e3*median(cp), mp/ma)
}

// cpuSeconds is the CPU time of the process so far (user and system).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
