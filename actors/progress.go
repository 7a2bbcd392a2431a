package actors

import (
	"sync/atomic"
	"time"
)

// Progress is the SchedulerActor's heartbeat: how many engine steps it has
// run and since when work has waited for the next one. It is read without
// asking the actor, because an actor stuck inside a step cannot answer; the
// readiness probe and the metrics read it to tell a stalled engine from a
// busy one. The zero value is ready to use; all methods are safe for
// concurrent use.
type Progress struct {
	steps atomic.Int64
	// since is when the engine last progressed while it had work (the
	// last step, or becoming busy), in Unix nanoseconds; 0 when idle.
	since atomic.Int64
}

// busy records that the engine has work; the stall clock starts now unless
// it already runs.
func (p *Progress) busy(now time.Time) {
	p.since.CompareAndSwap(0, now.UnixNano())
}

// stepped records a finished step; idle says whether work remains.
func (p *Progress) stepped(now time.Time, idle bool) {
	p.steps.Add(1)
	p.setIdle(now, idle)
}

// setIdle stops the stall clock when the engine has nothing to do.
func (p *Progress) setIdle(now time.Time, idle bool) {
	if idle {
		p.since.Store(0)
	} else {
		p.since.Store(now.UnixNano())
	}
}

// Steps is the number of engine steps run so far.
func (p *Progress) Steps() int64 { return p.steps.Load() }

// Waiting is how long work has waited for the engine to progress (0 when
// it is idle).
func (p *Progress) Waiting(now time.Time) time.Duration {
	since := p.since.Load()
	if since == 0 {
		return 0
	}
	return max(0, now.Sub(time.Unix(0, since)))
}

// Stalled reports whether work has waited longer than limit for a step.
func (p *Progress) Stalled(now time.Time, limit time.Duration) bool {
	return limit > 0 && p.Waiting(now) > limit
}
