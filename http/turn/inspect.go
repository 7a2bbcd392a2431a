package turn

import (
	"context"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
)

// Inputs is what a generating route would prefill for a request, as the
// input_tokens routes report it.
type Inputs struct {
	Prepared *actors.Prepared
	// Reason says why no history boundary was rendered (or why it is not a
	// token prefix); empty when one was.
	Reason string
	// Reusable is how many prompt tokens the prompt cache would reuse now.
	Reusable int
}

// inspectTimeout bounds an inspection (a preparer answer, a cache probe).
const inspectTimeout = 30 * time.Second

// Prepare renders and tokenizes r through the runtime's preparers, exactly
// as a generation would (capability gate included), without generating.
func Prepare(rt *troupe.Runtime, r *chat.Request) (*actors.Prepared, error) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	return rt.Prepare(ctx, r, true)
}

// Inspect prepares r through the same preparer (and capability gate) a
// generation would, without generating, and asks the scheduler, without
// side effects, how much of it the cache holds.
func Inspect(rt *troupe.Runtime, r *chat.Request) (*Inputs, error) {
	p, err := Prepare(rt, r)
	if err != nil {
		return nil, err
	}
	prep := p.Prepared
	in := &Inputs{Prepared: p}
	switch {
	case !rt.PromptCache():
		in.Reason = "prompt cache off"
	case p.Capability == actors.DenseKV && !prep.BoundaryRendered:
		in.Reason = "dense model: any common prefix is reused, no boundary needed"
	case !prep.BoundaryRendered || prep.Boundary == 0:
		in.Reason = prep.BoundaryNote
	}
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	if in.Reusable, err = rt.Reusable(ctx, prep.IDs, r.CacheScope); err != nil {
		return nil, err
	}
	return in, nil
}

// Body is the inspection answer's shared fields: the prompt, its token
// count, the capability it was prepared under, the history boundary and
// the tokens the cache would reuse.
func (in *Inputs) Body() map[string]any {
	prep := in.Prepared.Prepared
	boundary := map[string]any{"rendered": prep.BoundaryRendered, "tokens": prep.Boundary}
	if in.Reason != "" {
		boundary["reason"] = in.Reason
	}
	return map[string]any{"prompt": prep.Prompt, "input_tokens": len(prep.IDs),
		"capability": in.Prepared.Capability.String(), "history_boundary": boundary, "cached_tokens": in.Reusable}
}
