package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/troupe-ai/troupe/internal/syncbuf"
	"log/slog"
	"net"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/chat"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/templates"
)

// startWith runs a runtime with exactly opts (no test defaults) and its
// HTTP server on a loopback port; the log goes to logw when non-nil.
func startWith(t *testing.T, opts troupe.Options, cfg troupehttp.Config, logw *syncbuf.Buffer) *server {
	t.Helper()
	opts.Threads = 1
	opts.Logger = slog.New(slog.DiscardHandler)
	if logw != nil {
		opts.Logger = slog.New(slog.NewTextHandler(logw, nil))
	}
	rt, err := troupe.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := troupehttp.New(rt, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.App.Listener(ln)
	t.Cleanup(func() {
		srv.Shutdown(5 * time.Second)
		rt.Close()
	})
	return &server{rt: rt, url: "http://" + ln.Addr().String()}
}

// TestKVExhaustionDoesNotWedge is issue 12's wedge end to end: three
// concurrent long generations whose KV together overflows the pool (each
// fits alone) must all finish, with preemptions, and the server must keep
// answering meanwhile. Before the fix the scheduler looped inside one step
// forever and every later request hung.
func TestKVExhaustionDoesNotWedge(t *testing.T) {
	// The demo model keeps 4 KiB of KV per position: 1.5 MiB is 384
	// positions, and each request needs about 330. Sequences longer than a
	// step's chunk (32 tokens) are what used to wedge: admission checked only
	// the first chunk against the free and cached pages.
	s := startWith(t, troupe.Options{KVBudget: 3 << 19, Parallel: 4, PromptCache: true, StepTokens: 32}, troupehttp.Config{Parallel: 4}, nil)
	s.waitReady(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt":"request %d: tell me a long story about the sea","max_tokens":290,"ignore_eos":true}`, i)
			req, _ := nethttp.NewRequestWithContext(ctx, "POST", s.url+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := nethttp.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var out struct {
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("request %d: status %d, %v", i, resp.StatusCode, err)
				return
			}
			if out.Usage.CompletionTokens != 290 {
				errs <- fmt.Errorf("request %d: %d tokens, want 290", i, out.Usage.CompletionTokens)
			}
		}()
	}
	// While they run, the scheduler keeps answering.
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		if code, body := s.get(t, "/v1/cache/stats"); code != 200 {
			t.Errorf("/v1/cache/stats during the overload: %d %s", code, body)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st, err := s.rt.SchedulerStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions == 0 {
		t.Error("no preemptions: the pool never ran out, the test does not exercise the wedge")
	}
	if st.Running != 0 || st.Waiting != 0 {
		t.Errorf("engine not idle after every request finished: %+v", st)
	}
	if code, body := s.get(t, "/ready"); code != 200 {
		t.Errorf("/ready after the overload: %d %s", code, body)
	}
}

// TestStallWatchdog: while queued work waits longer than the stall timeout
// for an engine step, /ready answers 503 with phase "stalled" and
// troupe_scheduler_stalled reads 1; once the engine is idle again both
// recover. (A 1 ms timeout makes every ordinary step of a long prefill
// count as a stall, which exercises the watchdog without a wedged engine.)
func TestStallWatchdog(t *testing.T) {
	s := startWith(t, troupe.Options{KVBudget: 64 << 20, Parallel: 2, StallTimeout: time.Millisecond, StepTokens: 64},
		troupehttp.Config{Parallel: 2}, nil)
	s.waitReady(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := `{"prompt":"` + strings.Repeat("the sea is wide and deep ", 60) + `","max_tokens":200,"ignore_eos":true}`
		resp, err := nethttp.Post(s.url+"/v1/completions", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
	}()
	sawReady, sawMetric := false, false
	deadline := time.Now().Add(2 * time.Minute)
	for !(sawReady && sawMetric) && time.Now().Before(deadline) {
		if code, body := s.get(t, "/ready"); code == 503 && strings.Contains(body, `"phase":"stalled"`) {
			sawReady = true
		}
		if _, m := s.get(t, "/metrics"); strings.Contains(m, "troupe_scheduler_stalled 1") {
			sawMetric = true
		}
		select {
		case <-done:
			deadline = time.Now() // the generation ended: stop looking
		default:
		}
	}
	if !sawReady || !sawMetric {
		t.Fatalf("never saw the stall: /ready %v, metric %v", sawReady, sawMetric)
	}
	<-done
	if code, body := s.get(t, "/ready"); code != 200 {
		t.Errorf("/ready once idle: %d %s", code, body)
	}
	if _, m := s.get(t, "/metrics"); !strings.Contains(m, "troupe_scheduler_stalled 0") || strings.Contains(m, "troupe_scheduler_steps_total 0\n") {
		t.Errorf("metrics once idle:\n%s", grep(m, "troupe_scheduler"))
	}
}

// TestNoDeadLetterFlood: clients that leave mid-stream make the scheduler
// answer requesters that are gone; that is ordinary traffic and must not
// log a [DeadLetter] line per token. protoactor's own INFO narration
// (system started, dead letters) stays out of the log too: only its
// warnings and errors reach it.
func TestNoDeadLetterFlood(t *testing.T) {
	logs := &syncbuf.Buffer{}
	s := startWith(t, troupe.Options{KVBudget: 64 << 20, Parallel: 4}, troupehttp.Config{Parallel: 4}, logs)
	s.waitReady(t)
	for range 4 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := nethttp.NewRequestWithContext(ctx, "POST", s.url+"/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":400,"ignore_eos":true,"stream":true}`))
		resp, err := nethttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		resp.Body.Read(buf)
		cancel()
		resp.Body.Close()
	}
	time.Sleep(500 * time.Millisecond)
	if n := strings.Count(logs.String(), "[DeadLetter]"); n > 0 {
		t.Errorf("%d [DeadLetter] log lines:\n%s", n, logs.String())
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "lib=protoactor") && strings.Contains(line, "level=INFO") {
			t.Errorf("protoactor INFO line in the log: %s", line)
		}
	}
}

// TestWarmUpQueueBounded: warm-ups wait for an idle engine, so under
// traffic they queue; the queue keeps at most 32 (the newest), and a cache
// reset drops the queued ones instead of refilling the cache it emptied.
func TestWarmUpQueueBounded(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(fmt.Sprintf("reset=%v", reset), func(t *testing.T) {
			s := startWith(t, troupe.Options{KVBudget: 64 << 20, Parallel: 2, PromptCache: true}, troupehttp.Config{Parallel: 2}, nil)
			s.waitReady(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := nethttp.Post(s.url+"/v1/completions", "application/json",
					strings.NewReader(`{"prompt":"keep the engine busy","max_tokens":600,"ignore_eos":true}`))
				if err == nil {
					resp.Body.Close()
				}
			}()
			waitRunning(t, s)
			for i := range 40 {
				msgs, err := templates.DecodeJSON([]byte(fmt.Sprintf(`[{"role":"user","content":"question %d"}]`, i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := s.rt.WarmUp(context.Background(), &chat.Request{Messages: msgs.([]any)}, chat.Reply{Content: "answer"}); err != nil {
					t.Fatal(err)
				}
			}
			if reset {
				if _, err := s.rt.ResetCache(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			st, err := s.rt.SchedulerStats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Running == 0 {
				t.Skip("the generation ended before the warm-ups were queued (machine too slow to test this)")
			}
			<-done
			want := int64(32)
			if reset {
				want = 0
			}
			var got int64
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				st, err := s.rt.SchedulerStats(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if got = st.WarmUps; got >= want && st.Running == 0 && st.Waiting == 0 {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
			if st, _ := s.rt.SchedulerStats(context.Background()); st.WarmUps != want {
				t.Errorf("%d warm-ups ran, want %d", st.WarmUps, want)
			}
		})
	}
}

// waitRunning waits until the engine runs a sequence.
func waitRunning(t *testing.T, s *server) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, err := s.rt.SchedulerStats(context.Background()); err == nil && st.Running > 0 {
			return
		}
	}
	t.Fatal("no sequence started running")
}

// TestWarmUpYieldsToRequest: a request that arrives while a warm-up is
// being prefilled does not wait behind it. On a dense-KV model the warm-up
// is cut short, and what it had computed stays in the prefix cache for the
// request to reuse.
func TestWarmUpYieldsToRequest(t *testing.T) {
	s := startWith(t, troupe.Options{KVBudget: 64 << 20, StepTokens: 8, PromptCache: true}, troupehttp.Config{}, nil)
	s.waitReady(t)
	history := strings.Repeat("a long conversation so far, ", 120) // 3,360 bytes: 420 steps of 8 tokens
	msgs, err := templates.DecodeJSON([]byte(`[{"role":"user","content":"` + history + `"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.rt.WarmUp(context.Background(), &chat.Request{Messages: msgs.([]any)}, chat.Reply{Content: "answer"}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, s)
	if st, err := s.rt.SchedulerStats(context.Background()); err != nil || st.WarmUps != 0 {
		t.Skip("the warm-up ran to its end before the request could be sent (machine too fast to test this)")
	}
	body := `{"messages":[{"role":"user","content":"` + history + `"},{"role":"assistant","content":"answer"},{"role":"user","content":"next"}],"max_tokens":2,"ignore_eos":true}`
	resp, out := s.post(t, "/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	st, err := s.rt.SchedulerStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.WarmUps != 0 {
		t.Errorf("the warm-up ran to its end: the request waited behind it")
	}
	var r struct {
		Usage struct {
			Prompt  int `json:"prompt_tokens"`
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Usage.Details.Cached == 0 {
		t.Errorf("the request reused nothing of the warm-up it cut short: %s", out)
	}
	if st.Running != 0 || st.Waiting != 0 {
		t.Errorf("after the request: %d running, %d waiting (the cut-short warm-up should be gone)", st.Running, st.Waiting)
	}
}
