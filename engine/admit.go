package engine

import (
	"fmt"
	"math"

	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// Limits are what bounds one request's length on a loaded model: its
// positions and the KV pool. They do not change after the model loads, so a
// caller can check a request against them before submitting it (the HTTP
// layer does, to answer 400 before a stream's headers).
type Limits struct {
	// MaxPos is the model's max_position_embeddings, or the server's lower
	// cap (Capped); 0 means unbounded.
	MaxPos int
	// Capped says MaxPos is the server's context cap (--max-model-len)
	// rather than the model's positions.
	Capped bool
	// Pages and PageSize describe the KV pool; Pages is 0 for a model
	// without attention KV (its state does not grow with the sequence).
	Pages, PageSize int
}

// LimitsOf returns the limits of model m on pool, with the positions
// capped at maxModelLen when that is positive and lower.
func LimitsOf(m model.Model, pool *kvcache.Pool, maxModelLen int) Limits {
	l := Limits{MaxPos: m.Info().MaxPos, PageSize: pool.PageSize()}
	if maxModelLen > 0 && (l.MaxPos <= 0 || maxModelLen < l.MaxPos) {
		l.MaxPos, l.Capped = maxModelLen, true
	}
	if pool.PagesFor(1) > 0 {
		l.Pages = pool.NumPages()
	}
	return l
}

// Context is the most positions one request may use: the positions, or the
// KV pool when it holds fewer; 0 means unbounded.
func (l Limits) Context() int {
	room := l.MaxPos
	if l.Pages > 0 && (room <= 0 || l.Pages*l.PageSize < room) {
		room = l.Pages * l.PageSize
	}
	return room
}

// TooLongError is a request that can never run: its prompt plus its max
// tokens exceed the model's positions or the whole KV pool. It matches
// ErrTooLong with errors.Is.
type TooLongError struct {
	Prompt, MaxTokens int
	// Limit is the positions the request may use at most; Pages, when set,
	// says the KV pool is the bound (Limit = Pages × page size) rather than
	// the model's positions.
	Limit, Pages int
	// PromptOnly says the prompt alone leaves no room for one generated
	// token: lowering max tokens would not help.
	PromptOnly bool
	// Capped says Limit is the server's context cap, not the model's.
	Capped bool
}

func (e *TooLongError) Error() string {
	if e.Pages > 0 {
		total := e.Prompt + e.MaxTokens
		pageSize := e.Limit / e.Pages
		return fmt.Sprintf("%v: %d tokens need %d KV pages, the pool has %d", ErrTooLong, total, (total+pageSize-1)/pageSize, e.Pages)
	}
	if e.Capped {
		return fmt.Sprintf("%v: prompt %d + max tokens %d exceeds the server's context length of %d", ErrTooLong, e.Prompt, e.MaxTokens, e.Limit)
	}
	return fmt.Sprintf("%v: prompt %d + max tokens %d exceeds the model's %d positions", ErrTooLong, e.Prompt, e.MaxTokens, e.Limit)
}

// Unwrap makes errors.Is(err, ErrTooLong) hold.
func (e *TooLongError) Unwrap() error { return ErrTooLong }

// Admit checks a request of prompt tokens and maxTokens against l. With fit,
// maxTokens is an upper bound, lowered to the room the prompt leaves. It
// returns the max tokens the request runs with, or a *TooLongError.
func (l Limits) Admit(prompt, maxTokens int, fit bool) (int, error) {
	room := math.MaxInt
	if l.MaxPos > 0 {
		room = l.MaxPos
	}
	if l.Pages > 0 {
		room = min(room, l.Pages*l.PageSize)
	}
	if fit {
		if left := room - prompt; left >= 1 {
			maxTokens = min(maxTokens, left)
		}
	}
	total := prompt + maxTokens
	if l.MaxPos > 0 && total > l.MaxPos {
		return 0, &TooLongError{Prompt: prompt, MaxTokens: maxTokens, Limit: l.MaxPos, PromptOnly: prompt >= room, Capped: l.Capped}
	}
	if l.Pages > 0 && (total+l.PageSize-1)/l.PageSize > l.Pages {
		return 0, &TooLongError{Prompt: prompt, MaxTokens: maxTokens, Limit: l.Pages * l.PageSize, Pages: l.Pages, PromptOnly: prompt >= room}
	}
	return maxTokens, nil
}
