package troupe

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/engine"
)

// recordingDispatcher answers every job with its request id's length in
// tokens, and records the jobs.
type recordingDispatcher struct {
	mu   sync.Mutex
	jobs []*actors.PrefillJob
}

func (d *recordingDispatcher) Dispatch(ctx context.Context, job *actors.PrefillJob) <-chan *actors.TokenEvent {
	d.mu.Lock()
	d.jobs = append(d.jobs, job)
	d.mu.Unlock()
	out := make(chan *actors.TokenEvent, 8)
	go func() {
		defer close(out)
		out <- &actors.TokenEvent{RequestId: job.RequestId, Token: 'h', HasToken: true, PromptTokens: int32(len(job.Prompt))}
		out <- &actors.TokenEvent{RequestId: job.RequestId, Token: 'i', HasToken: true}
		out <- &actors.TokenEvent{RequestId: job.RequestId, FinishReason: "stop"}
	}()
	return out
}

// waitLoaded waits until rt reports ready, failing t if its load fails or
// ctx ends first.
func waitLoaded(ctx context.Context, t *testing.T, rt *Runtime) {
	t.Helper()
	for {
		st, err := rt.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Ready {
			return
		}
		if st.Error != "" {
			t.Fatal(st.Error)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A runtime with a Dispatcher and no weights prepares locally and
// generates through the dispatcher: ids carry the prefix, n > 1 choices
// each get a job.
func TestDispatcherRuntimeWithoutWeights(t *testing.T) {
	if _, err := Start(context.Background(), Options{NoWeights: true}); err == nil {
		t.Fatal("a runtime without weights and without a dispatcher must be refused")
	}
	d := &recordingDispatcher{}
	rt, err := Start(context.Background(), Options{NoWeights: true, Dispatcher: d, RequestIDPrefix: "member7/", Preparers: 2, Threads: 1, PromptCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waitLoaded(ctx, t, rt)
	if _, ok := rt.Limits(); ok {
		t.Fatal("a runtime without weights has no model limits")
	}
	streams, err := rt.GenerateN(ctx, &chat.Request{Prompt: "Once upon a time", MaxTokens: 4}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		var got []int32
		finish := ""
		for ev := range s.Events {
			if ev.HasToken {
				got = append(got, ev.Token)
			}
			finish = ev.FinishReason
		}
		if string(rune(got[0]))+string(rune(got[1])) != "hi" || finish != "stop" {
			t.Fatalf("choice %d: tokens %v, finish %q", i, got, finish)
		}
	}
	if len(d.jobs) != 2 {
		t.Fatalf("%d jobs dispatched, want 2", len(d.jobs))
	}
	for _, j := range d.jobs {
		if !strings.HasPrefix(j.RequestId, "member7/req-") || len(j.Prompt) == 0 {
			t.Fatalf("job %q with %d prompt tokens: want the member prefix and the prepared prompt", j.RequestId, len(j.Prompt))
		}
	}
	// The preparers are fail-open until the replicas' capability is
	// adopted, then render as for a snapshot-reuse model.
	chatReq := func() *chat.Request {
		return &chat.Request{Messages: []any{map[string]any{"role": "user", "content": "hi"}}, MaxTokens: 4}
	}
	if p, err := rt.Prepare(ctx, chatReq(), false); err != nil || p.Capability != actors.CapabilityUnknownYet {
		t.Fatalf("before adoption: capability %v, %v; want unknown", p.Capability, err)
	}
	rt.AdoptCapability(&actors.CapabilityReady{Model: "x", SnapshotReuse: true})
	adopted := false
	for i := 0; i < 200 && !adopted; i++ {
		p, err := rt.Prepare(ctx, chatReq(), false)
		if err != nil {
			t.Fatal(err)
		}
		adopted = p.Capability == actors.SnapshotReuse
		time.Sleep(5 * time.Millisecond)
	}
	if !adopted {
		t.Fatal("the preparers did not adopt the replicas' capability")
	}
	if err := rt.WarmUp(ctx, &chat.Request{Prompt: "x"}, chat.Reply{Content: "y"}); err == nil {
		t.Fatal("warm-ups are not dispatched: WarmUp must say so")
	}
}

// A capability passed on while the assets still load (a gateway adopts the
// replicas' as soon as it starts the runtime) is kept and adopted as the
// load ends without weights, not dropped: requests from readiness on render
// as for the model instead of fail-open.
func TestCapabilityAdoptedBeforeTheAssets(t *testing.T) {
	rt, err := Start(context.Background(), Options{NoWeights: true, Dispatcher: &recordingDispatcher{}, Preparers: 2, Threads: 1,
		LoadDelay: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rt.AdoptCapability(&actors.CapabilityReady{Model: "x", SnapshotReuse: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waitLoaded(ctx, t, rt)
	p, err := rt.Prepare(ctx, &chat.Request{Messages: []any{map[string]any{"role": "user", "content": "hi"}}, MaxTokens: 4}, false)
	if err != nil || p.Capability != actors.SnapshotReuse {
		t.Fatalf("first request once ready: capability %v, %v; want snapshot reuse", p.Capability, err)
	}
}

// The replicas' length limits, passed on with their capability, make a
// runtime without weights refuse what no replica can run before it
// dispatches anything (an HTTP 400 instead of a stream's error event).
func TestAdoptedLimitsRefuseEarly(t *testing.T) {
	d := &recordingDispatcher{}
	rt, err := Start(context.Background(), Options{NoWeights: true, Dispatcher: d, Preparers: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rt.AdoptCapability(&actors.CapabilityReady{Model: "x", MaxPos: 40})
	if l, ok := rt.Limits(); !ok || l.MaxPos != 40 {
		t.Fatalf("limits after adoption: %+v %v", l, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = rt.GenerateN(ctx, &chat.Request{Prompt: strings.Repeat("long prompt ", 4), MaxTokens: 40}, 1)
	var tl *engine.TooLongError
	if !errors.As(err, &tl) || tl.Limit != 40 {
		t.Fatalf("a request past the replicas' 40 positions: %v, want a TooLongError", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.jobs) != 0 {
		t.Fatalf("%d jobs dispatched, want none", len(d.jobs))
	}
}
