// Package soak runs a real `troupe serve` under mixed traffic for a long
// time and checks that its memory, goroutines and open files stay flat.
//
// TROUPE_SOAK sets the duration (e.g. 30m, `task soak`); without it the
// test runs a 10-second smoke version that checks only that no request gets
// a 5xx and the server stays healthy (too short to judge flatness).
package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/tests/internal/serveproc"
)

// sample is one reading of the server's own process metrics.
type sample struct {
	at         time.Duration
	rss        float64 // bytes
	goroutines float64
	fds        float64
	heap       float64 // Go heap in use, bytes
}

func TestSoak(t *testing.T) {
	duration := 10 * time.Second
	long := false
	if v := os.Getenv("TROUPE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TROUPE_SOAK: %v", err)
		}
		duration, long = d, d >= 2*time.Minute
	}
	bin, err := serveproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := serveproc.Start(t, bin, "--parallel", "4", "--max-queue", "8",
		"--kv-budget", "64MiB", "--threads", "1", "--responses-max", "64")
	srv.WaitReady(t, 60*time.Second)
	url := srv.URL

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var (
		mu       sync.Mutex
		statuses = map[string]int{}
	)
	record := func(kind string, code int) {
		mu.Lock()
		statuses[kind+" "+strconv.Itoa(code)]++
		mu.Unlock()
	}
	const workers = 6
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for i := 0; ctx.Err() == nil; i++ {
				kind, code := traffic(ctx, url, rng, w, i)
				if code != 0 {
					record(kind, code)
				}
			}
		}()
	}
	var samples []sample
	start := time.Now()
	every := max(duration/20, 2*time.Second)
	tick := time.NewTicker(every)
	samples = append(samples, scrape(t, url, 0))
	for loop := true; loop; {
		select {
		case <-ctx.Done():
			loop = false
		case <-tick.C:
			samples = append(samples, scrape(t, url, time.Since(start)))
		}
	}
	tick.Stop()
	wg.Wait()
	// Let keep-alive connections and finished streams settle, then read
	// the end state.
	time.Sleep(2 * time.Second)
	samples = append(samples, scrape(t, url, time.Since(start)))

	var report strings.Builder
	fmt.Fprintf(&report, "%-8s %10s %10s %6s %5s\n", "t", "RSS MiB", "heap MiB", "gorout", "fds")
	for _, s := range samples {
		fmt.Fprintf(&report, "%-8s %10.1f %10.1f %6.0f %5.0f\n", s.at.Round(time.Second), s.rss/(1<<20), s.heap/(1<<20), s.goroutines, s.fds)
	}
	mu.Lock()
	var total, fivexx int
	var lines []string
	for k, n := range statuses {
		total += n
		lines = append(lines, fmt.Sprintf("%s: %d", k, n))
		if code, _ := strconv.Atoi(k[strings.LastIndexByte(k, ' ')+1:]); code >= 500 {
			fivexx += n
		}
	}
	mu.Unlock()
	t.Logf("%d requests over %v\n%s\nstatuses: %s", total, duration, report.String(), strings.Join(lines, ", "))
	if fivexx > 0 {
		t.Errorf("%d requests answered 5xx", fivexx)
	}
	if total < workers {
		t.Errorf("only %d requests completed", total)
	}
	if code := get(url + "/ready"); code != 200 {
		t.Errorf("/ready after the soak: %d", code)
	}
	if !long {
		return
	}
	// Flat within 10% after warm-up: the baseline is the first sample
	// after a fifth of the run; small absolute slack for tiny counts.
	base := samples[len(samples)/5]
	end := samples[len(samples)-1]
	check := func(name string, b, e, slack float64) {
		if e > b*1.10+slack {
			t.Errorf("%s grew from %.0f to %.0f after warm-up (more than 10%%)", name, b, e)
		}
	}
	check("RSS", base.rss, end.rss, 8<<20)
	check("goroutines", base.goroutines, end.goroutines, 10)
	check("open files", base.fds, end.fds, 8)
}

var systems = []string{"You are a terse assistant.", "You answer in French.", "You are a pirate."}

// traffic sends one request of a random kind: the three APIs, streams and
// not, shared system prompts (cache hits) and random ones (misses), clients
// that leave mid-stream or mid-request, and bad requests. It returns the
// kind and the HTTP status (0 when the client left before one came).
func traffic(ctx context.Context, url string, rng *rand.Rand, w, i int) (string, int) {
	sys := systems[rng.IntN(len(systems))]
	if rng.IntN(3) == 0 {
		sys = fmt.Sprintf("Conversation %d-%d-%d.", w, i, rng.Int())
	}
	user := fmt.Sprintf("Question %d from worker %d: what is %d times %d?", i, w, rng.IntN(100), rng.IntN(100))
	maxTokens := 8 + rng.IntN(40)
	stream := rng.IntN(2) == 0
	var path, body, kind string
	switch rng.IntN(5) {
	case 0, 1:
		kind, path = "chat", "/v1/chat/completions"
		body = fmt.Sprintf(`{"messages":[{"role":"system","content":%q},{"role":"user","content":%q}],"max_tokens":%d,"stream":%v}`, sys, user, maxTokens, stream)
	case 2:
		kind, path = "responses", "/v1/responses"
		body = fmt.Sprintf(`{"instructions":%q,"input":%q,"max_output_tokens":%d,"stream":%v}`, sys, user, maxTokens, stream)
	case 3:
		kind, path = "messages", "/v1/messages"
		body = fmt.Sprintf(`{"system":%q,"messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":%v}`, sys, user, maxTokens, stream)
	default:
		if rng.IntN(2) == 0 {
			kind, path = "bad", "/v1/chat/completions"
			body = `{"messages":[{"role":"user","content":"x"}],"max_tokens":-5}`
		} else {
			kind, path = "completions", "/v1/completions"
			body = fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":%v}`, sys+" "+user, maxTokens, stream)
		}
	}
	if stream {
		kind += "/stream"
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	leave := rng.IntN(6) == 0 // a client that goes away early
	if leave && !stream {
		var c context.CancelFunc
		rctx, c = context.WithTimeout(rctx, time.Duration(20+rng.IntN(200))*time.Millisecond)
		defer c()
	}
	req, _ := http.NewRequestWithContext(rctx, "POST", url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return kind, 0
	}
	defer resp.Body.Close()
	if leave && stream {
		br := bufio.NewReader(resp.Body)
		for range 3 {
			if _, err := br.ReadString('\n'); err != nil {
				break
			}
		}
		return kind + "/left", resp.StatusCode
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil && ctx.Err() == nil && !leave {
		return kind + "/cut", resp.StatusCode
	}
	return kind, resp.StatusCode
}

func scrape(t *testing.T, url string, at time.Duration) sample {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s := sample{at: at}
	for _, line := range bytes.Split(b, []byte("\n")) {
		name, value, ok := strings.Cut(string(line), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "process_resident_memory_bytes":
			s.rss = v
		case "go_goroutines":
			s.goroutines = v
		case "process_open_fds":
			s.fds = v
		case "go_memstats_heap_inuse_bytes":
			s.heap = v
		}
	}
	return s
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
