package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/metrics"
)

// boundaryBody is a conversation with an earlier assistant turn: a history
// boundary exists.
const boundaryBody = `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]`

// inspectBoundary reads history_boundary from an input_tokens answer.
func inspectBoundary(t *testing.T, s *server) (rendered bool, reason string) {
	t.Helper()
	resp, body := s.post(t, "/v1/chat/completions/input_tokens", boundaryBody+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("input_tokens: %d %s", resp.StatusCode, body)
	}
	var v struct {
		HistoryBoundary struct {
			Rendered bool   `json:"rendered"`
			Reason   string `json:"reason"`
		} `json:"history_boundary"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("input_tokens answer %s: %v", body, err)
	}
	return v.HistoryBoundary.Rendered, v.HistoryBoundary.Reason
}

// TestBoundarySnapshots: the kill switch through the HTTP surface, on a
// dense-KV and a snapshot-reuse model, auto and off. Off renders no
// boundary during the load (no fail-open) nor after it, the inspect reason
// says so, /metrics counts the renders it stopped as disabled, the cache
// stats report the setting, and no warm-up is prepared on the
// snapshot-reuse model (a dense-KV one keeps its warm-ups).
func TestBoundarySnapshots(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dir      func(*testing.T) string
		snapshot bool
		b        actors.BoundarySnapshots
		// history_renders_total by outcome after one inspection during
		// the load and one inspection and one generation after it.
		renders map[string]float64
	}{
		{"dense/auto", func(*testing.T) string { return "" }, false, actors.BoundarySnapshotsAuto,
			map[string]float64{metrics.FailOpen: 1, metrics.SkippedDense: 2}},
		{"dense/off", func(*testing.T) string { return "" }, false, actors.BoundarySnapshotsOff,
			map[string]float64{metrics.Disabled: 1, metrics.SkippedDense: 2}},
		{"snapshot/auto", mambaDir, true, actors.BoundarySnapshotsAuto,
			map[string]float64{metrics.FailOpen: 1, metrics.Rendered: 2}},
		{"snapshot/off", mambaDir, true, actors.BoundarySnapshotsOff,
			map[string]float64{metrics.Disabled: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off := tc.b.Off()
			s := start(t, troupe.Options{Model: tc.dir(t), PromptCache: true, BoundarySnapshots: tc.b, LoadDelay: 2 * time.Second}, troupehttp.Config{})
			// During the load the capability is unknown: auto fails open,
			// off does not.
			rendered, reason := inspectBoundary(t, s)
			if st, _ := s.rt.Status(context.Background()); st.Ready {
				t.Fatal("the slowed load finished before the inspection")
			}
			if rendered == off {
				t.Fatalf("during the load with %v: boundary rendered %v", tc.b, rendered)
			}
			if off && reason != "boundary snapshots are off (--boundary-snapshots off)" {
				t.Fatalf("during the load with off: reason %q", reason)
			}
			s.waitReady(t)
			rendered, reason = inspectBoundary(t, s)
			if want := tc.snapshot && !off; rendered != want {
				t.Fatalf("after the load: boundary rendered %v, want %v (%s)", rendered, want, reason)
			}
			if off && !strings.Contains(reason, "--boundary-snapshots off") {
				t.Fatalf("after the load with off: reason %q", reason)
			}
			if !off && tc.snapshot && reason != "" {
				t.Fatalf("a rendered boundary with a reason: %q", reason)
			}
			if resp, body := s.post(t, "/v1/chat/completions", boundaryBody+`,"max_tokens":2}`); resp.StatusCode != 200 {
				t.Fatalf("chat: %d %s", resp.StatusCode, body)
			}
			_, m := s.get(t, "/metrics")
			for _, o := range []string{metrics.Rendered, metrics.FailOpen, metrics.SkippedDense, metrics.Disabled} {
				line := fmt.Sprintf("troupe_history_renders_total{outcome=%q} %v\n", o, tc.renders[o])
				if !strings.Contains(m, line) {
					t.Errorf("/metrics lacks %q:\n%s", line, grep(m, "history_renders"))
				}
			}
			_, stats := s.get(t, "/v1/cache/stats")
			if want := fmt.Sprintf(`"boundary_snapshots":%q`, tc.b); !strings.Contains(stats, want) {
				t.Fatalf("cache stats lack %s: %s", want, stats)
			}
			// The next turn's warm-up (the chat above asked for one too).
			err := s.rt.WarmUp(context.Background(), conversation(), chat.Reply{Content: "Fine."})
			if refused := off && tc.snapshot; refused {
				if !errors.Is(err, actors.ErrBoundarySnapshotsOff) {
					t.Fatalf("warm-up on a snapshot-reuse model with off: %v", err)
				}
				time.Sleep(200 * time.Millisecond) // the chat's warm-up would have run by now
				if _, stats := s.get(t, "/v1/cache/stats"); !strings.Contains(stats, `"warm_ups":0`) {
					t.Fatalf("a warm-up ran with boundary snapshots off: %s", stats)
				}
				return
			}
			if err != nil {
				t.Fatalf("warm-up: %v", err)
			}
			waitWarmUps(t, s, 2)
		})
	}
}
