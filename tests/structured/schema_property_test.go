// Package structured checks troupe's structured output end to end in
// process: a random-weight model generates under a JSON schema through the
// runtime (preparer, scheduler, masks computed beside the forward pass,
// sampling with the mask), and an independent JSON Schema validator judges
// every reply.
package structured

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/templates"
)

// Environment variables that widen TestSchemaProperty beyond its CI sample.
const (
	// envAll runs every fixture schema (about 5,600; many minutes).
	envAll = "TROUPE_SCHEMA_ALL"
	// envEvery takes every Nth fixture instead of the default.
	envEvery = "TROUPE_SCHEMA_EVERY"
	// envSeeds sets the number of seeds per schema.
	envSeeds = "TROUPE_SCHEMA_SEEDS"
)

// Defaults sized for CI (two shared cores, -race, under a minute): see
// TestSchemaProperty.
const (
	defaultEvery     = 40
	defaultEveryRace = 200
	defaultSeeds     = 3
	// maxTokens bounds one reply. The demo model's tokenizer is bytes, so
	// this is bytes of JSON; it is large enough that few replies reach it
	// (those that do are counted apart, never as passes).
	maxTokens = 1024
)

// schemaFixture is one MaskBench file (../shared/fixtures/jsonschema/data).
type schemaFixture struct {
	Schema json.RawMessage `json:"schema"`
}

// schemaCase is a fixture both troupe's compiler and the validator accept.
type schemaCase struct {
	name      string
	schema    json.RawMessage
	validator *jsonschema.Schema
}

// reply is one constrained generation's outcome.
type reply struct {
	text   string
	finish string
	err    error
}

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// compileValidator compiles schema with the reference validator, format
// assertions on (troupe's grammar enforces the formats it accepts) and no
// loading of remote or file references.
func compileValidator(schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	c.UseRegexpEngine(ecmaRegexp)
	const url = "mem://fixture/schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// loadCases reads every every-th fixture (sorted by name) and keeps those
// both compilers accept; it returns them and how many were tried and
// refused by each.
func loadCases(t *testing.T, every int) (cases []schemaCase, tried, troupeRefused, validatorRefused int) {
	t.Helper()
	dir := fixtures.Path(t, "jsonschema", "data")
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no schema fixtures in %s: %v", dir, err)
	}
	sort.Strings(names)
	for i, name := range names {
		if i%every != 0 {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var f schemaFixture
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tried++
		if _, err := grammar.CompileSchema(f.Schema); err != nil {
			troupeRefused++
			continue
		}
		v, err := compileValidator(f.Schema)
		if err != nil {
			validatorRefused++
			t.Logf("%s: the validator refuses the schema troupe compiles: %v", filepath.Base(name), firstLine(err.Error()))
			continue
		}
		cases = append(cases, schemaCase{name: filepath.Base(name), schema: f.Schema, validator: v})
	}
	return cases, tried, troupeRefused, validatorRefused
}

// ecmaSpace is ECMA-262's \s (WhiteSpace and LineTerminator) as the body
// of an RE2 class; RE2's \s is ASCII only.
const ecmaSpace = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// ecmaRegexp compiles a JSON Schema pattern (ECMA-262 syntax, which
// troupe's grammar follows) with Go's regexp after translating the
// escapes whose meaning differs: \s and \S (Unicode white space in
// ECMA-262) and . (which excludes \r, U+2028 and U+2029 too). Patterns
// RE2 cannot express (lookaround, back references) fail to compile, and
// the schema is left out.
func ecmaRegexp(pattern string) (jsonschema.Regexp, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			i++
			switch e := pattern[i]; {
			case e == 's' && inClass:
				b.WriteString(ecmaSpace)
			case e == 's':
				b.WriteString("[" + ecmaSpace + "]")
			case e == 'S' && !inClass:
				b.WriteString("[^" + ecmaSpace + "]")
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			// A ] right after [ or [^ is a literal in RE2 but closes an
			// empty class in ECMA-262; neither occurs in the fixtures.
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		case c == '.' && !inClass:
			b.WriteString(`[^\n\r\x{2028}\x{2029}]`)
		default:
			b.WriteByte(c)
		}
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, err
	}
	return re, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// generate asks rt for seeds replies to a chat request whose reply must
// follow schema, sampled at temperature 1 with seeds seed, seed+1, ...
func generate(ctx context.Context, rt *troupe.Runtime, schema json.RawMessage, seed uint64, seeds int) []reply {
	msgs, err := templates.DecodeJSON([]byte(`[{"role": "user", "content": "Answer with a JSON value that follows the schema."}]`))
	if err != nil {
		panic(err) // a constant
	}
	req := &chat.Request{
		Messages:    msgs.([]any),
		MaxTokens:   maxTokens,
		Sampling:    sample.Params{Temperature: 1, Seed: seed, HasSeed: true},
		SamplingSet: sample.AllFields,
		Format:      &grammar.Spec{JSONSchema: schema, Field: "response_format.json_schema.schema"},
	}
	out := make([]reply, seeds)
	streams, err := rt.GenerateN(ctx, req, seeds)
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ids []int32
			for ev := range s.Events {
				if ev.HasToken {
					ids = append(ids, ev.Token)
				}
				if ev.Error != "" {
					out[i].err = errors.New(ev.Error)
				}
				if ev.FinishReason != "" {
					out[i].finish = ev.FinishReason
				}
			}
			out[i].text = s.Prepared.Assets.Tokenizer.Decode(ids, true)
		}()
	}
	wg.Wait()
	return out
}

// TestSchemaProperty generates with a random-weight model (byte tokenizer)
// under every 40th MaskBench schema that troupe compiles (every 200th
// under the race detector), three seeds each at temperature 1, and checks with an independent validator
// (santhosh-tekuri/jsonschema, formats asserted) that every finished reply
// parses as JSON and validates. Replies cut at max_tokens are counted
// apart and never pass; an error, a reply that does not parse or does not
// validate fails the test with the fixture's name and the reply.
// TROUPE_SCHEMA_ALL=1 runs every fixture; TROUPE_SCHEMA_EVERY=N every Nth;
// TROUPE_SCHEMA_SEEDS=N seeds per schema.
func TestSchemaProperty(t *testing.T) {
	every := defaultEvery
	if raceDetector {
		every = defaultEveryRace
	}
	every = envInt(t, envEvery, every)
	if os.Getenv(envAll) != "" {
		every = 1
	}
	seeds := envInt(t, envSeeds, defaultSeeds)
	cases, tried, troupeRefused, validatorRefused := loadCases(t, every)
	if len(cases) == 0 {
		t.Fatal("no schema compiles")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const parallel = 48
	rt, err := troupe.Start(ctx, troupe.Options{Model: noiseModel(t), Threads: 2, Parallel: parallel, KVBudget: 256 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	start := time.Now()
	results := make([][]reply, len(cases))
	work := make(chan int)
	var wg sync.WaitGroup
	for range parallel / seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i] = generate(ctx, rt, cases[i].schema, uint64(1000*i), seeds)
			}
		}()
	}
	for i := range cases {
		work <- i
	}
	close(work)
	wg.Wait()

	var valid, truncated, failed, unjudged, bytesOut int
	for i, c := range cases {
		for k, r := range results[i] {
			bytesOut += len(r.text)
			seed := 1000*i + k
			switch {
			case r.err != nil:
				failed++
				t.Errorf("%s seed %d: %v", c.name, seed, r.err)
			case r.finish == "length":
				truncated++
				t.Logf("%s seed %d: cut at %d tokens", c.name, seed, maxTokens)
			case r.finish != "stop":
				failed++
				t.Errorf("%s seed %d: finish reason %q, want stop\n%s", c.name, seed, r.finish, clip(r.text))
			default:
				if err := check(c.validator, r.text); errors.Is(err, errValidatorPanic) {
					unjudged++
					t.Logf("%s seed %d: %v\nreply: %s", c.name, seed, err, clip(r.text))
					continue
				} else if err != nil {
					failed++
					t.Errorf("%s seed %d: %v\nschema: %s\nreply: %s", c.name, seed, err, clip(string(c.schema)), clip(r.text))
					continue
				}
				valid++
			}
		}
	}
	n := len(cases) * seeds
	t.Logf("%d fixtures tried (every %d): %d compile in troupe and the validator (troupe refuses %d, the validator %d); %d replies (%d seeds each, %d bytes): %d valid (%.1f%%), %d cut at %d tokens, %d the validator could not judge, %d failed; %v",
		tried, every, len(cases), troupeRefused, validatorRefused, n, seeds, bytesOut, valid, 100*float64(valid)/float64(n), truncated, maxTokens, unjudged, failed, time.Since(start).Round(time.Millisecond))
	// Most cuts are schemas whose objects are open (no
	// additionalProperties: false) yet require properties: the noise model
	// writes random keys and only ends the object if it spells a required
	// key by chance (about half the replies, the same schemas every run).
	// A sample where fewer than a third of the replies finish checks too
	// little.
	if valid*3 < n {
		t.Errorf("only %d of %d replies finished (%d cut at %d tokens): the sample checks too little", valid, n, truncated, maxTokens)
	}
}

// noiseModel writes a small random-weight Llama with the demo model's
// byte-level tokenizer and ChatML template: the demo model's shape scaled
// down (a quarter of the width, half the layers) so that a reply of a few
// thousand bytes costs milliseconds, with the demo model's spread of
// logits, so that sampling wanders over every token the mask allows.
func noiseModel(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := checkpoint.DemoConfig()
	cfg["hidden_size"] = 64
	cfg["intermediate_size"] = 172
	cfg["num_hidden_layers"] = 2
	cfg["num_attention_heads"] = 4
	cfg["num_key_value_heads"] = 2
	cfg["max_position_embeddings"] = 2 * maxTokens
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 7, Std: 0.15}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// errValidatorPanic is a reply the validator could not judge: v6.0.3
// panics in numValidate on numbers math/big cannot hold as a Rat (valid
// JSON such as 304182.56e999999, which a random model writes). Such a
// reply is counted apart, neither a pass nor a failure of troupe.
var errValidatorPanic = errors.New("the validator panicked")

// check parses text as one JSON value and validates it.
func check(v *jsonschema.Schema, text string) (err error) {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("reply is not JSON: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errValidatorPanic, p)
		}
	}()
	if err := v.Validate(inst); err != nil {
		return fmt.Errorf("reply does not validate: %w", err)
	}
	return nil
}

// clip shortens s for a failure message.
func clip(s string) string {
	const max = 3000
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("... (%d bytes)", len(s))
}

// TestECMARegexp checks the validator's pattern translation where ECMA-262
// and RE2 differ.
func TestECMARegexp(t *testing.T) {
	for _, tc := range []struct {
		pattern, text string
		match         bool
	}{
		{`^\s$`, "\u2009", true},
		{`^[\sa]+$`, "a\u3000a", true},
		{`^\S$`, "\u00a0", false},
		{`^\S$`, "x", true},
		{`^.$`, "\r", false},
		{`^.$`, "é", true},
		{`^[.]$`, ".", true},
		{`^\.$`, "x", false},
		{`^\\s$`, `\s`, true},
	} {
		re, err := ecmaRegexp(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if got := re.MatchString(tc.text); got != tc.match {
			t.Errorf("%q on %q: %v, want %v", tc.pattern, tc.text, got, tc.match)
		}
	}
}
