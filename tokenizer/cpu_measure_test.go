package tokenizer

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCPUMeasure(t *testing.T) {
	if os.Getenv("CPU_MEASURE") == "" {
		t.Skip()
	}
	text := benchCorpus(t)
	for _, fam := range families {
		tk := loadFamily(t, fam, false)
		ids := tk.AppendIDs(nil, text, true)
		n := 5
		if fam == "llama2" || fam == "gemma3" {
			n = 2
		}
		c0 := cpuNow()
		for range n {
			ids = tk.AppendIDs(ids[:0], text, true)
		}
		d := (cpuNow() - c0) / time.Duration(n)
		t.Logf("%s: %.1f MB/s (cpu %v per MB)", fam, float64(len(text))/1e6/d.Seconds(), d)
	}
	for _, fam := range []string{"qwen3", "llama3_1"} {
		tk := loadFamily(t, fam, false)
		prompt := "<|im_start|>user\n" + text[:17000] + "<|im_end|>\n"
		ids := tk.EncodeIDs(prompt, true)
		c0 := cpuNow()
		for range 2000 {
			ids = tk.AppendIDs(ids[:0], prompt, true)
		}
		t.Logf("%s chat prompt %d tokens: %v cpu", fam, len(ids), (cpuNow()-c0)/2000)
	}
}

func TestCPULoad(t *testing.T) {
	if os.Getenv("CPU_MEASURE") == "" {
		t.Skip()
	}
	for _, fam := range []string{"qwen3", "llama3_1", "deepseek_v3"} {
		dir := "../../shared/fixtures/tokenizers/" + fam
		best := time.Hour
		bestCPU := time.Hour
		for range 15 {
			c0, w0 := cpuNow(), time.Now()
			if _, err := Load(dir, Options{}); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(w0))
			bestCPU = min(bestCPU, cpuNow()-c0)
		}
		t.Logf("%s: best wall %v, cpu %v", fam, best, bestCPU)
	}
}
