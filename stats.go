package troupe

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-ai/troupe/actors"
)

// LogStats logs one line every interval while the server has work, as
// vLLM's periodic stats line does: sequences running and waiting, prompt
// and generation throughput over the interval, the share of prompt tokens
// the cache served, and the KV pool's use. Idle intervals log nothing. It
// returns when ctx is done.
func (r *Runtime) LogStats(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var prev *actors.SchedulerStats
	prevAt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			actx, cancel := context.WithTimeout(ctx, interval)
			cur, err := r.SchedulerStats(actx)
			cancel()
			if err != nil {
				continue // not loaded yet, or shutting down
			}
			if attrs, active := statsAttrs(prev, cur, now.Sub(prevAt)); active {
				r.opts.Logger.Info("stats", attrs...)
			}
			prev, prevAt = cur, now
		}
	}
}

// statsAttrs is the stats line between two scheduler snapshots dt apart
// (prev nil: the first), and whether anything happened in between.
func statsAttrs(prev, cur *actors.SchedulerStats, dt time.Duration) (attrs []any, active bool) {
	if prev == nil {
		prev = &actors.SchedulerStats{}
	}
	prompt := cur.PromptTokens - prev.PromptTokens
	gen := cur.GeneratedTokens - prev.GeneratedTokens
	cached := cur.CachedTokens - prev.CachedTokens
	active = cur.Running > 0 || cur.Waiting > 0 || prompt > 0 || gen > 0
	secs := dt.Seconds()
	if secs <= 0 {
		secs = 1
	}
	attrs = []any{"running", cur.Running, "waiting", cur.Waiting,
		"prompt_tok_s", fmt.Sprintf("%.1f", float64(prompt)/secs), "gen_tok_s", fmt.Sprintf("%.1f", float64(gen)/secs)}
	if cur.CacheEnabled || cur.CacheKind != "" {
		share := 0.0
		if prompt+cached > 0 {
			share = 100 * float64(cached) / float64(prompt+cached)
		}
		attrs = append(attrs, "cache_hit", fmt.Sprintf("%.0f%%", share))
	}
	if pages := cur.PagesUsed + cur.PagesFree; pages > 0 {
		attrs = append(attrs, "kv_used", fmt.Sprintf("%.0f%%", 100*float64(cur.PagesUsed)/float64(pages)))
	}
	if p := cur.Preemptions - prev.Preemptions; p > 0 {
		attrs = append(attrs, "preemptions", p)
	}
	return attrs, active
}
