package responses

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// StoreMaxBytes bounds the stored responses' approximate bytes; 0
	// means 256 MiB.
	StoreMaxBytes int64
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
	if cfg.StoreMaxBytes <= 0 {
		cfg.StoreMaxBytes = 256 << 20
	}
	return &API{rt: rt, cfg: cfg, store: NewStore(cfg.StoreTTL, cfg.StoreMax, cfg.StoreMaxBytes, nil)}
}

// For returns the handlers of another runtime (a model served beside a's)
// that share a's configuration and store: a stored response is found by
// GET, DELETE and previous_response_id whichever model made it.
func (a *API) For(rt *troupe.Runtime) *API { return &API{rt: rt, cfg: a.cfg, store: a.store} }

func (a *API) fail(c *fiber.Ctx, err error) error {
	return apierr.ReplyOpenAI(c, a.rt.Logger(), err, apierr.Params{Prompt: "input", MaxTokens: "max_output_tokens"})
}

// newID is prefix_ and 24 random hex digits, as OpenAI's ids look.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// parse decodes a body, checks the model, resolves previous_response_id
// into the conversation it continues and item references into the items
// they name (both among the tenant's stored responses only), and scopes
// the prompt cache to the tenant.
func (a *API) parse(c *fiber.Ctx) (*request, *translated, error) {
	var req request
	if err := apierr.Decode(c.Body(), &req); err != nil {
		return nil, nil, err
	}
	if req.Model != nil && *req.Model != "" && *req.Model != a.rt.Name() {
		return nil, nil, apierr.NotFound("model", "the model %q does not exist; this server serves %q", *req.Model, a.rt.Name())
	}
	tenant := turn.Tenant(c)
	var prev *segment
	var prior []any
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		r, ok := a.store.Get(tenant, *req.PreviousResponseID)
		if !ok {
			return nil, nil, apierr.NotFound("previous_response_id", "previous response %q not found (never stored, expired, or deleted)", *req.PreviousResponseID)
		}
		prev, prior = r.conv, r.conv.all()
	}
	items, raws, err := inputItems(req.Input, func(id string) (json.RawMessage, bool) { return a.store.Item(tenant, id) })
	if err != nil {
		return nil, nil, err
	}
	r, conv, err := translate(&req, prior, items)
	if err != nil {
		return nil, nil, err
	}
	turn.Scope(c, r)
	return &req, &translated{r: r, tenant: tenant, prev: prev, turnMessages: conv[len(prior):], input: raws}, nil
}

// Create serves POST /v1/responses.
func (a *API) Create(c *fiber.Ctx) error {
	req, tr, err := a.parse(c)
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

// notFound answers a response id the request's tenant has no response
// under; another key's response is not found either, so as not to reveal
// that it exists.
func notFound(c *fiber.Ctx, id string) error {
	return apierr.OpenAI(c, fiber.StatusNotFound, "response "+id+" not found (never stored, expired, or deleted)", "response_id")
}

// Get serves GET /v1/responses/{id}.
func (a *API) Get(c *fiber.Ctx) error {
	r, ok := a.store.Get(turn.Tenant(c), c.Params("id"))
	if !ok {
		return notFound(c, c.Params("id"))
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(r.object)
}

// Delete serves DELETE /v1/responses/{id}.
func (a *API) Delete(c *fiber.Ctx) error {
	id := c.Params("id")
	if !a.store.Delete(turn.Tenant(c), id) {
		return notFound(c, id)
	}
	return c.JSON(fiber.Map{"id": id, "object": "response.deleted", "deleted": true})
}

// InputTokens serves POST /v1/responses/input_tokens: exactly what POST
// /v1/responses would prefill for the same body.
func (a *API) InputTokens(c *fiber.Ctx) error {
	_, tr, err := a.parse(c)
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

// keep stores a finished response (unless store is false) with its input
// and output items and the conversation a follow-up continues: this
// turn's input plus its output, after the history it continued. A
// response too large for the store's byte bound is not kept, and its
// object says "store": false.
func (a *API) keep(req *request, tr *translated, b *builder, obj fiber.Map) {
	if req.Store != nil && !*req.Store {
		return
	}
	output, _ := obj["output"].([]fiber.Map)
	r := &stored{input: make([]item, 0, len(tr.input)), output: make([]item, 0, len(output))}
	for _, raw := range tr.input {
		it, err := withID(raw)
		if err != nil {
			obj["store"] = false
			return
		}
		r.input = append(r.input, it)
	}
	for _, o := range output {
		js, err := json.Marshal(o)
		if err != nil {
			obj["store"] = false
			return
		}
		id, _ := o["id"].(string)
		r.output = append(r.output, item{id: id, raw: js})
	}
	js, err := json.Marshal(obj)
	if err != nil {
		obj["store"] = false
		return
	}
	r.object = js
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
	r.conv = newSegment(tr.prev, append(append([]any{}, tr.turnMessages...), reply))
	if !a.store.Put(tr.tenant, b.id, r) {
		obj["store"] = false
	}
}

// withID is an input item's JSON with an id: its own, or a new one named
// after its type, as OpenAI's input_items lists them.
func withID(raw json.RawMessage) (item, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return item{}, fmt.Errorf("input item: %w", err)
	}
	var id, typ string
	if json.Unmarshal(fields["id"], &id) == nil && id != "" {
		return item{id: id, raw: raw}, nil
	}
	json.Unmarshal(fields["type"], &typ)
	prefix := map[string]string{"function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}[typ]
	if prefix == "" {
		prefix = "msg"
		if typ == "" {
			fields["type"] = json.RawMessage(`"message"`)
		}
	}
	id = newID(prefix)
	fields["id"], _ = json.Marshal(id)
	js, err := json.Marshal(fields)
	if err != nil {
		return item{}, fmt.Errorf("input item: %w", err)
	}
	return item{id: id, raw: js}, nil
}

// InputItems serves GET /v1/responses/{id}/input_items: the response's
// input items (item references resolved, each with its id) as OpenAI's
// list: limit (1..100, default 20), order (asc or desc, the default),
// after and before (item ids: the items after, or just before, one in that
// order).
func (a *API) InputItems(c *fiber.Ctx) error {
	r, ok := a.store.Get(turn.Tenant(c), c.Params("id"))
	if !ok {
		return notFound(c, c.Params("id"))
	}
	limit := 20
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return apierr.OpenAI(c, fiber.StatusBadRequest, "limit must be an integer between 1 and 100, got "+strconv.Quote(v), "limit")
		}
		limit = n
	}
	items := slices.Clone(r.input)
	switch order := c.Query("order", "desc"); order {
	case "desc":
		slices.Reverse(items)
	case "asc":
	default:
		return apierr.OpenAI(c, fiber.StatusBadRequest, "order must be \"asc\" or \"desc\", got "+strconv.Quote(order), "order")
	}
	cursor := func(param string) (int, error) {
		id := c.Query(param)
		if id == "" {
			return -1, nil
		}
		i := slices.IndexFunc(items, func(it item) bool { return it.id == id })
		if i < 0 {
			return 0, apierr.Bad(param, "%s: item %q is not an input item of response %s", param, id, c.Params("id"))
		}
		return i, nil
	}
	after, err := cursor("after")
	if err != nil {
		return a.fail(c, err)
	}
	before, err := cursor("before")
	if err != nil {
		return a.fail(c, err)
	}
	if before >= 0 {
		items = items[:before]
	}
	if after >= 0 {
		items = items[min(after+1, len(items)):]
	}
	more := len(items) > limit
	if before >= 0 && after < 0 { // the page just before the cursor
		items = items[max(0, len(items)-limit):]
	} else {
		items = items[:min(limit, len(items))]
	}
	data := make([]json.RawMessage, len(items))
	var first, last any
	for i, it := range items {
		data[i] = it.raw
	}
	if len(items) > 0 {
		first, last = items[0].id, items[len(items)-1].id
	}
	return c.JSON(fiber.Map{"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": more})
}

type translated struct {
	r      *chat.Request
	tenant string
	// prev is the conversation a previous response ended (nil when none);
	// turnMessages are the messages this request adds to it, without
	// instructions; input is the JSON of its input items.
	prev         *segment
	turnMessages []any
	input        []json.RawMessage
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

	reasoningTokens int         // tokens generated up to the last reasoning text
	logprobs        []fiber.Map // of the message's tokens (include message.output_text.logprobs)
	pending         []fiber.Map // of tokens whose text is not out yet
	rsID, msgID     string      // output item ids, made when the item opens
	callIDs         []string    // call_... per tool call
	fcIDs           []string    // fc_... per tool call
}

// track is the Emit of a non-streaming turn: it counts reasoning tokens
// and collects logprobs.
func (b *builder) track(d output.Delta, tok *actors.TokenEvent) bool {
	if d.Reasoning != "" {
		b.reasoningTokens = b.t.Tokens
	}
	b.take(d, tok)
	return true
}

// take records the logprob of tok (when the request asked for logprobs)
// and returns those d's content completes, which join the message's: a
// token counts toward the text that came out when it was added (text held
// back for a possible stop string or tag comes out with a later token).
// Tokens that came out as reasoning or a tool call have none in the
// message, nor has the end-of-sequence token.
func (b *builder) take(d output.Delta, tok *actors.TokenEvent) []fiber.Map {
	if !b.t.Request.Logprobs {
		return nil
	}
	if tok != nil && !(tok.FinishReason == "stop" && slices.Contains(b.t.Stream.Prepared.Assets.EOS, tok.Token)) {
		b.pending = append(b.pending, b.t.Logprob(tok))
	}
	switch {
	case d.Content != "":
		out := b.pending
		b.pending = nil
		b.logprobs = append(b.logprobs, out...)
		return out
	case d.Reasoning != "" || len(d.Tools) > 0:
		b.pending = nil
	}
	return nil
}

// eventLogprobs are logprobs as the text delta and done events carry them:
// token and logprob, alternatives alike, without bytes.
func eventLogprobs(entries []fiber.Map) []fiber.Map {
	out := make([]fiber.Map, len(entries))
	for i, e := range entries {
		var top []fiber.Map
		for _, alt := range e["top_logprobs"].([]fiber.Map) {
			top = append(top, fiber.Map{"token": alt["token"], "logprob": alt["logprob"]})
		}
		out[i] = fiber.Map{"token": e["token"], "logprob": e["logprob"], "top_logprobs": top}
		if top == nil {
			out[i]["top_logprobs"] = []fiber.Map{}
		}
	}
	return out
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
	for i := len(b.callIDs); i < len(b.t.Calls); i++ {
		b.callIDs = append(b.callIDs, callID(b.t.Calls[i].ID))
		b.fcIDs = append(b.fcIDs, fcID(b.t.Calls[i].ID))
	}
}

// callID and fcID are a tool call's call_id and item id: call_ and fc_
// followed by the call's 24 random base62 characters, the same in the
// stream, the final object and the stored conversation.
func callID(id string) string { return "call_" + id }
func fcID(id string) string   { return "fc_" + id }

func (b *builder) reasoningItem(status string) fiber.Map {
	content := []fiber.Map{}
	if status == "completed" {
		content = []fiber.Map{{"type": "reasoning_text", "text": b.t.Reasoning.String()}}
	}
	return fiber.Map{"type": "reasoning", "id": b.rsID, "summary": []fiber.Map{}, "content": content, "status": status}
}

// outputText is an output_text content part with the logprobs of its
// tokens (empty unless asked for).
func outputText(text string, logprobs []fiber.Map) fiber.Map {
	if logprobs == nil {
		logprobs = []fiber.Map{}
	}
	return fiber.Map{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": logprobs}
}

func (b *builder) messageItem(status string) fiber.Map {
	if status == "completed" && b.t.Finish == turn.Length {
		status = "incomplete" // cut by max_output_tokens
	}
	content := []fiber.Map{}
	if status != "in_progress" {
		content = []fiber.Map{outputText(b.t.Content.String(), b.logprobs)}
	}
	return fiber.Map{"type": "message", "id": b.msgID, "status": status, "role": "assistant", "content": content}
}

func (b *builder) callItem(i int, status string) fiber.Map {
	c := b.t.Calls[i]
	return functionCall(c.ID, c.Name, c.Arguments, callStatus(c, status))
}

// callStatus is a finished call's item status: incomplete when it was cut
// short.
func callStatus(c output.ToolCall, status string) string {
	if status == "completed" && !c.Complete {
		return "incomplete"
	}
	return status
}

func functionCall(id, name, args, status string) fiber.Map {
	return fiber.Map{"type": "function_call", "id": fcID(id), "call_id": callID(id), "name": name,
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

// used is what the response reports of a sampling parameter: the
// request's value, else the one it ran with (the model's default, or the
// server's); zero is what 0 in the job means (top_p: off, that is 1).
func used(given *float64, ran float32, zero float64) float64 {
	if given != nil {
		return *given
	}
	if ran == 0 {
		return zero
	}
	// The job carries float32: print its shortest form (0.6, not 0.6000000238418579).
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(ran), 'g', -1, 32), 64)
	return v
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
	ran := b.t.Stream.Prepared.Job.Sampling
	temperature, topP := used(req.Temperature, ran.Temperature, 0), used(req.TopP, ran.TopP, 1)
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
	format := any(fiber.Map{"type": "text"})
	if req.Text != nil && len(req.Text.Format) > 0 && string(req.Text.Format) != "null" {
		format = req.Text.Format
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
		"text": fiber.Map{"format": format}, "tool_choice": toolChoice, "tools": tools,
		"truncation": truncation, "usage": nil, "user": user, "metadata": metadata, "top_logprobs": req.TopLogprobs,
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
	open := ""            // "reasoning", "message" or "call": the item receiving deltas
	var call struct {     // the open function call
		id, name string
		args     strings.Builder
		index    int // among the calls
	}
	closeOpen := func() bool {
		idx := len(items) - 1
		switch open {
		case "call":
			status := "completed"
			if call.index < len(b.t.Calls) {
				status = callStatus(b.t.Calls[call.index], status)
			}
			args := call.args.String()
			item := functionCall(call.id, call.name, args, status)
			items[idx] = item
			open = ""
			return write("response.function_call_arguments.done", fiber.Map{"item_id": fcID(call.id), "output_index": idx, "name": call.name, "arguments": args}) &&
				write("response.output_item.done", fiber.Map{"output_index": idx, "item": item})
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
			return write("response.output_text.done", fiber.Map{"item_id": b.msgID, "output_index": idx, "content_index": 0, "text": text, "logprobs": eventLogprobs(b.logprobs)}) &&
				write("response.content_part.done", fiber.Map{"item_id": b.msgID, "output_index": idx, "content_index": 0, "part": outputText(text, b.logprobs)}) &&
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
			write("response.content_part.added", fiber.Map{"item_id": b.msgID, "output_index": idx, "content_index": 0, "part": outputText("", nil)})
	}
	emit := func(d output.Delta, tok *actors.TokenEvent) bool {
		lps := b.take(d, tok)
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
			if !write("response.output_text.delta", fiber.Map{"item_id": b.msgID, "output_index": len(items) - 1, "content_index": 0, "delta": d.Content, "logprobs": eventLogprobs(lps)}) {
				return false
			}
		}
		// Function calls stream as they are generated: the item when the
		// call's name is known, then its arguments piece by piece.
		for _, td := range d.Tools {
			if td.ID != "" {
				if !closeOpen() {
					return false
				}
				call.id, call.name, call.index = td.ID, td.Name, td.Index
				call.args.Reset()
				items = append(items, functionCall(td.ID, td.Name, "", "in_progress"))
				open = "call"
				if !write("response.output_item.added", fiber.Map{"output_index": len(items) - 1, "item": items[len(items)-1]}) {
					return false
				}
			}
			if td.Arguments != "" {
				call.args.WriteString(td.Arguments)
				if !write("response.function_call_arguments.delta", fiber.Map{"item_id": fcID(call.id), "output_index": len(items) - 1, "delta": td.Arguments}) {
					return false
				}
			}
		}
		return true
	}
	ping := func() bool {
		// A comment line alone: with a blank line after it, openai-go
		// (v1) dispatches an empty event and fails the stream.
		_, err := w.WriteString(": keep-alive\n")
		return err == nil && w.Flush() == nil
	}
	if !b.t.Run(emit, b.api.cfg.KeepAlive, ping) {
		return
	}
	if b.t.Err == "" && b.hasMessage() && b.msgID == "" && !openMessage() { // an empty answer still has its message
		return
	}
	if !closeOpen() {
		return
	}
	b.ids()
	status := b.finalStatus()
	obj := b.object(status, items)
	if status != "failed" {
		b.api.keep(b.req, tr, b, obj)
		b.t.WarmUp()
	}
	write("response."+status, fiber.Map{"response": obj})
}
