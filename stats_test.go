package troupe

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/internal/syncbuf"
)

func TestStatsAttrs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prev, cur  *actors.SchedulerStats
		dt         time.Duration
		active     bool
		want, none []string
	}{
		{"idle logs nothing", &actors.SchedulerStats{PromptTokens: 5}, &actors.SchedulerStats{PromptTokens: 5}, time.Second, false, nil, nil},
		{"throughput over the interval", &actors.SchedulerStats{PromptTokens: 100, GeneratedTokens: 10},
			&actors.SchedulerStats{Running: 2, Waiting: 1, PromptTokens: 300, GeneratedTokens: 50, PagesUsed: 25, PagesFree: 75},
			2 * time.Second, true, []string{"running=2", "waiting=1", "prompt_tok_s=100.0", "gen_tok_s=20.0", "kv_used=25%"}, []string{"cache_hit", "preemptions"}},
		{"cache share of the prompt tokens", nil,
			&actors.SchedulerStats{PromptTokens: 25, CachedTokens: 75, CacheEnabled: true, Preemptions: 3},
			time.Second, true, []string{"cache_hit=75%", "preemptions=3"}, nil},
		{"a running sequence is activity", &actors.SchedulerStats{}, &actors.SchedulerStats{Running: 1}, time.Second, true, []string{"gen_tok_s=0.0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs, active := statsAttrs(tc.prev, tc.cur, tc.dt)
			if active != tc.active {
				t.Fatalf("active %v, want %v", active, tc.active)
			}
			var b strings.Builder
			slog.New(slog.NewTextHandler(&b, nil)).Info("stats", attrs...)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("%q lacks %q", b.String(), w)
				}
			}
			for _, n := range tc.none {
				if strings.Contains(b.String(), n) {
					t.Errorf("%q has %q", b.String(), n)
				}
			}
		})
	}
}

// TestLogStats: while a generation runs, the periodic line reports it;
// once idle, the lines stop.
func TestLogStats(t *testing.T) {
	var logs syncbuf.Buffer
	rt, err := Start(context.Background(), Options{Threads: 1, Preparers: 1, KVBudget: 64 << 20,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rt.LogStats(ctx, 20*time.Millisecond)
	st, err := rt.Generate(ctx, &chat.Request{Prompt: "Once upon a time", MaxTokens: 300, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	for range st.Events {
	}
	if !strings.Contains(logs.String(), "msg=stats running=1") || !strings.Contains(logs.String(), "gen_tok_s=") ||
		strings.Contains(logs.String(), "running=1 waiting=0 prompt_tok_s=0.0 gen_tok_s=0.0") {
		t.Fatalf("no stats line while generating:\n%s", logs.String())
	}
	time.Sleep(100 * time.Millisecond) // the interval that saw the end
	n := strings.Count(logs.String(), "msg=stats")
	time.Sleep(200 * time.Millisecond)
	if m := strings.Count(logs.String(), "msg=stats"); m != n {
		t.Fatalf("%d stats lines while idle", m-n)
	}
}
