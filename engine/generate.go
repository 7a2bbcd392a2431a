package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/sample"
)

// Request is one generation: a prompt and how to continue it.
type Request struct {
	Prompt    []int32
	MaxTokens int
	Sample    sample.Params
	// StopIDs end generation when sampled (the model's EOS ids, typically).
	// The stop token is included in the output.
	StopIDs []int32
	// WantPromptLogits keeps the logits at the last prompt position.
	WantPromptLogits bool
}

// Result is what a Request produced.
type Result struct {
	IDs              []int32
	PromptLastLogits []float32
	// Timing of the request: from the start of the run to its first token
	// (prefill) and from then to its last token (decode).
	Prefill, Decode time.Duration
}

// Options tune a run.
type Options struct {
	// StepTokens is the most prompt tokens one step prefills (the chunk
	// budget); 0 means 512.
	StepTokens int
}

type seqState struct {
	req     *Request
	res     *Result
	kv      kvcache.Seq
	sampler *sample.Sampler
	fed     int   // prompt tokens already in the KV
	next    int32 // sampled token not yet fed
	done    bool
	start   time.Time
	first   time.Time
}

// Generate runs all requests to completion together, batching their prefill
// chunks and decode steps, and frees their KV pages before returning.
func Generate(ctx context.Context, m model.Model, dev gpu.Device, pool *kvcache.Pool, reqs []Request, opt Options) ([]Result, error) {
	budget := opt.StepTokens
	if budget <= 0 {
		budget = 512
	}
	info := m.Info()
	states := make([]*seqState, len(reqs))
	results := make([]Result, len(reqs))
	start := time.Now()
	for i := range reqs {
		r := &reqs[i]
		if len(r.Prompt) == 0 {
			return nil, fmt.Errorf("engine: request %d has an empty prompt", i)
		}
		if err := r.Sample.Validate(); err != nil {
			return nil, fmt.Errorf("engine: request %d: %w", i, err)
		}
		if info.MaxPos > 0 && len(r.Prompt)+r.MaxTokens > info.MaxPos {
			return nil, fmt.Errorf("engine: request %d: prompt %d + max tokens %d exceeds the model's %d positions", i, len(r.Prompt), r.MaxTokens, info.MaxPos)
		}
		states[i] = &seqState{req: r, res: &results[i], sampler: sample.New(r.Sample, r.Prompt), start: start}
	}
	defer func() {
		for _, s := range states {
			if s != nil {
				pool.Free(&s.kv)
			}
		}
	}()
	var batch []model.Seq
	var owners []*seqState
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch, owners = batch[:0], owners[:0]
		left := budget
		for _, s := range states {
			switch {
			case s.done:
			case s.fed < len(s.req.Prompt):
				if left == 0 {
					continue
				}
				n := min(left, len(s.req.Prompt)-s.fed)
				left -= n
				mode := model.NoLogits
				if s.fed+n == len(s.req.Prompt) {
					mode = model.LastLogits
				}
				batch = append(batch, model.Seq{Tokens: s.req.Prompt[s.fed : s.fed+n], Pos: s.fed, Logits: mode})
				owners = append(owners, s)
			default:
				batch = append(batch, model.Seq{Tokens: []int32{s.next}, Pos: s.kv.Len, Logits: model.LastLogits})
				owners = append(owners, s)
			}
		}
		if len(batch) == 0 {
			break
		}
		for i := range batch {
			s := owners[i]
			if err := pool.Reserve(&s.kv, batch[i].Pos+len(batch[i].Tokens)); err != nil {
				return nil, fmt.Errorf("engine: %w", err)
			}
			if err := pool.EnsureSlot(&s.kv); err != nil {
				return nil, fmt.Errorf("engine: %w", err)
			}
			batch[i].Pages, batch[i].Slot = s.kv.Pages, s.kv.Slot
		}
		logits, err := m.Forward(dev, pool, batch)
		if err != nil {
			return nil, err
		}
		row := 0
		now := time.Now()
		for i, b := range batch {
			s := owners[i]
			s.kv.Len = b.Pos + len(b.Tokens)
			if s.fed < len(s.req.Prompt) {
				s.fed += len(b.Tokens)
			}
			if b.Logits == model.NoLogits {
				continue
			}
			lg := logits[row*info.Vocab : (row+1)*info.Vocab]
			row++
			if len(s.res.IDs) == 0 && s.req.WantPromptLogits {
				s.res.PromptLastLogits = slices.Clone(lg)
			}
			if s.req.MaxTokens <= 0 {
				s.done = true
				continue
			}
			id := s.sampler.Sample(lg)
			if len(s.res.IDs) == 0 {
				s.first = now
			}
			s.res.IDs = append(s.res.IDs, id)
			s.next = id
			if len(s.res.IDs) >= s.req.MaxTokens || slices.Contains(s.req.StopIDs, id) {
				s.done = true
				s.res.Prefill = s.first.Sub(s.start)
				s.res.Decode = now.Sub(s.first)
			}
		}
	}
	for i, s := range states {
		if s.first.IsZero() {
			results[i].Prefill = time.Since(start)
		}
	}
	return results, nil
}
