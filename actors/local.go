package actors

import (
	"fmt"
	"github.com/troupe-ai/troupe/grammar"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// Node-local messages: they carry pointers (tokenizer, template, weights)
// and never leave the process.

// Prepare asks a RequestPreparer to turn a chat request into a job. The
// preparer answers with a *Prepared.
type Prepare struct {
	ID string
	// Request is the API-neutral request.
	Request *chat.Request
	// PromptCache says whether the prompt cache is on (boundaries are only
	// rendered when it is).
	PromptCache bool
	// InspectOnly prepares without building a job (prompt inspection).
	InspectOnly bool
	// WarmUpReply, when set, asks for a warm-up job instead: the history the
	// next turn will share once this reply is part of the conversation.
	WarmUpReply *chat.Reply
}

// Prepared answers Prepare.
type Prepared struct {
	Prepared *chat.Prepared
	// Assets are the tokenizer and template the request was prepared with
	// (per-request output decodes with the same tokenizer).
	Assets *chat.Assets
	Job    *PrefillJob
	// Capability is what the preparer knew when it prepared the request.
	Capability Capability
	Err        error
}

// Capability is a preparer's view of the model's prompt-cache capability.
type Capability int

const (
	// CapabilityUnknownYet: the model is still loading.
	CapabilityUnknownYet Capability = iota
	// DenseKV: prefixes are reused from KV pages; no boundary is needed.
	DenseKV
	// SnapshotReuse: prefixes are reused from whole-state snapshots taken at
	// history boundaries.
	SnapshotReuse
)

func (c Capability) String() string {
	return [...]string{"unknown", "dense_kv", "snapshot_reuse"}[c]
}

// registerPreparer is a preparer's hello to the ModelActor; it answers with
// a *registration.
type registerPreparer struct{}

type registration struct {
	assets     *chat.Assets // nil while loading
	capability *CapabilityReady
	failure    error // set when the load failed
}

// loadFailed tells the preparers and the scheduler that the model will
// not load: what waits for it is answered with Unavailable, and so is
// everything after.
type loadFailed struct{ err error }

// Unavailable is the error of a request the runtime cannot serve because
// its model failed to load (an HTTP 503, not a client error).
type Unavailable struct{ Cause error }

func (e *Unavailable) Error() string { return "the model failed to load: " + e.Cause.Error() }
func (e *Unavailable) Unwrap() error { return e.Cause }

// Overloaded is the error of a request refused because the runtime is at a
// concurrency bound it enforces (an HTTP 429): retrying after RetryAfter
// may succeed.
type Overloaded struct {
	// What names the bound ("inspection requests in flight").
	What       string
	Limit      int
	RetryAfter time.Duration
}

func (e *Overloaded) Error() string {
	return fmt.Sprintf("the server is at capacity (%d %s); retry shortly", e.Limit, e.What)
}

// TimedOut is the error of a request the runtime could not serve in time
// because it is busy (an HTTP 503 with Retry-After), e.g. no preparer
// answered within the prepare timeout.
type TimedOut struct {
	// What names the step that timed out ("prepare").
	What       string
	After      time.Duration
	RetryAfter time.Duration
}

func (e *TimedOut) Error() string {
	return fmt.Sprintf("the server is busy: %s did not finish within %v; retry shortly", e.What, e.After)
}

// TooLarge is the error of an input over a size limit the runtime enforces
// (an HTTP 413): Size and Limit are in Unit ("bytes of text", "tokens").
type TooLarge struct {
	What        string
	Size, Limit int
	Unit        string
}

func (e *TooLarge) Error() string {
	return fmt.Sprintf("%s is %d %s, over the limit of %d", e.What, e.Size, e.Unit, e.Limit)
}

// assetsReady carries the tokenizer and template to a preparer.
type assetsReady struct{ assets *chat.Assets }

// modelReady hands the loaded model to the SchedulerActor.
type modelReady struct {
	model model.Model
	dev   gpu.Device
	pool  *kvcache.Pool
	// guides make the structured-output guides of constrained jobs (nil:
	// no assets, such jobs fail).
	guides *grammar.Guides
}

// loadPhase, assetsLoaded and modelLoaded report the ModelActor's loading
// goroutine back to the actor.
type loadPhase struct{ phase string }
type assetsLoaded struct {
	assets *chat.Assets
	err    error
}
type modelLoaded struct {
	model model.Model
	dev   gpu.Device
	pool  *kvcache.Pool
	err   error
}

// step is the SchedulerActor's message to itself: run one engine step.
type step struct{}

// Pids names the actors of one model.
type Pids struct {
	Model     *actor.PID
	Scheduler *actor.PID
	Preparers []*actor.PID
}
