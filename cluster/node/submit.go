package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/actors"
)

// Stream is one job's TokenEvents as they arrive.
type Stream struct {
	// Events ends with the event that carries a FinishReason, then closes.
	Events <-chan *actors.TokenEvent
	cancel func()
}

// Cancel stops the job (a CancelJob to the target) and ends the stream.
func (s *Stream) Cancel() { s.cancel() }

// Submit sends job to target, any actor that takes PrefillJobs: a
// Replica's Endpoint on another member, or a local SchedulerActor. The job
// is sent with a per-job receiving actor of this node as its sender, so the
// scheduler streams the TokenEvents to it over protoactor remote. The
// receiver watches target: when target stops, or its member leaves the
// cluster (the provider's topology terminates its address), the stream ends
// with an "error" event with Unavailable set instead of hanging. Ending ctx
// cancels the job.
func (n *Node) Submit(ctx context.Context, target *actor.PID, job *actors.PrefillJob) *Stream {
	events := make(chan *actors.TokenEvent, 64)
	done := make(chan struct{})     // closed by Cancel
	finished := make(chan struct{}) // closed when the receiver stops
	deliver := func(ev *actors.TokenEvent) {
		select {
		case events <- ev:
		case <-done:
		}
	}
	root := n.system.Root
	pid := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Watch(target)
		case *actors.TokenEvent:
			if m.RequestId != job.RequestId {
				return
			}
			deliver(m)
			if m.FinishReason != "" {
				c.Stop(c.Self())
			}
		case *actor.Terminated:
			if m.Who.Equal(target) {
				deliver(&actors.TokenEvent{RequestId: job.RequestId, FinishReason: "error", Unavailable: true,
					Error: "the replica left the cluster (" + m.Why.String() + ")"})
				c.Stop(c.Self())
			}
		case *actor.Stopping:
			close(events)
			close(finished)
		}
	}))
	// Sent from here rather than from Started: a Cancel that follows
	// Submit then always follows the job.
	root.RequestWithCustomSender(target, job, pid)
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			close(done)
			root.Send(target, &actors.CancelJob{RequestId: job.RequestId})
			root.Stop(pid)
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-finished:
		}
	}()
	return &Stream{Events: events, cancel: cancel}
}

// SchedulerStats asks the SchedulerActor behind endpoint (a Replica's
// Endpoint) for its counters: queue and running sequences, KV pages, cache
// hits, what a router weighs replicas by.
func (n *Node) SchedulerStats(ctx context.Context, endpoint *actor.PID) (*actors.SchedulerStats, error) {
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	res, err := n.system.Root.RequestFuture(endpoint, &actors.StatsQuery{}, timeout).Result()
	if err != nil {
		return nil, err
	}
	st, ok := res.(*actors.SchedulerStats)
	if !ok {
		return nil, fmt.Errorf("cluster node: %v answered %T to a StatsQuery", endpoint, res)
	}
	return st, nil
}
