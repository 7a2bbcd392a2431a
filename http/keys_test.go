package http_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// do sends method path with body (may be empty) and headers, and decodes
// the JSON answer.
func (s *server) do(t *testing.T, method, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	resp, data := s.send(t, method, path, body, header...)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s %s: %d, body not JSON: %v", method, path, resp.StatusCode, err)
	}
	return resp.StatusCode, m
}

func errParam(m map[string]any) any {
	e, _ := m["error"].(map[string]any)
	return e["param"]
}

func errMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// TestAuthorizationScheme: the Bearer scheme is case-insensitive (RFC
// 7235); other schemes are not a key.
func TestAuthorizationScheme(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{APIKeys: []string{"sekret"}})
	s.waitReady(t)
	tests := []struct {
		header string
		want   int
	}{
		{"Bearer sekret", 200},
		{"bearer sekret", 200},
		{"BEARER sekret", 200},
		{"bearer  sekret ", 200},
		{"Basic sekret", 401},
		{"bearer", 401},
		{"sekret", 401},
	}
	for _, tc := range tests {
		if code, m := s.do(t, "GET", "/v1/models", "", "Authorization", tc.header); code != tc.want {
			t.Errorf("Authorization: %q: %d %v, want %d", tc.header, code, m, tc.want)
		}
	}
}

// TestKeyIsolation: with several API keys, one key cannot read, delete,
// continue, list or reference another key's stored responses (404, as for
// an id that never existed), nor learn through cached_tokens what another
// key's prompts were, on any API; its own requests still reuse its own
// cache.
func TestKeyIsolation(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{APIKeys: []string{"alice", "bob", "carol"}})
	s.waitReady(t)
	alice, bob := bearer("alice"), bearer("bob")

	code, a := s.do(t, "POST", "/v1/responses", `{"input":"The PIN is 4711.","max_output_tokens":3,"temperature":0}`, alice...)
	if code != 200 {
		t.Fatalf("alice's response: %d %v", code, a)
	}
	id := a["id"].(string)
	msgID := a["output"].([]any)[0].(map[string]any)["id"].(string)
	refused := []struct {
		name, method, path, body string
		status                   int
		param                    string
	}{
		{"GET", "GET", "/v1/responses/" + id, "", 404, "response_id"},
		{"input_items", "GET", "/v1/responses/" + id + "/input_items", "", 404, "response_id"},
		{"DELETE", "DELETE", "/v1/responses/" + id, "", 404, "response_id"},
		{"continue", "POST", "/v1/responses", fmt.Sprintf(`{"previous_response_id":%q,"input":"What was the PIN?"}`, id), 404, "previous_response_id"},
		{"input_tokens of a continuation", "POST", "/v1/responses/input_tokens", fmt.Sprintf(`{"previous_response_id":%q,"input":"x"}`, id), 404, "previous_response_id"},
		{"item_reference", "POST", "/v1/responses/input_tokens", fmt.Sprintf(`{"input":[{"type":"item_reference","id":%q}]}`, msgID), 400, "input[0].id"},
	}
	for _, tc := range refused {
		code, m := s.do(t, tc.method, tc.path, tc.body, bob...)
		if code != tc.status || errParam(m) != tc.param {
			t.Errorf("bob's %s of alice's response: %d %v, want %d param %s", tc.name, code, m, tc.status, tc.param)
		}
	}
	_, unknown := s.do(t, "GET", "/v1/responses/resp_000000000000000000000000", "", bob...)
	_, other := s.do(t, "GET", "/v1/responses/"+id, "", bob...)
	if strings.ReplaceAll(errMessage(other), id, "X") != strings.ReplaceAll(errMessage(unknown), "resp_000000000000000000000000", "X") {
		t.Errorf("another key's response answers differently from an unknown one: %q vs %q", errMessage(other), errMessage(unknown))
	}
	if code, m := s.do(t, "GET", "/v1/responses/"+id, "", alice...); code != 200 || m["id"] != id {
		t.Fatalf("alice's own GET after bob's attempts: %d %v", code, m)
	}

	// The prompt cache: alice's prompt is cached for alice only.
	secret := `{"messages":[{"role":"user","content":"My PIN is 4711 and my password is hunter2, keep it."}],"max_tokens":2,"temperature":0,"prompt_cache_key":"c1"}`
	if code, m := s.do(t, "POST", "/v1/chat/completions", secret, alice...); code != 200 {
		t.Fatalf("alice's chat: %d %v", code, m)
	}
	cached := func(key []string, path, body string) int {
		t.Helper()
		code, m := s.do(t, "POST", path, body, key...)
		if code != 200 {
			t.Fatalf("%s: %d %v", path, code, m)
		}
		if u, ok := m["usage"].(map[string]any); ok {
			if d, ok := u["prompt_tokens_details"].(map[string]any); ok {
				return num(d["cached_tokens"])
			}
			if d, ok := u["input_tokens_details"].(map[string]any); ok {
				return num(d["cached_tokens"])
			}
			return num(u["cache_read_input_tokens"])
		}
		return num(m["cached_tokens"])
	}
	if n := cached(alice, "/v1/chat/completions/input_tokens", secret); n == 0 {
		t.Fatal("alice's own prompt is not reusable for alice")
	}
	if n := cached(bob, "/v1/chat/completions/input_tokens", secret); n != 0 {
		t.Errorf("bob probes alice's prompt through input_tokens: %d cached tokens", n)
	}
	if n := cached(bob, "/v1/responses/input_tokens", `{"input":"The PIN is 4711.","prompt_cache_key":"c1"}`); n != 0 {
		t.Errorf("bob probes alice's response prompt through responses input_tokens: %d cached tokens", n)
	}
	if n := cached(bob, "/v1/chat/completions", secret); n != 0 {
		t.Errorf("bob's chat reused %d tokens of alice's prompt", n)
	}
	anth := `{"model":"troupe-demo","max_tokens":2,"messages":[{"role":"user","content":"My PIN is 4711 and my password is hunter2, keep it."}]}`
	if n := cached([]string{"x-api-key", "carol"}, "/v1/messages", anth); n != 0 {
		t.Errorf("carol's Anthropic message reused %d tokens of others' prompts", n)
	}
	if n := cached(bob, "/v1/chat/completions/input_tokens", secret); n == 0 {
		t.Error("bob's own prompt (after his request) is not reusable for bob")
	}
}

// TestCacheResetAdmin: POST /v1/cache/reset needs the admin key when keys
// are configured, is refused with a hint when no admin key is, and stays
// open without any key; the admin key is also an API key.
func TestCacheResetAdmin(t *testing.T) {
	tests := []struct {
		name   string
		cfg    troupehttp.Config
		header []string
		status int
		hint   string
	}{
		{"no keys: open", troupehttp.Config{}, nil, 200, ""},
		{"keys, no admin key: refused", troupehttp.Config{APIKeys: []string{"a"}}, bearer("a"), 403, "--admin-key"},
		{"keys, no admin key, no key sent", troupehttp.Config{APIKeys: []string{"a"}}, nil, 401, ""},
		{"admin key: an API key is not enough", troupehttp.Config{APIKeys: []string{"a"}, AdminKey: "root"}, bearer("a"), 403, "admin key"},
		{"admin key", troupehttp.Config{APIKeys: []string{"a"}, AdminKey: "root"}, bearer("root"), 200, ""},
		{"admin key only: no key sent", troupehttp.Config{AdminKey: "root"}, nil, 403, "admin key"},
		{"admin key only", troupehttp.Config{AdminKey: "root"}, bearer("root"), 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, troupe.Options{PromptCache: true}, tc.cfg)
			s.waitReady(t)
			code, m := s.do(t, "POST", "/v1/cache/reset", "", tc.header...)
			if code != tc.status || !strings.Contains(errMessage(m), tc.hint) {
				t.Fatalf("reset: %d %v, want %d mentioning %q", code, m, tc.status, tc.hint)
			}
			if code == 200 && m["enabled"] != true {
				t.Fatalf("reset answer %v", m)
			}
		})
	}
	s := start(t, troupe.Options{}, troupehttp.Config{APIKeys: []string{"a"}, AdminKey: "root"})
	s.waitReady(t)
	if resp, body := s.post(t, "/v1/chat/completions", hello, bearer("root")...); resp.StatusCode != 200 {
		t.Fatalf("the admin key on a generating route: %d %s", resp.StatusCode, body)
	}
}

// TestResponsesItemReference: an AI-SDK-style second turn sends the first
// turn's output message as an item_reference (and its user message as a
// reference to the stored input item): the prompt is exactly the one the
// items sent in full give, and input_items lists the resolved items.
func TestResponsesItemReference(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	user1 := `{"role":"user","content":[{"type":"input_text","text":"Hello there"}]}`
	code, r1 := s.respPost(t, "/v1/responses", `{"input":[`+user1+`],"max_output_tokens":4,"temperature":0}`)
	if code != 200 {
		t.Fatalf("turn 1: %d %v", code, r1)
	}
	out, _ := json.Marshal(r1["output"].([]any)[0])
	msgID := r1["output"].([]any)[0].(map[string]any)["id"].(string)
	code, items := s.do(t, "GET", "/v1/responses/"+r1["id"].(string)+"/input_items", "")
	if code != 200 || len(items["data"].([]any)) != 1 {
		t.Fatalf("turn 1 input_items: %d %v", code, items)
	}
	userID := items["first_id"].(string)
	if !strings.HasPrefix(userID, "msg_") {
		t.Fatalf("input item id %q", userID)
	}
	user2 := `{"role":"user","content":"And then?"}`
	full := `{"input":[` + user1 + `,` + string(out) + `,` + user2 + `],"max_output_tokens":2,"temperature":0}`
	// The AI SDK types its references; the openai-go SDK omits the
	// optional type.
	refs := fmt.Sprintf(`{"input":[{"id":%q},{"type":"item_reference","id":%q},%s],"max_output_tokens":2,"temperature":0}`, userID, msgID, user2)
	_, inFull := s.respPost(t, "/v1/responses/input_tokens", full)
	_, inRefs := s.respPost(t, "/v1/responses/input_tokens", refs)
	if inRefs["prompt"] == nil || inRefs["prompt"] != inFull["prompt"] {
		t.Fatalf("with references the prompt is\n%v\nwith the items in full\n%v", inRefs, inFull["prompt"])
	}
	if reply := outputText(r1); !strings.Contains(inRefs["prompt"].(string), "Hello there") || !strings.Contains(inRefs["prompt"].(string), reply) {
		t.Fatalf("prompt %q lacks turn 1 (reply %q)", inRefs["prompt"], reply)
	}
	code, r2 := s.respPost(t, "/v1/responses", refs)
	if code != 200 {
		t.Fatalf("turn 2 with references: %d %v", code, r2)
	}
	_, items2 := s.do(t, "GET", "/v1/responses/"+r2["id"].(string)+"/input_items?order=asc", "")
	data := items2["data"].([]any)
	if len(data) != 3 || data[1].(map[string]any)["id"] != msgID || data[1].(map[string]any)["role"] != "assistant" {
		t.Fatalf("turn 2 input_items: %v", items2)
	}
	var want map[string]any
	json.Unmarshal(out, &want)
	if !reflect.DeepEqual(data[1], want) {
		t.Fatalf("the referenced item is listed as %v, want turn 1's output item %v", data[1], want)
	}
}

// TestResponsesInputItemsList: GET /v1/responses/{id}/input_items pages
// through the input items in OpenAI's list shape.
func TestResponsesInputItemsList(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	_, r := s.respPost(t, "/v1/responses", `{"input":[{"role":"user","content":"one"},{"role":"assistant","content":"two","id":"msg_two"},{"type":"message","role":"user","content":"three"}],"max_output_tokens":1}`)
	base := "/v1/responses/" + r["id"].(string) + "/input_items"
	texts := func(m map[string]any) string {
		var out []string
		for _, it := range m["data"].([]any) {
			out = append(out, it.(map[string]any)["content"].(string))
		}
		return strings.Join(out, ",")
	}
	_, all := s.do(t, "GET", base+"?order=asc", "")
	ids := []string{}
	for _, it := range all["data"].([]any) {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	if len(ids) != 3 || ids[1] != "msg_two" || !strings.HasPrefix(ids[0], "msg_") || ids[0] == ids[2] {
		t.Fatalf("input item ids %v", ids)
	}
	tests := []struct {
		query, texts, first, last string
		more                      bool
	}{
		{"", "three,two,one", ids[2], ids[0], false},
		{"?order=asc", "one,two,three", ids[0], ids[2], false},
		{"?limit=2", "three,two", ids[2], ids[1], true},
		{"?limit=2&after=" + ids[1], "one", ids[0], ids[0], false},
		{"?order=asc&limit=1&after=" + ids[0], "two", ids[1], ids[1], true},
		{"?order=asc&after=" + ids[2], "", "", "", false},
		{"?before=" + ids[0], "three,two", ids[2], ids[1], false},
		{"?before=" + ids[0] + "&limit=1", "two", ids[1], ids[1], true},
		{"?order=asc&after=" + ids[0] + "&before=" + ids[2], "two", ids[1], ids[1], false},
	}
	for _, tc := range tests {
		code, m := s.do(t, "GET", base+tc.query, "")
		first, _ := m["first_id"].(string)
		last, _ := m["last_id"].(string)
		if code != 200 || m["object"] != "list" || texts(m) != tc.texts || first != tc.first || last != tc.last || m["has_more"] != tc.more {
			t.Errorf("%s: %d %v, want %s first %s last %s has_more %v", tc.query, code, m, tc.texts, tc.first, tc.last, tc.more)
		}
	}
	for _, tc := range []struct{ query, param string }{
		{"?limit=0", "limit"}, {"?limit=101", "limit"}, {"?limit=x", "limit"},
		{"?order=up", "order"}, {"?after=msg_nope", "after"}, {"?before=msg_nope", "before"},
	} {
		if code, m := s.do(t, "GET", base+tc.query, ""); code != 400 || errParam(m) != tc.param {
			t.Errorf("%s: %d %v, want 400 param %s", tc.query, code, m, tc.param)
		}
	}
	if code, m := s.do(t, "GET", "/v1/responses/resp_nope/input_items", ""); code != 404 {
		t.Errorf("unknown response: %d %v", code, m)
	}
}

// TestKeyIsolationSnapshot: on a snapshot-reuse model too, the history
// snapshot one key's turn left serves that key's next turn only.
func TestKeyIsolationSnapshot(t *testing.T) {
	s := start(t, troupe.Options{Model: mambaDir(t), PromptCache: true}, troupehttp.Config{APIKeys: []string{"alice", "bob"}})
	s.waitReady(t)
	two := `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"How?"}],"max_tokens":3,"ignore_eos":true}`
	if code, m := s.do(t, "POST", "/v1/chat/completions", two, bearer("alice")...); code != 200 {
		t.Fatalf("alice's turn: %d %v", code, m)
	}
	three := `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"How?"},{"role":"assistant","content":"Fine."},{"role":"user","content":"Good"}]}`
	probe := func(key string) int {
		code, m := s.do(t, "POST", "/v1/chat/completions/input_tokens", three, bearer(key)...)
		if code != 200 {
			t.Fatalf("%s's probe: %d %v", key, code, m)
		}
		return num(m["cached_tokens"])
	}
	if n := probe("alice"); n == 0 {
		t.Fatal("alice's history snapshot does not serve alice")
	}
	if n := probe("bob"); n != 0 {
		t.Fatalf("bob probes alice's history snapshot: %d cached tokens", n)
	}
}
