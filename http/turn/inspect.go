package turn

import (
	"context"
	"strings"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/templates"
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

// Admit takes one of the runtime's inspection slots for a whole inspection
// request; past the bound the error is *actors.Overloaded (a 429). The
// caller calls release when it has answered.
func Admit(rt *troupe.Runtime) (release func(), err error) { return rt.AdmitInspection() }

// Prepare renders and tokenizes r through the runtime's preparers, exactly
// as a generation would (capability gate included), without generating. It
// holds an inspection slot while it runs (see Admit) and refuses an input
// over the runtime's inspection input limit.
func Prepare(rt *troupe.Runtime, r *chat.Request) (*actors.Prepared, error) {
	release, err := Admit(rt)
	if err != nil {
		return nil, err
	}
	defer release()
	return PrepareAdmitted(rt, r)
}

// PrepareAdmitted is Prepare for a caller that already holds an inspection
// slot.
func PrepareAdmitted(rt *troupe.Runtime, r *chat.Request) (*actors.Prepared, error) {
	return rt.Prepare(context.Background(), r, true)
}

// Inspect prepares r through the same preparer (and capability gate) a
// generation would, without generating, and asks the scheduler, without
// side effects, how much of it the cache holds. It holds an inspection slot
// while it runs.
func Inspect(rt *troupe.Runtime, r *chat.Request) (*Inputs, error) {
	release, err := Admit(rt)
	if err != nil {
		return nil, err
	}
	defer release()
	p, err := PrepareAdmitted(rt, r)
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
		in.Reason = withoutTemplatePaths(prep.BoundaryNote, p.Assets)
	}
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	if in.Reusable, err = rt.Reusable(ctx, prep.IDs, r.CacheScope); err != nil {
		return nil, err
	}
	return in, nil
}

// inspectTimeout bounds a cache probe.
const inspectTimeout = 30 * time.Second

// withoutTemplatePaths replaces the chat templates' names (their files on
// the server) in a note meant for the client.
func withoutTemplatePaths(note string, a *chat.Assets) string {
	if a == nil {
		return note
	}
	for _, t := range []*templates.Template{a.Template, a.ToolTemplate} {
		if t == nil {
			continue
		}
		if n := t.Name(); n != "" {
			note = strings.ReplaceAll(note, n, "chat template")
		}
	}
	return note
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
		"capability": in.Prepared.Capability.String(), "history_boundary": boundary, "cached_tokens": in.Reusable,
		"preserve_thinking": prep.PreserveThinking}
}
