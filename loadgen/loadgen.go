// Package loadgen is troupe's load generator: it streams OpenAI chat
// requests at a server with a fixed concurrency and reports time to first
// token, inter-token latency, throughput and the share of prompt tokens the
// server reported as cached. `troupe bench` is its command line.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Config describes a run.
type Config struct {
	URL          string // server base URL, e.g. http://127.0.0.1:8080
	Model        string
	APIKey       string
	Concurrency  int
	Requests     int // conversations to run (each MultiTurn turns)
	PromptTokens int // approximate prompt length in words (~tokens)
	MaxTokens    int
	// SharedPrefixTokens of every prompt are the same system message.
	SharedPrefixTokens int
	// MultiTurn > 1 makes each conversation K turns long: each turn resends
	// the history with the reply and a new user message.
	MultiTurn int
	Seed      uint64
	Timeout   time.Duration // per request; 0 means 5 minutes
	Client    *http.Client
}

// Report is a run's result.
type Report struct {
	Requests        int       `json:"requests"`
	Errors          int       `json:"errors"`
	DurationS       float64   `json:"duration_s"`
	RequestsPerS    float64   `json:"requests_per_s"`
	OutputTokens    int       `json:"output_tokens"`
	OutputTokPerS   float64   `json:"output_tokens_per_s"`
	PromptTokens    int       `json:"prompt_tokens"`
	CachedTokens    int       `json:"cached_tokens"`
	CachedShare     float64   `json:"cached_share"`
	TTFTms          Dist      `json:"ttft_ms"`
	InterTokenms    Dist      `json:"inter_token_ms"`
	TTFTByTurnP50ms []float64 `json:"ttft_p50_ms_by_turn,omitempty"`
	FirstError      string    `json:"first_error,omitempty"`
}

// Dist summarises a latency distribution.
type Dist struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	N   int     `json:"n"`
}

func dist(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	q := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return Dist{P50: q(0.5), P90: q(0.9), P99: q(0.99), N: len(s)}
}

var words = strings.Fields(`the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there one all we their been has when who will more no if out so said what up its about into than them can only other new some could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three`)

func text(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type sample struct {
	ttft   float64
	itl    []float64
	out    int
	prompt int
	cached int
	turn   int
	reply  string
	err    error
}

// Run executes the load and reports it.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.URL == "" || cfg.Concurrency < 1 || cfg.Requests < 1 || cfg.MaxTokens < 1 || cfg.PromptTokens < 1 {
		return nil, errors.New("loadgen: url, concurrency, requests, max tokens and prompt tokens must be set and positive")
	}
	if cfg.SharedPrefixTokens >= cfg.PromptTokens {
		return nil, fmt.Errorf("loadgen: shared prefix %d must be shorter than the prompt %d", cfg.SharedPrefixTokens, cfg.PromptTokens)
	}
	if cfg.MultiTurn < 1 {
		cfg.MultiTurn = 1
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	shared := text(rand.New(rand.NewPCG(cfg.Seed, 1)), cfg.SharedPrefixTokens)
	jobs := make(chan int)
	var mu sync.Mutex
	var samples []sample
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for conv := range jobs {
				r := rand.New(rand.NewPCG(cfg.Seed, uint64(conv)+2))
				var msgs []message
				if shared != "" {
					msgs = append(msgs, message{"system", shared})
				}
				userLen := cfg.PromptTokens - cfg.SharedPrefixTokens
				for turn := 0; turn < cfg.MultiTurn; turn++ {
					msgs = append(msgs, message{"user", text(r, userLen)})
					s := one(ctx, cfg, msgs)
					s.turn = turn
					mu.Lock()
					samples = append(samples, s)
					mu.Unlock()
					if s.err != nil {
						break
					}
					msgs = append(msgs, message{"assistant", s.reply})
				}
			}
		}()
	}
	for i := 0; i < cfg.Requests; i++ {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	rep := &Report{DurationS: elapsed}
	var ttft, itl []float64
	byTurn := make([][]float64, cfg.MultiTurn)
	for _, s := range samples {
		rep.Requests++
		if s.err != nil {
			rep.Errors++
			if rep.FirstError == "" {
				rep.FirstError = s.err.Error()
			}
			continue
		}
		ttft = append(ttft, s.ttft)
		byTurn[s.turn] = append(byTurn[s.turn], s.ttft)
		itl = append(itl, s.itl...)
		rep.OutputTokens += s.out
		rep.PromptTokens += s.prompt
		rep.CachedTokens += s.cached
	}
	rep.TTFTms, rep.InterTokenms = dist(ttft), dist(itl)
	if cfg.MultiTurn > 1 {
		for _, t := range byTurn {
			rep.TTFTByTurnP50ms = append(rep.TTFTByTurnP50ms, dist(t).P50)
		}
	}
	rep.RequestsPerS = float64(rep.Requests-rep.Errors) / elapsed
	rep.OutputTokPerS = float64(rep.OutputTokens) / elapsed
	if rep.PromptTokens > 0 {
		rep.CachedShare = float64(rep.CachedTokens) / float64(rep.PromptTokens)
	}
	return rep, nil
}

// one streams a chat request and times it.
func one(ctx context.Context, cfg Config, msgs []message) sample {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"model": cfg.Model, "messages": msgs, "max_tokens": cfg.MaxTokens, "stream": true,
		"temperature": 0, "ignore_eos": true, "stream_options": map[string]any{"include_usage": true},
	})
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(cfg.URL, "/")+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return sample{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	start := time.Now()
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return sample{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return sample{err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)}
	}
	var s sample
	var last time.Time
	var reply strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
				Details          struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Error *struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return sample{err: fmt.Errorf("bad event %q: %w", data, err)}
		}
		if chunk.Error != nil {
			return sample{err: errors.New(chunk.Error.Message)}
		}
		if chunk.Usage != nil {
			s.prompt, s.out, s.cached = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens, chunk.Usage.Details.Cached
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content == "" {
				continue
			}
			now := time.Now()
			if last.IsZero() {
				s.ttft = float64(now.Sub(start).Microseconds()) / 1000
			} else {
				s.itl = append(s.itl, float64(now.Sub(last).Microseconds())/1000)
			}
			last = now
			reply.WriteString(c.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return sample{err: err}
	}
	s.reply = reply.String()
	return s
}

// Table renders a report for people.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests        %d (%d errors) in %.2fs: %.2f req/s\n", r.Requests, r.Errors, r.DurationS, r.RequestsPerS)
	fmt.Fprintf(&b, "output tokens   %d: %.1f tok/s\n", r.OutputTokens, r.OutputTokPerS)
	fmt.Fprintf(&b, "prompt tokens   %d, cached %d (%.1f%%)\n", r.PromptTokens, r.CachedTokens, 100*r.CachedShare)
	fmt.Fprintf(&b, "TTFT ms         p50 %.1f  p90 %.1f  p99 %.1f\n", r.TTFTms.P50, r.TTFTms.P90, r.TTFTms.P99)
	fmt.Fprintf(&b, "inter-token ms  p50 %.2f  p90 %.2f  p99 %.2f\n", r.InterTokenms.P50, r.InterTokenms.P90, r.InterTokenms.P99)
	for i, v := range r.TTFTByTurnP50ms {
		fmt.Fprintf(&b, "turn %d TTFT p50 %.1f ms\n", i+1, v)
	}
	if r.FirstError != "" {
		fmt.Fprintf(&b, "first error: %s\n", r.FirstError)
	}
	return b.String()
}
