package http_test

import (
	"encoding/json"
	"fmt"
	nethttp "net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// respEvent is one Responses stream event: its event: name and its data.
type respEvent struct {
	name string
	data map[string]any
}

// respEvents parses a Responses event stream; every event's event: line
// must repeat its data's type.
func respEvents(t *testing.T, body string) []respEvent {
	t.Helper()
	var out []respEvent
	name := ""
	for _, line := range strings.Split(body, "\n") {
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("event data %q: %v", d, err)
		}
		if m["type"] != name {
			t.Fatalf("event: %s carries type %v", name, m["type"])
		}
		out = append(out, respEvent{name, m})
	}
	return out
}

func (s *server) respPost(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	resp, data := s.post(t, path, body)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, data)
	}
	return resp.StatusCode, m
}

func (s *server) respGet(t *testing.T, id string) (int, map[string]any) {
	t.Helper()
	code, body := s.get(t, "/v1/responses/"+id)
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("GET %s: %d %s", id, code, body)
	}
	return code, m
}

// outputText joins the output_text parts of a response's message items.
func outputText(obj map[string]any) string {
	var b strings.Builder
	for _, it := range obj["output"].([]any) {
		item := it.(map[string]any)
		if item["type"] != "message" {
			continue
		}
		for _, p := range item["content"].([]any) {
			b.WriteString(p.(map[string]any)["text"].(string))
		}
	}
	return b.String()
}

func num(v any) int { f, _ := v.(float64); return int(f) }

// streamed replays a Responses stream the way a client does: it checks the
// sequence numbers, the order of the lifecycle events and that every delta
// names an item that was added; it returns the final response object and
// the texts accumulated from deltas per item id.
func streamed(t *testing.T, body string) (final map[string]any, texts map[string]string, names []string) {
	t.Helper()
	evs := respEvents(t, body)
	texts = map[string]string{}
	added := map[string]bool{}
	for i, ev := range evs {
		names = append(names, ev.name)
		if num(ev.data["sequence_number"]) != i {
			t.Fatalf("event %d (%s) has sequence_number %v", i, ev.name, ev.data["sequence_number"])
		}
		switch ev.name {
		case "response.output_item.added":
			added[ev.data["item"].(map[string]any)["id"].(string)] = true
		case "response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta":
			id := ev.data["item_id"].(string)
			if !added[id] {
				t.Fatalf("%s for item %s that was never added", ev.name, id)
			}
			texts[id] += ev.data["delta"].(string)
		case "response.completed", "response.incomplete", "response.failed":
			if i != len(evs)-1 {
				t.Fatalf("%s is not the last event", ev.name)
			}
			final = ev.data["response"].(map[string]any)
		}
	}
	if len(names) < 3 || names[0] != "response.created" || names[1] != "response.in_progress" || final == nil {
		t.Fatalf("event order: %v", names)
	}
	return final, texts, names
}

// TestResponses: the Responses API on the demo model: the object and its
// stream carry the same answer with consistent ids, stored responses come
// back from GET and continue through previous_response_id (without the old
// instructions), store:false keeps nothing, and input_tokens says exactly
// what would be prefilled.
func TestResponses(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{})
	s.waitReady(t)
	body := `{"model":"troupe-demo","instructions":"Be brief.","input":"Hello there","max_output_tokens":6,"temperature":0,"metadata":{"k":"v"}}`
	code, obj := s.respPost(t, "/v1/responses", body)
	if code != 200 || obj["object"] != "response" || !strings.HasPrefix(obj["id"].(string), "resp_") {
		t.Fatalf("create: %d %v", code, obj)
	}
	usage := obj["usage"].(map[string]any)
	_, in := s.respPost(t, "/v1/responses/input_tokens", body)
	if num(usage["output_tokens"]) != 6 || num(usage["input_tokens"]) != num(in["input_tokens"]) || num(usage["total_tokens"]) != num(usage["input_tokens"])+6 {
		t.Fatalf("usage %v, input_tokens %v", usage, in["input_tokens"])
	}
	if obj["status"] != "incomplete" || obj["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Fatalf("a reply cut by max_output_tokens: status %v details %v", obj["status"], obj["incomplete_details"])
	}
	if obj["metadata"].(map[string]any)["k"] != "v" || obj["instructions"] != "Be brief." || obj["store"] != true {
		t.Fatalf("request fields not echoed: %v", obj)
	}
	if !strings.Contains(in["prompt"].(string), "Be brief.") || !strings.Contains(in["prompt"].(string), "Hello there") {
		t.Fatalf("input_tokens prompt %q", in["prompt"])
	}
	reply := outputText(obj)

	// GET returns the same object.
	if code, got := s.respGet(t, obj["id"].(string)); code != 200 || !reflect.DeepEqual(got, obj) {
		t.Fatalf("GET: %d %v\nwant %v", code, got, obj)
	}

	// The stream: same greedy answer, ids consistent with the final object,
	// which GET returns too.
	resp, data := s.post(t, "/v1/responses", strings.Replace(body, `"input"`, `"stream":true,"input"`, 1))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, data)
	}
	final, texts, names := streamed(t, string(data))
	if outputText(final) != reply {
		t.Fatalf("streamed %q, non-streamed %q", outputText(final), reply)
	}
	msg := final["output"].([]any)[0].(map[string]any)
	if texts[msg["id"].(string)] != reply {
		t.Fatalf("deltas of %s joined to %q, want %q", msg["id"], texts[msg["id"].(string)], reply)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	if !reflect.DeepEqual(names[:4], want) || names[len(names)-1] != "response.incomplete" {
		t.Fatalf("events %v", names)
	}
	tail := names[len(names)-4 : len(names)-1]
	if !reflect.DeepEqual(tail, []string{"response.output_text.done", "response.content_part.done", "response.output_item.done"}) {
		t.Fatalf("closing events %v", tail)
	}
	if _, got := s.respGet(t, final["id"].(string)); !reflect.DeepEqual(got, final) {
		t.Fatalf("GET after stream %v\nwant %v", got, final)
	}

	// previous_response_id continues the conversation: the earlier input and
	// reply are in the prompt, the earlier instructions are not, and the
	// prompt cache serves the shared history.
	next := fmt.Sprintf(`{"previous_response_id":%q,"input":"And then?","max_output_tokens":2}`, obj["id"])
	_, in2 := s.respPost(t, "/v1/responses/input_tokens", next)
	p2 := in2["prompt"].(string)
	if !strings.Contains(p2, "Hello there") || !strings.Contains(p2, reply) || !strings.Contains(p2, "And then?") || strings.Contains(p2, "Be brief.") {
		t.Fatalf("continued prompt %q", p2)
	}
	code, obj2 := s.respPost(t, "/v1/responses", next)
	if code != 200 || obj2["previous_response_id"] != obj["id"] {
		t.Fatalf("continue: %d %v", code, obj2)
	}
	if cached := num(obj2["usage"].(map[string]any)["input_tokens_details"].(map[string]any)["cached_tokens"]); cached == 0 {
		t.Fatalf("turn 2 reused no cached tokens: %v", obj2["usage"])
	}

	// store:false keeps nothing; an unknown id is a 404 in OpenAI's shape.
	_, obj3 := s.respPost(t, "/v1/responses", `{"input":"x","max_output_tokens":1,"store":false}`)
	if code, e := s.respGet(t, obj3["id"].(string)); code != 404 || e["error"] == nil {
		t.Fatalf("GET of an unstored response: %d %v", code, e)
	}
	code, e := s.respPost(t, "/v1/responses", fmt.Sprintf(`{"previous_response_id":%q,"input":"x"}`, obj3["id"]))
	if errObj, _ := e["error"].(map[string]any); code != 404 || errObj["param"] != "previous_response_id" {
		t.Fatalf("continuing an unstored response: %d %v", code, e)
	}
	// DELETE forgets.
	del, _ := nethttp.NewRequest("DELETE", s.url+"/v1/responses/"+obj["id"].(string), nil)
	if resp, err := nethttp.DefaultClient.Do(del); err != nil || resp.StatusCode != 200 {
		t.Fatalf("DELETE: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, _ := s.respGet(t, obj["id"].(string)); code != 404 {
		t.Fatalf("GET after DELETE: %d", code)
	}
}

// TestResponsesReasoningAndTools: with a script model (Qwen3's tokenizer
// and template, output known in advance) the reply's reasoning, text and
// function call come out as reasoning, message and function_call items,
// streamed with their own events; the call's output continues the
// conversation through previous_response_id as a tool message.
func TestResponsesReasoningAndTools(t *testing.T) {
	s := start(t, troupe.Options{Model: scriptModel(t), PromptCache: true}, troupehttp.Config{})
	s.waitReady(t)
	tools := `"tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	body := `{"input":"Weather in Paris?",` + tools + `}`
	check := func(obj map[string]any) {
		t.Helper()
		out := obj["output"].([]any)
		if len(out) != 3 {
			t.Fatalf("output %v", out)
		}
		rs, msg, fc := out[0].(map[string]any), out[1].(map[string]any), out[2].(map[string]any)
		if rs["type"] != "reasoning" || rs["content"].([]any)[0].(map[string]any)["text"] != "Plan: call the tool." {
			t.Fatalf("reasoning item %v", rs)
		}
		if msg["type"] != "message" || outputText(obj) != "Sure" {
			t.Fatalf("message item %v", msg)
		}
		if fc["type"] != "function_call" || fc["name"] != "get_weather" || fc["arguments"] != `{"city": "Paris"}` || !strings.HasPrefix(fc["call_id"].(string), "call_") {
			t.Fatalf("function_call item %v", fc)
		}
		u := obj["usage"].(map[string]any)
		if r := num(u["output_tokens_details"].(map[string]any)["reasoning_tokens"]); r <= 0 || r >= num(u["output_tokens"]) {
			t.Fatalf("reasoning tokens %v of %v", r, u["output_tokens"])
		}
		if obj["status"] != "completed" {
			t.Fatalf("status %v", obj["status"])
		}
	}
	code, obj := s.respPost(t, "/v1/responses", body)
	if code != 200 {
		t.Fatalf("%d %v", code, obj)
	}
	check(obj)

	resp, data := s.post(t, "/v1/responses", `{"stream":true,`+body[1:])
	if resp.StatusCode != 200 {
		t.Fatalf("stream %d %s", resp.StatusCode, data)
	}
	final, texts, names := streamed(t, string(data))
	check(final)
	out := final["output"].([]any)
	if texts[out[0].(map[string]any)["id"].(string)] != "Plan: call the tool." || texts[out[1].(map[string]any)["id"].(string)] != "Sure" ||
		texts[out[2].(map[string]any)["id"].(string)] != `{"city": "Paris"}` {
		t.Fatalf("deltas per item %v", texts)
	}
	for _, n := range []string{"response.reasoning_text.done", "response.function_call_arguments.done", "response.completed"} {
		if !strings.Contains(strings.Join(names, " "), n) {
			t.Fatalf("no %s in %v", n, names)
		}
	}

	// The tool's answer continues the stored conversation.
	callID := out[2].(map[string]any)["call_id"].(string)
	next := fmt.Sprintf(`{"previous_response_id":%q,"input":[{"type":"function_call_output","call_id":%q,"output":"18C and sunny"}],`+tools+`}`, final["id"], callID)
	_, in := s.respPost(t, "/v1/responses/input_tokens", next)
	p := in["prompt"].(string)
	for _, want := range []string{`<tool_call>`, `"get_weather"`, `<tool_response>`, "18C and sunny", "Sure"} {
		if !strings.Contains(p, want) {
			t.Fatalf("continued prompt lacks %q:\n%s", want, p)
		}
	}
	// The same conversation given in full as input items renders the same.
	full := fmt.Sprintf(`{"input":[{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]},`+
		`{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"Plan: call the tool."}]},`+
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Sure"}]},`+
		`{"type":"function_call","call_id":%q,"name":"get_weather","arguments":"{\"city\": \"Paris\"}"},`+
		`{"type":"function_call_output","call_id":%q,"output":"18C and sunny"}],`+tools+`}`, callID, callID)
	_, in2 := s.respPost(t, "/v1/responses/input_tokens", full)
	if in2["prompt"] != p {
		t.Fatalf("items rendered\n%s\nprevious_response_id rendered\n%s", in2["prompt"], p)
	}
	// reasoning.effort reaches the template's switch: "minimal" closes the
	// think block in the prompt, "high" leaves it open.
	_, off := s.respPost(t, "/v1/responses/input_tokens", `{"input":"hi","reasoning":{"effort":"minimal"}}`)
	_, on := s.respPost(t, "/v1/responses/input_tokens", `{"input":"hi","reasoning":{"effort":"high"}}`)
	if !strings.HasSuffix(off["prompt"].(string), "<think>\n\n</think>\n\n") || strings.Contains(on["prompt"].(string), "</think>") {
		t.Fatalf("effort minimal %q, high %q", off["prompt"], on["prompt"])
	}
}

// TestResponsesBadInput: malformed Responses requests are 4xx in OpenAI's
// error shape naming the field.
func TestResponsesBadInput(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	tests := []struct {
		name, body string
		status     int
		param      string
	}{
		{"empty body", ``, 400, ""},
		{"invalid JSON", `{"input":`, 400, ""},
		{"no input", `{}`, 400, "input"},
		{"input wrong type", `{"input":5}`, 400, "input"},
		{"item not an object", `{"input":["hi"]}`, 400, "input[0]"},
		{"bad role", `{"input":[{"role":"robot","content":"hi"}]}`, 400, "input[0].role"},
		{"image part", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`, 400, "input[0].content[0]"},
		{"unknown item type", `{"input":[{"type":"computer_call_output","id":"x"}]}`, 400, "input[0].type"},
		{"unknown item_reference", `{"input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"msg_nope"}]}`, 400, "input[1].id"},
		{"item_reference without id", `{"input":[{"type":"item_reference"}]}`, 400, "input[0].id"},
		{"untyped item_reference (type is optional)", `{"input":[{"id":"msg_nope"}]}`, 400, "input[0].id"},
		{"item_reference with a non-string id", `{"input":[{"type":"item_reference","id":5}]}`, 400, "input[0].id"},
		{"17 metadata pairs", `{"input":"hi","metadata":{` + metadataPairs(17) + `}}`, 400, "metadata"},
		{"metadata key of 65", `{"input":"hi","metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, 400, "metadata"},
		{"metadata value of 513", `{"input":"hi","metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, 400, "metadata"},
		{"metadata value not a string", `{"input":"hi","metadata":{"k":5}}`, 400, "metadata"},
		{"metadata not an object", `{"input":"hi","metadata":[]}`, 400, "metadata"},
		{"user of 257", `{"input":"hi","user":"` + strings.Repeat("u", 257) + `"}`, 400, "user"},
		{"prompt_cache_key of 1025", `{"input":"hi","prompt_cache_key":"` + strings.Repeat("p", 1025) + `"}`, 400, "prompt_cache_key"},
		{"bad reasoning.summary", `{"input":"hi","reasoning":{"summary":"verbose"}}`, 400, "reasoning.summary"},
		{"function_call without call_id", `{"input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, 400, "input[0]"},
		{"function_call_output without output", `{"input":[{"type":"function_call_output","call_id":"c"}]}`, 400, "input[0].output"},
		{"max_output_tokens 0", `{"input":"hi","max_output_tokens":0}`, 400, "max_output_tokens"},
		{"max_output_tokens string", `{"input":"hi","max_output_tokens":"5"}`, 400, "max_output_tokens"},
		{"temperature 3", `{"input":"hi","temperature":3}`, 400, "temperature"},
		{"top_p 2", `{"input":"hi","top_p":2}`, 400, "top_p"},
		{"bad effort", `{"input":"hi","reasoning":{"effort":"max"}}`, 400, "reasoning.effort"},
		{"web search tool", `{"input":"hi","tools":[{"type":"web_search"}]}`, 400, "tools[0].type"},
		{"tool without name", `{"input":"hi","tools":[{"type":"function"}]}`, 400, "tools[0].name"},
		{"tools not array", `{"input":"hi","tools":{}}`, 400, "tools"},
		{"tool_choice unknown", `{"input":"hi","tool_choice":"sometimes"}`, 400, "tool_choice"},
		{"tool_choice names a missing tool", `{"input":"hi","tool_choice":{"type":"function","name":"f"}}`, 400, "tool_choice"},
		{"json_schema format without a name", `{"input":"hi","text":{"format":{"type":"json_schema"}}}`, 400, "text.format.name"},
		{"json_schema format without a schema", `{"input":"hi","text":{"format":{"type":"json_schema","name":"x"}}}`, 400, "text.format.schema"},
		{"json_schema format with an unsupported keyword", `{"input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object","propertyNames":{"maxLength":3}}}}}`, 400, "text.format.schema"},
		{"unknown format", `{"input":"hi","text":{"format":{"type":"xml"}}}`, 400, "text.format.type"},
		{"background", `{"input":"hi","background":true}`, 400, "background"},
		{"bad truncation", `{"input":"hi","truncation":"middle"}`, 400, "truncation"},
		{"unknown model", `{"model":"nope","input":"hi"}`, 404, "model"},
		{"unknown previous_response_id", `{"previous_response_id":"resp_nope","input":"hi"}`, 404, "previous_response_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/responses", "/v1/responses/input_tokens"} {
				resp, data := s.post(t, path, tc.body)
				var e struct {
					Error *struct {
						Message string  `json:"message"`
						Type    string  `json:"type"`
						Param   *string `json:"param"`
					} `json:"error"`
				}
				if err := json.Unmarshal(data, &e); err != nil || e.Error == nil || e.Error.Message == "" {
					t.Fatalf("%s: not OpenAI's error shape: %d %s", path, resp.StatusCode, data)
				}
				param := ""
				if e.Error.Param != nil {
					param = *e.Error.Param
				}
				if resp.StatusCode != tc.status || param != tc.param {
					t.Fatalf("%s: %d param %q (%s), want %d param %q", path, resp.StatusCode, param, e.Error.Message, tc.status, tc.param)
				}
			}
		})
	}
	if code, body := s.get(t, "/v1/responses/resp_nope"); code != 404 || !strings.Contains(body, `"error"`) {
		t.Fatalf("GET unknown: %d %s", code, body)
	}
}

// metadataPairs is n metadata pairs as JSON object members.
func metadataPairs(n int) string {
	pairs := make([]string, n)
	for i := range pairs {
		pairs[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Join(pairs, ",")
}

// TestResponsesMetadataAtLimits: metadata at OpenAI's limits (16 pairs,
// 64-character keys, 512-character values, counted in characters, not
// bytes) and a user of 256 characters are accepted and echoed.
func TestResponsesMetadataAtLimits(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	tests := []struct{ name, fields string }{
		{"16 pairs", `"metadata":{` + metadataPairs(16) + `}`},
		{"key of 64", `"metadata":{"` + strings.Repeat("k", 64) + `":"v"}`},
		{"value of 512 two-byte characters", `"metadata":{"k":"` + strings.Repeat("é", 512) + `"}`},
		{"user of 256", `"user":"` + strings.Repeat("u", 256) + `"`},
	}
	for _, tc := range tests {
		code, obj := s.respPost(t, "/v1/responses", `{"input":"hi","max_output_tokens":1,`+tc.fields+`}`)
		if code != 200 {
			t.Fatalf("%s: %d %v", tc.name, code, obj)
		}
	}
}

// TestResponsesLogprobs: include message.output_text.logprobs gives the
// output_text part a logprobs entry per token of its text (token, bytes,
// logprob, top_logprobs alike), and the stream's text deltas carry the same
// entries (without bytes, as OpenAI's delta events); top_logprobs alone
// asks for nothing, and past 20 it is a 400.
func TestResponsesLogprobs(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	base := `"input":"Write a line of verse","max_output_tokens":8,"temperature":0`
	tests := []struct {
		name, params string
		want, top    int // logprobs entries per token (0 or 1), alternatives each
	}{
		{"three alternatives", `"include":["message.output_text.logprobs"],"top_logprobs":3`, 1, 3},
		{"no alternatives", `"include":["message.output_text.logprobs"]`, 1, 0},
		{"twenty", `"include":["message.output_text.logprobs"],"top_logprobs":20`, 1, 20},
		{"top_logprobs without include", `"top_logprobs":5`, 0, 0},
	}
	// part checks an output_text part's logprobs against its text (tokens
	// is how many tokens of it the model generated) and returns them.
	part := func(t *testing.T, p map[string]any, tokens, want, top int) []any {
		t.Helper()
		lps := p["logprobs"].([]any)
		var joined strings.Builder
		for i, e := range lps {
			entry := e.(map[string]any)
			var bytes []byte
			for _, b := range entry["bytes"].([]any) {
				bytes = append(bytes, byte(num(b)))
			}
			if string(bytes) != entry["token"] {
				t.Fatalf("entry %d: bytes %q of the token %q", i, bytes, entry["token"])
			}
			joined.WriteString(entry["token"].(string))
			alts := entry["top_logprobs"].([]any)
			lp := entry["logprob"].(float64)
			if len(alts) != top || lp > 0 {
				t.Fatalf("entry %d: logprob %v with %d alternatives, want %d", i, lp, len(alts), top)
			}
			for j, a := range alts {
				alt := a.(map[string]any)
				if _, ok := alt["bytes"].([]any); !ok || alt["token"] == nil {
					t.Fatalf("entry %d alternative %d: %v", i, j, alt)
				}
				if j > 0 && alt["logprob"].(float64) > alts[j-1].(map[string]any)["logprob"].(float64) {
					t.Fatalf("entry %d: alternatives out of order: %v", i, alts)
				}
			}
			// Greedy: the token taken is the likeliest.
			if top > 0 && alts[0].(map[string]any)["logprob"].(float64) != lp {
				t.Fatalf("entry %d: greedy token's logprob %v, likeliest %v", i, lp, alts[0])
			}
		}
		if len(lps) != want*tokens {
			t.Fatalf("%d logprobs for %d tokens of %q", len(lps), tokens, p["text"])
		}
		// The demo model's tokens are bytes: one that is part of a UTF-8
		// character reads as U+FFFD alone (as vLLM shows it); the others
		// spell the text, unless fragments joined into a character.
		text := p["text"].(string)
		ascii := !strings.ContainsFunc(text, func(r rune) bool { return r > 127 && r != utf8.RuneError })
		drop := func(s string) string { return strings.ReplaceAll(s, "\uFFFD", "") }
		if want > 0 && ascii && drop(joined.String()) != drop(text) {
			t.Fatalf("tokens %q spell %q", joined.String(), text)
		}
		return lps
	}
	// tokens is how many tokens of a response's text the model generated:
	// its output tokens but the end-of-sequence token that completed it.
	tokens := func(obj map[string]any) int {
		n := num(obj["usage"].(map[string]any)["output_tokens"])
		if obj["status"] == "completed" {
			n--
		}
		return n
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, obj := s.respPost(t, "/v1/responses", `{`+base+`,`+tc.params+`}`)
			if code != 200 {
				t.Fatalf("%d %v", code, obj)
			}
			msg := obj["output"].([]any)[0].(map[string]any)
			lps := part(t, msg["content"].([]any)[0].(map[string]any), tokens(obj), tc.want, tc.top)

			resp, body := s.post(t, "/v1/responses", `{`+base+`,`+tc.params+`,"stream":true}`)
			if resp.StatusCode != 200 {
				t.Fatalf("stream: %d %s", resp.StatusCode, body)
			}
			var deltas, done []any
			for _, ev := range respEvents(t, string(body)) {
				switch ev.name {
				case "response.output_text.delta":
					deltas = append(deltas, ev.data["logprobs"].([]any)...)
				case "response.output_text.done":
					done = ev.data["logprobs"].([]any)
				case "response.completed", "response.incomplete":
					final := ev.data["response"].(map[string]any)
					p := final["output"].([]any)[0].(map[string]any)["content"].([]any)[0]
					if streamed := part(t, p.(map[string]any), tokens(final), tc.want, tc.top); !reflect.DeepEqual(streamed, lps) {
						t.Fatalf("streamed part's logprobs %v, the object's %v", streamed, lps)
					}
				}
			}
			for _, events := range [][]any{deltas, done} {
				if len(events) != len(lps) {
					t.Fatalf("%d logprobs in delta events and %d in the done event, %d in the part", len(deltas), len(done), len(lps))
				}
				for i, e := range events {
					entry, want := e.(map[string]any), lps[i].(map[string]any)
					if _, has := entry["bytes"]; has || entry["token"] != want["token"] || entry["logprob"] != want["logprob"] ||
						len(entry["top_logprobs"].([]any)) != tc.top {
						t.Fatalf("event entry %d: %v, the part's %v", i, entry, want)
					}
				}
			}
		})
	}
	for _, top := range []string{"21", "-1", `"3"`} {
		code, m := s.respPost(t, "/v1/responses", `{"input":"hi","include":["message.output_text.logprobs"],"top_logprobs":`+top+`}`)
		if code != 400 || errParam(m) != "top_logprobs" {
			t.Errorf("top_logprobs %s: %d %v", top, code, m)
		}
	}
}
