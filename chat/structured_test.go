package chat_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/output"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// syntaxTemplate is a fixture template whose tool-call syntax is forced
// and parsed, with the text its model writes after the generation prompt
// and the end of its turn (EOS, not part of the grammar).
type syntaxTemplate struct {
	name     string
	syntax   output.Syntax
	eos      string // what the template writes after the calls (the model's stop token, and the next generation prompt)
	parallel bool   // the syntax has room for several calls in one reply
	idRe     string // how the template writes a call id ("" when it does not)
}

// syntaxTemplates are the templates of each syntax.
func syntaxTemplates() []syntaxTemplate {
	return []syntaxTemplate{
		{name: "qwen2.5", syntax: output.SyntaxDefault, eos: "<|im_end|>\n<|im_start|>assistant\n", parallel: true},
		{name: "mistral-nemo", syntax: output.SyntaxMistral, eos: "</s>", parallel: true, idRe: `"id": "([A-Za-z0-9]{9})"`},
		{name: "mistral-small-3.2", syntax: output.SyntaxMistral, eos: "</s>", parallel: true, idRe: `\[CALL_ID\]([A-Za-z0-9]{9})`},
		{name: "gpt-oss", syntax: output.SyntaxHarmony, eos: "<|call|><|start|>assistant"},
	}
}

const (
	weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer"}},"required":["city"],"additionalProperties":false}}},` +
		`{"type":"function","function":{"name":"get_time","description":"Time in a zone","parameters":{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"],"additionalProperties":false}}}]`
	userTurn = `{"role":"user","content":"Weather in Paris?"}`
)

// callTurn is an assistant turn with calls, each "name|{args}".
func callTurn(content string, calls ...string) string {
	var parts []string
	for i, c := range calls {
		name, args, _ := strings.Cut(c, "|")
		id := []string{"abcDEF123", "xyz987654"}[i]
		parts = append(parts, `{"id":"`+id+`","type":"function","function":{"name":"`+name+`","arguments":`+args+`}}`)
	}
	return `{"role":"assistant","content":` + content + `,"tool_calls":[` + strings.Join(parts, ",") + `]}`
}

// modelText is what the template renders after the generation prompt for
// the assistant turn turn: the text its model writes, without its stop
// token.
func modelText(t *testing.T, a *chat.Assets, st syntaxTemplate, turn string) string {
	t.Helper()
	tools := msgs(t, weatherTools)
	base, err := a.Prepare(&chat.Request{Messages: msgs(t, `[`+userTurn+`]`), Tools: tools}, false)
	if err != nil {
		t.Fatal(err)
	}
	full, err := a.Prepare(&chat.Request{Messages: msgs(t, `[`+userTurn+`,`+turn+`]`), Tools: tools}, false)
	if err != nil {
		t.Fatal(err)
	}
	text, ok := strings.CutPrefix(full.Prompt, base.Prompt)
	if !ok {
		t.Fatalf("the prompt is not a prefix of the conversation:\n%q\n%q", base.Prompt, full.Prompt)
	}
	if text, ok = strings.CutSuffix(text, st.eos); !ok {
		t.Fatalf("the call turn does not end with %q: %q", st.eos, text)
	}
	return text
}

// compact writes the arguments objects of text as the grammar writes
// them (compact JSON), where the template spaced them.
func compact(text string) string {
	for _, spaced := range []string{`{"city": "Paris", "n": 2}`, `{"city": "Paris"}`, `{"tz": "CET"}`, `{"city": "Paris", "n": "two"}`} {
		var b bytes.Buffer
		_ = json.Compact(&b, []byte(spaced))
		text = strings.ReplaceAll(text, spaced, b.String())
	}
	return text
}

// TestForcedToolCallsFollowTemplates: the grammar that forces tool calls
// (tool_choice required or named) accepts what each template renders as
// its model's calls (arguments compacted, as the grammar writes JSON), one
// or more as the syntax allows, and refuses a tool that is not there (or
// not the named one), arguments against the schema, and a second call when
// one is asked for.
func TestForcedToolCallsFollowTemplates(t *testing.T) {
	byName := map[string]fixtureTemplate{}
	for _, ft := range fixtureTemplates(t) {
		byName[ft.name] = ft
	}
	weather := `get_weather|{"city": "Paris", "n": 2}`
	timeCall := `get_time|{"tz": "CET"}`
	for _, st := range syntaxTemplates() {
		ft := byName[st.name]
		a := assets(t, ft.source)
		a.SpecialTokens = ft.special
		one := modelText(t, a, st, callTurn(`""`, weather))
		two := ""
		if st.parallel {
			two = modelText(t, a, st, callTurn(`""`, weather, timeCall))
		}
		tests := []struct {
			name   string
			req    chat.Request
			text   string
			accept bool
		}{
			{name: "one call", req: chat.Request{ToolChoice: chat.ToolRequired}, text: one, accept: true},
			{name: "two calls", req: chat.Request{ToolChoice: chat.ToolRequired}, text: two, accept: st.parallel},
			{name: "two calls when one is asked for", req: chat.Request{ToolChoice: chat.ToolRequired, OneToolCall: true}, text: two},
			{name: "named", req: chat.Request{ToolChoice: chat.ToolNamed, ToolName: "get_weather"}, text: one, accept: true},
			{name: "named another", req: chat.Request{ToolChoice: chat.ToolNamed, ToolName: "get_time"}, text: one},
			{name: "unknown tool", req: chat.Request{ToolChoice: chat.ToolRequired}, text: strings.ReplaceAll(one, "get_weather", "get_wether")},
			{name: "arguments against the schema", req: chat.Request{ToolChoice: chat.ToolRequired}, text: modelText(t, a, st, callTurn(`""`, `get_weather|{"city": "Paris", "n": "two"}`))},
			{name: "missing required argument", req: chat.Request{ToolChoice: chat.ToolRequired}, text: modelText(t, a, st, callTurn(`""`, `get_time|{}`))},
		}
		if st.syntax == output.SyntaxHarmony {
			tests = append(tests,
				struct {
					name   string
					req    chat.Request
					text   string
					accept bool
				}{name: "reasoning first", req: chat.Request{ToolChoice: chat.ToolRequired}, text: modelText(t, a, st, callTurn(`"Need the weather; I will call get_weather."`, weather)), accept: true},
				struct {
					name   string
					req    chat.Request
					text   string
					accept bool
				}{name: "harmony's own header order", req: chat.Request{ToolChoice: chat.ToolRequired},
					text: `<|channel|>analysis<|message|>Use the tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}`, accept: true},
				struct {
					name   string
					req    chat.Request
					text   string
					accept bool
				}{name: "final answer instead of a call", req: chat.Request{ToolChoice: chat.ToolRequired}, text: `<|channel|>final<|message|>It is sunny.`},
			)
		}
		for _, tc := range tests {
			if tc.text == "" {
				continue
			}
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				r := tc.req
				r.Messages, r.Tools = msgs(t, `[`+userTurn+`]`), msgs(t, weatherTools)
				p, err := a.Prepare(&r, false)
				if err != nil {
					t.Fatal(err)
				}
				if p.Syntax != st.syntax {
					t.Fatalf("syntax %v, want %v", p.Syntax, st.syntax)
				}
				plan, err := grammar.UnmarshalPlan(p.Plan)
				if err != nil {
					t.Fatal(err)
				}
				g, err := grammar.CompilePlan(plan)
				if err != nil {
					t.Fatal(err)
				}
				text := compact(tc.text)
				m := grammar.NewMatcher(g)
				ok := m.AdvanceBytes([]byte(text)) && m.CanEnd()
				if ok != tc.accept {
					t.Fatalf("accepted %v, want %v: %q", ok, tc.accept, text)
				}
			})
		}
	}
}

// TestToolCallsRoundTrip: the calls the output parser reads from what a
// template renders as its model's calls go back into the conversation with
// the runtime's ids (call_ + 24 characters) and render as the model wrote
// them, the template's own id form included (Mistral's nine
// alphanumerics), their results pointing at the same id.
func TestToolCallsRoundTrip(t *testing.T) {
	byName := map[string]fixtureTemplate{}
	for _, ft := range fixtureTemplates(t) {
		byName[ft.name] = ft
	}
	for _, st := range syntaxTemplates() {
		t.Run(st.name, func(t *testing.T) {
			ft := byName[st.name]
			a := assets(t, ft.source)
			a.SpecialTokens = ft.special
			calls := []string{`get_weather|{"city": "Paris", "n": 2}`}
			if st.parallel {
				calls = append(calls, `get_time|{"tz": "CET"}`)
			}
			text := modelText(t, a, st, callTurn(`""`, calls...))
			p := output.New(a.Tokenizer, output.Options{Tools: true, Syntax: st.syntax})
			for _, id := range a.Tokenizer.EncodeIDs(text, false) {
				p.Add(id)
			}
			p.Finish()
			parsed, _ := p.ToolCalls()
			if len(parsed) != len(calls) {
				t.Fatalf("parsed %+v from %q", parsed, text)
			}
			var turn []string
			var results []string
			for i, c := range parsed {
				name, args, _ := strings.Cut(calls[i], "|")
				if !c.Complete || c.Name != name || c.Arguments != args {
					t.Fatalf("call %d: %+v, want %s %s", i, c, name, args)
				}
				argsJSON, _ := json.Marshal(c.Arguments)
				id := "call_" + c.ID
				turn = append(turn, `{"id":"`+id+`","type":"function","function":{"name":"`+c.Name+`","arguments":`+string(argsJSON)+`}}`)
				results = append(results, `{"role":"tool","tool_call_id":"`+id+`","content":"result `+c.Name+`"}`)
			}
			conv := `[` + userTurn + `,{"role":"assistant","content":"","tool_calls":[` + strings.Join(turn, ",") + `]},` + strings.Join(results, ",") + `]`
			base, err := a.Prepare(&chat.Request{Messages: msgs(t, `[`+userTurn+`]`), Tools: msgs(t, weatherTools)}, false)
			if err != nil {
				t.Fatal(err)
			}
			back, err := a.Prepare(&chat.Request{Messages: msgs(t, conv), Tools: msgs(t, weatherTools)}, false)
			if err != nil {
				t.Fatalf("the parsed calls do not render: %v", err)
			}
			rest, ok := strings.CutPrefix(back.Prompt, base.Prompt)
			if !ok {
				t.Fatalf("the prompt is not a prefix of the conversation:\n%q\n%q", base.Prompt, back.Prompt)
			}
			// The calls render as the model wrote them but for their ids,
			// which the template writes in its own form.
			want := text
			if st.idRe != "" {
				re := regexp.MustCompile(st.idRe)
				ids := re.FindAllStringSubmatch(rest, -1)
				if len(ids) != len(calls) {
					t.Fatalf("ids %v in %q", ids, rest)
				}
				for i, m := range ids {
					rest = strings.Replace(rest, m[1], []string{"abcDEF123", "xyz987654"}[i], 1)
					// The result points at the same id.
					if strings.Count(back.Prompt, m[1]) != 2 {
						t.Fatalf("id %s appears %d times, want 2 (call and result):\n%s", m[1], strings.Count(back.Prompt, m[1]), back.Prompt)
					}
				}
			}
			if !strings.HasPrefix(rest, want) {
				t.Fatalf("the calls render back as\n%q\nwant\n%q", rest, want)
			}
		})
	}
}

// TestForcedHarmonyWithItsTokens: on gpt-oss's own vocabulary the forced
// call is written with harmony's special tokens, one token each as the
// model knows them (<|channel|>, <|message|>, ...), and ends with <|call|>,
// an EOS token the guide allows once the arguments are complete.
func TestForcedHarmonyWithItsTokens(t *testing.T) {
	tok, err := tokenizer.Load(fixtures.Path(t, "tokenizers", "gptoss"), tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ft fixtureTemplate
	for _, f := range fixtureTemplates(t) {
		if f.name == "gpt-oss" {
			ft = f
		}
	}
	a := assets(t, ft.source)
	a.Tokenizer, a.SpecialTokens = tok, ft.special
	for _, s := range []string{"<|return|>", "<|call|>", "<|endoftext|>"} {
		id, _ := tok.TokenID(s)
		a.EOS = append(a.EOS, id)
	}
	st := syntaxTemplate{name: "gpt-oss", syntax: output.SyntaxHarmony, eos: "<|call|><|start|>assistant"}
	text := compact(modelText(t, a, st, callTurn(`"Need the weather."`, `get_weather|{"city": "Paris", "n": 2}`)))
	r := &chat.Request{Messages: msgs(t, `[`+userTurn+`]`), Tools: msgs(t, weatherTools), ToolChoice: chat.ToolRequired}
	p, err := a.Prepare(r, false)
	if err != nil {
		t.Fatal(err)
	}
	gd, err := a.Guides().Guide(p.Plan, a.EOS)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.EncodeIDs(text+"<|call|>", false)
	specials := 0
	for i, id := range ids {
		mask, ok := gd.Mask()
		if !ok || !mask.Has(id) {
			t.Fatalf("token %d (%d %q) of %q is not allowed", i, id, tok.Decode([]int32{id}, false), text)
		}
		if err := gd.Accept(id); err != nil {
			t.Fatal(err)
		}
		if tok.IsSpecial(id) {
			specials++
		}
	}
	if specials != 7 { // <|channel|> <|message|> <|end|> <|start|> <|channel|> <|message|> <|call|>
		t.Fatalf("%d special tokens, want 7", specials)
	}
}

// TestHarmonyFormat: on gpt-oss a response format constrains the final
// channel's message, after the analysis the model may write first, and the
// output parser returns it as the content.
func TestHarmonyFormat(t *testing.T) {
	var ft fixtureTemplate
	for _, f := range fixtureTemplates(t) {
		if f.name == "gpt-oss" {
			ft = f
		}
	}
	a := assets(t, ft.source)
	a.SpecialTokens = ft.special
	st := syntaxTemplate{name: "gpt-oss", syntax: output.SyntaxHarmony, eos: "<|end|><|start|>assistant"}
	answer := `{"city":"Paris"}`
	rendered := modelText(t, a, st, `{"role":"assistant","content":"`+strings.ReplaceAll(answer, `"`, `\"`)+`"}`)
	schema := grammar.Spec{JSONSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}
	r := &chat.Request{Messages: msgs(t, `[`+userTurn+`]`), Format: &schema}
	p, err := a.Prepare(r, false)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := grammar.UnmarshalPlan(p.Plan)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.CompilePlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, text string
		accept     bool
	}{
		{"as the template renders it", rendered, true},
		{"after reasoning", "<|channel|>analysis<|message|>JSON with the city.<|end|><|start|>assistant" + rendered, true},
		{"without the final channel", answer, false},
		{"against the schema", `<|channel|>final<|message|>{"town":"Paris"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := grammar.NewMatcher(g)
			if ok := m.AdvanceBytes([]byte(tc.text)) && m.CanEnd(); ok != tc.accept {
				t.Fatalf("accepted %v, want %v: %q", ok, tc.accept, tc.text)
			}
			if !tc.accept {
				return
			}
			out := output.New(a.Tokenizer, output.Options{Syntax: p.Syntax})
			var content string
			for _, id := range a.Tokenizer.EncodeIDs(tc.text, false) {
				content += out.Add(id).Content
			}
			if content += out.Finish().Content; content != answer {
				t.Fatalf("content %q, want %q", content, answer)
			}
		})
	}
}

// TestStrictToolsAfterToolCalls: with tool_choice auto and a strict tool,
// on Mistral's templates a call the model opens with [TOOL_CALLS] follows
// the tool's schema, and the text around calls stays free.
func TestStrictToolsAfterToolCalls(t *testing.T) {
	byName := map[string]fixtureTemplate{}
	for _, ft := range fixtureTemplates(t) {
		byName[ft.name] = ft
	}
	tests := []struct {
		template, text string
		accept         bool
	}{
		{"mistral-small-3.2", `Let me look. [TOOL_CALLS]get_weather[ARGS]{"city":"Paris","n":2}[TOOL_CALLS]get_time[ARGS]{"any":[1]}`, true},
		{"mistral-small-3.2", `[TOOL_CALLS]get_weather[ARGS]{"city":1}`, false},
		{"mistral-small-3.2", `[TOOL_CALLS]get_wether[ARGS]{}`, false},
		{"mistral-nemo", `Sure. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city":"Paris"}}, {"name": "get_time", "arguments": {"x":true}, "id": "abcDEF123"}] done`, true},
		{"mistral-nemo", `[TOOL_CALLS][{"name": "get_weather", "arguments": {"town":"Paris"}}]`, false},
	}
	for _, tc := range tests {
		t.Run(tc.template+"/"+tc.text, func(t *testing.T) {
			ft := byName[tc.template]
			if ok := strictToolAccepts(t, ft, tc.text); ok != tc.accept {
				t.Fatalf("accepted %v, want %v", ok, tc.accept)
			}
		})
	}
}

// mistralAssets are the Mistral Small 3.2 template over the byte tokenizer
// with Mistral's markers and EOS added as special tokens, as Mistral's
// tokenizers have them.
func mistralAssets(t *testing.T, src string, special *templates.Dict) *chat.Assets {
	t.Helper()
	dir := t.TempDir()
	if err := checkpoint.WriteByteTokenizerSpecials(dir, "</s>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"); err != nil {
		t.Fatal(err)
	}
	a := assets(t, src)
	var err error
	if a.Tokenizer, err = tokenizer.Load(dir, tokenizer.Options{}); err != nil {
		t.Fatal(err)
	}
	a.SpecialTokens = special
	eos, _ := a.Tokenizer.TokenID("</s>")
	a.EOS = []int32{eos}
	return a
}

// TestMistralMarkersAsTokens: where [TOOL_CALLS], [CALL_ID] and [ARGS] are
// special tokens, a forced call (and, tool_choice auto, a strict one the
// model opens) writes each as its one token, and the output parser reads
// the calls back.
func TestMistralMarkersAsTokens(t *testing.T) {
	byName := map[string]fixtureTemplate{}
	for _, ft := range fixtureTemplates(t) {
		byName[ft.name] = ft
	}
	tests := []struct {
		name, template string
		choice         string
		text           string
		markers        int
	}{
		{"forced v11", "mistral-small-3.2", chat.ToolRequired, `[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city":"Paris"}[TOOL_CALLS]get_time[ARGS]{"tz":"CET"}</s>`, 5},
		{"strict v11", "mistral-small-3.2", chat.ToolAuto, `Checking. [TOOL_CALLS]get_weather[ARGS]{"city":"Paris"}</s>`, 2},
		{"forced nemo", "mistral-nemo", chat.ToolRequired, `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city":"Paris"}}, {"name": "get_time", "arguments": {"tz":"CET"}, "id": "abcDEF123"}]</s>`, 1},
		{"strict nemo", "mistral-nemo", chat.ToolAuto, `Checking. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city":"Paris"}}]</s>`, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ft := byName[tc.template]
			a := mistralAssets(t, ft.source, ft.special)
			r := &chat.Request{Messages: msgs(t, `[`+userTurn+`]`), Tools: msgs(t, weatherTools), ToolChoice: tc.choice, StrictTools: map[string]bool{"get_weather": true}}
			p, err := a.Prepare(r, false)
			if err != nil {
				t.Fatal(err)
			}
			gd, err := a.Guides().Guide(p.Plan, a.EOS)
			if err != nil {
				t.Fatal(err)
			}
			out := output.New(a.Tokenizer, output.Options{Tools: true, Syntax: p.Syntax})
			markers := 0
			for i, id := range a.Tokenizer.EncodeIDs(tc.text, false) {
				if mask, ok := gd.Mask(); ok && !mask.Has(id) {
					t.Fatalf("token %d (%d) of %q is not allowed", i, id, tc.text)
				}
				if err := gd.Accept(id); err != nil {
					t.Fatal(err)
				}
				if a.Tokenizer.IsSpecial(id) && !slices.Contains(a.EOS, id) {
					markers++
				}
				out.Add(id)
			}
			out.Finish()
			if markers != tc.markers {
				t.Fatalf("%d marker tokens, want %d", markers, tc.markers)
			}
			calls, _ := out.ToolCalls()
			if len(calls) == 0 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"city":"Paris"}` || !calls[0].Complete {
				t.Fatalf("calls %+v", calls)
			}
		})
	}
}

// TestStrictToolsHarmony: with tool_choice auto and a strict tool, a
// gpt-oss call follows the tool's schema from its recipient on, in either
// header order, and the rest of the reply stays free.
func TestStrictToolsHarmony(t *testing.T) {
	var ft fixtureTemplate
	for _, f := range fixtureTemplates(t) {
		if f.name == "gpt-oss" {
			ft = f
		}
	}
	tests := []struct {
		name, text string
		accept     bool
	}{
		{"template order", `<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}`, true},
		{"harmony order", `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris","n":2}`, true},
		{"a plain answer", `<|channel|>final<|message|>It is sunny {"city": 1}.`, true},
		{"against the schema", `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":1}`, false},
		{"unknown tool", `<|channel|>commentary to=functions.get_wether <|constrain|>json<|message|>{}`, false},
		{"a non-strict tool takes any object", `<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"x":[1]}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if ok := strictToolAccepts(t, ft, tc.text); ok != tc.accept {
				t.Fatalf("accepted %v, want %v", ok, tc.accept)
			}
		})
	}
}

// strictToolAccepts reports whether text, as the model's reply to a user
// turn with the strict get_weather tool under tool_choice auto, passes
// every mask of the request's guide on template ft.
func strictToolAccepts(t *testing.T, ft fixtureTemplate, text string) bool {
	t.Helper()
	a := assets(t, ft.source)
	a.SpecialTokens = ft.special
	r := &chat.Request{Messages: msgs(t, `[`+userTurn+`]`), Tools: msgs(t, weatherTools), StrictTools: map[string]bool{"get_weather": true}}
	p, err := a.Prepare(r, false)
	if err != nil {
		t.Fatal(err)
	}
	gd, err := a.Guides().Guide(p.Plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range a.Tokenizer.EncodeIDs(text, false) {
		if mask, constrained := gd.Mask(); constrained && !mask.Has(id) {
			return false
		}
		if err := gd.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	return true
}
