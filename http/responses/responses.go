package responses

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/gofiber/fiber/v2"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/http/turn"
	"github.com/troupe-ai/troupe/output"
	"github.com/troupe-ai/troupe/templates"
)

// Config tunes the handlers.
type Config struct {
	// KeepAlive is the period of SSE keep-alive comments while no token
	// arrives.
	KeepAlive time.Duration
	// StoreTTL is how long a stored response is kept; 0 means 1 hour.
	StoreTTL time.Duration
	// StoreMax bounds the stored responses; 0 means 1024.
	StoreMax int
}

// API serves the Responses routes of one runtime.
type API struct {
	rt    *troupe.Runtime
	cfg   Config
	store *Store
}

// New returns the handlers with an empty store.
func New(rt *troupe.Runtime, cfg Config) *API {
	if cfg.StoreTTL <= 0 {
		cfg.StoreTTL = time.Hour
	}
	if cfg.StoreMax <= 0 {
		cfg.StoreMax = 1024
	}
	return &API{rt: rt, cfg: cfg, store: NewStore(cfg.StoreTTL, cfg.StoreMax, nil)}
}

func (a *API) fail(c *fiber.Ctx, err error) error {
	status, param := apierr.Classify(err, "input")
	return apierr.OpenAI(c, status, err.Error(), param)
}

// newID is prefix_ and 24 random hex digits, as OpenAI's ids look.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// parse decodes a body, checks the model and resolves previous_response_id
// into the conversation it continues.
func (a *API) parse(body []byte) (*request, *translated, error) {
	var req request
	if err := apierr.Decode(body, &req); err != nil {
		return nil, nil, err
	}
	if req.Model != nil && *req.Model != "" && *req.Model != a.rt.Name() {
		return nil, nil, apierr.NotFound("model", "the model %q does not exist; this server serves %q", *req.Model, a.rt.Name())
	}
	var prior []any
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		prev, ok := a.store.Get(*req.PreviousResponseID)
		if !ok {
			return nil, nil, apierr.NotFound("previous_response_id", "previous response %q not found (never stored, expired, or deleted)", *req.PreviousResponseID)
		}
		prior = prev.messages
	}
	r, conv, err := translate(&req, prior)
	if err != nil {
		return nil, nil, err
	}
	return &req, &translated{r: r, conversation: conv}, nil
}

// Create serves POST /v1/responses.
func (a *API) Create(c *fiber.Ctx) error {
	req, tr, err := a.parse(c.Body())
	if err != nil {
		return a.fail(c, err)
	}
	t, err := turn.Start(a.rt, tr.r, turn.Options{Reasoning: true, Arrival: turn.Arrival(c), Context: turn.Context(c)})
	if err != nil {
		return a.fail(c, err)
	}
	b := &builder{api: a, req: req, t: t, id: newID("resp"), created: time.Now().Unix()}
	if !req.Stream {
		defer t.Close()
		t.Run(b.track, 0, nil)
		if t.Err != "" {
			return apierr.OpenAI(c, t.ErrStatus(), t.Err, "")
		}
		obj := b.object(b.finalStatus(), b.finalOutput())
		a.keep(req, tr, b, obj)
		t.WarmUp()
		return c.JSON(obj)
	}
	return turn.SSE(c, t, func(w *bufio.Writer) { b.stream(w, tr) })
}

// Get serves GET /v1/responses/{id}.
func (a *API) Get(c *fiber.Ctx) error {
	r, ok := a.store.Get(c.Params("id"))
	if !ok {
		return apierr.OpenAI(c, fiber.StatusNotFound, "response "+c.Params("id")+" not found (never stored, expired, or deleted)", "response_id")
	}
	return c.JSON(r.object)
}

// Delete serves DELETE /v1/responses/{id}.
func (a *API) Delete(c *fiber.Ctx) error {
	id := c.Params("id")
	if !a.store.Delete(id) {
		return apierr.OpenAI(c, fiber.StatusNotFound, "response "+id+" not found (never stored, expired, or deleted)", "response_id")
	}
	return c.JSON(fiber.Map{"id": id, "object": "response.deleted", "deleted": true})
}

// InputTokens serves POST /v1/responses/input_tokens: exactly what POST
// /v1/responses would prefill for the same body.
func (a *API) InputTokens(c *fiber.Ctx) error {
	_, tr, err := a.parse(c.Body())
	if err != nil {
		return a.fail(c, err)
	}
	in, err := turn.Inspect(a.rt, tr.r)
	if err != nil {
		return a.fail(c, err)
	}
	body := in.Body()
	body["object"], body["model"] = "response.input_tokens", a.rt.Name()
	return c.JSON(body)
}

// keep stores a finished response (unless store is false) with the
// conversation a follow-up continues: this turn's input plus its output.
func (a *API) keep(req *request, tr *translated, b *builder, obj fiber.Map) {
	if req.Store != nil && !*req.Store {
		return
	}
	reply := templates.NewDict(4)
	reply.Set("role", "assistant")
	reply.Set("content", b.t.Content.String())
	if b.t.Reasoning.Len() > 0 {
		reply.Set("reasoning_content", b.t.Reasoning.String())
	}
	if b.t.Calls != nil {
		calls := make([]any, len(b.t.Calls))
		for i, call := range b.t.Calls {
			fn := templates.NewDict(2)
			fn.Set("name", call.Name)
			var args any = call.Arguments
			if v, err := templates.DecodeJSON([]byte(call.Arguments)); err == nil {
				args = v
			}
			fn.Set("arguments", args)
			d := templates.NewDict(3)
			d.Set("id", b.callIDs[i])
			d.Set("type", "function")
			d.Set("function", fn)
			calls[i] = d
		}
		reply.Set("tool_calls", calls)
	}
	msgs := append(append([]any{}, tr.conversation...), reply)
	a.store.Put(b.id, &stored{object: obj, messages: msgs})
}

type translated struct {
	r            *chat.Request
	conversation []any // the messages without instructions
}

// builder accumulates one response's output items as the turn produces
// them and writes them in the Responses shapes.
type builder struct {
	api     *API
	req     *request
	t       *turn.Turn
	id      string
	created int64
	seq     int

	reasoningTokens int      // tokens generated up to the last reasoning text
	rsID, msgID     string   // output item ids, made when the item opens
	callIDs         []string // call_... per tool call
	fcIDs           []string // fc_... per tool call
}

// track is the Emit of a non-streaming turn: it only counts reasoning
// tokens.
func (b *builder) track(d output.Delta, _ *actors.TokenEvent) bool {
	if d.Reasoning != "" {
		b.reasoningTokens = b.t.Tokens
	}
	return true
}

func (b *builder) finalStatus() string {
	switch {
	case b.t.Err != "":
		return "failed"
	case b.t.Finish == turn.Length:
		return "incomplete"
	}
	return "completed"
}

func (b *builder) ids() {
	if b.rsID == "" {
		b.rsID = newID("rs")
	}
	if b.msgID == "" {
		b.msgID = newID("msg")
	}
	for len(b.callIDs) < len(b.t.Calls) {
		b.callIDs = append(b.callIDs, newID("call"))
		b.fcIDs = append(b.fcIDs, newID("fc"))
	}
}

func (b *builder) reasoningItem(status string) fiber.Map {
	content := []fiber.Map{}
	if status == "completed" {
		content = []fiber.Map{{"type": "reasoning_text", "text": b.t.Reasoning.String()}}
	}
	return fiber.Map{"type": "reasoning", "id": b.rsID, "summary": []fiber.Map{}, "content": content, "status": status}
}

func outputText(text string) fiber.Map {
	return fiber.Map{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func (b *builder) messageItem(status string) fiber.Map {
	if status == "completed" && b.t.Finish == turn.Length {
		status = "incomplete" // cut by max_output_tokens
	}
	content := []fiber.Map{}
	if status != "in_progress" {
		content = []fiber.Map{outputText(b.t.Content.String())}
	}
	return fiber.Map{"type": "message", "id": b.msgID, "status": status, "role": "assistant", "content": content}
}

func (b *builder) callItem(i int, status string) fiber.Map {
	args := ""
	if status == "completed" {
		args = b.t.Calls[i].Arguments
	}
	return fiber.Map{"type": "function_call", "id": b.fcIDs[i], "call_id": b.callIDs[i], "name": b.t.Calls[i].Name,
		"arguments": args, "status": status}
}

// hasMessage says whether the output has a message item: when there is
// text, or when there is nothing else to show.
func (b *builder) hasMessage() bool { return b.t.Content.Len() > 0 || b.t.Calls == nil }

// finalOutput is the output items of the finished turn: reasoning, then
// the message, then the function calls.
func (b *builder) finalOutput() []fiber.Map {
	b.ids()
	out := []fiber.Map{}
	if b.t.Reasoning.Len() > 0 {
		out = append(out, b.reasoningItem("completed"))
	}
	if b.hasMessage() {
		out = append(out, b.messageItem("completed"))
	}
	for i := range b.t.Calls {
		out = append(out, b.callItem(i, "completed"))
	}
	return out
}

// object is the response object in the given status with the given output.
func (b *builder) object(status string, output []fiber.Map) fiber.Map {
	req := b.req
	var instructions, maxOut, prev, user any
	if req.Instructions != nil {
		instructions = *req.Instructions
	}
	if req.MaxOutputTokens != nil {
		maxOut = *req.MaxOutputTokens
	}
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		prev = *req.PreviousResponseID
	}
	if req.User != nil {
		user = *req.User
	}
	temperature, topP := 1.0, 1.0
	if req.Temperature != nil {
		temperature = *req.Temperature
	}
	if req.TopP != nil {
		topP = *req.TopP
	}
	var toolChoice any = "auto"
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		toolChoice = json.RawMessage(req.ToolChoice)
	}
	tools := any([]any{})
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		tools = json.RawMessage(req.Tools)
	}
	metadata := req.Metadata
	if metadata == nil {
		metadata = map[string]string{}
	}
	reasoning := fiber.Map{"effort": nil, "summary": nil}
	if req.Reasoning != nil {
		if req.Reasoning.Effort != nil {
			reasoning["effort"] = *req.Reasoning.Effort
		}
		if req.Reasoning.Summary != nil {
			reasoning["summary"] = *req.Reasoning.Summary
		}
	}
	truncation := "disabled"
	if req.Truncation != nil {
		truncation = *req.Truncation
	}
	parallel := true
	if req.ParallelToolCalls != nil {
		parallel = *req.ParallelToolCalls
	}
	store := req.Store == nil || *req.Store
	obj := fiber.Map{
		"id": b.id, "object": "response", "created_at": b.created, "status": status, "background": false,
		"error": nil, "incomplete_details": nil, "instructions": instructions, "max_output_tokens": maxOut,
		"model": b.api.rt.Name(), "output": output, "parallel_tool_calls": parallel, "previous_response_id": prev,
		"reasoning": reasoning, "store": store, "temperature": temperature, "top_p": topP,
		"text": fiber.Map{"format": fiber.Map{"type": "text"}}, "tool_choice": toolChoice, "tools": tools,
		"truncation": truncation, "usage": nil, "user": user, "metadata": metadata,
	}
	switch status {
	case "completed", "incomplete", "failed":
		t := b.t
		obj["usage"] = fiber.Map{
			"input_tokens": t.PromptTokens, "input_tokens_details": fiber.Map{"cached_tokens": t.CachedTokens},
			"output_tokens": t.Tokens, "output_tokens_details": fiber.Map{"reasoning_tokens": b.reasoningTokens},
			"total_tokens": t.PromptTokens + t.Tokens,
		}
	}
	if status == "incomplete" {
		obj["incomplete_details"] = fiber.Map{"reason": "max_output_tokens"}
	}
	if status == "failed" {
		obj["error"] = fiber.Map{"code": "server_error", "message": b.t.Err}
	}
	return obj
}

// stream writes the documented event sequence: response.created and
// response.in_progress; per output item output_item.added, its parts and
// deltas, and output_item.done; then response.completed (or .incomplete,
// .failed) carrying the same object GET /v1/responses/{id} returns.
func (b *builder) stream(w *bufio.Writer, tr *translated) {
	write := func(typ string, fields fiber.Map) bool {
		fields["type"] = typ
		fields["sequence_number"] = b.seq
		b.seq++
		return turn.WriteEvent(w, typ, fields) == nil
	}
	if !write("response.created", fiber.Map{"response": b.object("in_progress", []fiber.Map{})}) ||
		!write("response.in_progress", fiber.Map{"response": b.object("in_progress", []fiber.Map{})}) {
		return
	}
	var items []fiber.Map // output so far, for output_index
	open := ""            // "reasoning" or "message": the item receiving deltas
	closeOpen := func() bool {
		idx := len(items) - 1
		switch open {
		case "reasoning":
			text := b.t.Reasoning.String()
			item := b.reasoningItem("completed")
			items[idx] = item
			open = ""
			return write("response.reasoning_text.done", fiber.Map{"item_id": b.rsID, "output_index": idx, "content_index": 0, "text": text}) &&
				write("response.output_item.done", fiber.Map{"output_index": idx, "item": item})
		case "message":
			text := b.t.Content.String()
			item := b.messageItem("completed")
			items[idx] = item
			open = ""
			return write("response.output_text.done", fiber.Map{"item_id": b.msgID, "output_index": idx, "content_index": 0, "text": text, "logprobs": []any{}}) &&
				write("response.content_part.done", fiber.Map{"item_id": b.msgID, "output_index": idx, "content_index": 0, "part": outputText(text)}) &&
				write("response.output_item.done", fiber.Map{"output_index": idx, "item": item})
		}
		return true
	}
	openMessage := func() bool {
		if open == "message" {
			return true
		}
		if !closeOpen() {
			return false
		}
		b.msgID = newID("msg")
		items = append(items, b.messageItem("in_progress"))
		open = "message"
		idx := len(items) - 1
		return write("response.output_item.added", fiber.Map{"output_index": idx, "item": items[idx]}) &&
			write("response.content_part.added", fiber.Map{"item_id": b.msgID, "output_index": idx, "content_index": 0, "part": outputText("")})
	}
	emit := func(d output.Delta, tok *actors.TokenEvent) bool {
		if d.Reasoning != "" {
			b.reasoningTokens = b.t.Tokens
			if open != "reasoning" {
				if open != "" && !closeOpen() {
					return false
				}
				b.rsID = newID("rs")
				items = append(items, b.reasoningItem("in_progress"))
				open = "reasoning"
				if !write("response.output_item.added", fiber.Map{"output_index": len(items) - 1, "item": items[len(items)-1]}) {
					return false
				}
			}
			if !write("response.reasoning_text.delta", fiber.Map{"item_id": b.rsID, "output_index": len(items) - 1, "content_index": 0, "delta": d.Reasoning}) {
				return false
			}
		}
		if d.Content != "" {
			if !openMessage() {
				return false
			}
			if !write("response.output_text.delta", fiber.Map{"item_id": b.msgID, "output_index": len(items) - 1, "content_index": 0, "delta": d.Content, "logprobs": []any{}}) {
				return false
			}
		}
		return true
	}
	ping := func() bool {
		_, err := w.WriteString(": keep-alive\n\n")
		return err == nil && w.Flush() == nil
	}
	if !b.t.Run(emit, b.api.cfg.KeepAlive, ping) {
		return
	}
	if b.t.Err == "" && b.hasMessage() && !openMessage() { // an empty answer still has its message
		return
	}
	if !closeOpen() {
		return
	}
	b.ids()
	for i, call := range b.t.Calls {
		idx := len(items)
		items = append(items, b.callItem(i, "completed"))
		if !write("response.output_item.added", fiber.Map{"output_index": idx, "item": b.callItem(i, "in_progress")}) ||
			!write("response.function_call_arguments.delta", fiber.Map{"item_id": b.fcIDs[i], "output_index": idx, "delta": call.Arguments}) ||
			!write("response.function_call_arguments.done", fiber.Map{"item_id": b.fcIDs[i], "output_index": idx, "name": call.Name, "arguments": call.Arguments}) ||
			!write("response.output_item.done", fiber.Map{"output_index": idx, "item": items[idx]}) {
			return
		}
	}
	status := b.finalStatus()
	obj := b.object(status, items)
	if status != "failed" {
		b.api.keep(b.req, tr, b, obj)
		b.t.WarmUp()
	}
	write("response."+status, fiber.Map{"response": obj})
}
