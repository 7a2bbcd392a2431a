// Package turn is what every generating route shares between its API's
// request translator and its API's response shape: one generation (one
// assistant turn) run through the runtime, its tokens turned into final text
// by the output processor (stop strings, <think> reasoning, tool calls), the
// serving metrics recorded, the queue slot released when the answer ends,
// and the next turn's history warmed up.
//
// The translators (http/openai, http/responses, http/anthropic) differ only
// in how they parse a body into a chat.Request and how they write deltas
// and the final object; Turn gives them both as plain data. A Group is the
// n choices of one request (OpenAI's n), a Turn each, run at once.
package turn

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/conns"
	"github.com/troupe-ai/troupe/output"
)

// Why a request's context ends before its answer does (its cause).
var (
	// ErrClientGone: the client closed the connection.
	ErrClientGone = errors.New("the client closed the connection")
	// ErrShutdown: the server reached its shutdown deadline.
	ErrShutdown = errors.New("the server is shutting down; the request was cut at the shutdown deadline")
)

// StatusClientClosed is the status recorded for a request whose client
// left before its answer (nginx's 499; nobody receives it).
const StatusClientClosed = 499

// Finish reasons, API-neutral; each API maps them to its own words.
const (
	Stop      = "stop"       // end of sequence or a stop string
	Length    = "length"     // max tokens (or the model's positions)
	ToolCalls = "tool_calls" // the reply is tool calls
)

// Turn is one generation in progress and what it has produced so far.
type Turn struct {
	Stream   *troupe.Stream
	Request  *chat.Request
	Prepared *chat.Prepared

	Content, Reasoning strings.Builder
	Tokens             int // generated tokens
	PromptTokens       int
	CachedTokens       int // prompt tokens served from the prompt cache
	Finish             string
	StopString         string // the stop string that ended it, if any
	Calls              []output.ToolCall
	Err                string // a generation error (after the answer began)
	// Unavailable marks Err as the server's failure (the model failed to
	// load, the server shutting down), not the request's.
	Unavailable bool
	// Gone marks Err as the client having left.
	Gone bool

	rt          *troupe.Runtime
	life        context.Context // the request's lifetime (nil: none)
	first       *atomic.Bool    // set at the first token of the request's choices
	recorded    bool            // filled into rec (under rec's lock)
	proc        *output.Processor
	rec         *Record       // the request's access-log record (nil: none)
	ttft        time.Duration // arrival to the first token
	prepare     time.Duration // arrival to prepared (rendered, tokenized, checked)
	cancel      context.CancelFunc
	start, last time.Time
}

// Options configure Start.
type Options struct {
	// Reasoning separates <think> reasoning from the answer when the
	// template thinks.
	Reasoning bool
	// Arrival is when the request arrived (for time to first token); zero
	// means now.
	Arrival time.Time
	// Context is the request's lifetime (Context(c)): when it ends with
	// ErrClientGone or ErrShutdown as its cause, Run stops the generation.
	// Nil means the turn lives until its generation ends.
	Context context.Context
}

// Start prepares r and starts generating. Errors are those of preparation
// (bad request, no template) or of a runtime that is not serving.
func Start(rt *troupe.Runtime, r *chat.Request, opts Options) (*Turn, error) {
	g, err := StartN(rt, r, 1, opts)
	if err != nil {
		return nil, err
	}
	return g.Turns[0], nil
}

// StartN prepares r once and starts n choices of it (OpenAI's n), one Turn
// each (see troupe.Runtime.GenerateN for how they share the prompt).
func StartN(rt *troupe.Runtime, r *chat.Request, n int, opts Options) (*Group, error) {
	ctx, cancel := context.WithCancel(context.Background())
	streams, err := rt.GenerateN(ctx, r, n)
	if err != nil {
		cancel()
		return nil, err
	}
	if opts.Arrival.IsZero() {
		opts.Arrival = time.Now()
	}
	prepared := time.Since(opts.Arrival)
	g := &Group{Turns: make([]*Turn, n), cancel: cancel}
	first := &atomic.Bool{} // the request's first token (its time to first token)
	for i, s := range streams {
		prep := s.Prepared.Prepared
		t := &Turn{Stream: s, Request: r, Prepared: prep, PromptTokens: len(prep.IDs), rt: rt, cancel: cancel,
			start: opts.Arrival, prepare: prepared, life: opts.Context, first: first}
		t.rec = RecordFrom(opts.Context)
		t.proc = output.New(s.Prepared.Assets.Tokenizer, output.Options{
			Stop: r.Stop, Prompt: prep.Prompt, PromptIDs: prep.IDs, Reasoning: opts.Reasoning && prep.Reasoning, Tools: r.Tools != nil,
			Syntax: prep.Syntax,
		})
		g.Turns[i] = t
	}
	return g, nil
}

// ErrStatus is the HTTP status of a failed turn: 503 when the server
// cannot serve, 400 when the engine refused the request (too long for the
// model's positions).
func (t *Turn) ErrStatus() int {
	if t.Gone {
		return StatusClientClosed
	}
	if t.Unavailable {
		return fiber.StatusServiceUnavailable
	}
	return fiber.StatusBadRequest
}

// Close ends the generation (if still running) and frees its context
// (shared by the choices of a Group: closing one ends them all).
func (t *Turn) Close() {
	t.Stream.Cancel()
	t.cancel()
	t.rec.fill(t)
}

// Absorb processes one token event and returns the text that became final;
// tok is the event when it carried an accepted token (nil otherwise).
func (t *Turn) Absorb(ev *actors.TokenEvent) (d output.Delta, tok *actors.TokenEvent) {
	if ev.Error != "" {
		t.Err, t.Unavailable = ev.Error, ev.Unavailable
	}
	if ev.PromptTokens > 0 {
		t.CachedTokens = int(ev.CachedTokens)
	}
	if ev.HasToken && !t.proc.Stopped() {
		now := time.Now()
		m := t.rt.Metrics()
		if t.Tokens == 0 {
			t.ttft = now.Sub(t.start)
			if t.first.CompareAndSwap(false, true) {
				m.TTFT.Observe(t.ttft.Seconds())
			}
		} else {
			m.InterToken.Observe(now.Sub(t.last).Seconds())
		}
		t.last = now
		t.Tokens++
		tok = ev
		d = t.proc.Add(ev.Token)
		if t.proc.Stopped() {
			t.Finish, t.StopString = Stop, t.proc.StopString()
			t.Stream.Cancel()
		}
	}
	if ev.FinishReason != "" || t.proc.Stopped() {
		f := t.proc.Finish()
		d.Content += f.Content
		d.Reasoning += f.Reasoning
		d.Tools = append(d.Tools, f.Tools...)
		if t.Finish == "" {
			t.Finish = Stop
			if ev.FinishReason == "length" {
				t.Finish = Length
			}
		}
		if calls, ok := t.proc.ToolCalls(); ok {
			t.Calls = calls
			if complete(calls) || t.Finish != Length {
				t.Finish = ToolCalls
			}
		}
	}
	t.Content.WriteString(d.Content)
	t.Reasoning.WriteString(d.Reasoning)
	return d, tok
}

// Logprob is a generated token's log-probability in the OpenAI APIs'
// shape: its text, log-probability and UTF-8 bytes, with its most likely
// alternatives (top_logprobs) alike. A log-probability of -Inf (a token
// the sampler's filters ruled out) is -9999, as vLLM writes it, since JSON
// has no infinities.
func (t *Turn) Logprob(ev *actors.TokenEvent) fiber.Map {
	tok := t.Stream.Prepared.Assets.Tokenizer
	piece := func(id int32) (string, []int) {
		s := tok.Decode([]int32{id}, false)
		b := make([]int, len(s))
		for i := 0; i < len(s); i++ {
			b[i] = int(s[i])
		}
		return s, b
	}
	finite := func(lp float32) float32 { return max(lp, -9999) }
	text, bytes := piece(ev.Token)
	top := []fiber.Map{}
	for _, alt := range ev.TopLogprobs {
		s, b := piece(alt.Token)
		top = append(top, fiber.Map{"token": s, "logprob": finite(alt.Logprob), "bytes": b})
	}
	return fiber.Map{"token": text, "logprob": finite(ev.Logprob), "bytes": bytes, "top_logprobs": top}
}

// complete reports whether every call was generated to its end (not cut
// short by max tokens).
func complete(calls []output.ToolCall) bool {
	for _, c := range calls {
		if !c.Complete {
			return false
		}
	}
	return true
}

// Emit receives each piece of final text (and the token event that
// produced it, when there was one); it returns false when the client is
// gone.
type Emit func(d output.Delta, tok *actors.TokenEvent) bool

// Run reads the generation to its end, passing each delta to emit (which
// may be nil). keepAlive, when set with ping, is called whenever period
// passes without an event (a long prefill), so proxies keep the stream
// open; a failed ping ends the generation. Run reports whether the client
// stayed to the end.
//
// When the request's context (Options.Context) ends first, the generation
// is cancelled (its KV freed): a client that left makes Run return false
// (Err set, Gone); a shutdown deadline makes it return true with Err set
// and Unavailable, so the route ends its answer with an error in its own
// shape.
func (t *Turn) Run(emit Emit, period time.Duration, ping func() bool) bool {
	var tick <-chan time.Time
	if ping != nil && period > 0 {
		tk := time.NewTicker(period)
		defer tk.Stop()
		tick = tk.C
	}
	var life <-chan struct{}
	if t.life != nil {
		life = t.life.Done()
	}
	for {
		select {
		case <-life:
			t.Stream.Cancel()
			if cause := context.Cause(t.life); errors.Is(cause, ErrShutdown) {
				t.Err, t.Unavailable = cause.Error(), true
				return true
			}
			t.Err, t.Gone = ErrClientGone.Error(), true
			return false
		case ev, ok := <-t.Stream.Events:
			if !ok {
				return true
			}
			d, tok := t.Absorb(ev)
			if emit != nil && !emit(d, tok) {
				t.Stream.Cancel() // client gone: stop generating now
				return false
			}
		case <-tick:
			if !ping() {
				t.Stream.Cancel()
				return false
			}
		}
	}
}

// WarmUp ends a turn for the next one: it keeps the reply's reasoning for
// re-attachment (clients send back content and tool calls only; see
// chat.ReasoningMemory), and asks for the next turn's history to be
// prefilled ahead, as the next turn will render it with this reply in it:
// templates re-render earlier assistant turns (and a generated reply may
// not re-tokenize to the ids it was generated as), so the state of the
// last turn alone does not cover it. A reply of tool calls warms up the
// history up to its results. Failed turns and calls cut short are left
// alone.
func (t *Turn) WarmUp() {
	if t.Err != "" || !t.Request.IsChat() {
		return
	}
	if t.Calls != nil && !complete(t.Calls) {
		return
	}
	reply := t.Reply()
	if a := t.Stream.Prepared.Assets; a != nil {
		a.Remember(reply)
	}
	if !t.rt.PromptCache() {
		return
	}
	go t.rt.WarmUp(context.Background(), t.Request, reply)
}

// Reply is the turn's answer as the conversation's next request carries
// it back: its text, its tool calls and (kept apart) its reasoning.
func (t *Turn) Reply() chat.Reply {
	r := chat.Reply{Content: t.Content.String(), Reasoning: t.Reasoning.String()}
	for _, c := range t.Calls {
		r.Calls = append(r.Calls, chat.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return r
}

// Queue-slot and arrival bookkeeping shared by the admission middleware and
// the handlers, kept in the request's locals.
const (
	localRelease   = "troupe.release"
	localClaim     = "troupe.claim"
	localStreaming = "troupe.streaming"
	localArrival   = "troupe.arrival"
)

// MarkArrival records when a request arrived (for time to first token).
func MarkArrival(c *fiber.Ctx) { c.Locals(localArrival, time.Now()) }

// Arrival is when the request arrived (now if unmarked).
func Arrival(c *fiber.Ctx) time.Time {
	if t, ok := c.Locals(localArrival).(time.Time); ok {
		return t
	}
	return time.Now()
}

// SetClaim registers the function that takes further queue slots for the
// request (see Claim).
func SetClaim(c *fiber.Ctx, f func(extra int) error) { c.Locals(localClaim, f) }

// Claim takes extra queue slots for c's request, one per further
// sequence it runs (the other choices of an n > 1 request), freed with its
// own slot. The error (*actors.Overloaded, a 429) says the server is at
// capacity. Without admission (no SetClaim) it always succeeds.
func Claim(c *fiber.Ctx, extra int) error {
	f, _ := c.Locals(localClaim).(func(int) error)
	if f == nil || extra <= 0 {
		return nil
	}
	return f(extra)
}

// SetRelease registers the function that frees the request's queue slot.
func SetRelease(c *fiber.Ctx, f func()) { c.Locals(localRelease, f) }

// ReleaseIfNotStreaming frees the slot of a request that answered without a
// stream (a stream frees it when it ends).
func ReleaseIfNotStreaming(c *fiber.Ctx) {
	if !Streaming(c) {
		release(c)()
	}
}

func release(c *fiber.Ctx) func() {
	f, _ := c.Locals(localRelease).(func())
	if f == nil {
		return func() {}
	}
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			f()
		}
	}
}

// Transport is what the server's connection layer tells the routes about
// streaming: how long a stream may wait on a client that does not read, how
// much may queue unsent in the kernel, and where to log.
type Transport struct {
	// StallTimeout bounds each write of a stream: a client that reads
	// nothing for this long has its stream cancelled. 0: no bound.
	StallTimeout time.Duration
	// SendBuffer is the socket send buffer of a streaming connection, in
	// bytes (what a client that stops reading leaves queued). 0: the
	// kernel's.
	SendBuffer int
	// Log receives stream panics.
	Log *slog.Logger
}

const localTransport = "troupe.transport"

// SetTransport tells the request's routes the server's stream limits.
func SetTransport(c *fiber.Ctx, tr *Transport) { c.Locals(localTransport, tr) }

// Context is the request's lifetime as the server set it (see Options).
func Context(c *fiber.Ctx) context.Context { return c.UserContext() }

// SSE answers c with a server-sent event stream written by body after the
// handler returns; the queue slot is released and the turn closed when body
// ends. Each flush of body's writer must reach the client within the
// server's stall timeout, else the write fails (body sees the client as
// gone) and the generation is cancelled; a panic in body is logged and
// ends the stream.
func SSE(c *fiber.Ctx, t *Turn, body func(w *bufio.Writer)) error {
	return SSEGroup(c, &Group{Turns: []*Turn{t}}, body)
}

// SSEGroup is SSE for the choices of a Group: they are all closed when body
// ends.
func SSEGroup(c *fiber.Ctx, g *Group, body func(w *bufio.Writer)) error {
	c.Locals(localStreaming, true)
	done := release(c)
	rec := RecordFrom(Context(c))
	tr, _ := c.Locals(localTransport).(*Transport)
	if tr == nil {
		tr = &Transport{}
	}
	for _, t := range g.Turns {
		if t.life == nil {
			t.life = Context(c)
		}
	}
	conn := c.Context().Conn()
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer done()
		defer rec.streamEnded() // after the turns closed: their figures are in
		defer g.Close()
		defer func() {
			if r := recover(); r != nil && tr.Log != nil {
				tr.Log.Error("panic while streaming an answer", "panic", r, "stack", string(debug.Stack()))
			}
		}()
		if conn != nil && tr.SendBuffer > 0 {
			conns.SetSendBuffer(conn, tr.SendBuffer)
		}
		if conn == nil || tr.StallTimeout <= 0 {
			body(w)
			return
		}
		// Every flush of out goes to the client under a fresh write
		// deadline: fasthttp's own write deadline covers the whole body,
		// which would cut a long stream, while a client that reads nothing
		// would otherwise hold the stream (and its queue slot) forever.
		out := bufio.NewWriterSize(&stallWriter{w: w, conn: conn, stall: tr.StallTimeout}, w.Size())
		body(out)
		out.Flush()
	})
	return nil
}

// stallWriter passes each write on to fasthttp's stream writer and flushes
// it, under a write deadline on the connection.
type stallWriter struct {
	w     *bufio.Writer
	conn  net.Conn
	stall time.Duration
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if err := s.conn.SetWriteDeadline(time.Now().Add(s.stall)); err != nil {
		return 0, err
	}
	n, err := s.w.Write(p)
	if err == nil {
		err = s.w.Flush()
	}
	return n, err
}

// WriteEvent writes one SSE event (with an event: line when name is set)
// whose data is v as JSON, and flushes it; an error means the client is
// gone.
func WriteEvent(w *bufio.Writer, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if name != "" {
		w.WriteString("event: ")
		w.WriteString(name)
		w.WriteString("\n")
	}
	w.WriteString("data: ")
	w.Write(data)
	if _, err := w.WriteString("\n\n"); err != nil {
		return err
	}
	return w.Flush()
}
