// Package load checks the k6 load scripts in this directory (chat_stream.js,
// multi_turn.js, anthropic_messages.js). k6 is not needed: the scripts run
// under the small Node.js stand-in for `k6 run` in shim/, against a real
// `troupe serve` process, and the test reads the shim's JSON summary.
// Without node on PATH the tests skip; under CI=true they fail.
package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/tests/internal/serveproc"
)

var (
	tmpDir    string
	buildOnce sync.Once
	binary    string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "troupe-load")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// troupeBinary builds the troupe command once, on first use.
func troupeBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() { binary, buildErr = serveproc.Build(tmpDir) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// needNode ends the test when Node.js (18.19 or later: module.register) is
// missing: a skip, or a failure under CI=true.
func needNode(t *testing.T) {
	t.Helper()
	msg := ""
	if _, err := exec.LookPath("node"); err != nil {
		msg = "node is not on PATH: the k6 script tests need Node.js >= 18.19 (apt-get install nodejs)"
	} else if out, err := exec.Command("node", "-e", "process.exit(typeof require('node:module').register === 'function' ? 0 : 1)").CombinedOutput(); err != nil {
		v, _ := exec.Command("node", "--version").Output()
		msg = fmt.Sprintf("node %s lacks module.register: the k6 script tests need Node.js >= 18.19 (%v %s)", bytes.TrimSpace(v), err, out)
	}
	if msg == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: these tests must run)")
	}
	t.Skip(msg)
}

// serve starts `troupe serve --threads 1` on a free loopback port with a
// tiny random-weight model that has Qwen3's real tokenizer and chat
// template, and waits until it is ready.
func serve(t *testing.T) string {
	t.Helper()
	bin := troupeBinary(t)
	model := filepath.Join(t.TempDir(), "model")
	mk := exec.Command(bin, "model", "init", "--out", model, "--preset", "tiny", "--seed", "5",
		"--tokenizer", fixtures.Path(t, "tokenizers", "qwen3"))
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("model init: %v\n%s", err, out)
	}
	s := serveproc.Start(t, bin, "--model", model, "--threads", "1")
	s.WaitReady(t, 60*time.Second)
	return s.URL
}

// summary is the part of the shim's JSON summary the tests read.
type summary struct {
	Metrics map[string]struct {
		Type       string             `json:"type"`
		Values     map[string]float64 `json:"values"`
		Thresholds map[string]struct {
			OK bool `json:"ok"`
		} `json:"thresholds"`
	} `json:"metrics"`
	Checks []struct {
		Name   string `json:"name"`
		Path   string `json:"path"`
		Passes int    `json:"passes"`
		Fails  int    `json:"fails"`
	} `json:"checks"`
	InterruptedIterations int  `json:"interrupted_iterations"`
	OK                    bool `json:"ok"`
}

// value returns metric.values[stat], failing the test when it is absent.
func (s *summary) value(t *testing.T, metric, stat string) float64 {
	t.Helper()
	m, ok := s.Metrics[metric]
	if !ok {
		t.Fatalf("summary has no metric %s", metric)
	}
	v, ok := m.Values[stat]
	if !ok {
		t.Fatalf("metric %s has no %s: %v", metric, stat, m.Values)
	}
	return v
}

// runShim runs `node shim/run.mjs script` with env on top of a clean k6
// configuration and returns the summary and the exit status.
func runShim(t *testing.T, script string, env ...string) (*summary, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("shim", "run.mjs"), script)
	// Variables the scripts read: cleared first so the caller's shell cannot leak in.
	base := []string{"BASE_URL=", "MODEL=", "API_KEY=", "VUS=", "ITERATIONS=", "DURATION=",
		"MAX_TOKENS=", "TEMPERATURE=", "PROMPT=", "TURNS=", "TTFT_PROBE="}
	cmd.Env = append(append(os.Environ(), base...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	t.Logf("node shim/run.mjs %s %v: exit %d in %v\n%s", script, env, code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("summary of %s is not JSON (%v):\n%s", script, err, stdout.String())
	}
	return &s, code
}

// passed asserts a clean run: exit 0, every check and threshold passed.
func passed(t *testing.T, s *summary, code int) {
	t.Helper()
	if code != 0 || !s.OK || s.InterruptedIterations != 0 {
		t.Errorf("exit %d, ok %v, interrupted iterations %d", code, s.OK, s.InterruptedIterations)
	}
	for _, c := range s.Checks {
		if c.Fails != 0 || c.Passes == 0 {
			t.Errorf("check %q: %d passes, %d fails", c.Name, c.Passes, c.Fails)
		}
	}
	for name, m := range s.Metrics {
		for expr, th := range m.Thresholds {
			if !th.OK {
				t.Errorf("threshold %s %s failed: %v", name, expr, m.Values)
			}
		}
	}
}

// TestShim checks the shim itself: aggregates, submetrics, checks and the
// exit status of failing thresholds, checks and iterations.
func TestShim(t *testing.T) {
	needNode(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	script := filepath.Join("shim", "testdata", "selftest.js")
	url := "BASE_URL=" + srv.URL

	s, code := runShim(t, script, url)
	passed(t, s, code)
	for metric, want := range map[string]map[string]float64{
		"selftest_trend":                 {"count": 4, "avg": 2.5, "min": 1, "med": 2.5, "max": 4, "p(95)": 3.85},
		"selftest_trend{even:yes}":       {"avg": 3},
		"selftest_counter":               {"count": 10},
		"selftest_rate":                  {"rate": 0.5, "passes": 2, "fails": 2},
		"selftest_gauge":                 {"value": 4, "min": 1, "max": 4},
		"iterations":                     {"count": 4},
		"http_reqs":                      {"count": 4},
		"http_req_failed":                {"rate": 0},
		"http_req_duration{name:health}": {"count": 4},
		"checks":                         {"passes": 20, "fails": 0},
	} {
		for stat, w := range want {
			if got := s.value(t, metric, stat); got < w-1e-9 || got > w+1e-9 {
				t.Errorf("%s %s = %v, want %v", metric, stat, got, w)
			}
		}
	}
	if len(s.Checks) != 5 || s.Checks[0].Path != "::selftest" {
		t.Errorf("checks: %+v", s.Checks)
	}

	if s, code := runShim(t, script, url, "TREND_THRESHOLD=p(95)<3"); code != 99 || s.OK || s.Metrics["selftest_trend"].Thresholds["p(95)<3"].OK {
		t.Errorf("failing threshold: exit %d (want 99), ok %v", code, s.OK)
	}
	if s, code := runShim(t, script, url, "FAIL_CHECK=1"); code != 1 || s.OK {
		t.Errorf("failing check: exit %d (want 1), ok %v", code, s.OK)
	}
	// Every iteration throws, so the metrics the thresholds watch have no
	// samples: the thresholds fail (99) before the interrupted iterations (1).
	if s, code := runShim(t, script, url, "THROW=1"); code != 99 || s.InterruptedIterations != 4 {
		t.Errorf("throwing iterations: exit %d (want 99), interrupted %d (want 4)", code, s.InterruptedIterations)
	}
}

// TestK6Scripts runs each load script for a few iterations against a real
// server and checks the custom metrics it reports.
func TestK6Scripts(t *testing.T) {
	needNode(t)
	url := serve(t)
	base := "BASE_URL=" + url

	t.Run("chat_stream", func(t *testing.T) {
		const iterations = 3
		s, code := runShim(t, "chat_stream.js", base, "ITERATIONS=3", "MAX_TOKENS=8", "TEMPERATURE=0")
		passed(t, s, code)
		for _, m := range []string{"ttft_ms", "ttfb_ms"} {
			if n := s.value(t, m, "count"); n != iterations {
				t.Errorf("%s count = %v, want %d", m, n, iterations)
			}
			if v := s.value(t, m, "min"); v <= 0 {
				t.Errorf("%s min = %v, want > 0", m, v)
			}
		}
		// A reply can end early at an end-of-turn token, and one-token
		// replies have no inter-token interval.
		if tok := s.value(t, "completion_tokens", "count"); tok < iterations || tok > 8*iterations {
			t.Errorf("completion_tokens = %v, want %d..%d", tok, iterations, 8*iterations)
		}
		if n := s.value(t, "inter_token_ms", "count"); n < 1 || n > iterations {
			t.Errorf("inter_token_ms count = %v, want 1..%d", n, iterations)
		}
		if v := s.value(t, "inter_token_ms", "avg"); v <= 0 {
			t.Errorf("inter_token_ms avg = %v, want > 0", v)
		}
		// GET /v1/models in setup, then a probe and a stream per iteration.
		if n := s.value(t, "http_reqs", "count"); n != 1+2*iterations {
			t.Errorf("http_reqs = %v, want %d", n, 1+2*iterations)
		}
		if v := s.value(t, "errors", "rate"); v != 0 {
			t.Errorf("errors rate = %v", v)
		}
	})

	t.Run("multi_turn", func(t *testing.T) {
		const conversations, turns = 2, 3
		s, code := runShim(t, "multi_turn.js", base, "ITERATIONS=2", "VUS=2", "TURNS=3", "MAX_TOKENS=8", "TEMPERATURE=0")
		passed(t, s, code)
		if n := s.value(t, "cached_token_share", "count"); n != conversations*(turns-1) {
			t.Errorf("cached_token_share count = %v, want %d (turns >= 2)", n, conversations*(turns-1))
		}
		if v := s.value(t, "cached_token_share", "min"); v <= 0 || v > 1 {
			t.Errorf("cached_token_share min = %v, want in (0, 1]: turns >= 2 reuse the earlier turns", v)
		}
		cached, prompt := s.value(t, "cached_tokens", "count"), s.value(t, "prompt_tokens", "count")
		if cached <= 0 || cached >= prompt {
			t.Errorf("cached_tokens = %v, prompt_tokens = %v", cached, prompt)
		}
		if n := s.value(t, "http_reqs", "count"); n != 1+conversations*turns {
			t.Errorf("http_reqs = %v, want %d", n, 1+conversations*turns)
		}
	})

	t.Run("anthropic_messages", func(t *testing.T) {
		const iterations = 3
		s, code := runShim(t, "anthropic_messages.js", base, "ITERATIONS=3", "MAX_TOKENS=8", "TEMPERATURE=0")
		passed(t, s, code)
		for _, m := range []string{"ttft_ms", "ttfb_ms"} {
			if n := s.value(t, m, "count"); n != iterations {
				t.Errorf("%s count = %v, want %d", m, n, iterations)
			}
			if v := s.value(t, m, "min"); v <= 0 {
				t.Errorf("%s min = %v, want > 0", m, v)
			}
		}
		if tok := s.value(t, "output_tokens", "count"); tok < iterations || tok > 8*iterations {
			t.Errorf("output_tokens = %v, want %d..%d", tok, iterations, 8*iterations)
		}
		if v := s.value(t, "errors", "rate"); v != 0 {
			t.Errorf("errors rate = %v", v)
		}
	})
}
