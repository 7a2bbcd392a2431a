package turn

import (
	"context"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Record is what one request's access-log line says about its generation:
// the turn that served it fills it when it closes. The server's outermost
// middleware makes one per request (WithRecord) and logs it when the
// answer is complete: at once, or, for a stream, when the stream ends
// (OnStreamEnd).
type Record struct {
	mu        sync.Mutex
	prompt    int
	cached    int
	generated int
	ttft      time.Duration
	prepare   time.Duration
	finish    string
	err       string
	turns     int // turns filled in
	end       func()
}

// RecordFields are a Record's values.
type RecordFields struct {
	PromptTokens, CachedTokens, GeneratedTokens int
	// TTFT is the time from arrival to the first token (0: none).
	TTFT time.Duration
	// Prepare is the part of TTFT before the engine: arrival until the
	// request was rendered, tokenized and checked (the rest is the queue,
	// the prefill and the delivery of the first token).
	Prepare time.Duration
	Finish  string
	Err     string
	// Generated reports whether a turn filled the record (a generation ran).
	Generated bool
}

type recordKey struct{}

// WithRecord returns ctx carrying r, for the turn started under it.
func WithRecord(ctx context.Context, r *Record) context.Context {
	return context.WithValue(ctx, recordKey{}, r)
}

// RecordFrom returns the Record ctx carries, or nil.
func RecordFrom(ctx context.Context) *Record {
	if ctx == nil {
		return nil
	}
	r, _ := ctx.Value(recordKey{}).(*Record)
	return r
}

// fill takes t's figures (the first close of t). The choices of a Group
// add up: the prompt, cached tokens and finish are the first choice's, the
// generated tokens the sum, the time to first token the earliest, the
// error the first.
func (r *Record) fill(t *Turn) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.recorded {
		return
	}
	t.recorded = true
	r.generated += t.Tokens
	if r.err == "" {
		r.err = t.Err
	}
	if t.ttft > 0 && (r.ttft == 0 || t.ttft < r.ttft) {
		r.ttft = t.ttft
	}
	if r.turns++; r.turns > 1 {
		return
	}
	r.prompt, r.cached, r.finish, r.prepare = t.PromptTokens, t.CachedTokens, t.Finish, t.prepare
	if r.finish == "" && r.err == "" {
		r.finish = "none"
	}
}

// Fields returns the record's values.
func (r *Record) Fields() RecordFields {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RecordFields{PromptTokens: r.prompt, CachedTokens: r.cached, GeneratedTokens: r.generated,
		TTFT: r.ttft, Prepare: r.prepare, Finish: r.finish, Err: r.err, Generated: r.finish != "" || r.err != ""}
}

// OnStreamEnd makes f run when the request's stream ends (after its turn
// closed). The middleware calls it after the handler returned, before the
// stream body runs.
func (r *Record) OnStreamEnd(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.end = f
}

// streamEnded runs the OnStreamEnd function, once.
func (r *Record) streamEnded() {
	if r == nil {
		return
	}
	r.mu.Lock()
	f := r.end
	r.end = nil
	r.mu.Unlock()
	if f != nil {
		f()
	}
}

// Streaming reports whether c answers with a stream (turn.SSE), which ends
// after the handler returns.
func Streaming(c *fiber.Ctx) bool {
	s, _ := c.Locals(localStreaming).(bool)
	return s
}
